//! Apache ORC data files (what Hive, Trino or Spark write for an Iceberg table with
//! `write.format.default=orc`), read with the `orc-rust` crate.
//!
//! Guarantees: every column's values are decoded through arrow and searched the way Parquet
//! values are (nested struct, list and map columns included; string and binary values for
//! value prefixes and text IDs, integer values compared with integer IDs of a column of the
//! same name; reported as [`Place::DataValue`]); the file's user metadata (keys and values,
//! [`Place::FooterMetadata`]) and the file's and every stripe's column statistics (string
//! and decimal min/max, integer min/max against IDs; [`Place::FooterStatistic`]) are searched
//! too. A file the reader cannot decode to its last row is unreadable.
//!
//! Does not: read ORC row indexes or bloom filters (their min/max repeat values already
//! searched in the data), decrypt ORC column encryption, or erase from ORC files.

use std::collections::BTreeMap;

use bytes::Bytes;
use orc_rust::schema::DataType;
use orc_rust::statistics::{ColumnStatistics, TypeStatistics};
use parquet::file::reader::ChunkReader;

use super::parquet::{BATCH_ROWS, walk_batches};
use crate::report::{Deferred, Hits, Place};

/// Random access for `orc-rust` over the scan's [`ChunkReader`].
struct OrcSource<R>(R);

impl<R: ChunkReader> orc_rust::reader::ChunkReader for OrcSource<R> {
    type T = R::T;

    fn len(&self) -> u64 {
        self.0.len()
    }

    fn get_read(&self, offset: u64) -> std::io::Result<Self::T> {
        self.0
            .get_read(offset)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    fn get_bytes(&self, offset: u64, length: u64) -> std::io::Result<Bytes> {
        let end = offset.checked_add(length);
        if end.is_none_or(|end| end > self.0.len()) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("range at {offset} of {length} bytes is beyond the file's end"),
            ));
        }
        let b = self
            .0
            .get_bytes(offset, length as usize)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        if b.len() as u64 != length {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("short read at {offset}"),
            ));
        }
        Ok(b)
    }
}

/// A column of the file's type tree: its dotted path and its own name (for ID matching).
struct Column {
    path: String,
    name: String,
}

/// Every column by its ORC column index (0 is the root struct).
fn columns(root: &orc_rust::schema::RootDataType) -> BTreeMap<usize, Column> {
    fn add(dt: &DataType, name: &str, path: String, out: &mut BTreeMap<usize, Column>) {
        out.insert(
            dt.column_index(),
            Column {
                path: path.clone(),
                name: name.to_string(),
            },
        );
        match dt {
            DataType::Struct { children, .. } => {
                for c in children {
                    add(c.data_type(), c.name(), format!("{path}.{}", c.name()), out);
                }
            }
            DataType::List { child, .. } => {
                add(child, name, format!("{path}.element"), out);
            }
            DataType::Map { key, value, .. } => {
                add(key, "key", format!("{path}.key"), out);
                add(value, name, format!("{path}.value"), out);
            }
            DataType::Union { variants, .. } => {
                for (i, v) in variants.iter().enumerate() {
                    add(v, name, format!("{path}.{i}"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    for c in root.children() {
        add(c.data_type(), c.name(), c.name().to_string(), &mut out);
    }
    out
}

/// Search one column statistic (`place` [`Place::FooterStatistic`]).
fn statistic(hits: &mut Hits, s: &ColumnStatistics, column: &Column, scope: &str) {
    let group = format!("column `{}` statistics", column.path);
    let detail = || format!("{scope} statistics of column `{}`", column.path);
    let traces = hits.traces;
    let id = traces.id_column(&column.name);
    match s.type_statistics() {
        Some(TypeStatistics::Integer { min, max, .. }) => {
            if let Some(col) = id {
                for v in [*min, *max] {
                    hits.ids(Place::FooterStatistic, col.int(v), &group, &detail);
                }
            }
        }
        Some(TypeStatistics::String {
            lower_bound,
            upper_bound,
            ..
        }) => {
            for v in [lower_bound, upper_bound] {
                hits.search(Place::FooterStatistic, v.as_bytes(), &group, &detail);
                if let Some(col) = id {
                    hits.ids(Place::FooterStatistic, col.text(v), &group, &detail);
                }
            }
        }
        Some(TypeStatistics::Decimal { min, max, .. }) => {
            for v in [min, max] {
                hits.search(Place::FooterStatistic, v.as_bytes(), &group, &detail);
                if let Some(col) = id {
                    hits.ids(Place::FooterStatistic, col.text(v), &group, &detail);
                }
            }
        }
        _ => {}
    }
}

/// Read an ORC file: user metadata, statistics, then every value.
pub(crate) fn scan_orc<R: ChunkReader + 'static>(src: R, hits: &mut Hits) -> Result<(), String> {
    super::orc_guard::check(&src)?;
    let builder = orc_rust::ArrowReaderBuilder::try_new(OrcSource(src))
        .map_err(|e| format!("ORC footer: {e}"))?;
    let md = builder.file_metadata();
    let mut user: Vec<(&String, &Vec<u8>)> = md.user_custom_metadata().iter().collect();
    user.sort();
    for (i, (k, v)) in user.into_iter().enumerate() {
        let group = if hits.mentions(k) {
            format!("user metadata #{i}")
        } else {
            format!("user metadata `{}`", k.chars().take(64).collect::<String>())
        };
        hits.search(Place::FooterMetadata, k.as_bytes(), &group, &|| {
            format!("key of {group}")
        });
        hits.search(Place::FooterMetadata, v, &group, &|| group.clone());
    }
    let cols = columns(md.root_data_type());
    for (i, s) in md.column_file_statistics().iter().enumerate() {
        if let Some(c) = cols.get(&i) {
            statistic(hits, s, c, "file");
        }
    }
    for (n, stripe) in md.stripe_metadatas().iter().enumerate() {
        for (i, s) in stripe.column_statistics().iter().enumerate() {
            if let Some(c) = cols.get(&i) {
                statistic(hits, s, c, &format!("stripe {n}"));
            }
        }
    }
    let leaves: Vec<u32> = (0..md.root_data_type().children().len() as u32).collect();
    let reader = builder.with_batch_size(BATCH_ROWS).build();
    let mut sink = Deferred::new(hits.traces, hits.values_only);
    let outcome = walk_batches(reader, &mut sink, Place::DataValue, &leaves, 0, true);
    hits.merge(sink);
    outcome.map_err(|e| format!("ORC {e}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use crate::dispatch::tests::subject_traces;
    use crate::{FileFormat, FileReport, FileStatus, Place, TraceKind, scan_bytes};

    const EMAIL: &str = "alexa590@post.example";

    /// A flat ORC file written by orc-rust's writer (no statistics, no user metadata).
    fn flat(ids: &[i64], emails: &[&str]) -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("learner_id", DataType::Int64, false),
            Field::new("email", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(emails.to_vec())),
            ],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut w = orc_rust::ArrowWriterBuilder::new(&mut out, schema)
            .try_build()
            .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        out
    }

    fn details(r: &FileReport, place: Place, id: bool) -> Vec<String> {
        let mut d: Vec<String> = r
            .hits
            .iter()
            .filter(|h| h.place == place && matches!(h.trace, TraceKind::Id { .. }) == id)
            .map(|h| h.detail.clone())
            .collect();
        d.sort();
        d
    }

    #[test]
    fn flat_file_values_and_integer_ids_are_found() {
        let ts = subject_traces();
        let bytes = flat(&[1, 2, 3590], &["a@b.example", "c@d.example", EMAIL]);
        assert!(bytes.starts_with(b"ORC"));
        let r = scan_bytes(&ts, "part-0.orc", &bytes, false);
        assert_eq!(r.status, FileStatus::Read, "{:?}", r.status);
        assert_eq!(r.format, FileFormat::Orc);
        assert_eq!(
            details(&r, Place::DataValue, true),
            ["column `learner_id`, first at row 2"]
        );
        assert_eq!(
            details(&r, Place::DataValue, false),
            ["column `email`, first at row 2"]
        );
        // Values only (a table an exception keeps): the ID is not reported.
        let r = scan_bytes(&ts, "part-0.orc", &bytes, true);
        assert!(details(&r, Place::DataValue, true).is_empty());
    }

    /// `bytes` (an uncompressed ORC file) with a user metadata item added to its footer.
    fn with_user_metadata(bytes: &[u8], key: &str, value: &[u8]) -> Vec<u8> {
        use prost::Message;
        let ps_len = usize::from(*bytes.last().unwrap());
        let ps_start = bytes.len() - 1 - ps_len;
        let mut ps =
            orc_rust::proto::PostScript::decode(&bytes[ps_start..bytes.len() - 1]).unwrap();
        assert_eq!(ps.compression(), orc_rust::proto::CompressionKind::None);
        let footer_start = ps_start - ps.footer_length() as usize;
        let mut footer = orc_rust::proto::Footer::decode(&bytes[footer_start..ps_start]).unwrap();
        footer.metadata.push(orc_rust::proto::UserMetadataItem {
            name: Some(key.into()),
            value: Some(value.to_vec()),
        });
        let footer = footer.encode_to_vec();
        ps.footer_length = Some(footer.len() as u64);
        let ps = ps.encode_to_vec();
        let mut out = bytes[..footer_start].to_vec();
        out.extend_from_slice(&footer);
        out.extend_from_slice(&ps);
        out.push(u8::try_from(ps.len()).unwrap());
        out
    }

    #[test]
    fn user_metadata_is_searched_keys_included() {
        let ts = subject_traces();
        let bytes = flat(&[1], &["a@b.example"]);
        let bytes = with_user_metadata(&bytes, "origin", format!("export for {EMAIL}").as_bytes());
        let r = scan_bytes(&ts, "m.orc", &bytes, false);
        assert_eq!(r.status, FileStatus::Read, "{:?}", r.status);
        assert_eq!(
            details(&r, Place::FooterMetadata, false),
            ["user metadata `origin`"]
        );
        assert!(details(&r, Place::DataValue, false).is_empty());
        // A key holding the value is searched, and not shown.
        let bytes = with_user_metadata(&flat(&[1], &["a"]), EMAIL, b"x");
        let r = scan_bytes(&ts, "k.orc", &bytes, false);
        assert_eq!(
            details(&r, Place::FooterMetadata, false),
            ["key of user metadata #0"]
        );
    }

    #[test]
    fn clean_file_holds_nothing_and_broken_files_are_unreadable() {
        let ts = subject_traces();
        let bytes = flat(&[1, 2, 3], &["a@b.example", "c@d.example", "e@f.example"]);
        let r = scan_bytes(&ts, "clean.orc", &bytes, false);
        assert_eq!(r.status, FileStatus::Read);
        assert!(r.hits.is_empty(), "{:?}", r.hits);
        for cut in [3, 10, bytes.len() / 2, bytes.len() - 1] {
            let r = scan_bytes(&ts, "cut.orc", &bytes[..cut], false);
            assert_eq!(r.format, FileFormat::Orc);
            let FileStatus::Unreadable { reason } = &r.status else {
                panic!("truncated at {cut}: read");
            };
            assert!(!reason.contains("panicked"), "cut {cut}: {reason}");
        }
        // Every single-byte corruption: read or unreadable, never a panic of this crate.
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x5a;
            let _ = scan_bytes(&ts, "flip.orc", &b, false);
        }
    }

    /// ORC files written by pyarrow (Apache ORC's C++ writer) with
    /// `tests/interop/write_orc.py`.
    fn pyarrow_files() -> tempfile::TempDir {
        crate::dispatch::tests::run_interop_script("write_orc.py")
    }

    #[test]
    fn pyarrow_nested_columns_statistics_lists_and_maps() {
        let ts = subject_traces();
        let dir = pyarrow_files();
        let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();

        let r = scan_bytes(&ts, "nested.orc", &read("nested.orc"), false);
        assert_eq!(r.status, FileStatus::Read, "{:?}", r.status);
        assert_eq!(r.format, FileFormat::Orc);
        assert_eq!(
            details(&r, Place::DataValue, false),
            ["column `contact.email`, first at row 17"]
        );
        assert_eq!(
            details(&r, Place::DataValue, true),
            ["column `learner_id`, first at row 17"]
        );
        // The email is the smallest of its column and the ID the largest: both are in the
        // file's and the stripe's statistics.
        assert_eq!(
            details(&r, Place::FooterStatistic, false),
            ["file statistics of column `contact.email`"]
        );
        assert_eq!(
            details(&r, Place::FooterStatistic, true),
            ["file statistics of column `learner_id`"]
        );
        // Counted once in the file's statistics and once in its one stripe's.
        for h in r.hits.iter().filter(|h| h.place == Place::FooterStatistic) {
            assert_eq!(h.count, 2, "{h:?}");
        }

        // The footer check decompresses the footer in every compression ORC has.
        for compression in ["zlib", "lz4", "snappy", "uncompressed"] {
            let name = format!("nested-{compression}.orc");
            let again = scan_bytes(&ts, "nested.orc", &read(&name), false);
            assert_eq!(again.status, FileStatus::Read, "{name}");
            assert_eq!(again.hits, r.hits, "{name}");
        }

        let r = scan_bytes(&ts, "listed.orc", &read("listed.orc"), false);
        assert_eq!(r.status, FileStatus::Read, "{:?}", r.status);
        assert_eq!(
            details(&r, Place::DataValue, false),
            [
                "column `aliases`, first in rows 0-49",
                "column `attrs.value`, first in rows 0-49",
            ]
        );
        assert!(details(&r, Place::DataValue, true).is_empty());

        let r = scan_bytes(&ts, "clean.orc", &read("clean.orc"), false);
        assert_eq!(r.status, FileStatus::Read, "{:?}", r.status);
        assert!(r.hits.is_empty(), "{:?}", r.hits);

        let bytes = read("nested.orc");
        let r = scan_bytes(&ts, "nested.orc", &bytes[..bytes.len() - 7], false);
        let FileStatus::Unreadable { reason } = &r.status else {
            panic!("truncated pyarrow file read");
        };
        assert!(reason.starts_with("ORC"), "{reason}");
    }
}
