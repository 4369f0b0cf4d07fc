//! A check of DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY pages before parquet-rs decodes
//! them. parquet-rs reserves `4 × count` bytes for a page's lengths from the count in the
//! page's DELTA_BINARY_PACKED header (`vec![0; values_left]`), so a corrupt count made it ask
//! for exabytes and abort the process (found by fuzzing).
//!
//! Before a byte-array column chunk is decoded, each of its delta pages must have: headers
//! as the format requires (block size a multiple of 128, values per miniblock a multiple of
//! 32), a count no larger than the page's own value count, and that at most
//! [`MAX_PAGE_VALUES`]; for DELTA_BYTE_ARRAY the suffix lengths' header (after the prefix
//! lengths' blocks, which are skipped, not unpacked) is checked the same way.

use std::sync::Arc;

use parquet::basic::{Encoding, Type as PhysicalType};
use parquet::column::page::{Page, PageReader};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::ReaderProperties;
use parquet::file::reader::ChunkReader;
use parquet::file::serialized_reader::SerializedPageReader;
use parquet::schema::types::ColumnDescriptor;

use super::parquet_pages::v1_values_offset;

/// Most values one page may declare (a page of 64M lengths is 256 MB decoded; writers cut
/// pages at 20,000 rows or 1 MB).
pub(crate) const MAX_PAGE_VALUES: u64 = 1 << 26;
/// Largest block of a DELTA_BINARY_PACKED header (writers use 128 or 256 values).
const MAX_BLOCK_VALUES: u64 = 1 << 16;

/// Check the delta pages of the byte-array `columns` (leaf indices) in row groups `groups`.
pub(crate) fn check_pages<R: ChunkReader + 'static>(
    src: &Arc<R>,
    md: &ParquetMetaData,
    columns: &[usize],
    groups: &[usize],
) -> Result<(), String> {
    let props = Arc::new(
        ReaderProperties::builder()
            .set_read_bloom_filter(false)
            .build(),
    );
    let schema = md.file_metadata().schema_descr();
    for &g in groups {
        let Some(rg) = md.row_groups().get(g) else {
            continue;
        };
        for &c in columns {
            let descr = schema.column(c);
            // An encrypted chunk's pages are read by parquet-rs's decrypting reader only; its
            // page headers are authenticated by AES-GCM (a writer with the key could still
            // state a large count: the guard does not cover encrypted pages).
            if !byte_array(&descr) || rg.column(c).crypto_metadata().is_some() {
                continue;
            }
            let name = || format!("column `{}`, row group {g}", descr.path().string());
            let rows = usize::try_from(rg.num_rows()).unwrap_or(0);
            let mut pages = SerializedPageReader::new_with_properties(
                Arc::clone(src),
                rg.column(c),
                rows,
                None,
                Arc::clone(&props),
            )
            .map_err(|e| format!("{}: {e}", name()))?;
            let mut k = 0usize;
            while let Some(page) = pages
                .get_next_page()
                .map_err(|e| format!("{}: {e}", name()))?
            {
                check_page(&descr, &page)
                    .map_err(|what| format!("{}, page {k}: {what}", name()))?;
                if !matches!(page, Page::DictionaryPage { .. }) {
                    k += 1;
                }
            }
        }
    }
    Ok(())
}

/// [`check_pages`] of one column chunk whose pages are already read (`pages`, in order, as
/// parquet-rs's page reader gives them); `name` names the chunk in the error.
pub(crate) fn check_read_pages(
    descr: &ColumnDescriptor,
    pages: &[Page],
    name: impl Fn() -> String,
) -> Result<(), String> {
    if !byte_array(descr) {
        return Ok(());
    }
    let data = pages
        .iter()
        .filter(|p| !matches!(p, Page::DictionaryPage { .. }));
    for (k, page) in data.enumerate() {
        check_page(descr, page).map_err(|what| format!("{}, page {k}: {what}", name()))?;
    }
    Ok(())
}

/// Whether the column holds byte arrays (the only columns whose delta pages are checked).
fn byte_array(descr: &ColumnDescriptor) -> bool {
    matches!(
        descr.physical_type(),
        PhysicalType::BYTE_ARRAY | PhysicalType::FIXED_LEN_BYTE_ARRAY
    )
}

/// Check one page of a byte-array column (a dictionary page or a page in another encoding
/// passes).
fn check_page(descr: &ColumnDescriptor, page: &Page) -> Result<(), &'static str> {
    let (buf, encoding, values_at, count) = match page {
        Page::DictionaryPage { .. } => return Ok(()),
        Page::DataPage {
            buf,
            encoding,
            num_values,
            def_level_encoding,
            rep_level_encoding,
            ..
        } => (
            buf,
            *encoding,
            v1_values_offset(
                buf,
                (descr.max_rep_level() > 0).then_some(*rep_level_encoding),
                (descr.max_def_level() > 0).then_some(*def_level_encoding),
            ),
            *num_values,
        ),
        Page::DataPageV2 {
            buf,
            encoding,
            num_values,
            def_levels_byte_len,
            rep_levels_byte_len,
            ..
        } => (
            buf,
            *encoding,
            usize::try_from(u64::from(*def_levels_byte_len) + u64::from(*rep_levels_byte_len)).ok(),
            *num_values,
        ),
    };
    let delta_byte_array = match encoding {
        Encoding::DELTA_LENGTH_BYTE_ARRAY => false,
        Encoding::DELTA_BYTE_ARRAY => true,
        _ => return Ok(()),
    };
    let values = values_at
        .and_then(|at| buf.get(at..))
        .ok_or("levels past the page's end")?;
    check_delta(values, u64::from(count), delta_byte_array)
}

/// Check the lengths' header(s) at the start of a delta byte-array page's values.
fn check_delta(values: &[u8], count: u64, delta_byte_array: bool) -> Result<(), &'static str> {
    let mut r = Reader { buf: values, at: 0 };
    let max = count.min(MAX_PAGE_VALUES);
    let header = r.header(max)?;
    if delta_byte_array {
        r.skip_blocks(header)?;
        r.header(max)?;
    }
    Ok(())
}

#[derive(Clone, Copy)]
struct Header {
    block: u64,
    miniblocks: u64,
    total: u64,
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn varint(&mut self) -> Result<u64, &'static str> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self
                .buf
                .get(self.at)
                .ok_or("a delta header past the page's end")?;
            self.at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("an overlong varint in a delta header")
    }

    fn skip(&mut self, n: u64) -> Result<(), &'static str> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.at.checked_add(n))
            .filter(|end| *end <= self.buf.len())
            .ok_or("delta blocks past the page's end")?;
        self.at = end;
        Ok(())
    }

    /// A DELTA_BINARY_PACKED header: block size, miniblocks per block, value count, first value.
    fn header(&mut self, max: u64) -> Result<Header, &'static str> {
        let block = self.varint()?;
        let miniblocks = self.varint()?;
        let total = self.varint()?;
        self.varint()?; // the first value (zigzag)
        if block == 0 || block % 128 != 0 || block > MAX_BLOCK_VALUES {
            return Err("a delta block size the format does not allow");
        }
        if miniblocks == 0 || block % miniblocks != 0 || (block / miniblocks) % 32 != 0 {
            return Err("a delta miniblock count the format does not allow");
        }
        if total > max {
            return Err("a delta header with more values than its page");
        }
        Ok(Header {
            block,
            miniblocks,
            total,
        })
    }

    /// Skip the blocks after a header: per block a min delta, a bit width per miniblock, and
    /// the bodies of the miniblocks that hold values (`width × values per miniblock / 8`).
    fn skip_blocks(&mut self, h: Header) -> Result<(), &'static str> {
        let per_miniblock = h.block / h.miniblocks;
        let mut left = h.total.saturating_sub(1);
        while left > 0 {
            self.varint()?; // min delta (zigzag)
            let widths_at = self.at;
            self.skip(h.miniblocks)?;
            for i in 0..h.miniblocks {
                if left == 0 {
                    break;
                }
                let width = u64::from(self.buf[widths_at + i as usize]);
                if width > 32 {
                    return Err("a delta bit width over 32");
                }
                self.skip(width * per_miniblock / 8)?;
                left = left.saturating_sub(per_miniblock);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Appends `v` as an unsigned LEB128 varint (Thrift compact's and the delta encodings').
    pub(crate) fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn header(block: u64, miniblocks: u64, total: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for v in [block, miniblocks, total, 0] {
            varint(v, &mut out);
        }
        out
    }

    #[test]
    fn counts_beyond_the_page_are_refused() {
        assert!(check_delta(&header(128, 4, 10), 10, false).is_ok());
        let err = check_delta(&header(128, 4, 11), 10, false).unwrap_err();
        assert!(err.contains("more values than its page"), "{err}");
        // The fuzz find's size class: a count near 2^62 on a page of a few values.
        let err = check_delta(&header(128, 4, 1 << 62), 3, false).unwrap_err();
        assert!(err.contains("more values"), "{err}");
        // More than MAX_PAGE_VALUES even when the page claims as many.
        assert!(check_delta(&header(128, 4, 1 << 27), u64::MAX, false).is_err());
        assert!(check_delta(&header(100, 4, 1), 10, false).is_err());
        assert!(check_delta(&header(128, 3, 1), 10, false).is_err());
        assert!(check_delta(&[0x80], 10, false).is_err());
    }

    #[test]
    fn the_suffix_header_of_a_delta_byte_array_page_is_found_and_checked() {
        // Prefixes: 40 values in one block of 128 with 4 miniblocks of 32: two miniblocks
        // hold values (39 deltas), each of width 3 (12 bytes).
        let mut page = header(128, 4, 40);
        page.push(0); // min delta
        page.extend_from_slice(&[3, 3, 0, 0]);
        page.extend(std::iter::repeat_n(0xAA, 24));
        let mut ok = page.clone();
        ok.extend(header(128, 4, 40));
        assert!(check_delta(&ok, 40, true).is_ok());
        let mut bad = page;
        bad.extend(header(128, 4, 1 << 40));
        let err = check_delta(&bad, 40, true).unwrap_err();
        assert!(err.contains("more values"), "{err}");
        // A body past the page's end.
        let mut short = header(128, 4, 40);
        short.extend_from_slice(&[0, 3, 3, 0, 0]);
        assert!(check_delta(&short, 40, true).is_err());
    }

    /// Pages parquet-rs wrote in both delta encodings, v1 and v2, with nulls, pass.
    #[test]
    fn pages_parquet_rs_wrote_pass() {
        use arrow::array::StringArray;
        use arrow::datatypes::{DataType, Field, Schema};
        use arrow::record_batch::RecordBatch;
        use bytes::Bytes;
        use parquet::arrow::ArrowWriter;
        use parquet::file::metadata::ParquetMetaDataReader;
        use parquet::file::properties::{WriterProperties, WriterVersion};

        let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
        let values: Vec<Option<String>> = (0..5000)
            .map(|i| (i % 7 != 0).then(|| format!("value-{i:05}-{}", "x".repeat(i % 13))))
            .collect();
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(values))])
            .unwrap();
        for encoding in [
            Encoding::DELTA_LENGTH_BYTE_ARRAY,
            Encoding::DELTA_BYTE_ARRAY,
        ] {
            for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
                let props = WriterProperties::builder()
                    .set_writer_version(version)
                    .set_dictionary_enabled(false)
                    .set_encoding(encoding)
                    .set_data_page_row_count_limit(700)
                    .set_write_batch_size(100)
                    .build();
                let mut out = Vec::new();
                let mut w = ArrowWriter::try_new(&mut out, schema.clone(), Some(props)).unwrap();
                w.write(&batch).unwrap();
                w.close().unwrap();
                let bytes = Bytes::from(out);
                let md = ParquetMetaDataReader::new()
                    .parse_and_finish(&bytes)
                    .unwrap();
                assert!(
                    md.row_group(0).column(0).encodings().any(|e| e == encoding),
                    "{encoding:?} not written"
                );
                check_pages(&Arc::new(bytes), &md, &[0], &[0])
                    .unwrap_or_else(|e| panic!("{encoding:?} {version:?}: {e}"));
            }
        }
    }
}
