//! Parquet data values searched in the bytes of their pages; only what may hold a trace is
//! decoded.
//!
//! Every page of every column chunk is read and decompressed (a page that can't be is an
//! unreadable file, as before), by lethe-scan's own page reader (`parquet_chunk`: one
//! decompression context and one output buffer per thread, the same page bytes as
//! parquet-rs's reader) or, for what that reader doesn't handle, by parquet-rs's. Then,
//! instead of decoding every value:
//! - byte-array columns (strings, binary, fixed-size): the bytes of PLAIN and
//!   DELTA_LENGTH_BYTE_ARRAY data pages and of dictionary pages hold the values' bytes, and are
//!   searched whole with the value prefixes (and, in a column that may hold IDs, the text IDs),
//!   with the case folding the value search uses ([`TraceSet::page_may_hold`]); PLAIN
//!   BYTE_ARRAY values are first copied out without the lengths and levels between them
//!   (`TraceSet::plain_byte_arrays_may_hold`: those bytes would make a page non-ASCII);
//! - INT32/INT64 columns that may hold IDs: PLAIN data pages and dictionary pages are searched
//!   for the IDs' little-endian bytes (values at known offsets compared one by one with the
//!   IDs of the ID columns the value walk could compare the column with);
//! - dictionary-encoded data pages hold only indices (their values are the dictionary's);
//! - pages in any other encoding (DELTA_BYTE_ARRAY, DELTA_BINARY_PACKED, BYTE_STREAM_SPLIT)
//!   can't be searched as bytes: their column chunk is decoded.
//!
//! The byte search finds a superset of what decoding finds (a match across two values or in
//! a length prefix is possible, never a miss), so a column chunk with no match holds no
//! trace. A chunk with a match is decoded with arrow-rs and searched value by value exactly as
//! a full decode does — that is what reports the hits, so places, details and counts are the
//! same as decoding the whole file, and a byte match that decoding doesn't confirm is not a
//! hit. A column below a list or map is decoded as its whole top-level column over all row
//! groups (its details name the batch of rows), a flat column one row group at a time: from
//! the pages the search already read and decompressed (kept from the first page that may
//! hold a trace on, the pages before it read again; up to [`KEEP_PAGES`] bytes per file, the
//! chunks past that read again by parquet-rs), with the delta check run on those pages.
//!
//! Does not: check the values of pages searched as bytes for encoding errors (their
//! decompression is checked; a page whose values are corrupt but whose bytes decompress is
//! searched, not decoded), search page-header statistics (neither did the decoding reader).

use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::basic::{Encoding, Type as PhysicalType};
use parquet::column::page::{Page, PageReader};
use parquet::file::metadata::RowGroupMetaData;
use parquet::file::properties::ReaderProperties;
use parquet::file::reader::ChunkReader;
use parquet::file::serialized_reader::SerializedPageReader;
use parquet::schema::types::ColumnDescriptor;

use super::parquet::{Projection, Shared, decode_read_pages, decode_values};
use super::parquet_chunk::{self, Next, PageKind};
use crate::report::{Deferred, Hits, Place};
use crate::traces::{IdColumn, PageSearch, TraceSet};

/// How the data values are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Values {
    /// Search the pages' bytes, decode the column chunks that may hold a trace.
    Search,
    /// Decode every value of the file in one pass, recording hits as they come (how the
    /// scan read Parquet before it searched bytes: the reference the search is tested
    /// against).
    #[cfg(any(test, feature = "reference"))]
    Reference,
}

/// What a leaf column's pages are searched for; None when no value of its type is searched.
fn page_search(c: &ColumnDescriptor, traces: &TraceSet, values_only: bool) -> Option<PageSearch> {
    let ids = !values_only && traces.has_ids() && may_hold_ids(c, traces);
    match c.physical_type() {
        PhysicalType::BYTE_ARRAY | PhysicalType::FIXED_LEN_BYTE_ARRAY => Some(if ids {
            PageSearch::ValuesAndIds
        } else {
            PageSearch::Values
        }),
        PhysicalType::INT32 if ids => Some(PageSearch::Int32),
        PhysicalType::INT64 if ids => Some(PageSearch::Int64),
        _ => None,
    }
}

/// True when the value walk could compare this column's values with IDs (see
/// [`id_columns`]).
fn may_hold_ids(c: &ColumnDescriptor, traces: &TraceSet) -> bool {
    !id_columns(c, traces).is_empty()
}

/// The ID columns the value walk could compare this column's values with: it takes the ID
/// column by a name on the column's path (the leaf's, or a list's or map's above it), so
/// every name on the path that is an ID column counts, and the dotted path too.
fn id_columns<'t>(c: &ColumnDescriptor, traces: &'t TraceSet) -> Vec<&'t IdColumn> {
    let parts = c.path().parts();
    let mut found: Vec<&IdColumn> = Vec::new();
    for col in parts
        .iter()
        .filter_map(|p| traces.id_column(p))
        .chain(traces.id_column(&parts.join(".")))
    {
        if !found.iter().any(|f| std::ptr::eq(*f, col)) {
            found.push(col);
        }
    }
    found
}

/// Search the data values of a Parquet file (see the module docs); hits go to `hits` as a
/// decode of every batch would have recorded them.
pub(crate) fn scan_values<R: ChunkReader + 'static>(
    src: &Shared<R>,
    meta: &ArrowReaderMetadata,
    hits: &mut Hits,
    place: Place,
    how: Values,
) -> Result<(), String> {
    let traces = hits.traces;
    let (mut sink, result);
    match how {
        Values::Search if encrypted(meta.metadata()) => {
            sink = Deferred::new(traces, hits.values_only);
            result = decode_every_root(src, meta, &mut sink, place);
        }
        Values::Search => {
            sink = Deferred::new(traces, hits.values_only);
            result = search_and_decode(src, meta, &mut sink, place);
        }
        #[cfg(any(test, feature = "reference"))]
        Values::Reference => {
            sink = Deferred::in_arrival_order(traces, hits.values_only);
            result = decode_values(src, meta, &mut sink, place, Projection::All, None, 0);
        }
    }
    // Hits found before an error are kept.
    hits.merge(sink);
    result
}

/// True when a column chunk of the file is encrypted: its pages are read through parquet-rs's
/// decrypting reader only (lethe-scan's page reader and the byte search don't decrypt).
fn encrypted(md: &parquet::file::metadata::ParquetMetaData) -> bool {
    md.row_groups()
        .iter()
        .any(|rg| rg.columns().iter().any(|c| c.crypto_metadata().is_some()))
}

/// Every top-level column decoded over all row groups and searched value by value (what
/// [`search_and_decode`] does to a column whose pages may hold a trace).
fn decode_every_root<R: ChunkReader + 'static>(
    src: &Shared<R>,
    meta: &ArrowReaderMetadata,
    sink: &mut Deferred,
    place: Place,
) -> Result<(), String> {
    let roots = meta
        .metadata()
        .file_metadata()
        .schema_descr()
        .root_schema()
        .get_fields()
        .len();
    for r in 0..roots {
        decode_values(src, meta, sink, place, Projection::Root(r), None, 0)?;
    }
    Ok(())
}

fn search_and_decode<R: ChunkReader + 'static>(
    src: &Shared<R>,
    meta: &ArrowReaderMetadata,
    sink: &mut Deferred,
    place: Place,
) -> Result<(), String> {
    let md = meta.metadata();
    let schema = md.file_metadata().schema_descr();
    let traces = sink.traces;
    let columns = schema.num_columns();
    let searched: Vec<Option<PageSearch>> = (0..columns)
        .map(|c| page_search(&schema.column(c), traces, sink.values_only))
        .collect();
    let roots = schema.root_schema().get_fields().len();
    // A top-level column with a list or map anywhere in it is decoded whole.
    let mut nested_root = vec![false; roots];
    for c in 0..columns {
        if schema.column(c).max_rep_level() > 0
            && let Some(n) = nested_root.get_mut(schema.get_column_root_idx(c))
        {
            *n = true;
        }
    }
    let by_bytes = traces.page_bytes_searchable();
    let props = Arc::new(
        ReaderProperties::builder()
            .set_read_bloom_filter(false)
            .build(),
    );
    let groups = md.row_groups();
    let mut candidate = vec![vec![false; columns]; groups.len()];
    // The pages of candidate chunks of flat columns as read (decoded from these, not read
    // again), while they fit in `budget` bytes.
    let mut read: Vec<Vec<Option<Vec<Page>>>> = vec![vec![None; columns]; groups.len()];
    let mut budget = KEEP_PAGES;
    let mut scratch = Vec::new();
    for (g, rg) in groups.iter().enumerate() {
        for c in 0..columns {
            let Some(what) = searched[c] else {
                // No trace is searched in values of this type: not read.
                continue;
            };
            if !by_bytes {
                candidate[g][c] = true;
                continue;
            }
            let flat = !nested_root[schema.get_column_root_idx(c)];
            let keep = flat.then_some(&mut budget);
            let (may, pages) = chunk_may_hold(src, rg, c, what, traces, &props, &mut scratch, keep)
                .map_err(|e| {
                    format!(
                        "column `{}`, row group {g}: {e}",
                        schema.column(c).path().string()
                    )
                })?;
            candidate[g][c] = may;
            read[g][c] = pages;
            #[cfg(test)]
            {
                let n = if candidate[g][c] {
                    &tests::DECODED
                } else {
                    &tests::SKIPPED
                };
                n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    let mut first_rows = Vec::with_capacity(groups.len());
    let mut rows = 0u64;
    for rg in groups {
        first_rows.push(rows);
        rows = rows.saturating_add(u64::try_from(rg.num_rows()).unwrap_or(0));
    }
    for (r, nested) in nested_root.iter().enumerate() {
        let leaves: Vec<usize> = (0..columns)
            .filter(|&c| schema.get_column_root_idx(c) == r)
            .collect();
        if *nested {
            let any = leaves
                .iter()
                .any(|&c| candidate.iter().any(|g| g.get(c) == Some(&true)));
            if any {
                decode_values(src, meta, sink, place, Projection::Root(r), None, 0)?;
            }
            continue;
        }
        for &c in &leaves {
            for (g, first_row) in first_rows.iter().enumerate() {
                if let Some(pages) = read[g][c].take() {
                    decode_read_pages(meta, sink, place, c, g, *first_row, pages)?;
                } else if candidate[g][c] {
                    decode_values(
                        src,
                        meta,
                        sink,
                        place,
                        Projection::Leaf(c),
                        Some(g),
                        *first_row,
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// Most bytes of decompressed pages one file's search keeps for decoding (the chunks past
/// it are read again by the decoder). The tests' files are small: a smaller bound there
/// takes both ways.
#[cfg(not(test))]
const KEEP_PAGES: usize = 64 << 20;
#[cfg(test)]
const KEEP_PAGES: usize = 256 << 10;

/// Reads every page of column `c` in row group `rg`; true when one may hold a trace (or can
/// only be searched by decoding). Without `keep`, stops at the first such page: decoding
/// reads the rest. With `keep` (the bytes left to keep), the chunk's pages are returned too
/// when one may hold a trace and they fit: the pages from that one on are kept as they are
/// read, those before it read again.
///
/// The pages are read with lethe-scan's own page reader (`parquet_chunk`: one decompression
/// context and buffer per thread); a chunk that reader doesn't handle (another codec, an
/// index page, a header it doesn't parse, a page that doesn't decompress) is read again from
/// its start with parquet-rs's page reader, as before, which reads it or reports its error
/// (its pages are not kept).
#[allow(clippy::too_many_arguments)]
fn chunk_may_hold<R: ChunkReader + 'static>(
    src: &Shared<R>,
    rg: &RowGroupMetaData,
    c: usize,
    what: PageSearch,
    traces: &TraceSet,
    props: &Arc<ReaderProperties>,
    scratch: &mut Vec<u8>,
    keep: Option<&mut usize>,
) -> parquet::errors::Result<(bool, Option<Vec<Page>>)> {
    let search = ChunkSearch::new(rg.column(c).column_descr(), what, traces);
    let mut may = false;
    let mut budget = keep.as_deref().copied().unwrap_or(0);
    let mut kept: Option<Vec<Page>> = None;
    let (mut index, mut first_kept) = (0usize, 0usize);
    let own = parquet_chunk::read_pages(&*src.0, rg.column(c), |kind, buf| {
        let i = index;
        index += 1;
        if !may {
            if !search.page_may_hold(kind, buf, scratch) {
                return Next::Continue;
            }
            may = true;
            if keep.is_none() {
                return Next::Stop;
            }
            first_kept = i;
            kept = Some(Vec::new());
        }
        match &mut kept {
            Some(pages) if buf.len() <= budget => {
                budget -= buf.len();
                pages.push(kind.to_page(Bytes::copy_from_slice(buf)));
                Next::Continue
            }
            // Too large to keep: decoding reads the chunk.
            _ => {
                kept = None;
                Next::Stop
            }
        }
    });
    #[cfg(test)]
    tests::count_reader(own.is_ok());
    if own.is_err() {
        return Ok((
            chunk_may_hold_parquet_rs(src, rg, c, &search, props, scratch)?,
            None,
        ));
    }
    if let Some(pages) = &mut kept
        && first_kept > 0
    {
        // The pages before the first that may hold a trace, read again.
        let mut before = Vec::with_capacity(first_kept);
        let again = parquet_chunk::read_pages(&*src.0, rg.column(c), |kind, buf| {
            if before.len() == first_kept || buf.len() > budget {
                return Next::Stop;
            }
            budget -= buf.len();
            before.push(kind.to_page(Bytes::copy_from_slice(buf)));
            Next::Continue
        });
        if again.is_ok() && before.len() == first_kept {
            before.append(pages);
            *pages = before;
        } else {
            kept = None;
        }
    }
    if let (Some(keep), Some(_)) = (keep, &kept) {
        *keep = budget;
    }
    #[cfg(test)]
    if may {
        let n = match &kept {
            Some(_) if first_kept > 0 => &tests::KEPT_AFTER_FIRST,
            Some(_) => &tests::KEPT,
            None => &tests::NOT_KEPT,
        };
        n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Ok((may, kept))
}

/// [`chunk_may_hold`] with parquet-rs's page reader.
fn chunk_may_hold_parquet_rs<R: ChunkReader + 'static>(
    src: &Shared<R>,
    rg: &RowGroupMetaData,
    c: usize,
    search: &ChunkSearch,
    props: &Arc<ReaderProperties>,
    scratch: &mut Vec<u8>,
) -> parquet::errors::Result<bool> {
    let rows = usize::try_from(rg.num_rows()).unwrap_or(0);
    let mut pages = SerializedPageReader::new_with_properties(
        Arc::clone(&src.0),
        rg.column(c),
        rows,
        None,
        Arc::clone(props),
    )?;
    while let Some(page) = pages.get_next_page()? {
        let (kind, buf) = page_kind(&page);
        if search.page_may_hold(kind, buf, scratch) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A parquet-rs page as lethe-scan's page reader describes it, and its bytes.
pub(crate) fn page_kind(page: &Page) -> (PageKind, &[u8]) {
    match page {
        Page::DictionaryPage {
            buf,
            encoding,
            num_values,
            is_sorted,
        } => (
            PageKind::Dictionary {
                encoding: *encoding,
                num_values: *num_values,
                is_sorted: *is_sorted,
            },
            buf,
        ),
        Page::DataPage {
            buf,
            encoding,
            def_level_encoding,
            rep_level_encoding,
            num_values,
            ..
        } => (
            PageKind::V1 {
                encoding: *encoding,
                def_levels: *def_level_encoding,
                rep_levels: *rep_level_encoding,
                num_values: *num_values,
            },
            buf,
        ),
        Page::DataPageV2 {
            buf,
            encoding,
            def_levels_byte_len,
            rep_levels_byte_len,
            num_values,
            num_nulls,
            num_rows,
            is_compressed,
            ..
        } => (
            PageKind::V2 {
                encoding: *encoding,
                levels_len: usize::try_from(
                    u64::from(*def_levels_byte_len) + u64::from(*rep_levels_byte_len),
                )
                .unwrap_or(usize::MAX),
                num_values: *num_values,
                num_nulls: *num_nulls,
                num_rows: *num_rows,
                def_len: *def_levels_byte_len,
                rep_len: *rep_levels_byte_len,
                is_compressed: *is_compressed,
            },
            buf,
        ),
    }
}

/// How the pages of one column chunk are searched.
struct ChunkSearch<'t> {
    descr: &'t ColumnDescriptor,
    what: PageSearch,
    traces: &'t TraceSet,
    /// The ID columns integer values are compared with (empty for byte arrays).
    id_cols: Vec<&'t IdColumn>,
}

impl<'t> ChunkSearch<'t> {
    fn new(descr: &'t ColumnDescriptor, what: PageSearch, traces: &'t TraceSet) -> Self {
        let id_cols = match what {
            PageSearch::Int32 | PageSearch::Int64 => id_columns(descr, traces),
            PageSearch::Values | PageSearch::ValuesAndIds => Vec::new(),
        };
        ChunkSearch {
            descr,
            what,
            traces,
            id_cols,
        }
    }

    /// True when the page may hold a trace, or can only be searched by decoding.
    fn page_may_hold(&self, kind: PageKind, buf: &[u8], scratch: &mut Vec<u8>) -> bool {
        let strings = matches!(self.what, PageSearch::Values | PageSearch::ValuesAndIds);
        let width = match self.what {
            PageSearch::Int32 => 4,
            PageSearch::Int64 => 8,
            _ => 0,
        };
        let descr = self.descr;
        // Whether the page can be searched as bytes, and where plain values start when that
        // is known (integers are then compared value by value).
        let (searchable, values_at) = match kind {
            PageKind::Dictionary { encoding, .. } => (
                matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY),
                Some(0),
            ),
            PageKind::V1 {
                encoding,
                def_levels,
                rep_levels,
                ..
            } => match encoding {
                // Indices into the dictionary page, which is searched.
                Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY => return false,
                Encoding::PLAIN => (
                    true,
                    v1_values_offset(
                        buf,
                        (descr.max_rep_level() > 0).then_some(rep_levels),
                        (descr.max_def_level() > 0).then_some(def_levels),
                    ),
                ),
                Encoding::DELTA_LENGTH_BYTE_ARRAY => (strings, None),
                _ => (false, None),
            },
            PageKind::V2 {
                encoding,
                levels_len,
                ..
            } => match encoding {
                Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY => return false,
                Encoding::PLAIN => (true, Some(levels_len)),
                Encoding::DELTA_LENGTH_BYTE_ARRAY => (strings, None),
                _ => (false, None),
            },
        };
        if !searchable {
            return true;
        }
        let values = values_at.and_then(|at| buf.get(at..));
        if strings && descr.physical_type() == PhysicalType::BYTE_ARRAY {
            // Searched value by value, without the lengths and levels between them; the raw
            // bytes when the lengths don't add up.
            if let Some(may) = values.and_then(|v| {
                self.traces
                    .plain_byte_arrays_may_hold(self.what, v, scratch)
            }) {
                return may;
            }
        }
        let plain = values
            .filter(|_| width > 0)
            .filter(|v| v.len() % width == 0);
        match plain {
            Some(values) => self
                .traces
                .plain_ints_may_hold(width, values, &self.id_cols),
            None => self.traces.page_may_hold(self.what, buf, scratch),
        }
    }
}

/// Where the values of a v1 data page start: after its repetition and definition levels
/// (each, when the column has them, RLE with a 4-byte length). None when a level encoding has
/// no length (the deprecated BIT_PACKED) or the lengths don't fit.
pub(crate) fn v1_values_offset(
    buf: &[u8],
    rep: Option<Encoding>,
    def: Option<Encoding>,
) -> Option<usize> {
    let mut at = 0usize;
    for levels in [rep, def].into_iter().flatten() {
        if levels != Encoding::RLE {
            return None;
        }
        let len = buf
            .get(at..)?
            .first_chunk::<4>()
            .map(|b| u32::from_le_bytes(*b))?;
        at = at.checked_add(4)?.checked_add(usize::try_from(len).ok()?)?;
    }
    (at <= buf.len()).then_some(at)
}

#[cfg(test)]
pub(crate) mod tests {
    //! The byte search against the reference (every value decoded in one pass): random files
    //! of every encoding, page version, codec, row-group and page size, nested types, nulls,
    //! non-ASCII and invalid UTF-8, with traces planted, near-missed and split across values.

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use arrow::array::{
        ArrayRef, BinaryArray, FixedSizeBinaryArray, Float64Array, Int16Array, Int64Array,
        ListArray, MapArray, RecordBatch, StringArray, StructArray, UInt32Array,
    };
    use arrow::buffer::{NullBuffer, OffsetBuffer};
    use arrow::datatypes::{DataType, Field, Fields, Schema};
    use bytes::Bytes;
    use parquet::arrow::{ArrowSchemaConverter, ArrowWriter};
    use parquet::basic::{Compression, Encoding, Type as PhysicalType};
    use parquet::file::properties::{WriterProperties, WriterVersion};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use crate::formats::parquet::scan_parquet;
    use crate::report::Hits;
    use crate::traces::{IdTrace, IdValue, SubjectTraces, TraceSet, ValueTrace};

    use super::Values;

    /// Column chunks the search decoded and skipped (for the test's coverage).
    pub(super) static DECODED: AtomicUsize = AtomicUsize::new(0);
    pub(super) static SKIPPED: AtomicUsize = AtomicUsize::new(0);
    /// Column chunks lethe-scan's page reader read, and those it left to parquet-rs.
    static OWN_READER: AtomicUsize = AtomicUsize::new(0);
    static FALLBACK: AtomicUsize = AtomicUsize::new(0);
    /// Candidate chunks decoded from the pages the search kept (from the first page on, or
    /// from a later one, the pages before it read again), and those read again whole.
    pub(super) static KEPT: AtomicUsize = AtomicUsize::new(0);
    pub(super) static KEPT_AFTER_FIRST: AtomicUsize = AtomicUsize::new(0);
    pub(super) static NOT_KEPT: AtomicUsize = AtomicUsize::new(0);

    pub(super) fn count_reader(own: bool) {
        let n = if own { &OWN_READER } else { &FALLBACK };
        n.fetch_add(1, Ordering::Relaxed);
    }

    fn subjects() -> Vec<SubjectTraces> {
        let id = |column: &str, values: Vec<IdValue>| IdTrace {
            column: column.into(),
            values,
        };
        let value = |kind: &str, value: &str| ValueTrace {
            kind: kind.into(),
            value: value.into(),
        };
        vec![
            SubjectTraces {
                label: "a".into(),
                ids: vec![
                    id("learner_id", vec![IdValue::Int(3590)]),
                    id("review_id", vec![IdValue::Text("CGB0000113".into())]),
                ],
                values: vec![
                    value("email", "alexa590@post.example"),
                    value("full_name", "Alexa Lindqvist"),
                ],
            },
            SubjectTraces {
                label: "b".into(),
                ids: vec![
                    id("account_id", vec![IdValue::Int(3_000_000_000)]),
                    id("learner_id", vec![IdValue::Int(-7)]),
                    id("course_id", vec![IdValue::Int(77)]),
                ],
                values: vec![value("full_name", "Ömer Çelik")],
            },
            SubjectTraces {
                label: "c".into(),
                ids: vec![
                    id("labels", vec![IdValue::Text("CGB0000113".into())]),
                    id("learner_id", vec![IdValue::Text("123456789012".into())]),
                ],
                values: vec![value("full_name", "Zoë Çelik"), value("email", "İpek@x.tr")],
            },
        ]
    }

    thread_local! {
        /// How often a generated value comes from the pool of traces and near misses (varied
        /// per file, so that many column chunks hold nothing and are not decoded).
        pub(crate) static DENSITY: std::cell::Cell<f64> = const { std::cell::Cell::new(0.5) };
    }

    fn from_pool(rng: &mut StdRng) -> bool {
        rng.random_bool(DENSITY.get())
    }

    /// Strings with traces, near misses (one character short of the prefix), traces split
    /// over two neighbouring values, case changes, long values and junk.
    fn string(rng: &mut StdRng) -> String {
        const POOL: &[&str] = &[
            "alexa590@post.example",
            "ALEXA590@POST.EXAMPLE",
            "mail: Alexa590@Post.Ex;",
            "alexa590@post.e",
            "alexa590@post.",
            "alexa590@",
            "post.example",
            "ÖMER ÇELİK",
            "ömer çeli",
            "Ömer Çelik Yılmaz",
            "zoë çelik",
            "ZOË ÇELİK",
            "zoe celik",
            "İPEK@X.TR",
            "ipek@x.tr",
            "Alexa Lindqvist",
            "Alexa Lindqvis",
            "CGB0000113",
            "cgb0000113",
            "xCGB0000113",
            "3590",
            "123456789012",
            "",
            "Ω",
        ];
        if from_pool(rng) {
            return POOL[rng.random_range(0..POOL.len())].to_string();
        }
        match rng.random_range(0..5) {
            0 => {
                let n = rng.random_range(100..400);
                let mut s: String = (0..n)
                    .map(|_| rng.random_range(b'a'..=b'z') as char)
                    .collect();
                if from_pool(rng) {
                    let at = rng.random_range(0..s.len());
                    s.insert_str(at, POOL[rng.random_range(0..POOL.len())]);
                }
                s
            }
            1 => (0..rng.random_range(0..12))
                .map(|_| ['é', 'Ç', 'İ', 'ß', 'K', 'a', 'Z', '€', '字'][rng.random_range(0..9)])
                .collect(),
            _ => (0..rng.random_range(0..20))
                .map(|_| rng.random_range(b' '..=b'~') as char)
                .collect(),
        }
    }

    fn bytes(rng: &mut StdRng) -> Vec<u8> {
        if rng.random_bool(0.5) {
            let mut b = string(rng).into_bytes();
            if rng.random_bool(0.3) {
                b.push([0xc3, 0xe2, 0xff, 0x80][rng.random_range(0..4)]);
            }
            b
        } else {
            (0..rng.random_range(0..30)).map(|_| rng.random()).collect()
        }
    }

    fn int(rng: &mut StdRng) -> i64 {
        if !from_pool(rng) {
            return rng.random_range(-5000..5000);
        }
        [3590, -7, 77, 3590 << 8, 3_000_000_000][rng.random_range(0..5)]
    }

    fn nulls(rng: &mut StdRng, n: usize, p: f64) -> Option<NullBuffer> {
        if rng.random_bool(0.5) {
            return None;
        }
        Some(NullBuffer::from(
            (0..n).map(|_| !rng.random_bool(p)).collect::<Vec<bool>>(),
        ))
    }

    fn strings(rng: &mut StdRng, n: usize) -> StringArray {
        let nb = nulls(rng, n, 0.2);
        (0..n)
            .map(|i| {
                nb.as_ref()
                    .is_none_or(|b| b.is_valid(i))
                    .then(|| string(rng))
            })
            .collect()
    }

    fn offsets(rng: &mut StdRng, n: usize) -> (OffsetBuffer<i32>, usize) {
        let lens: Vec<usize> = (0..n).map(|_| rng.random_range(0..4)).collect();
        let total = lens.iter().sum();
        (OffsetBuffer::from_lengths(lens), total)
    }

    pub(crate) fn batch(rng: &mut StdRng, n: usize) -> RecordBatch {
        let learner: Int64Array = (0..n)
            .map(|_| (!rng.random_bool(0.1)).then(|| int(rng)))
            .collect();
        let account: UInt32Array = (0..n)
            .map(|_| {
                Some(if from_pool(rng) {
                    3_000_000_000
                } else {
                    rng.random_range(0..4_000_000_000)
                })
            })
            .collect();
        let blob: BinaryArray = (0..n)
            .map(|_| Some(bytes(rng)))
            .collect::<Vec<_>>()
            .into_iter()
            .collect();
        let code = FixedSizeBinaryArray::try_from_iter((0..n).map(|_| {
            let mut b = string(rng).into_bytes();
            b.resize(16, b'.');
            b
        }))
        .unwrap();
        let score: Float64Array = (0..n).map(|_| Some(rng.random::<f64>())).collect();

        let inner_fields = Fields::from(vec![
            Field::new("learner_id", DataType::Int16, true),
            Field::new("note", DataType::Utf8, true),
        ]);
        let small: Int16Array = (0..n)
            .map(|_| {
                Some(if from_pool(rng) {
                    -7
                } else {
                    rng.random_range(-100..100)
                })
            })
            .collect();
        let s = StructArray::try_new(
            inner_fields.clone(),
            vec![Arc::new(small) as ArrayRef, Arc::new(strings(rng, n))],
            nulls(rng, n, 0.1),
        )
        .unwrap();

        let (o, total) = offsets(rng, n);
        let tags = ListArray::try_new(
            Arc::new(Field::new("element", DataType::Utf8, true)),
            o,
            Arc::new(strings(rng, total)),
            nulls(rng, n, 0.1),
        )
        .unwrap();
        let (o, total) = offsets(rng, n);
        let courses = ListArray::try_new(
            Arc::new(Field::new("element", DataType::Int64, true)),
            o,
            Arc::new((0..total).map(|_| Some(int(rng))).collect::<Int64Array>()),
            None,
        )
        .unwrap();
        let item_fields = Fields::from(vec![
            Field::new("a", DataType::Utf8, true),
            Field::new("learner_id", DataType::Int64, true),
        ]);
        let (o, total) = offsets(rng, n);
        let item_values = StructArray::try_new(
            item_fields.clone(),
            vec![
                Arc::new(strings(rng, total)) as ArrayRef,
                Arc::new((0..total).map(|_| Some(int(rng))).collect::<Int64Array>()),
            ],
            None,
        )
        .unwrap();
        let items = ListArray::try_new(
            Arc::new(Field::new("element", DataType::Struct(item_fields), true)),
            o,
            Arc::new(item_values),
            None,
        )
        .unwrap();
        let (o, total) = offsets(rng, n);
        let entry_fields = Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Utf8, true),
        ]);
        let keys: StringArray = (0..total).map(|_| Some(string(rng))).collect();
        let entries = StructArray::try_new(
            entry_fields.clone(),
            vec![Arc::new(keys) as ArrayRef, Arc::new(strings(rng, total))],
            None,
        )
        .unwrap();
        let labels = MapArray::try_new(
            Arc::new(Field::new(
                "key_value",
                DataType::Struct(entry_fields),
                false,
            )),
            o,
            entries,
            None,
            false,
        )
        .unwrap();

        let columns: Vec<(&str, ArrayRef)> = vec![
            ("learner_id", Arc::new(learner)),
            ("review_id", Arc::new(strings(rng, n))),
            ("email", Arc::new(strings(rng, n))),
            ("account_id", Arc::new(account)),
            ("blob", Arc::new(blob)),
            ("code", Arc::new(code)),
            ("score", Arc::new(score)),
            ("s", Arc::new(s)),
            ("tags", Arc::new(tags)),
            ("course_id", Arc::new(courses)),
            ("items", Arc::new(items)),
            ("labels", Arc::new(labels)),
        ];
        let fields: Vec<Field> = columns
            .iter()
            .map(|(name, a)| Field::new(*name, a.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap()
    }

    pub(crate) fn write(rng: &mut StdRng, batches: &[RecordBatch]) -> (Vec<u8>, String) {
        let schema = batches[0].schema();
        let descr = ArrowSchemaConverter::new().convert(&schema).unwrap();
        let codec = [
            Compression::UNCOMPRESSED,
            Compression::SNAPPY,
            Compression::ZSTD(Default::default()),
            Compression::GZIP(Default::default()),
            Compression::LZ4_RAW,
            // Left to parquet-rs's page reader by lethe-scan's.
            Compression::BROTLI(Default::default()),
            Compression::LZ4,
        ][rng.random_range(0..7)];
        let mut b = WriterProperties::builder()
            .set_compression(codec)
            .set_write_page_header_statistics(rng.random_bool(0.2))
            .set_writer_version(if rng.random_bool(0.5) {
                WriterVersion::PARQUET_1_0
            } else {
                WriterVersion::PARQUET_2_0
            })
            .set_dictionary_enabled(rng.random_bool(0.5))
            .set_dictionary_page_size_limit(rng.random_range(64..4096))
            .set_data_page_row_count_limit(rng.random_range(1..600))
            .set_write_batch_size(rng.random_range(1..300))
            .set_max_row_group_row_count(Some(rng.random_range(1..2500)))
            .set_bloom_filter_enabled(rng.random_bool(0.3));
        let mut described = format!("{codec:?}");
        for c in descr.columns() {
            let choices: &[Encoding] = match c.physical_type() {
                PhysicalType::BYTE_ARRAY => &[
                    Encoding::PLAIN,
                    Encoding::DELTA_LENGTH_BYTE_ARRAY,
                    Encoding::DELTA_BYTE_ARRAY,
                ],
                PhysicalType::FIXED_LEN_BYTE_ARRAY => &[
                    Encoding::PLAIN,
                    Encoding::DELTA_BYTE_ARRAY,
                    Encoding::BYTE_STREAM_SPLIT,
                ],
                PhysicalType::INT32 | PhysicalType::INT64 => &[
                    Encoding::PLAIN,
                    Encoding::DELTA_BINARY_PACKED,
                    Encoding::BYTE_STREAM_SPLIT,
                ],
                _ => &[Encoding::PLAIN],
            };
            // Mostly PLAIN: the encodings the byte search reads.
            let e = if rng.random_bool(0.6) {
                Encoding::PLAIN
            } else {
                choices[rng.random_range(0..choices.len())]
            };
            described.push_str(&format!(" {}={e:?}", c.path().string()));
            b = b.set_column_encoding(c.path().clone(), e);
        }
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema, Some(b.build())).unwrap();
        for batch in batches {
            w.write(batch).unwrap();
        }
        w.close().unwrap();
        (out, described)
    }

    pub(crate) fn scan(
        traces: &TraceSet,
        file: &[u8],
        values_only: bool,
        how: Values,
    ) -> (Result<(), String>, Vec<crate::Hit>, u64) {
        let mut hits = Hits::new(traces, values_only);
        let r = scan_parquet(
            Bytes::copy_from_slice(file),
            &mut hits,
            (false, how),
            &crate::ParquetKeys::default(),
        );
        let (h, omitted) = hits.finish();
        (r, h, omitted)
    }

    /// Where a Parquet file's footer (its Thrift metadata) starts.
    fn footer_start(file: &[u8]) -> usize {
        let len = file.len();
        let footer_len = u32::from_le_bytes(file[len - 8..len - 4].try_into().unwrap()) as usize;
        len - 8 - footer_len
    }

    /// `file` with its footer's row count (FileMetaData field 3, Thrift compact: header 0x16,
    /// the zigzag varint, then field 4's list header 0x19) set to 0; the row groups keep
    /// theirs.
    fn footer_rows_zeroed(file: &[u8], rows: i64) -> Vec<u8> {
        let start = footer_start(file);
        let footer = &file[start..file.len() - 8];
        let mut varint = Vec::new();
        crate::formats::delta_guard::tests::varint(
            ((rows << 1) ^ (rows >> 63)) as u64,
            &mut varint,
        );
        let mut pattern = vec![0x16];
        pattern.extend_from_slice(&varint);
        pattern.push(0x19);
        let at = footer
            .windows(pattern.len())
            .position(|w| w == pattern)
            .expect("the footer's row count");
        let mut patched = footer[..=at].to_vec();
        patched.push(0);
        patched.extend_from_slice(&footer[at + 1 + varint.len()..]);
        let mut out = file[..start].to_vec();
        out.extend_from_slice(&patched);
        out.extend_from_slice(&u32::try_from(patched.len()).unwrap().to_le_bytes());
        out.extend_from_slice(b"PAR1");
        out
    }

    /// Found by fuzzing: arrow-rs caps a reader's batch size at the footer's row count, so a
    /// footer saying 0 rows over row groups that hold some had every decode read nothing.
    #[test]
    fn a_footer_row_count_of_zero_hides_no_values() {
        let seed = crate::test_seed(20_261_206);
        let mut rng = StdRng::seed_from_u64(seed);
        DENSITY.set(0.05);
        let batches: Vec<RecordBatch> = (0..2).map(|_| batch(&mut rng, 700)).collect();
        let mut file = Vec::new();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(500))
            .build();
        let mut w = ArrowWriter::try_new(&mut file, batches[0].schema(), Some(props)).unwrap();
        for b in &batches {
            w.write(b).unwrap();
        }
        w.close().unwrap();
        let patched = footer_rows_zeroed(&file, 1400);
        let md = parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&Bytes::from(patched.clone()))
            .unwrap();
        assert_eq!(md.file_metadata().num_rows(), 0, "seed {seed}");
        assert_eq!(md.num_row_groups(), 3);
        let traces = TraceSet::new(&subjects(), 15).unwrap();
        let whole = scan(&traces, &file, false, Values::Search);
        assert!(whole.0.is_ok(), "{:?}", whole.0);
        let data: Vec<&crate::Hit> = whole
            .1
            .iter()
            .filter(|h| h.place == crate::Place::DataValue)
            .collect();
        assert!(
            data.iter().any(|h| h.detail.contains("first in rows")) && data.len() > 5,
            "seed {seed}: the file holds traces, nested ones too: {data:?}"
        );
        for how in [Values::Search, Values::Reference] {
            assert_eq!(
                scan(&traces, &patched, false, how),
                scan(&traces, &file, false, how),
                "seed {seed}, {how:?}"
            );
        }
    }

    /// `file` with its row groups' row counts set to 0 (the file's, their sum, too): its
    /// footer parsed without page indexes, changed and written again after the same pages.
    fn group_rows_zeroed(file: &[u8]) -> Vec<u8> {
        let start = footer_start(file);
        let md = parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&Bytes::copy_from_slice(file))
            .unwrap();
        let mut b = md.into_builder();
        let groups: Vec<_> = b
            .take_row_groups()
            .into_iter()
            .map(|rg| rg.into_builder().set_num_rows(0).build().unwrap())
            .collect();
        let md = b.set_row_groups(groups).build();
        let mut out = file[..start].to_vec();
        parquet::file::metadata::ParquetMetaDataWriter::new(&mut out, &md)
            .finish()
            .unwrap();
        out
    }

    /// Found by fuzzing: a row group saying 0 rows over column chunks that hold values had
    /// the reference (arrow-rs's reader, which reads a group's rows as its count says) see no
    /// value, while the scan's decode of the pages it kept read them all.
    #[test]
    fn a_row_group_row_count_of_zero_hides_no_values() {
        let seed = crate::test_seed(20_261_207);
        let mut rng = StdRng::seed_from_u64(seed);
        DENSITY.set(0.05);
        let b = batch(&mut rng, 700);
        let mut file = Vec::new();
        let mut w = ArrowWriter::try_new(&mut file, b.schema(), None).unwrap();
        w.write(&b).unwrap();
        w.close().unwrap();
        let patched = group_rows_zeroed(&file);
        let md = parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&Bytes::from(patched.clone()))
            .unwrap();
        assert_eq!(md.row_group(0).num_rows(), 0, "seed {seed}");
        let traces = TraceSet::new(&subjects(), 15).unwrap();
        let whole = scan(&traces, &file, false, Values::Search);
        assert!(whole.0.is_ok(), "{:?}", whole.0);
        assert!(
            whole.1.iter().any(|h| h.place == crate::Place::DataValue),
            "seed {seed}: the file holds traces"
        );
        for how in [Values::Search, Values::Reference] {
            assert_eq!(
                scan(&traces, &patched, false, how),
                scan(&traces, &file, false, how),
                "seed {seed}, {how:?}"
            );
        }
    }

    #[test]
    fn searching_bytes_finds_what_decoding_every_value_finds() {
        let seed = crate::test_seed(20_260_518);
        let mut rng = StdRng::seed_from_u64(seed);
        let subjects = subjects();
        let all = TraceSet::new(&subjects, 15).unwrap();
        // A value holding U+FFFD (what the search puts for invalid UTF-8): pages are decoded.
        let mut odd = subjects.clone();
        odd.push(SubjectTraces {
            label: "d".into(),
            ids: Vec::new(),
            values: vec![ValueTrace {
                kind: "note".into(),
                value: "ab\u{FFFD}".into(),
            }],
        });
        let odd = TraceSet::new(&odd, 15).unwrap();
        // Hundreds of subjects: the gram filters and the cover (see `grams`) instead of the
        // automaton alone; values of every length class.
        let mut crowd = subjects.clone();
        for i in 0..300 {
            let word = |rng: &mut StdRng, n: usize| -> String {
                (0..n)
                    .map(|_| rng.random_range(b'a'..=b'z') as char)
                    .collect()
            };
            let n = rng.random_range(4..30);
            crowd.push(SubjectTraces {
                label: format!("r{i}"),
                ids: vec![
                    IdTrace {
                        column: "learner_id".into(),
                        values: vec![IdValue::Int(rng.random_range(-1_000_000..1_000_000))],
                    },
                    IdTrace {
                        column: "review_id".into(),
                        values: vec![IdValue::Text(word(&mut rng, 9))],
                    },
                ],
                values: vec![ValueTrace {
                    kind: "email".into(),
                    value: word(&mut rng, n),
                }],
            });
        }
        let crowd = TraceSet::new(&crowd, 15).unwrap();
        assert!(all.page_bytes_searchable() && !odd.page_bytes_searchable());
        let mut data_hits = 0;
        for round in 0..32 {
            DENSITY.set([0.0, 0.0002, 0.003, 0.05, 0.5][round % 5]);
            let batches: Vec<RecordBatch> = (0..rng.random_range(1..4))
                .map(|_| {
                    let n = rng.random_range(1..1500);
                    batch(&mut rng, n)
                })
                .collect();
            let (file, described) = write(&mut rng, &batches);
            for (k, traces) in [(0, &all), (1, &odd), (2, &crowd)] {
                for values_only in [false, true] {
                    let fast = scan(traces, &file, values_only, Values::Search);
                    let reference = scan(traces, &file, values_only, Values::Reference);
                    assert!(reference.0.is_ok(), "round {round}: {:?}", reference.0);
                    assert_eq!(
                        fast, reference,
                        "round {round} (seed {seed}, traces {k}, values_only {values_only}): {described}"
                    );
                    data_hits += fast.1.len();
                }
            }
            // One subject at a time: the same hits as among all.
            for s in 0..subjects.len() {
                let one = TraceSet::new(&subjects[s..=s], 15).unwrap();
                let fast = scan(&one, &file, false, Values::Search);
                let reference = scan(&one, &file, false, Values::Reference);
                assert_eq!(fast, reference, "round {round} subject {s}: {described}");
            }
        }
        assert!(
            data_hits > 100,
            "the fixtures hold traces: {data_hits} hits"
        );
        let (decoded, skipped) = (
            DECODED.load(Ordering::Relaxed),
            SKIPPED.load(Ordering::Relaxed),
        );
        let (own, fallback) = (
            OWN_READER.load(Ordering::Relaxed),
            FALLBACK.load(Ordering::Relaxed),
        );
        println!(
            "column chunks decoded {decoded}, skipped {skipped}; read by lethe-scan's page reader {own}, by parquet-rs's {fallback}"
        );
        assert!(own > 100 && fallback > 10, "own {own}, fallback {fallback}");
        let kept = [&KEPT, &KEPT_AFTER_FIRST, &NOT_KEPT].map(|n| n.load(Ordering::Relaxed));
        println!(
            "candidate chunks decoded from kept pages {} (the first kept after the first page {}), read again {}",
            kept[0] + kept[1],
            kept[1],
            kept[2]
        );
        assert!(kept[0] > 50 && kept[1] > 5 && kept[2] > 5, "kept {kept:?}");
        assert!(
            decoded > 100 && skipped > 100,
            "decoded {decoded}, skipped {skipped}"
        );
    }
}
