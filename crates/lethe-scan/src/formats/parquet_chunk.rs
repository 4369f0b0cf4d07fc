//! lethe-scan's own reader of a column chunk's pages, for the byte search
//! (`parquet_pages`): page headers parsed here, every page decompressed with one
//! decompression context and one reused output buffer per thread.
//!
//! parquet-rs's `SerializedPageReader` creates a zstd compression and decompression context
//! per column chunk and allocates (and, for zstd, copies) a fresh buffer per page; the byte
//! search reads every page of every searched column chunk, so that was a tenth of the scan.
//!
//! Guarantees: the bytes handed to the caller for a page, and its header's fields in
//! [`PageKind`] (encodings, counts, level lengths, flags), are exactly the `buf` and fields
//! parquet-rs's page reader gives for it ([`PageKind::to_page`] makes its `Page`) (a v1 data page or dictionary page decompressed whole; a v2 data
//! page's levels as stored followed by its decompressed values; an uncompressed page as
//! stored), checked as parquet-rs checks them (header and page sizes inside the chunk, the
//! decompressed size equal to the header's). Anything this reader doesn't handle makes it
//! give up on the chunk with [`Unsupported`] before the caller has used any page's verdict,
//! and the caller reads the chunk with parquet-rs as before, which then reads it or reports
//! the same error as before:
//! - codecs other than UNCOMPRESSED, SNAPPY, GZIP, LZ4_RAW and ZSTD (BROTLI, LZO, the framed
//!   and Hadoop LZ4);
//! - page types other than data pages v1 and v2 and dictionary pages (index pages);
//! - a header that doesn't parse as this reader expects (a missing required field, a field
//!   of another Thrift type than the format's, an unknown encoding or page type, a negative
//!   count), a header longer than [`HEADER_PEEK`] bytes, sizes outside the chunk;
//! - a page that doesn't decompress, or not to the size its header says.
//!
//! Does not: check page CRCs (neither does parquet-rs as lethe builds it), decrypt.

use std::cell::RefCell;
use std::io::Read;

use bytes::Bytes;
use parquet::basic::{Compression, Encoding};
use parquet::column::page::Page;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::reader::ChunkReader;

use super::thrift_guard;

/// Bytes read ahead for a page header (headers without statistics take a few dozen bytes;
/// one with long min/max statistics can take more, and is then left to parquet-rs).
pub(crate) const HEADER_PEEK: u64 = 64 << 10;

/// The reader can't read this chunk (see the module docs); nothing it read was used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unsupported(pub &'static str);

/// One page as the caller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageKind {
    /// A dictionary page.
    Dictionary {
        encoding: Encoding,
        num_values: u32,
        is_sorted: bool,
    },
    /// A v1 data page (levels, when the column has them, are inside the decompressed bytes).
    V1 {
        encoding: Encoding,
        def_levels: Encoding,
        rep_levels: Encoding,
        num_values: u32,
    },
    /// A v2 data page: `levels_len` bytes of repetition and definition levels first
    /// (`def_len` + `rep_len`).
    V2 {
        encoding: Encoding,
        levels_len: usize,
        num_values: u32,
        num_nulls: u32,
        num_rows: u32,
        def_len: u32,
        rep_len: u32,
        is_compressed: bool,
    },
}

impl PageKind {
    /// The page as parquet-rs's page reader gives it, holding `buf` (its bytes as
    /// [`read_pages`] gave them): the same fields, statistics left out (decoding doesn't
    /// read them).
    pub(crate) fn to_page(self, buf: Bytes) -> Page {
        match self {
            PageKind::Dictionary {
                encoding,
                num_values,
                is_sorted,
            } => Page::DictionaryPage {
                buf,
                num_values,
                encoding,
                is_sorted,
            },
            PageKind::V1 {
                encoding,
                def_levels,
                rep_levels,
                num_values,
            } => Page::DataPage {
                buf,
                num_values,
                encoding,
                def_level_encoding: def_levels,
                rep_level_encoding: rep_levels,
                statistics: None,
            },
            PageKind::V2 {
                encoding,
                num_values,
                num_nulls,
                num_rows,
                def_len,
                rep_len,
                is_compressed,
                ..
            } => Page::DataPageV2 {
                buf,
                num_values,
                encoding,
                num_nulls,
                num_rows,
                def_levels_byte_len: def_len,
                rep_levels_byte_len: rep_len,
                is_compressed,
                statistics: None,
            },
        }
    }
}

/// What the caller's function says after a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Read the next page.
    Continue,
    /// Stop: the chunk's verdict is known.
    Stop,
}

/// A thread's decompression state, reused for every page it reads.
struct Decompressors {
    zstd: Option<zstd::bulk::Decompressor<'static>>,
    snappy: snap::raw::Decoder,
    out: Vec<u8>,
}

thread_local! {
    static STATE: RefCell<Decompressors> = RefCell::new(Decompressors {
        zstd: None,
        snappy: snap::raw::Decoder::new(),
        out: Vec::new(),
    });
}

/// Largest output buffer kept between pages (a larger page's buffer is freed after it).
const KEEP_BUFFER: usize = 16 << 20;

/// Read the pages of column chunk `chunk` of `src` in order, calling `f` with each page's
/// kind and decompressed bytes until it says [`Next::Stop`] or the chunk ends. Errors with
/// [`Unsupported`] (see the module docs) before `f` is called for a page that can't be read;
/// the caller must then disregard what `f` saw of earlier pages only if it treats the chunk
/// as unread (the byte search does: it starts over with parquet-rs).
pub(crate) fn read_pages<R: ChunkReader>(
    src: &R,
    chunk: &ColumnChunkMetaData,
    mut f: impl FnMut(PageKind, &[u8]) -> Next,
) -> Result<(), Unsupported> {
    let codec = chunk.compression();
    if !matches!(
        codec,
        Compression::UNCOMPRESSED
            | Compression::SNAPPY
            | Compression::GZIP(_)
            | Compression::LZ4_RAW
            | Compression::ZSTD(_)
    ) {
        return Err(Unsupported("codec"));
    }
    let start = chunk
        .dictionary_page_offset()
        .unwrap_or_else(|| chunk.data_page_offset());
    let (Ok(mut offset), Ok(mut remaining)) =
        (u64::try_from(start), u64::try_from(chunk.compressed_size()))
    else {
        return Err(Unsupported("chunk range"));
    };
    STATE.with(|state| {
        let mut state = state.borrow_mut();
        let state = &mut *state;
        while remaining > 0 {
            let peek = src
                .get_bytes(offset, remaining.min(HEADER_PEEK) as usize)
                .map_err(|_| Unsupported("read"))?;
            let (header_len, h) = parse_header(&peek)?;
            let header_len = header_len as u64;
            if header_len > remaining {
                return Err(Unsupported("header past the chunk"));
            }
            offset += header_len;
            remaining -= header_len;
            let (Ok(compressed), Ok(uncompressed)) =
                (u64::try_from(h.compressed), usize::try_from(h.uncompressed))
            else {
                return Err(Unsupported("negative page size"));
            };
            if compressed > remaining {
                return Err(Unsupported("page past the chunk"));
            }
            let data = if header_len + compressed <= peek.len() as u64 {
                peek.slice(header_len as usize..(header_len + compressed) as usize)
            } else {
                src.get_bytes(offset, compressed as usize)
                    .map_err(|_| Unsupported("read"))?
            };
            if data.len() as u64 != compressed {
                return Err(Unsupported("short read"));
            }
            offset += compressed;
            remaining -= compressed;
            let next = match decompress(state, codec, &h, &data, uncompressed)? {
                Some(page) => f(h.kind, page),
                None => f(h.kind, &data),
            };
            if state.out.capacity() > KEEP_BUFFER {
                state.out = Vec::new();
            }
            if next == Next::Stop {
                break;
            }
        }
        Ok(())
    })
}

/// The page's bytes as parquet-rs's `decode_page` makes them: None when they are `data`
/// itself (no codec, or a v2 page stored uncompressed), else the reused buffer.
fn decompress<'s>(
    state: &'s mut Decompressors,
    codec: Compression,
    h: &Header,
    data: &Bytes,
    uncompressed: usize,
) -> Result<Option<&'s [u8]>, Unsupported> {
    let mut levels = 0usize;
    if let PageKind::V2 { levels_len, .. } = h.kind {
        if !h.v2_compressed {
            return Ok(None);
        }
        levels = levels_len;
    }
    if codec == Compression::UNCOMPRESSED {
        return Ok(None);
    }
    if levels > data.len() || levels > uncompressed {
        return Err(Unsupported("levels past the page"));
    }
    let size = uncompressed - levels;
    let (input, out) = (&data[levels..], &mut state.out);
    out.clear();
    out.extend_from_slice(&data[..levels]);
    if size > 0 {
        match codec {
            Compression::ZSTD(_) => {
                out.resize(uncompressed, 0);
                let zstd = match &mut state.zstd {
                    Some(z) => z,
                    None => state.zstd.insert(
                        zstd::bulk::Decompressor::new().map_err(|_| Unsupported("zstd context"))?,
                    ),
                };
                let n = zstd
                    .decompress_to_buffer(input, &mut out[levels..])
                    .map_err(|_| Unsupported("zstd"))?;
                out.truncate(levels + n);
            }
            Compression::SNAPPY => {
                // As parquet-rs: the buffer has the header's size whatever the stream says.
                out.resize(uncompressed, 0);
                state
                    .snappy
                    .decompress(input, &mut out[levels..])
                    .map_err(|_| Unsupported("snappy"))?;
            }
            Compression::GZIP(_) => {
                flate2::read::MultiGzDecoder::new(input)
                    .read_to_end(out)
                    .map_err(|_| Unsupported("gzip"))?;
            }
            Compression::LZ4_RAW => {
                out.resize(uncompressed, 0);
                let n = lz4_flex::block::decompress_into(input, &mut out[levels..])
                    .map_err(|_| Unsupported("lz4"))?;
                if n != size {
                    return Err(Unsupported("lz4 size"));
                }
            }
            _ => return Err(Unsupported("codec")),
        }
    }
    if out.len() != uncompressed {
        return Err(Unsupported("decompressed size"));
    }
    Ok(Some(out))
}

/// A page header as far as the byte search needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    kind: PageKind,
    compressed: i32,
    uncompressed: i32,
    /// A v2 page's `is_compressed` (true when absent, as the format says).
    v2_compressed: bool,
}

const T_TRUE: u8 = 1;
const T_FALSE: u8 = 2;
const T_I32: u8 = 5;
const T_STRUCT: u8 = 12;

/// A Thrift compact-protocol reader over a byte slice.
struct Thrift<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Thrift<'_> {
    fn byte(&mut self) -> Result<u8, Unsupported> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or(Unsupported("header truncated"))?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, Unsupported> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Unsupported("overlong varint"))
    }

    fn i32(&mut self) -> Result<i32, Unsupported> {
        let v = self.varint()?;
        let v = u32::try_from(v).map_err(|_| Unsupported("i32 out of range"))?;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    /// The next field's (id, type), None at the struct's end.
    fn field(&mut self, last: &mut i16) -> Result<Option<(i16, u8)>, Unsupported> {
        let head = self.byte()?;
        let kind = head & 0x0f;
        if kind == 0 {
            return Ok(None);
        }
        let delta = head >> 4;
        let id = if delta == 0 {
            let v = self.varint()?;
            let v = u16::try_from(v).map_err(|_| Unsupported("field id"))?;
            ((v >> 1) as i16) ^ -((v & 1) as i16)
        } else {
            last.checked_add(i16::from(delta))
                .ok_or(Unsupported("field id"))?
        };
        *last = id;
        Ok(Some((id, kind)))
    }

    fn skip(&mut self, kind: u8) -> Result<(), Unsupported> {
        self.at = thrift_guard::skip_value(self.bytes, self.at, kind).map_err(|what| {
            // Running out of the bytes read ahead (long statistics) is a truncated header.
            Unsupported(match what {
                "truncated" | "a length past the end" | "a container larger than the footer" => {
                    "header truncated"
                }
                _ => "unknown field",
            })
        })?;
        Ok(())
    }

    fn expect_i32(&mut self, kind: u8) -> Result<i32, Unsupported> {
        if kind != T_I32 {
            return Err(Unsupported("field type"));
        }
        self.i32()
    }
}

fn encoding(v: i32) -> Result<Encoding, Unsupported> {
    Ok(match v {
        0 => Encoding::PLAIN,
        2 => Encoding::PLAIN_DICTIONARY,
        3 => Encoding::RLE,
        #[allow(deprecated)]
        4 => Encoding::BIT_PACKED,
        5 => Encoding::DELTA_BINARY_PACKED,
        6 => Encoding::DELTA_LENGTH_BYTE_ARRAY,
        7 => Encoding::DELTA_BYTE_ARRAY,
        8 => Encoding::RLE_DICTIONARY,
        9 => Encoding::BYTE_STREAM_SPLIT,
        _ => return Err(Unsupported("encoding")),
    })
}

/// Parse a `PageHeader` at the start of `bytes`: its length and what the search needs.
fn parse_header(bytes: &[u8]) -> Result<(usize, Header), Unsupported> {
    let mut t = Thrift { bytes, at: 0 };
    let (mut page_type, mut uncompressed, mut compressed) = (None, None, None);
    let mut v1 = None;
    let mut dict = None;
    let mut v2 = None;
    let mut last = 0i16;
    while let Some((id, kind)) = t.field(&mut last)? {
        match id {
            1 => page_type = Some(t.expect_i32(kind)?),
            2 => uncompressed = Some(t.expect_i32(kind)?),
            3 => compressed = Some(t.expect_i32(kind)?),
            5 | 7 | 8 => {
                if kind != T_STRUCT {
                    return Err(Unsupported("field type"));
                }
                // The i32 fields each header starts with: data page v1 4, dictionary 2, v2 6.
                let ints = match id {
                    5 => 4,
                    7 => 2,
                    _ => 6,
                };
                let s = sub_header(&mut t, ints)?;
                match id {
                    5 => v1 = Some(s),
                    7 => dict = Some(s),
                    _ => v2 = Some(s),
                }
            }
            _ => t.skip(kind)?,
        }
    }
    let (Some(page_type), Some(uncompressed), Some(compressed)) =
        (page_type, uncompressed, compressed)
    else {
        return Err(Unsupported("required field missing"));
    };
    let need = |f: &[Option<i32>], i: usize| f.get(i).copied().flatten();
    let count = |v: Option<i32>| -> Result<u32, Unsupported> {
        v.and_then(|n| u32::try_from(n).ok())
            .ok_or(Unsupported("count"))
    };
    let (kind, v2_compressed) = match page_type {
        // DATA_PAGE: num_values, encoding, definition and repetition level encodings.
        0 => {
            let s = v1.ok_or(Unsupported("no data page header"))?;
            let num_values = count(need(&s.ints, 1))?;
            let e = |i| need(&s.ints, i).ok_or(Unsupported("required field missing"));
            (
                PageKind::V1 {
                    encoding: encoding(e(2)?)?,
                    def_levels: encoding(e(3)?)?,
                    rep_levels: encoding(e(4)?)?,
                    num_values,
                },
                true,
            )
        }
        // DICTIONARY_PAGE: num_values, encoding, is_sorted (false when absent, as parquet-rs).
        2 => {
            let s = dict.ok_or(Unsupported("no dictionary page header"))?;
            let num_values = count(need(&s.ints, 1))?;
            let e = need(&s.ints, 2).ok_or(Unsupported("required field missing"))?;
            (
                PageKind::Dictionary {
                    encoding: encoding(e)?,
                    num_values,
                    is_sorted: s.flag.unwrap_or(false),
                },
                true,
            )
        }
        // DATA_PAGE_V2: num_values, num_nulls, num_rows, encoding, definition and repetition
        // levels' byte lengths, is_compressed.
        3 => {
            let s = v2.ok_or(Unsupported("no v2 data page header"))?;
            let [num_values, num_nulls, num_rows] = [1, 2, 3].map(|i| count(need(&s.ints, i)));
            let e = need(&s.ints, 4).ok_or(Unsupported("required field missing"))?;
            let def = count(need(&s.ints, 5))?;
            let rep = count(need(&s.ints, 6))?;
            let levels = u64::from(def) + u64::from(rep);
            if levels > u64::from(u32::try_from(uncompressed).unwrap_or(0)) {
                return Err(Unsupported("levels larger than the page"));
            }
            let is_compressed = s.flag.unwrap_or(true);
            (
                PageKind::V2 {
                    encoding: encoding(e)?,
                    levels_len: levels as usize,
                    num_values: num_values?,
                    num_nulls: num_nulls?,
                    num_rows: num_rows?,
                    def_len: def,
                    rep_len: rep,
                    is_compressed,
                },
                is_compressed,
            )
        }
        _ => return Err(Unsupported("page type")),
    };
    Ok((
        t.at,
        Header {
            kind,
            compressed,
            uncompressed,
            v2_compressed,
        },
    ))
}

/// A data page, dictionary page or v2 data page header: its leading i32 fields by id and
/// its bool field (the dictionary's `is_sorted`, 3; the v2 header's `is_compressed`, 7).
struct SubHeader {
    ints: [Option<i32>; 7],
    flag: Option<bool>,
}

/// Read a sub-header whose fields 1..=`ints` are i32 (the rest, statistics among them,
/// skipped; the bool field kept).
fn sub_header(t: &mut Thrift, ints: i16) -> Result<SubHeader, Unsupported> {
    let mut s = SubHeader {
        ints: [None; 7],
        flag: None,
    };
    let mut last = 0i16;
    while let Some((id, kind)) = t.field(&mut last)? {
        if (1..=ints).contains(&id) {
            s.ints[id as usize] = Some(t.expect_i32(kind)?);
        } else if id == ints + 1 && matches!(kind, T_TRUE | T_FALSE) && ints != 4 {
            s.flag = Some(kind == T_TRUE);
        } else {
            t.skip(kind)?;
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    //! lethe-scan's page reader against parquet-rs's on random files (every codec, page
    //! version, dictionary and plain encodings, page sizes; see `parquet_pages`' generator),
    //! on the same files with bytes corrupted, and on what it leaves to parquet-rs.

    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::Arc;

    use arrow::array::{ArrayRef, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use bytes::Bytes;
    use parquet::arrow::ArrowWriter;
    use parquet::column::page::PageReader;
    use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaDataReader};
    use parquet::file::properties::WriterProperties;
    use parquet::file::serialized_reader::SerializedPageReader;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::{Next, PageKind, Unsupported, read_pages};
    use crate::formats::parquet_pages::Values;
    use crate::formats::parquet_pages::page_kind;
    use crate::formats::parquet_pages::tests::{DENSITY, batch, scan, write};

    type Pages = Vec<(PageKind, Vec<u8>)>;

    fn own(file: &Bytes, chunk: &ColumnChunkMetaData) -> Result<Pages, Unsupported> {
        let mut pages = Vec::new();
        read_pages(file, chunk, |kind, buf| {
            pages.push((kind, buf.to_vec()));
            Next::Continue
        })?;
        Ok(pages)
    }

    /// parquet-rs's pages, or its error (a panic counts as one).
    fn parquet_rs(file: &Bytes, chunk: &ColumnChunkMetaData, rows: usize) -> Result<Pages, String> {
        catch_unwind(AssertUnwindSafe(|| {
            let mut reader = SerializedPageReader::new(Arc::new(file.clone()), chunk, rows, None)
                .map_err(|e| e.to_string())?;
            let mut pages = Vec::new();
            while let Some(page) = reader.get_next_page().map_err(|e| e.to_string())? {
                let (kind, buf) = page_kind(&page);
                pages.push((kind, buf.to_vec()));
            }
            Ok(pages)
        }))
        .unwrap_or_else(|_| Err("panicked".into()))
    }

    #[test]
    fn pages_are_those_parquet_rs_reads_and_corrupt_ones_are_refused_as_it_refuses_them() {
        let seed = crate::test_seed(20_261_201);
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut read, mut left, mut corrupt_read, mut corrupt_left) = (0, 0, 0, 0);
        for round in 0..24 {
            DENSITY.set([0.0, 0.003, 0.5][round % 3]);
            let batches: Vec<RecordBatch> = (0..rng.random_range(1..3))
                .map(|_| {
                    let n = rng.random_range(1..1200);
                    batch(&mut rng, n)
                })
                .collect();
            let (file, described) = write(&mut rng, &batches);
            let file = Bytes::from(file);
            let md = ParquetMetaDataReader::new()
                .parse_and_finish(&file)
                .unwrap();
            for rg in md.row_groups() {
                let rows = rg.num_rows() as usize;
                for chunk in rg.columns() {
                    let theirs = parquet_rs(&file, chunk, rows).expect("parquet-rs reads it");
                    match own(&file, chunk) {
                        Ok(ours) => {
                            assert_eq!(ours, theirs, "round {round} (seed {seed}): {described}");
                            read += 1;
                        }
                        Err(why) => {
                            // Only what the reader doesn't handle is left to parquet-rs.
                            assert!(
                                why.0 == "codec" || why.0 == "header truncated",
                                "round {round} (seed {seed}): {why:?}: {described}"
                            );
                            left += 1;
                        }
                    }
                }
            }
            // Corrupt bytes before the footer: whatever this reader reads, parquet-rs reads
            // the same; what it refuses is parquet-rs's to read or refuse.
            let footer_at = {
                let n = file.len();
                let len = u32::from_le_bytes(file[n - 8..n - 4].try_into().unwrap()) as usize;
                n - 8 - len
            };
            for _ in 0..20 {
                let mut bad = file.to_vec();
                for _ in 0..rng.random_range(1..4) {
                    let at = rng.random_range(4..footer_at);
                    bad[at] = match rng.random_range(0..3) {
                        0 => rng.random(),
                        1 => bad[at] ^ (1 << rng.random_range(0..8)),
                        _ => bad[at].wrapping_add(1),
                    };
                }
                let bad = Bytes::from(bad);
                for rg in md.row_groups() {
                    for chunk in rg.columns() {
                        match own(&bad, chunk) {
                            Ok(ours) => {
                                let theirs = parquet_rs(&bad, chunk, rg.num_rows() as usize);
                                assert_eq!(
                                    Ok(ours),
                                    theirs,
                                    "corrupt, round {round} (seed {seed}): {described}"
                                );
                                corrupt_read += 1;
                            }
                            Err(_) => corrupt_left += 1,
                        }
                    }
                }
            }
        }
        println!(
            "chunks read {read}, left to parquet-rs {left}; corrupted: read {corrupt_read}, left {corrupt_left}"
        );
        assert!(read > 200 && left > 20, "read {read}, left {left}");
        assert!(corrupt_read > 200 && corrupt_left > 100);
    }

    #[test]
    fn a_page_header_longer_than_the_peek_is_left_to_parquet_rs() {
        // Page header statistics of a 100 KB value, untruncated: the header is longer than
        // the reader reads ahead; the scan still finds the trace behind it, as decoding does.
        let long: String = "x".repeat(100 << 10);
        let values = StringArray::from(vec![long.as_str(), "mateo3590@web.example"]);
        let schema = Arc::new(Schema::new(vec![Field::new("email", DataType::Utf8, true)]));
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(values) as ArrayRef]).unwrap();
        let props = WriterProperties::builder()
            .set_dictionary_enabled(false)
            .set_write_page_header_statistics(true)
            .set_statistics_truncate_length(None)
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema, Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let file = Bytes::from(out);
        let md = ParquetMetaDataReader::new()
            .parse_and_finish(&file)
            .unwrap();
        let chunk = md.row_group(0).column(0);
        assert_eq!(own(&file, chunk), Err(Unsupported("header truncated")));
        assert!(parquet_rs(&file, chunk, 2).is_ok());

        let subjects = vec![crate::SubjectTraces {
            label: "s".into(),
            ids: Vec::new(),
            values: vec![crate::ValueTrace {
                kind: "email".into(),
                value: "MATEO3590@WEB.EXAMPLE".into(),
            }],
        }];
        let traces = crate::TraceSet::new(&subjects, 15).unwrap();
        let search = scan(&traces, &file, false, Values::Search);
        let reference = scan(&traces, &file, false, Values::Reference);
        assert!(search.0.is_ok(), "{:?}", search.0);
        assert_eq!(search, reference);
        assert!(
            search
                .1
                .iter()
                .any(|h| h.detail == "column `email`, first at row 1"),
            "{:?}",
            search.1
        );
    }
}
