//! Choosing a reader for a file: by magic bytes first, then by name, then by content.
//!
//! | magic / name | reader |
//! |---|---|
//! | `PAR1`, `PARE` | Parquet (`PARE`: encrypted footer, reported unreadable naming its key) |
//! | `ORC` | ORC (see [`crate::formats::orc`]) |
//! | `Obj\x01` | Avro (Iceberg manifest / manifest list / generic) |
//! | `PFA1` | Puffin |
//! | `1f 8b` | gzip, then the inner content by the name without `.gz` and its own magic |
//! | `28 b5 2f fd` | zstd, then the inner content as for gzip (name without `.zst`) |
//! | `fd 37 7a 58 5a 00` | xz, then the inner content as for gzip (name without `.xz`) |
//! | `PK\x03\x04`, `PK\x05\x06` | zip archive: every member by its own magic/name (see [`crate::formats::archive`]) |
//! | `ustar` at 257, or `*.tar` | tar archive (also inside gzip/zstd/xz: `.tar.gz`, `.tgz`, `.tar.zst`, `.tar.xz`) |
//! | `crc\0` | Hadoop checksum: read, holds no values |
//! | UTF-16 mark `FF FE` / `FE FF`, or UTF-16 pattern | decoded to UTF-8, then CSV / JSON / text as below |
//! | `*.csv` | CSV |
//! | `*.jsonl`, `*.ndjson` | JSON lines |
//! | `*.json`, or content starting with `{` | JSON document (several values: JSON lines) |
//! | other text | text in chunks |
//! | other binary | unreadable ("unrecognised binary format") |
//!
//! Formats that need random access (Parquet, Puffin, JSON documents, zip) inside gzip, zstd,
//! xz or a tar archive are read into memory up to [`MAX_IN_MEMORY`] bytes; others are
//! streamed.

use std::io::{Cursor, Read};

use ::parquet::file::reader::ChunkReader;
use bytes::Bytes;
use flate2::read::MultiGzDecoder;

use crate::formats::archive::{self, ArchiveState};
use crate::formats::encoding::{self, Utf16};
use crate::formats::{avro, csv, json, orc, parquet, puffin, text};
use crate::report::{FileFormat, Hits, Place};

/// Largest content read whole into memory (JSON documents, gzip'ed Parquet/Puffin).
pub const MAX_IN_MEMORY: u64 = 512 << 20;
/// Bytes looked at to tell text from binary.
const SNIFF: u64 = 8192;
/// Deepest nesting of compressed streams (gzip, zstd, xz) followed.
const MAX_GZIP_DEPTH: u32 = 3;
/// Memory the xz decoder may use (its dictionary), in KiB.
const XZ_MEMORY_KIB: u32 = 256 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Parquet,
    Orc,
    Avro,
    Puffin,
    Gzip,
    Zstd,
    Xz,
    Zip,
    Tar,
    Crc,
    /// UTF-16 text (by mark or pattern), decoded before a text format's reader.
    Utf16(Utf16),
    Csv,
    JsonLines,
    JsonDoc,
    Text,
    Empty,
    Binary,
}

fn lower_name(name: &str) -> String {
    name.rsplit(['/', '\\'])
        .next()
        .unwrap_or(name)
        .to_ascii_lowercase()
}

/// The name of the content inside a gzip file: `x.csv.gz` -> `x.csv`,
/// `v3.gz.metadata.json` -> `v3.metadata.json`, `x.tgz` -> `x.tar`; likewise `.zst`,
/// `.zstd`, `.xz` for those compressions.
fn inner_name(name: &str) -> String {
    inner_name_of(name, &[".gz"])
}

fn inner_name_of(name: &str, suffixes: &[&str]) -> String {
    for suffix in suffixes {
        if let Some(n) = name.strip_suffix(suffix) {
            return n.to_string();
        }
    }
    if let Some(n) = name.strip_suffix(".tgz") {
        return format!("{n}.tar");
    }
    for suffix in suffixes {
        let infix = format!("{suffix}.");
        if let Some(i) = name.rfind(&infix) {
            return format!("{}{}", &name[..i], &name[i + suffix.len()..]);
        }
    }
    name.to_string()
}

fn sniff(head: &[u8], name: &str) -> Kind {
    let n = lower_name(name);
    if head.is_empty() {
        return Kind::Empty;
    }
    if head.starts_with(b"PAR1") || head.starts_with(b"PARE") {
        return Kind::Parquet;
    }
    if head.starts_with(b"ORC") {
        return Kind::Orc;
    }
    if head.starts_with(b"Obj\x01") {
        return Kind::Avro;
    }
    if head.starts_with(b"PFA1") {
        return Kind::Puffin;
    }
    if head.starts_with(&[0x1f, 0x8b]) {
        return Kind::Gzip;
    }
    if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Kind::Zstd;
    }
    if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        return Kind::Xz;
    }
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Kind::Zip;
    }
    if head.get(257..262) == Some(b"ustar".as_slice()) || n.ends_with(".tar") {
        return Kind::Tar;
    }
    if head.starts_with(b"crc\0") {
        return Kind::Crc;
    }
    if let Some(order) = utf16(head) {
        return Kind::Utf16(order);
    }
    if n.ends_with(".csv") {
        return Kind::Csv;
    }
    if n.ends_with(".jsonl") || n.ends_with(".ndjson") {
        return Kind::JsonLines;
    }
    let body = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if n.ends_with(".json") || first == Some(&b'{') {
        return Kind::JsonDoc;
    }
    if text::looks_like_text(head) {
        return Kind::Text;
    }
    Kind::Binary
}

/// UTF-16 by byte-order mark (when the decoded head looks like text) or by pattern.
fn utf16(head: &[u8]) -> Option<Utf16> {
    if let Some(order) = encoding::bom(head) {
        return encoding::decodes_to_text(&head[2..head.len() & !1], order).then_some(order);
    }
    encoding::pattern(head)
}

/// Per-file scanning state.
pub(crate) struct Ctx<'t> {
    pub hits: Hits<'t>,
    pub marked_delete: bool,
    /// How Parquet data values are read.
    pub parquet_values: parquet::Values,
    pub format: FileFormat,
    pub gzip: bool,
    /// Archive nesting, limits and bytes read out of archives.
    pub archive: ArchiveState,
    /// Keys for encrypted Parquet.
    pub keys: crate::ParquetKeys,
}

/// Scan a random-access source.
pub(crate) fn scan_source<R: ChunkReader + 'static>(
    src: R,
    name: &str,
    ctx: &mut Ctx,
    depth: u32,
) -> Result<(), String> {
    let len = src.len();
    let head = src
        .get_bytes(0, len.min(SNIFF) as usize)
        .map_err(|e| format!("read error: {e}"))?;
    let kind = sniff(&head, name);
    match kind {
        Kind::Parquet => {
            ctx.format = FileFormat::Parquet;
            parquet::scan_parquet(
                src,
                &mut ctx.hits,
                (ctx.marked_delete, ctx.parquet_values),
                &ctx.keys,
            )
        }
        Kind::Puffin => {
            ctx.format = FileFormat::Puffin;
            puffin::scan_puffin(&src, &mut ctx.hits)
        }
        Kind::Orc => {
            ctx.format = FileFormat::Orc;
            orc::scan_orc(src, &mut ctx.hits)
        }
        Kind::Zip => {
            ctx.format = FileFormat::Zip;
            archive::scan_zip(&src, name, ctx, depth)
        }
        Kind::JsonDoc => {
            ctx.format = FileFormat::Json;
            if len > MAX_IN_MEMORY {
                return Err(format!(
                    "JSON document of {len} bytes is larger than {MAX_IN_MEMORY}"
                ));
            }
            let all = src
                .get_bytes(0, len as usize)
                .map_err(|e| format!("read error: {e}"))?;
            json_document(&all, ctx)
        }
        _ => {
            let mut r = src.get_read(0).map_err(|e| format!("read error: {e}"))?;
            scan_stream(kind, &mut r, name, ctx, depth)
        }
    }
}

fn json_document(all: &[u8], ctx: &mut Ctx) -> Result<(), String> {
    match json::scan_document(all, &mut ctx.hits, Place::MetadataJson)? {
        json::Doc::Done => Ok(()),
        json::Doc::Lines => {
            // Hits of a first, partial attempt are impossible: the parse failed before any
            // walk. Read as JSON lines.
            ctx.format = FileFormat::JsonLines;
            json::scan_lines(&mut Cursor::new(all), &mut ctx.hits, Place::JsonLine)
        }
    }
}

/// Scan a sequential stream whose kind is known.
fn scan_stream(
    kind: Kind,
    r: &mut dyn Read,
    name: &str,
    ctx: &mut Ctx,
    depth: u32,
) -> Result<(), String> {
    match kind {
        Kind::Empty => {
            ctx.format = FileFormat::Text;
            Ok(())
        }
        Kind::Crc => {
            ctx.format = FileFormat::Crc;
            std::io::copy(r, &mut std::io::sink()).map_err(|e| format!("read error: {e}"))?;
            Ok(())
        }
        Kind::Avro => {
            ctx.format = FileFormat::Avro;
            avro::scan_avro(r, &mut ctx.hits, &mut ctx.format)
        }
        Kind::Csv => {
            ctx.format = FileFormat::Csv;
            let mut r = encoding::skip_utf8_bom(r).map_err(|e| format!("read error: {e}"))?;
            csv::scan_csv(&mut r, &mut ctx.hits)
        }
        Kind::JsonLines => {
            ctx.format = FileFormat::JsonLines;
            json::scan_lines(r, &mut ctx.hits, Place::JsonLine)
        }
        Kind::Text => {
            ctx.format = FileFormat::Text;
            text::scan_text(r, &mut ctx.hits, Place::Text, "", text::Position::Line)
                .map_err(|e| format!("read error: {e}"))
        }
        Kind::Utf16(order) => scan_utf16(r, order, name, ctx),
        Kind::Gzip => {
            ctx.gzip = true;
            if depth >= MAX_GZIP_DEPTH {
                return Err(format!("gzip nested more than {MAX_GZIP_DEPTH} deep"));
            }
            scan_gzip(r, &inner_name(name), ctx, depth + 1)
        }
        Kind::Zstd | Kind::Xz => {
            let label = if kind == Kind::Zstd { "zstd" } else { "xz" };
            if depth >= MAX_GZIP_DEPTH {
                return Err(format!(
                    "compressed streams nested more than {MAX_GZIP_DEPTH} deep"
                ));
            }
            let (decoder, inner): (Box<dyn Read + '_>, String) = if kind == Kind::Zstd {
                let d = zstd::stream::read::Decoder::new(r).map_err(|e| format!("zstd: {e}"))?;
                (Box::new(d), inner_name_of(name, &[".zst", ".zstd"]))
            } else {
                let d = lzma_rust2::XzReader::new_mem_limit(r, true, XZ_MEMORY_KIB);
                (Box::new(d), inner_name_of(name, &[".xz"]))
            };
            scan_decompressed(decoder, label, &inner, ctx, depth + 1)
        }
        Kind::Tar => {
            ctx.format = FileFormat::Tar;
            archive::scan_tar(r, name, ctx, depth)
        }
        Kind::Binary => {
            ctx.format = FileFormat::Unknown;
            Err("unrecognised binary format".into())
        }
        Kind::Parquet | Kind::Orc | Kind::Puffin | Kind::JsonDoc | Kind::Zip => {
            // Needs random access: read into memory (bounded).
            let mut all = Vec::new();
            r.take(MAX_IN_MEMORY + 1)
                .read_to_end(&mut all)
                .map_err(|e| format!("read error: {e}"))?;
            if all.len() as u64 > MAX_IN_MEMORY {
                ctx.format = match kind {
                    Kind::Parquet => FileFormat::Parquet,
                    Kind::Orc => FileFormat::Orc,
                    Kind::Puffin => FileFormat::Puffin,
                    Kind::Zip => FileFormat::Zip,
                    _ => FileFormat::Json,
                };
                return Err(format!(
                    "content larger than {MAX_IN_MEMORY} bytes cannot be read in memory"
                ));
            }
            scan_source(Bytes::from(all), name, ctx, depth)
        }
    }
}

/// Decode UTF-16 and read the text with the reader its name or decoded content selects
/// (CSV, JSON lines, a JSON document, or plain text).
fn scan_utf16(r: &mut dyn Read, order: Utf16, name: &str, ctx: &mut Ctx) -> Result<(), String> {
    let mut decoder = encoding::Utf16Reader::new(r, order);
    let mut head = Vec::new();
    (&mut decoder)
        .take(SNIFF)
        .read_to_end(&mut head)
        .map_err(|e| format!("read error: {e}"))?;
    let kind = match sniff(&head, name) {
        k @ (Kind::Csv | Kind::JsonLines | Kind::JsonDoc | Kind::Empty) => k,
        _ => Kind::Text,
    };
    let mut stream = Cursor::new(head).chain(decoder);
    if kind == Kind::JsonDoc {
        ctx.format = FileFormat::Json;
        let mut all = Vec::new();
        (&mut stream)
            .take(MAX_IN_MEMORY + 1)
            .read_to_end(&mut all)
            .map_err(|e| format!("read error: {e}"))?;
        if all.len() as u64 > MAX_IN_MEMORY {
            return Err(format!(
                "decoded JSON document larger than {MAX_IN_MEMORY} bytes cannot be read in memory"
            ));
        }
        return json_document(&all, ctx);
    }
    // Depth: the decoded kinds never nest further.
    scan_stream(kind, &mut stream, name, ctx, MAX_GZIP_DEPTH)
}

fn scan_gzip(r: &mut dyn Read, inner: &str, ctx: &mut Ctx, depth: u32) -> Result<(), String> {
    scan_decompressed(Box::new(MultiGzDecoder::new(r)), "gzip", inner, ctx, depth)
}

/// Read the content of a decompressed stream, named `inner`, by its own magic or name.
fn scan_decompressed(
    mut decoder: Box<dyn Read + '_>,
    label: &'static str,
    inner: &str,
    ctx: &mut Ctx,
    depth: u32,
) -> Result<(), String> {
    let mut head = Vec::new();
    (&mut decoder)
        .take(SNIFF)
        .read_to_end(&mut head)
        .map_err(|e| format!("{label}: {e}"))?;
    let kind = sniff(&head, inner);
    ctx.format = FileFormat::Unknown;
    let mut stream = Labelled(Cursor::new(head).chain(decoder), label);
    scan_stream(kind, &mut stream, inner, ctx, depth)
}

/// Scan an archive member's content by its own magic or name (an archive's reader calls
/// this for each member; nested archives come back here).
pub(crate) fn scan_member(
    r: &mut dyn Read,
    member: &str,
    ctx: &mut Ctx,
    depth: u32,
) -> Result<(), String> {
    let mut head = Vec::new();
    r.take(SNIFF)
        .read_to_end(&mut head)
        .map_err(|e| format!("read error: {e}"))?;
    let kind = sniff(&head, member);
    let mut stream = Cursor::new(head).chain(r);
    scan_stream(kind, &mut stream, member, ctx, depth)
}

/// Labels read errors of a decompressed stream with its compression.
struct Labelled<R>(R, &'static str);

impl<R: Read> Read for Labelled<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0
            .read(buf)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", self.1)))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn names_inside_gzip() {
        assert_eq!(inner_name("a/x.csv.gz"), "a/x.csv");
        assert_eq!(inner_name("v3.gz.metadata.json"), "v3.metadata.json");
        assert_eq!(inner_name("blob"), "blob");
    }

    use crate::{
        FileStatus, Hit, IdTrace, IdValue, SubjectTraces, TraceKind, TraceSet, ValueTrace,
        scan_bytes,
    };
    use encoding::utf16;

    pub(crate) fn subject_traces() -> TraceSet {
        TraceSet::new(
            &[SubjectTraces {
                label: "s".into(),
                ids: vec![IdTrace {
                    column: "learner_id".into(),
                    values: vec![IdValue::Int(3590)],
                }],
                values: vec![ValueTrace {
                    kind: "email".into(),
                    value: "alexa590@post.example".into(),
                }],
            }],
            15,
        )
        .unwrap()
    }

    /// The Python with pyarrow: `LETHE_PYTHON`, else the venv `scripts/python-env.sh`
    /// installs. Panics when neither exists: a test never passes by skipping.
    pub(crate) fn python() -> String {
        if let Ok(p) = std::env::var("LETHE_PYTHON") {
            return p;
        }
        let venv = std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
            .join(".cache/lethe-venv/bin/python");
        assert!(
            venv.exists(),
            "no Python with pyarrow: set LETHE_PYTHON or run `bash scripts/python-env.sh`"
        );
        venv.display().to_string()
    }

    /// Runs `tests/interop/<script> DIR alexa590@post.example 3590` (files other tools
    /// write, holding the subject of [`subject_traces`]) and returns DIR.
    pub(crate) fn run_interop_script(script: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/interop")
            .join(script);
        let out = std::process::Command::new(python())
            .arg(path)
            .arg(dir.path())
            .arg("alexa590@post.example")
            .arg("3590")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    }

    fn hit(hits: &[Hit], place: Place, id: bool) -> Option<&Hit> {
        hits.iter().find(|h| {
            h.place == place
                && matches!(
                    (&h.trace, id),
                    (TraceKind::Id { .. }, true) | (TraceKind::Value { .. }, false)
                )
        })
    }

    const CSV: &str =
        "name,learner_id,email\r\nA,12,a@x.example\r\nÅsa,3590,alexa590@post.example\r\n";

    #[test]
    fn utf16_csv_with_and_without_mark_finds_id_and_email_at_their_row() {
        let ts = subject_traces();
        for order in [Utf16::Le, Utf16::Be] {
            for mark in [true, false] {
                let bytes = utf16(CSV, order, mark);
                let r = scan_bytes(&ts, "export.csv", &bytes, false);
                assert_eq!(r.status, FileStatus::Read, "{order:?} {mark}");
                assert_eq!(r.format, FileFormat::Csv);
                let id = hit(&r.hits, Place::Csv, true).expect("ID hit");
                assert_eq!(id.detail, "column `learner_id`, first at data row 2");
                let v = hit(&r.hits, Place::Csv, false).expect("email hit");
                assert_eq!(v.detail, "column `email`, first at data row 2");
                assert_eq!(r.hits.len(), 2, "{:?}", r.hits);
            }
        }
    }

    #[test]
    fn utf16_json_and_text_give_pointers_and_lines() {
        let ts = subject_traces();
        let json = "{\"people\": [{\"learner_id\": 3590, \"email\": \"alexa590@post.example\"}]}";
        let r = scan_bytes(&ts, "x.json", &utf16(json, Utf16::Le, true), false);
        assert_eq!(r.status, FileStatus::Read);
        assert_eq!(r.format, FileFormat::Json);
        assert_eq!(
            hit(&r.hits, Place::MetadataJson, true).unwrap().detail,
            "/people/0/learner_id"
        );
        assert_eq!(
            hit(&r.hits, Place::MetadataJson, false).unwrap().detail,
            "/people/0/email"
        );

        let lines = "{\"a\": 1}\n{\"learner_id\": 3590}\n";
        let r = scan_bytes(&ts, "x.jsonl", &utf16(lines, Utf16::Be, false), false);
        assert_eq!(r.format, FileFormat::JsonLines);
        assert_eq!(
            hit(&r.hits, Place::JsonLine, true).unwrap().detail,
            "line 2, /learner_id"
        );

        let text = "header\nsecond line\nthird: ALEXA590@post.example\n";
        let r = scan_bytes(&ts, "notes", &utf16(text, Utf16::Le, false), false);
        assert_eq!(r.status, FileStatus::Read);
        assert_eq!(r.format, FileFormat::Text);
        assert_eq!(hit(&r.hits, Place::Text, false).unwrap().detail, "line 3");
    }

    #[test]
    fn utf8_mark_is_stripped_before_csv_header() {
        let ts = subject_traces();
        let bytes = [b"\xef\xbb\xbf".as_slice(), b"learner_id,x\n3590,y\n"].concat();
        let r = scan_bytes(&ts, "x.csv", &bytes, false);
        let id = hit(&r.hits, Place::Csv, true).expect("ID hit despite the mark");
        assert_eq!(id.detail, "column `learner_id`, first at data row 1");
    }

    #[test]
    fn utf16_in_gzip_and_utf16_looking_binary() {
        let ts = subject_traces();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &utf16(CSV, Utf16::Le, true)).unwrap();
        let r = scan_bytes(&ts, "x.csv.gz", &gz.finish().unwrap(), false);
        assert!(r.gzip);
        assert_eq!(r.format, FileFormat::Csv);
        assert_eq!(r.hits.len(), 2);
        // NULs in every other position but not text once decoded: still binary.
        let binary: Vec<u8> = (0..200u8).flat_map(|i| [i % 5 + 1, 0]).collect();
        assert_eq!(sniff(&binary, "a.bin"), Kind::Binary);
    }

    #[test]
    fn sniffing() {
        assert_eq!(sniff(b"PAR1xxxx", "a.txt"), Kind::Parquet);
        assert_eq!(sniff(b"ORC\x0a\x04", "a"), Kind::Orc);
        assert_eq!(sniff(b"PK\x03\x04", "a"), Kind::Zip);
        assert_eq!(sniff(&[0x28, 0xb5, 0x2f, 0xfd], "a"), Kind::Zstd);
        assert_eq!(sniff(b"Obj\x01", "a"), Kind::Avro);
        assert_eq!(sniff(b"PFA1", "a"), Kind::Puffin);
        assert_eq!(sniff(&[0x1f, 0x8b, 8], "a"), Kind::Gzip);
        assert_eq!(sniff(b"crc\0abcd", "a.crc"), Kind::Crc);
        assert_eq!(sniff(b"a,b\n1,2", "X.CSV"), Kind::Csv);
        assert_eq!(sniff(b"{}", "x.ndjson"), Kind::JsonLines);
        assert_eq!(sniff(b"  {\"a\":1}", "noext"), Kind::JsonDoc);
        assert_eq!(sniff(b"[1]", "a.json"), Kind::JsonDoc);
        assert_eq!(sniff(b"[INFO] started", "app.log"), Kind::Text);
        assert_eq!(sniff(b"\x00\x01\x02\x03", "a.bin"), Kind::Binary);
        assert_eq!(sniff(b"", "a.parquet"), Kind::Empty);
    }
}
