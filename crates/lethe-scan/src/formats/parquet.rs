//! Parquet files: data values, footer statistics, page index and bloom filters.
//!
//! Guarantees:
//! - every value of every column, nested (struct/list/map) included: the decompressed pages'
//!   bytes are searched first, and only column chunks that may hold a trace are decoded
//!   through arrow-rs in batches of [`BATCH_ROWS`] rows (see `parquet_pages`; memory bounded
//!   by a page and a batch); the decoded string and binary values (plain, large, view,
//!   fixed-size, dictionary-encoded) are searched for value prefixes; integer columns are
//!   compared with the integer IDs of the column of the same leaf name (case-insensitive),
//!   string columns with the text IDs (and integer IDs in decimal) -> `DataValue` (or
//!   `DeleteFile`, see below). Hits, their details and counts are those a decode of every
//!   value gives;
//! - every row group's column-chunk statistics (min/max) -> `FooterStatistic`: exact ID
//!   equality for ID columns, prefix search for byte arrays;
//! - the page index (column index min/max per page) likewise -> `PageIndex`;
//! - bloom filters of ID columns are probed with the IDs (i32, i64 or byte array per the
//!   physical type) -> `BloomFilter` (a bloom filter says "maybe": a hit can be a false
//!   positive; a miss is certain);
//! - position delete files (top-level field ids 2147483546 `file_path` and 2147483545 `pos`),
//!   files whose key-value metadata says `delete-type`, and files the caller marks as delete
//!   files report their values as `DeleteFile`.
//!
//! Encrypted Parquet (modular encryption) is decrypted with the configured keys ([`crate::keys`])
//! and read as above, except that its encrypted columns' values are decoded, not searched as
//! page bytes first, and their bloom filters are not probed; without the keys the file is
//! unreadable, naming them.
//!
//! Does not: compare float/decimal columns.

use arrow::array::{Array, AsArray, GenericByteArray};
use arrow::datatypes::{ArrowNativeType, ByteArrayType};
use arrow::datatypes::{
    DataType, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type,
    UInt64Type,
};
use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder, RowGroups,
};
use parquet::arrow::parquet_to_arrow_field_levels;
use parquet::basic::Type as PhysicalType;
use parquet::column::page::{Page, PageIterator, PageMetadata, PageReader};
use parquet::encryption::decrypt::FileDecryptionProperties;
use parquet::errors::ParquetError;
use parquet::file::metadata::{
    PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader, RowGroupMetaData,
};
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::reader::{ChunkReader, Length};

pub(crate) use super::parquet_pages::Values;
use crate::keys::{FileKeys, ParquetKeys};
use crate::report::{Deferred, Hits, Order, Place};
use crate::traces::{IdColumn, PageSearch};

/// Rows per record batch.
pub(crate) const BATCH_ROWS: usize = 1024;
const FIELD_ID_FILE_PATH: i32 = 2_147_483_546;
const FIELD_ID_POS: i32 = 2_147_483_545;
const MAX_DEPTH: usize = 200;

/// Names parquet/arrow give to the inner levels of lists and maps: ID matching uses the
/// nearest real column name above them.
const INNER: &[&str] = &[
    "element",
    "item",
    "list",
    "array",
    "bag",
    "key_value",
    "entries",
    "map",
];

/// The name used for ID matching of a column path.
fn id_name(parts: &[String]) -> &str {
    let mut i = parts.len();
    while i > 0 {
        let p = parts[i - 1].as_str();
        let inner_kv = (p == "key" || p == "value")
            && i >= 2
            && matches!(parts[i - 2].as_str(), "key_value" | "entries" | "map");
        if INNER.contains(&p) || inner_kv {
            i -= 1;
            continue;
        }
        return p;
    }
    parts.last().map(String::as_str).unwrap_or("")
}

/// Check the footer's Thrift sizes before parquet-rs decodes it (see [`super::thrift_guard`]).
/// A file too short for a footer is left to parquet-rs to refuse. For a file with modular
/// encryption (encrypted footer `PARE`, or a plaintext footer with encrypted columns):
/// `Ok(Some(reason))`, the reason naming the keys it needs (see [`super::parquet_crypto`]);
/// an encrypted footer's sizes are not checked (AES-GCM authenticates it when it is read).
fn check_footer_sizes<R: ChunkReader>(src: &R, len: u64) -> Result<Option<String>, String> {
    let Some(tail_at) = len.checked_sub(8) else {
        return Ok(None);
    };
    let tail = src
        .get_bytes(tail_at, 8)
        .map_err(|e| format!("footer: {e}"))?;
    if tail.len() == 8 && &tail[4..] == b"PARE" {
        let footer_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        let region = match tail_at.checked_sub(footer_len) {
            Some(start) => src
                .get_bytes(start, footer_len as usize)
                .map_err(|e| format!("footer: {e}"))?,
            None => Bytes::new(),
        };
        return Ok(Some(super::parquet_crypto::encrypted_footer(&region)));
    }
    if tail.len() != 8 || &tail[4..] != b"PAR1" {
        return Ok(None);
    }
    let footer_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    let Some(start) = tail_at.checked_sub(footer_len) else {
        return Ok(None);
    };
    let footer = src
        .get_bytes(start, footer_len as usize)
        .map_err(|e| format!("footer: {e}"))?;
    super::thrift_guard::check_footer(&footer)?;
    Ok(super::parquet_crypto::plaintext_footer(&footer).err())
}

/// Check each column index's range and Thrift sizes (see [`super::thrift_guard`]) before
/// parquet-rs decodes it: it reserved memory for a page list from the size in the data (an
/// encrypted column's index: its range only).
fn check_column_index_sizes<R: ChunkReader>(
    src: &R,
    md: &ParquetMetaData,
    len: u64,
) -> Result<(), String> {
    for (g, group) in md.row_groups().iter().enumerate() {
        for (c, chunk) in group.columns().iter().enumerate() {
            let (Some(at), Some(n)) = (chunk.column_index_offset(), chunk.column_index_length())
            else {
                continue;
            };
            let range = u64::try_from(at)
                .ok()
                .zip(u64::try_from(n).ok())
                .filter(|(at, n)| at.checked_add(*n).is_some_and(|end| end <= len));
            let Some((at, n)) = range else {
                return Err(format!(
                    "footer: the column index of column chunk {c} of row group {g} lies outside the file"
                ));
            };
            if chunk.crypto_metadata().is_some() {
                // Encrypted: its size is checked by decryption (AES-GCM authenticates it).
                continue;
            }
            let bytes = src
                .get_bytes(at, n as usize)
                .map_err(|e| format!("page index: {e}"))?;
            super::thrift_guard::check_struct(&bytes)
                .map_err(|what| format!("page index: column chunk {c} of row group {g}: {what}"))?;
        }
    }
    Ok(())
}

/// Refuse a footer whose column chunks don't lie inside the file (a negative offset or size,
/// or one past the end): parquet-rs asserts on a negative range when it opens the chunk's
/// pages, a panic the scan would only report as "the reader failed".
fn check_chunk_ranges(md: &ParquetMetaData, len: u64) -> Result<(), String> {
    for (g, group) in md.row_groups().iter().enumerate() {
        for (c, chunk) in group.columns().iter().enumerate() {
            let start = chunk
                .dictionary_page_offset()
                .unwrap_or_else(|| chunk.data_page_offset());
            let inside = [start, chunk.data_page_offset(), chunk.compressed_size()]
                .iter()
                .all(|v| *v >= 0)
                && u64::try_from(start)
                    .ok()
                    .zip(u64::try_from(chunk.compressed_size()).ok())
                    .and_then(|(s, n)| s.checked_add(n))
                    .is_some_and(|end| end <= len);
            if !inside {
                return Err(format!(
                    "footer: column chunk {c} of row group {g} lies outside the file"
                ));
            }
        }
    }
    Ok(())
}

/// The footer with each row group's row count raised to what its flat column chunks hold, and
/// the file's row count replaced by the row groups' sum, where they differ. arrow-rs reads a
/// row group's rows as its count says and caps a reader's batch size at the file's count: a
/// footer saying 0 rows over row groups that hold some had every decode read nothing, and a
/// row group saying 0 rows over chunks of 8 values each had the decode of every column read
/// nothing while the scan's own page decode read them — the scan then saw values the
/// reference it is tested against didn't (both found by fuzzing). A chunk of a column
/// without lists or maps holds one value (or null) per row, so its value count is the row
/// group's row count in every valid file; a count larger than the pages hold makes the decode
/// fail, and the file is reported unreadable.
fn with_counted_rows(
    md: parquet::file::metadata::ParquetMetaData,
) -> parquet::file::metadata::ParquetMetaData {
    use parquet::file::metadata::{FileMetaData, ParquetMetaDataBuilder, RowGroupMetaData};
    let schema = md.file_metadata().schema_descr_ptr();
    let flat: Vec<usize> = (0..schema.num_columns())
        .filter(|&c| schema.column(c).max_rep_level() == 0)
        .collect();
    let held = |rg: &RowGroupMetaData| {
        flat.iter()
            .filter_map(|&c| rg.columns().get(c))
            .map(|cc| cc.num_values())
            .fold(rg.num_rows(), i64::max)
    };
    let understated = md.row_groups().iter().any(|rg| held(rg) != rg.num_rows());
    let rows = md
        .row_groups()
        .iter()
        .fold(0i64, |n, rg| n.saturating_add(held(rg)));
    let fm = md.file_metadata();
    if fm.num_rows() == rows && !understated {
        return md;
    }
    let counted = FileMetaData::new(
        fm.version(),
        rows,
        fm.created_by().map(str::to_string),
        fm.key_value_metadata().cloned(),
        fm.schema_descr_ptr(),
        fm.column_orders().cloned(),
    );
    let mut old = md.into_builder();
    let (groups, columns, offsets) = (
        old.take_row_groups(),
        old.take_column_index(),
        old.take_offset_index(),
    );
    let groups = groups
        .into_iter()
        .map(|rg| {
            let n = held(&rg);
            if n == rg.num_rows() {
                return rg;
            }
            rg.clone()
                .into_builder()
                .set_num_rows(n)
                .build()
                .unwrap_or(rg)
        })
        .collect();
    ParquetMetaDataBuilder::new(counted)
        .set_row_groups(groups)
        .set_column_index(columns)
        .set_offset_index(offsets)
        .build()
}

/// Read a Parquet file, its data values as `how` says; an encrypted file is decrypted with
/// `keys` (unreadable, naming the keys it needs, when they aren't configured).
pub(crate) fn scan_parquet<R: ChunkReader + 'static>(
    src: R,
    hits: &mut Hits,
    (marked_delete, how): (bool, Values),
    keys: &ParquetKeys,
) -> Result<(), String> {
    let file_keys = match check_footer_sizes(&src, src.len())? {
        None => None,
        Some(reason) => match keys.for_file() {
            None => return Err(reason),
            Some(k) => Some(k),
        },
    };
    let decryption = file_keys.as_ref().map(FileKeys::properties).transpose()?;
    let read = read_parquet(src, hits, marked_delete, how, decryption);
    match (read, file_keys) {
        (Err(e), Some(k)) => Err(k.reason(e)),
        (r, _) => r,
    }
}

/// [`scan_parquet`] once the file's footer is checked: `decryption` is set for an encrypted
/// file.
fn read_parquet<R: ChunkReader + 'static>(
    src: R,
    hits: &mut Hits,
    marked_delete: bool,
    how: Values,
    decryption: Option<Arc<FileDecryptionProperties>>,
) -> Result<(), String> {
    let len = src.len();
    // The embedded Arrow schema (`ARROW:schema`) is skipped: arrow-ipc panics on a corrupt
    // one, and the Parquet schema alone gives every value (dictionary columns read as plain).
    // The offset index is skipped too: pages are read in sequence, so a corrupt offset index
    // (page before its column chunk: parquet-rs subtracts with overflow) cannot steer the
    // reader; the column index (page min/max) is still read and searched.
    let mut options = ArrowReaderOptions::new()
        .with_page_index_policy(PageIndexPolicy::Optional)
        .with_offset_index_policy(PageIndexPolicy::Skip)
        .with_skip_arrow_metadata(true);
    if let Some(d) = &decryption {
        options = options.with_file_decryption_properties(Arc::clone(d));
    }
    let src = Shared(Arc::new(src));
    // The footer first, then (once its chunk ranges and column indexes' Thrift sizes are
    // checked) the column indexes.
    let footer = ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Skip)
        .with_decryption_properties(decryption.clone())
        .parse_and_finish(&src)
        .map_err(|e| format!("footer: {e}"))?;
    check_chunk_ranges(&footer, len)?;
    check_column_index_sizes(&src, &footer, len)?;
    let mut reader = ParquetMetaDataReader::new_with_metadata(footer)
        .with_column_index_policy(PageIndexPolicy::Optional)
        .with_offset_index_policy(PageIndexPolicy::Skip)
        .with_decryption_properties(decryption);
    reader
        .read_page_indexes(&src)
        .map_err(|e| format!("page index: {e}"))?;
    let md = with_counted_rows(reader.finish().map_err(|e| format!("page index: {e}"))?);
    let meta =
        ArrowReaderMetadata::try_new(Arc::new(md), options).map_err(|e| format!("footer: {e}"))?;
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(src.clone(), meta.clone());
    let md = builder.metadata().clone();
    let schema = md.file_metadata().schema_descr_ptr();

    let ids: Vec<i32> = schema
        .root_schema()
        .get_fields()
        .iter()
        .filter(|f| f.get_basic_info().has_id())
        .map(|f| f.get_basic_info().id())
        .collect();
    let position_delete = ids.contains(&FIELD_ID_FILE_PATH) && ids.contains(&FIELD_ID_POS);
    let kv_delete = md
        .file_metadata()
        .key_value_metadata()
        .is_some_and(|kv| kv.iter().any(|e| e.key == "delete-type"));
    let data_place = if marked_delete || position_delete || kv_delete {
        Place::DeleteFile
    } else {
        Place::DataValue
    };

    // Key-value metadata (except the base64 Arrow schema).
    if let Some(kv) = md.file_metadata().key_value_metadata() {
        for e in kv.iter().filter(|e| e.key != "ARROW:schema") {
            let key: String = e.key.chars().take(64).collect();
            let key = if hits.mentions(&key) {
                "*".to_string()
            } else {
                key
            };
            let group = format!("key-value metadata `{key}`");
            hits.search(Place::FooterMetadata, e.key.as_bytes(), &group, &|| {
                group.clone()
            });
            if let Some(v) = &e.value {
                hits.search(Place::FooterMetadata, v.as_bytes(), &group, &|| {
                    group.clone()
                });
            }
        }
    }

    // Footer statistics and bloom filters.
    for (rg_i, rg) in md.row_groups().iter().enumerate() {
        for (c, cc) in rg.columns().iter().enumerate() {
            let descr = cc.column_descr();
            let path = descr.path().string();
            let col = hits.traces.id_column(id_name(descr.path().parts()));
            let physical = descr.physical_type();
            if let Some(stats) = cc.statistics() {
                for (which, v) in [
                    ("min", stats.min_bytes_opt()),
                    ("max", stats.max_bytes_opt()),
                ] {
                    let Some(v) = v else { continue };
                    let group = format!("column `{path}`, row group {rg_i}, {which}");
                    stat_value(hits, Place::FooterStatistic, physical, col, v, &group);
                }
            }
            // An encrypted column's bloom filter is encrypted too, and parquet-rs reads it
            // undecrypted: not probed (it holds hashes of the chunk's values, which are read).
            if let Some(col) = col
                && !hits.values_only
                && cc.crypto_metadata().is_none()
            {
                let (offset, length) = (cc.bloom_filter_offset(), cc.bloom_filter_length());
                let Some(offset) = offset else { continue };
                let ok = u64::try_from(offset)
                    .ok()
                    .filter(|&o| o < len)
                    .is_some_and(|o| match length {
                        Some(l) => l > 0 && o.checked_add(l as u64).is_some_and(|end| end <= len),
                        None => o.checked_add(20).is_some_and(|end| end <= len),
                    });
                if !ok {
                    return Err(format!(
                        "column `{path}`, row group {rg_i}: bloom filter range is outside the file"
                    ));
                }
                let sbbf = builder
                    .get_row_group_column_bloom_filter(rg_i, c)
                    .map_err(|e| format!("column `{path}`, row group {rg_i}: bloom filter: {e}"))?;
                let Some(sbbf) = sbbf else { continue };
                if sbbf.num_blocks() == 0 {
                    return Err(format!(
                        "column `{path}`, row group {rg_i}: empty bloom filter"
                    ));
                }
                let group = format!("column `{path}`, row group {rg_i}");
                let mut owners = Vec::new();
                match physical {
                    PhysicalType::INT32 => {
                        for (v, o) in col.ints() {
                            if let Ok(v) = i32::try_from(v)
                                && sbbf.check(&v)
                            {
                                owners.extend_from_slice(o);
                            }
                        }
                    }
                    PhysicalType::INT64 => {
                        for (v, o) in col.ints() {
                            if sbbf.check(&v) {
                                owners.extend_from_slice(o);
                            }
                        }
                    }
                    PhysicalType::BYTE_ARRAY | PhysicalType::FIXED_LEN_BYTE_ARRAY => {
                        for (v, o) in col.texts() {
                            if sbbf.check(v.as_bytes()) {
                                owners.extend_from_slice(o);
                            }
                        }
                    }
                    _ => {}
                }
                hits.ids(Place::BloomFilter, &owners, &group, &|| group.clone());
            }
        }
    }

    // Page index (column index).
    if let Some(index) = md.column_index() {
        for (rg_i, columns) in index.iter().enumerate() {
            let Some(rg) = md.row_groups().get(rg_i) else {
                break;
            };
            for (c, ci) in columns.iter().enumerate() {
                let Some(cc) = rg.columns().get(c) else { break };
                let descr = cc.column_descr();
                let path = descr.path().string();
                let col = hits.traces.id_column(id_name(descr.path().parts()));
                let physical = descr.physical_type();
                let pages = page_bounds(ci);
                for (page, min, max) in pages {
                    for (which, v) in [("min", min), ("max", max)] {
                        let Some(v) = v else { continue };
                        let group =
                            format!("column `{path}`, row group {rg_i}, page {page}, {which}");
                        stat_value(hits, Place::PageIndex, physical, col, &v, &group);
                    }
                }
            }
        }
    }

    // Data values: searched in the pages' bytes, decoded where they may hold a trace.
    drop(builder);
    super::parquet_pages::scan_values(&src, &meta, hits, data_place, how)
}

/// A file shared between the readers of one scan (the page reader and arrow-rs readers).
pub(crate) struct Shared<R>(pub Arc<R>);

impl<R> Clone for Shared<R> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<R: ChunkReader> Length for Shared<R> {
    fn len(&self) -> u64 {
        self.0.len()
    }
}

impl<R: ChunkReader> ChunkReader for Shared<R> {
    type T = R::T;

    fn get_read(&self, start: u64) -> parquet::errors::Result<R::T> {
        self.0.get_read(start)
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.0.get_bytes(start, length)
    }
}

/// Decode column `leaf`'s values (`roots`: the whole top-level column holding it) of one row
/// group, or of all when `group` is None, in batches of [`BATCH_ROWS`] rows, and search them
/// as the walk always has. `first_row` is the file row the first decoded row has.
pub(crate) fn decode_values<R: ChunkReader + 'static>(
    src: &Shared<R>,
    meta: &ArrowReaderMetadata,
    sink: &mut Deferred,
    place: Place,
    projection: Projection,
    group: Option<usize>,
    first_row: u64,
) -> Result<(), String> {
    let schema = meta.metadata().file_metadata().schema_descr_ptr();
    let first_leaf_of = |r: usize| {
        (0..schema.num_columns())
            .find(|&c| schema.get_column_root_idx(c) == r)
            .unwrap_or(0)
    };
    let mask = match projection {
        Projection::Leaf(c) => ProjectionMask::leaves(&schema, [c]),
        Projection::Root(r) => ProjectionMask::roots(&schema, [r]),
        #[cfg(any(test, feature = "reference"))]
        Projection::All => ProjectionMask::all(),
    };
    // The first leaf of each top-level field the batches hold.
    let first_leaves: Vec<u32> = match projection {
        Projection::Leaf(c) => vec![c],
        Projection::Root(r) => vec![first_leaf_of(r)],
        #[cfg(any(test, feature = "reference"))]
        Projection::All => (0..schema.root_schema().get_fields().len())
            .map(first_leaf_of)
            .collect(),
    }
    .into_iter()
    .map(|c| u32::try_from(c).unwrap_or(u32::MAX))
    .collect();
    // Delta pages' counts are checked before parquet-rs reserves memory from them.
    let leaves: Vec<usize> = (0..schema.num_columns())
        .filter(|&c| match projection {
            Projection::Leaf(l) => c == l,
            Projection::Root(r) => schema.get_column_root_idx(c) == r,
            #[cfg(any(test, feature = "reference"))]
            Projection::All => true,
        })
        .collect();
    let groups: Vec<usize> = match group {
        Some(g) => vec![g],
        None => (0..meta.metadata().num_row_groups()).collect(),
    };
    super::delta_guard::check_pages(&src.0, meta.metadata(), &leaves, &groups)?;
    let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(src.clone(), meta.clone())
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS);
    if let Some(g) = group {
        builder = builder.with_row_groups(vec![g]);
    }
    let reader = builder
        .build()
        .map_err(|e| format!("cannot read data: {e}"))?;
    // The reference (every value searched on its own) searches every batch's values.
    #[cfg(any(test, feature = "reference"))]
    let filter_batches = !matches!(projection, Projection::All);
    #[cfg(not(any(test, feature = "reference")))]
    let filter_batches = true;
    walk_batches(
        reader,
        sink,
        place,
        &first_leaves,
        first_row,
        filter_batches,
    )
}

/// [`decode_values`] of leaf column `leaf` (not under a list or map) in row group `group`
/// from its pages as already read and decompressed (`pages`, in order: the `Page`s
/// parquet-rs's page reader gives for the chunk, see `parquet_chunk`): decoded by arrow-rs as
/// [`decode_values`] decodes them, without reading and decompressing them again.
pub(crate) fn decode_read_pages(
    meta: &ArrowReaderMetadata,
    sink: &mut Deferred,
    place: Place,
    leaf: usize,
    group: usize,
    first_row: u64,
    pages: Vec<Page>,
) -> Result<(), String> {
    let md = meta.metadata();
    let schema = md.file_metadata().schema_descr();
    let descr = schema.column(leaf);
    super::delta_guard::check_read_pages(&descr, &pages, || {
        format!("column `{}`, row group {group}", descr.path().string())
    })?;
    let mask = ProjectionMask::leaves(schema, [leaf]);
    let levels = parquet_to_arrow_field_levels(schema, mask, Some(meta.schema().fields()))
        .map_err(|e| format!("cannot read data: {e}"))?;
    let chunk = ReadChunk {
        md: Arc::clone(md),
        group,
        leaf,
        pages: std::sync::Mutex::new(Some(pages)),
    };
    let reader =
        ParquetRecordBatchReader::try_new_with_row_groups(&levels, &chunk, BATCH_ROWS, None)
            .map_err(|e| format!("cannot read data: {e}"))?;
    let first_leaf = vec![u32::try_from(leaf).unwrap_or(u32::MAX)];
    walk_batches(reader, sink, place, &first_leaf, first_row, true)
}

/// One column chunk's pages, already read, as the row groups arrow-rs decodes.
struct ReadChunk {
    md: Arc<ParquetMetaData>,
    group: usize,
    leaf: usize,
    /// Taken by the one reader of the chunk.
    pages: std::sync::Mutex<Option<Vec<Page>>>,
}

impl RowGroups for ReadChunk {
    fn num_rows(&self) -> usize {
        self.md
            .row_groups()
            .get(self.group)
            .and_then(|rg| usize::try_from(rg.num_rows()).ok())
            .unwrap_or(0)
    }

    fn column_chunks(&self, i: usize) -> parquet::errors::Result<Box<dyn PageIterator>> {
        let pages = match self.pages.lock() {
            Ok(mut p) if i == self.leaf => p.take(),
            _ => None,
        }
        .ok_or_else(|| ParquetError::General(format!("column {i} was not read")))?;
        Ok(Box::new(OnePageReader(Some(ReadPages(pages.into())))))
    }

    fn row_groups(&self) -> Box<dyn Iterator<Item = &RowGroupMetaData> + '_> {
        Box::new(self.md.row_groups().get(self.group).into_iter())
    }

    fn metadata(&self) -> &ParquetMetaData {
        &self.md
    }
}

/// The page iterator of a [`ReadChunk`]: its one chunk's pages.
struct OnePageReader(Option<ReadPages>);

impl Iterator for OnePageReader {
    type Item = parquet::errors::Result<Box<dyn PageReader>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0
            .take()
            .map(|p| Ok(Box::new(p) as Box<dyn PageReader>))
    }
}

impl PageIterator for OnePageReader {}

/// Pages already read, given in order (their metadata as parquet-rs's page reader gives it
/// from the headers).
struct ReadPages(std::collections::VecDeque<Page>);

impl Iterator for ReadPages {
    type Item = parquet::errors::Result<Page>;

    fn next(&mut self) -> Option<Self::Item> {
        self.get_next_page().transpose()
    }
}

impl PageReader for ReadPages {
    fn get_next_page(&mut self) -> parquet::errors::Result<Option<Page>> {
        Ok(self.0.pop_front())
    }

    fn peek_next_page(&mut self) -> parquet::errors::Result<Option<PageMetadata>> {
        Ok(self.0.front().map(|p| match p {
            Page::DictionaryPage { .. } => PageMetadata {
                num_rows: None,
                num_levels: None,
                is_dict: true,
            },
            Page::DataPage { num_values, .. } => PageMetadata {
                num_rows: None,
                num_levels: Some(*num_values as usize),
                is_dict: false,
            },
            Page::DataPageV2 {
                num_values,
                num_rows,
                ..
            } => PageMetadata {
                num_rows: Some(*num_rows as usize),
                num_levels: Some(*num_values as usize),
                is_dict: false,
            },
        }))
    }

    fn skip_next_page(&mut self) -> parquet::errors::Result<()> {
        self.0.pop_front();
        Ok(())
    }
}

/// Walk every batch of `reader` (`first_leaves`: the first leaf column of each of its
/// top-level fields; `first_row`: the file row of its first row).
pub(crate) fn walk_batches(
    reader: impl Iterator<Item = Result<arrow::array::RecordBatch, arrow::error::ArrowError>>,
    sink: &mut Deferred,
    place: Place,
    first_leaves: &[u32],
    first_row: u64,
    filter_batches: bool,
) -> Result<(), String> {
    let mut w = DataWalk {
        sink,
        place,
        first_row,
        rows: 0,
        leaf: 0,
        filter_batches,
        scratch: Vec::new(),
    };
    let mut row = first_row;
    for batch in reader {
        let batch = batch.map_err(|e| format!("data after row {row}: {e}"))?;
        let schema = batch.schema();
        for (i, field) in schema.fields().iter().enumerate() {
            w.first_row = row;
            w.rows = batch.num_rows() as u64;
            w.leaf = first_leaves.get(i).copied().unwrap_or(u32::MAX);
            w.walk(
                batch.column(i).as_ref(),
                field.name(),
                field.name(),
                true,
                0,
            )?;
        }
        row += batch.num_rows() as u64;
    }
    Ok(())
}

/// What [`decode_values`] decodes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Projection {
    /// One leaf column (not under a list or map).
    Leaf(usize),
    /// A whole top-level column, by its index among the roots.
    Root(usize),
    /// Every column.
    #[cfg(any(test, feature = "reference"))]
    All,
}

/// One page's (page number, min, max), plain-encoded.
type PageBounds = (usize, Option<Vec<u8>>, Option<Vec<u8>>);

/// Per page: (page number, min, max) as plain-encoded bytes.
fn page_bounds(ci: &ColumnIndexMetaData) -> Vec<PageBounds> {
    fn prim<T: Copy>(
        min: impl Iterator<Item = Option<T>>,
        max: impl Iterator<Item = Option<T>>,
        enc: impl Fn(T) -> Vec<u8>,
    ) -> Vec<PageBounds> {
        min.zip(max)
            .enumerate()
            .map(|(i, (a, b))| (i, a.map(&enc), b.map(&enc)))
            .collect()
    }
    match ci {
        ColumnIndexMetaData::INT32(x) => prim(
            x.min_values_iter().map(|v| v.copied()),
            x.max_values_iter().map(|v| v.copied()),
            |v: i32| v.to_le_bytes().to_vec(),
        ),
        ColumnIndexMetaData::INT64(x) => prim(
            x.min_values_iter().map(|v| v.copied()),
            x.max_values_iter().map(|v| v.copied()),
            |v: i64| v.to_le_bytes().to_vec(),
        ),
        ColumnIndexMetaData::BYTE_ARRAY(x) | ColumnIndexMetaData::FIXED_LEN_BYTE_ARRAY(x) => x
            .min_values_iter()
            .zip(x.max_values_iter())
            .enumerate()
            .map(|(i, (a, b))| (i, a.map(<[u8]>::to_vec), b.map(<[u8]>::to_vec)))
            .collect(),
        _ => Vec::new(),
    }
}

/// A statistic (plain-encoded): IDs compared exactly per physical type, byte arrays searched.
fn stat_value(
    hits: &mut Hits,
    place: Place,
    physical: PhysicalType,
    col: Option<&IdColumn>,
    v: &[u8],
    group: &str,
) {
    let detail = || group.to_string();
    match physical {
        PhysicalType::INT32 => {
            if let (Some(col), Ok(a)) = (col, <[u8; 4]>::try_from(v)) {
                let owners = col.int(i64::from(i32::from_le_bytes(a))).to_vec();
                hits.ids(place, &owners, group, &detail);
            }
        }
        PhysicalType::INT64 => {
            if let (Some(col), Ok(a)) = (col, <[u8; 8]>::try_from(v)) {
                let owners = col.int(i64::from_le_bytes(a)).to_vec();
                hits.ids(place, &owners, group, &detail);
            }
        }
        PhysicalType::BYTE_ARRAY | PhysicalType::FIXED_LEN_BYTE_ARRAY => {
            hits.search(place, v, group, &detail);
            if let Some(col) = col {
                let owners = col.bytes(v).to_vec();
                hits.ids(place, &owners, group, &detail);
            }
        }
        _ => {}
    }
}

fn detail(path: &str, top: bool, i: usize, first_row: u64, rows: u64) -> String {
    if top {
        format!("column `{path}`, first at row {}", first_row + i as u64)
    } else {
        format!(
            "column `{path}`, first in rows {}-{}",
            first_row,
            (first_row + rows).saturating_sub(1)
        )
    }
}

/// The bytes of every value of a string or binary array, each value's bytes contiguous.
fn value_bytes<T: ByteArrayType>(a: &GenericByteArray<T>) -> &[u8] {
    let offsets = a.value_offsets();
    let (Some(first), Some(last)) = (offsets.first(), offsets.last()) else {
        return &[];
    };
    let (first, last) = (first.as_usize(), last.as_usize());
    a.value_data().get(first..last).unwrap_or(a.value_data())
}

struct DataWalk<'h, 't> {
    sink: &'h mut Deferred<'t>,
    place: Place,
    first_row: u64,
    rows: u64,
    /// The leaf column being walked (its index in the file's schema), advanced after each
    /// leaf: with the row, it orders occurrences as a walk of whole batches met them.
    leaf: u32,
    /// When true, the bytes of a batch's byte-array values are searched at once first, and
    /// the values one by one only when that search may have found something (see
    /// [`DataWalk::text`]).
    filter_batches: bool,
    /// Reused by the search of a batch's bytes.
    scratch: Vec<u8>,
}

impl DataWalk<'_, '_> {
    fn detail(&self, path: &str, top: bool, i: usize) -> String {
        detail(path, top, i, self.first_row, self.rows)
    }

    /// Where element `i` of the current leaf is in a walk of whole batches of
    /// [`BATCH_ROWS`] rows from the file's first row. Below a list or map (`!top`) the walk
    /// is always of such batches, so its first row is a batch's.
    fn order(&self, top: bool, i: usize) -> Order {
        let batch = BATCH_ROWS as u64;
        if top {
            let r = self.first_row + i as u64;
            (r / batch, self.leaf, r % batch)
        } else {
            (self.first_row / batch, self.leaf, i as u64)
        }
    }

    /// Search byte-array values (`i`: the value's index in the batch). `whole`, when given,
    /// holds every value's bytes, each contiguous (the array's value buffer): when the page
    /// search (a superset of what searching each value finds, see
    /// [`TraceSet::page_may_hold`]) finds nothing in it, no value holds a trace or equals an
    /// ID, and the values are not searched one by one.
    fn text<'a>(
        &mut self,
        path: &str,
        name: &str,
        top: bool,
        whole: Option<&[u8]>,
        values: impl Iterator<Item = (usize, &'a [u8])>,
    ) {
        let traces = self.sink.traces;
        let col = traces.id_column(name);
        if let Some(whole) = whole
            && self.filter_batches
            && traces.page_bytes_searchable()
        {
            let what = match col {
                Some(_) if !self.sink.values_only => PageSearch::ValuesAndIds,
                _ => PageSearch::Values,
            };
            if !traces.page_may_hold(what, whole, &mut self.scratch) {
                return;
            }
        }
        let group = format!("column `{path}`");
        let (first_row, rows) = (self.first_row, self.rows);
        for (i, v) in values {
            let mut found = Vec::new();
            traces.search(v, |o| found.push(o));
            let order = self.order(top, i);
            for o in found {
                self.sink.value(self.place, o, &group, order, &|| {
                    detail(path, top, i, first_row, rows)
                });
            }
            if let Some(col) = col
                && !self.sink.values_only
            {
                let owners = col.bytes(v);
                if !owners.is_empty() {
                    self.sink.ids(self.place, owners, &group, order, &|| {
                        detail(path, top, i, first_row, rows)
                    });
                }
            }
        }
    }

    fn ints(
        &mut self,
        path: &str,
        name: &str,
        top: bool,
        values: impl Iterator<Item = (usize, i64)>,
    ) {
        if self.sink.values_only {
            return;
        }
        let traces = self.sink.traces;
        let Some(col) = traces.id_column(name) else {
            return;
        };
        let group = format!("column `{path}`");
        for (i, v) in values {
            let owners = col.int(v);
            if !owners.is_empty() {
                let d = self.detail(path, top, i);
                let order = self.order(top, i);
                self.sink
                    .ids(self.place, owners, &group, order, &|| d.clone());
            }
        }
    }

    fn walk(
        &mut self,
        a: &dyn Array,
        name: &str,
        path: &str,
        top: bool,
        depth: usize,
    ) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("column `{path}` nests deeper than {MAX_DEPTH}"));
        }
        macro_rules! ints {
            ($t:ty) => {{
                if let Some(p) = a.as_primitive_opt::<$t>() {
                    self.ints(
                        path,
                        name,
                        top,
                        p.iter().enumerate().filter_map(|(i, v)| {
                            v.and_then(|v| i64::try_from(v).ok()).map(|v| (i, v))
                        }),
                    );
                }
            }};
        }
        match a.data_type() {
            DataType::Utf8 => {
                if let Some(s) = a.as_string_opt::<i32>() {
                    self.text(
                        path,
                        name,
                        top,
                        Some(value_bytes(s)),
                        s.iter()
                            .enumerate()
                            .filter_map(|(i, v)| v.map(|v| (i, v.as_bytes()))),
                    );
                }
            }
            DataType::LargeUtf8 => {
                if let Some(s) = a.as_string_opt::<i64>() {
                    self.text(
                        path,
                        name,
                        top,
                        Some(value_bytes(s)),
                        s.iter()
                            .enumerate()
                            .filter_map(|(i, v)| v.map(|v| (i, v.as_bytes()))),
                    );
                }
            }
            DataType::Utf8View => {
                if let Some(s) = a.as_string_view_opt() {
                    self.text(
                        path,
                        name,
                        top,
                        None,
                        s.iter()
                            .enumerate()
                            .filter_map(|(i, v)| v.map(|v| (i, v.as_bytes()))),
                    );
                }
            }
            DataType::Binary => {
                if let Some(s) = a.as_binary_opt::<i32>() {
                    self.text(
                        path,
                        name,
                        top,
                        Some(value_bytes(s)),
                        s.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i, v))),
                    );
                }
            }
            DataType::LargeBinary => {
                if let Some(s) = a.as_binary_opt::<i64>() {
                    self.text(
                        path,
                        name,
                        top,
                        Some(value_bytes(s)),
                        s.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i, v))),
                    );
                }
            }
            DataType::BinaryView => {
                if let Some(s) = a.as_binary_view_opt() {
                    self.text(
                        path,
                        name,
                        top,
                        None,
                        s.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i, v))),
                    );
                }
            }
            DataType::FixedSizeBinary(_) => {
                if let Some(s) = a.as_fixed_size_binary_opt() {
                    self.text(
                        path,
                        name,
                        top,
                        Some(s.value_data()),
                        s.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i, v))),
                    );
                }
            }
            DataType::Int8 => ints!(Int8Type),
            DataType::Int16 => ints!(Int16Type),
            DataType::Int32 => ints!(Int32Type),
            DataType::Int64 => ints!(Int64Type),
            DataType::UInt8 => ints!(UInt8Type),
            DataType::UInt16 => ints!(UInt16Type),
            DataType::UInt32 => ints!(UInt32Type),
            DataType::UInt64 => ints!(UInt64Type),
            DataType::Dictionary(_, _) => {
                if let Some(d) = a.as_any_dictionary_opt() {
                    self.walk(d.values().as_ref(), name, path, false, depth + 1)?;
                }
            }
            DataType::Struct(fields) => {
                if let Some(s) = a.as_struct_opt() {
                    for (f, child) in fields.iter().zip(s.columns()) {
                        let p = format!("{path}.{}", f.name());
                        self.walk(child.as_ref(), f.name(), &p, top, depth + 1)?;
                    }
                }
            }
            DataType::List(_) => {
                if let Some(l) = a.as_list_opt::<i32>() {
                    self.walk(l.values().as_ref(), name, path, false, depth + 1)?;
                }
            }
            DataType::LargeList(_) => {
                if let Some(l) = a.as_list_opt::<i64>() {
                    self.walk(l.values().as_ref(), name, path, false, depth + 1)?;
                }
            }
            DataType::ListView(_) => {
                if let Some(l) = a.as_list_view_opt::<i32>() {
                    self.walk(l.values().as_ref(), name, path, false, depth + 1)?;
                }
            }
            DataType::LargeListView(_) => {
                if let Some(l) = a.as_list_view_opt::<i64>() {
                    self.walk(l.values().as_ref(), name, path, false, depth + 1)?;
                }
            }
            DataType::FixedSizeList(_, _) => {
                if let Some(l) = a.as_fixed_size_list_opt() {
                    self.walk(l.values().as_ref(), name, path, false, depth + 1)?;
                }
            }
            DataType::Map(_, _) => {
                if let Some(m) = a.as_map_opt() {
                    self.walk(
                        m.keys().as_ref(),
                        name,
                        &format!("{path}.key"),
                        false,
                        depth + 1,
                    )?;
                    self.walk(
                        m.values().as_ref(),
                        name,
                        &format!("{path}.value"),
                        false,
                        depth + 1,
                    )?;
                }
            }
            _ => {}
        }
        let container = matches!(
            a.data_type(),
            DataType::Dictionary(..)
                | DataType::Struct(_)
                | DataType::List(_)
                | DataType::LargeList(_)
                | DataType::ListView(_)
                | DataType::LargeListView(_)
                | DataType::FixedSizeList(..)
                | DataType::Map(..)
        );
        if !container {
            self.leaf = self.leaf.saturating_add(1);
        }
        Ok(())
    }
}
