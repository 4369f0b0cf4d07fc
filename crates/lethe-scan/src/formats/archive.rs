//! Archives: zip, and tar (plain, or inside gzip, zstd or xz, which [`crate::dispatch`]
//! decompresses as streams). Every member is read with its own format's reader, chosen as for
//! a file (by magic, then name, then content); its name is searched as a path. A hit in a
//! member is reported with the member's place, its detail starting with
//! `archive!member: ` (nested: `outer.tar.gz!inner.zip!data.csv: `).
//!
//! Guarantees: archives nested deeper than [`ArchiveLimits::max_depth`] make the file
//! unreadable, naming the depth; the bytes read out of archives (decompressed, counted at
//! every nesting level) are bounded by [`ArchiveLimits::max_bytes`], beyond which the file is
//! unreadable (a zip bomb cannot exhaust memory or time); a member that cannot be read
//! (corrupt, encrypted, unsupported compression, unrecognised binary) makes the archive
//! unreadable, naming the member; the other members are still read, so their hits are
//! reported too.
//!
//! Does not: decrypt encrypted zip members, follow links inside an archive (a link holds no
//! data; its name is searched), or read multi-volume zips.

use std::cell::Cell;
use std::io::{self, Read, Seek, SeekFrom};
use std::rc::Rc;

use ::parquet::file::reader::ChunkReader;
use serde::{Deserialize, Serialize};

use crate::dispatch::{self, Ctx};
use crate::report::Place;

/// Bounds on reading archives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveLimits {
    /// Deepest nesting of archives read (an archive in an archive is depth 2).
    pub max_depth: u32,
    /// Most bytes read out of the archives of one file, decompressed, over all members and
    /// nesting levels.
    pub max_bytes: u64,
}

impl Default for ArchiveLimits {
    /// Depth 4, 4 GiB.
    fn default() -> Self {
        ArchiveLimits {
            max_depth: 4,
            max_bytes: 4 << 30,
        }
    }
}

/// Archive reading state of one file.
#[derive(Clone, Debug, Default)]
pub(crate) struct ArchiveState {
    pub limits: ArchiveLimits,
    /// Archives entered (0: not inside one).
    pub depth: u32,
    /// Bytes read out of archives so far.
    pub used: Rc<Cell<u64>>,
    /// The scanned file's own name (the outermost archive as details name it, e.g.
    /// `x.tar.gz` rather than the `x.tar` inside it).
    pub file: String,
}

/// Counts what is read out of an archive member against the file's limit.
struct Metered<R> {
    inner: R,
    used: Rc<Cell<u64>>,
    limit: u64,
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let used = self.used.get().saturating_add(n as u64);
        self.used.set(used);
        if used > self.limit {
            return Err(io::Error::other(over_limit(self.limit)));
        }
        Ok(n)
    }
}

fn over_limit(limit: u64) -> String {
    format!("archive content beyond the limit of {limit} bytes decompressed (an archive bomb?)")
}

/// Random access over a [`ChunkReader`] as `Read + Seek` (what the zip reader needs).
struct ChunkSeek<'a, R> {
    src: &'a R,
    pos: u64,
    len: u64,
}

impl<R: ChunkReader> Read for ChunkSeek<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.len || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(self.len - self.pos) as usize;
        let bytes = self
            .src
            .get_bytes(self.pos, n)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let n = bytes.len().min(n);
        buf[..n].copy_from_slice(&bytes[..n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: ChunkReader> Seek for ChunkSeek<'_, R> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let target = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match target {
            Some(p) => {
                self.pos = p;
                Ok(p)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek before the start",
            )),
        }
    }
}

/// Members that could not be read: the first one's reason, and how many.
#[derive(Default)]
struct Failures {
    first: Option<String>,
    count: u64,
}

impl Failures {
    fn add(&mut self, member: &str, reason: String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(format!("member `{member}`: {reason}"));
        }
    }

    fn result(self) -> Result<(), String> {
        match self.first {
            None => Ok(()),
            Some(first) if self.count == 1 => Err(first),
            Some(first) => Err(format!(
                "{first} (and {} more unreadable members)",
                self.count - 1
            )),
        }
    }
}

/// Enter an archive named `name` (depth check); returns the member prefix to restore.
fn enter(ctx: &mut Ctx, name: &str) -> Result<String, String> {
    let max = ctx.archive.limits.max_depth;
    if ctx.archive.depth >= max {
        return Err(format!("archives nested more than {max} deep"));
    }
    ctx.archive.depth += 1;
    let saved = ctx.hits.member.clone();
    if saved.is_empty() {
        let file = if ctx.archive.file.is_empty() {
            name
        } else {
            &ctx.archive.file
        };
        ctx.hits.member = base_name(file).to_string();
    }
    Ok(saved)
}

fn leave(ctx: &mut Ctx, saved: String) {
    ctx.archive.depth -= 1;
    ctx.hits.member = saved;
}

fn base_name(name: &str) -> &str {
    name.rsplit(['/', '\\']).next().unwrap_or(name)
}

/// How a member is named in details: its name, or `#index` when the name holds a trace.
fn shown(ctx: &Ctx, name: &str, index: usize) -> String {
    if ctx.hits.mentions(name) {
        format!("#{index}")
    } else {
        name.chars().take(256).collect()
    }
}

/// Scan one member's content (`r`), the `index`th entry named `name`, with hits prefixed by
/// it. A member that can't be read is added to `failures`; Err only when nothing further can
/// be read (the archive's byte limit reached).
fn member(
    ctx: &mut Ctx,
    name: &str,
    index: usize,
    r: &mut dyn Read,
    depth: u32,
    failures: &mut Failures,
) -> Result<(), String> {
    let shown = shown(ctx, name, index);
    let outer = ctx.hits.member.clone();
    ctx.hits.member = format!("{outer}!{shown}");
    ctx.hits
        .search(Place::Path, name.as_bytes(), "member name", &|| {
            "member name".into()
        });
    let (format, gzip) = (ctx.format, ctx.gzip);
    let limit = ctx.archive.limits.max_bytes;
    let mut metered = Metered {
        inner: r,
        used: ctx.archive.used.clone(),
        limit,
    };
    let outcome = dispatch::scan_member(&mut metered, name, ctx, depth);
    ctx.format = format;
    ctx.gzip = gzip;
    ctx.hits.member = outer;
    match outcome {
        Ok(()) => Ok(()),
        // Over the limit: nothing further can be read.
        Err(_) if ctx.archive.used.get() > limit => {
            Err(format!("member `{shown}`: {}", over_limit(limit)))
        }
        Err(e) => {
            failures.add(&shown, e);
            Ok(())
        }
    }
}

/// A member without data (directory, link): only its name is searched.
fn name_only(ctx: &mut Ctx, name: &str, index: usize) {
    ctx.hits
        .search(Place::Path, name.as_bytes(), "member name", &|| {
            format!("name of member #{index}")
        });
}

/// Read a zip archive from random-access `src`.
pub(crate) fn scan_zip<R: ChunkReader>(
    src: &R,
    name: &str,
    ctx: &mut Ctx,
    depth: u32,
) -> Result<(), String> {
    let saved = enter(ctx, name)?;
    let outcome = zip_members(src, ctx, depth);
    leave(ctx, saved);
    outcome
}

fn zip_members<R: ChunkReader>(src: &R, ctx: &mut Ctx, depth: u32) -> Result<(), String> {
    let reader = ChunkSeek {
        src,
        pos: 0,
        len: src.len(),
    };
    let mut archive = zip::ZipArchive::new(reader).map_err(|e| format!("zip: {e}"))?;
    ctx.hits
        .search(Place::Path, archive.comment(), "zip comment", &|| {
            "zip comment".into()
        });
    let mut failures = Failures::default();
    for i in 0..archive.len() {
        let mut file = match archive.by_index(i) {
            Ok(f) => f,
            Err(e) => {
                failures.add(&format!("#{i}"), format!("zip: {e}"));
                continue;
            }
        };
        let name = match file.name() {
            Ok(n) => n.into_owned(),
            Err(_) => format!("#{i}"),
        };
        if file.is_dir() {
            name_only(ctx, &name, i);
            continue;
        }
        if file.encrypted() {
            name_only(ctx, &name, i);
            let shown = shown(ctx, &name, i);
            failures.add(
                &shown,
                "encrypted zip member: no password configured".into(),
            );
            continue;
        }
        let comment = file.comment().to_string();
        ctx.hits
            .search(Place::Path, comment.as_bytes(), "member comment", &|| {
                format!("comment of member #{i}")
            });
        let mut reader = ZipErrors(&mut file);
        member(ctx, &name, i, &mut reader, depth, &mut failures)?;
    }
    failures.result()
}

/// Labels read errors of a zip member as zip errors.
struct ZipErrors<R>(R);

impl<R: Read> Read for ZipErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0
            .read(buf)
            .map_err(|e| io::Error::new(e.kind(), format!("zip: {e}")))
    }
}

/// Read a tar archive from the stream `r` (already decompressed).
pub(crate) fn scan_tar(
    r: &mut dyn Read,
    name: &str,
    ctx: &mut Ctx,
    depth: u32,
) -> Result<(), String> {
    let saved = enter(ctx, name)?;
    let outcome = tar_members(r, ctx, depth);
    leave(ctx, saved);
    outcome
}

fn tar_members(r: &mut dyn Read, ctx: &mut Ctx, depth: u32) -> Result<(), String> {
    let mut archive = tar::Archive::new(r);
    let entries = archive.entries().map_err(|e| format!("tar: {e}"))?;
    let mut failures = Failures::default();
    for (i, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|e| format!("tar: entry #{i}: {e}"))?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        if let Some(link) = entry.link_name_bytes().map(|l| l.into_owned()) {
            ctx.hits.search(Place::Path, &link, "member link", &|| {
                format!("link target of member #{i}")
            });
        }
        if !(kind.is_file() || kind.is_contiguous()) {
            // Directories, links, devices: no data; the name is searched.
            name_only(ctx, &name, i);
            continue;
        }
        let mut reader = TarErrors(&mut entry);
        member(ctx, &name, i, &mut reader, depth, &mut failures)?;
        // Whatever the member's reader left unread is skipped by the next `entries` step.
    }
    failures.result()
}

/// Labels read errors of a tar member as tar errors.
struct TarErrors<R>(R);

impl<R: Read> Read for TarErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0
            .read(buf)
            .map_err(|e| io::Error::new(e.kind(), format!("tar: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Cursor, Write};
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use crate::dispatch::tests::subject_traces;
    use crate::{
        FileFormat, FileReport, FileStatus, Hit, TraceKind, scan_bytes, scan_bytes_with_limits,
    };

    const EMAIL: &str = "alexa590@post.example";

    fn csv() -> Vec<u8> {
        format!("learner_id,email\n1,a@b.example\n3590,{EMAIL}\n").into_bytes()
    }

    fn json() -> Vec<u8> {
        format!("{{\"contact\": {{\"email\": \"{EMAIL}\"}}}}").into_bytes()
    }

    fn parquet() -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("learner_id", DataType::Int64, false),
            Field::new("email", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![7, 3590])),
                Arc::new(StringArray::from(vec!["x@y.example", EMAIL])),
            ],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut w = ::parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        out
    }

    fn zip(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, data) in members {
            w.start_file(*name, options).unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    fn tar(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in members {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, name, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn details(r: &FileReport, place: Place, id: bool) -> Vec<String> {
        let mut d: Vec<String> = r
            .hits
            .iter()
            .filter(|h: &&Hit| h.place == place && matches!(h.trace, TraceKind::Id { .. }) == id)
            .map(|h| h.detail.clone())
            .collect();
        d.sort();
        d
    }

    #[test]
    fn zip_members_are_read_with_their_own_readers() {
        let ts = subject_traces();
        let bytes = zip(&[
            ("dir/", b""),
            ("dir/people.csv", &csv()),
            ("doc.json", &json()),
            ("rows.parquet", &parquet()),
            ("readme.txt", b"nothing here\n"),
        ]);
        let r = scan_bytes(&ts, "exports/batch.zip", &bytes, false);
        assert_eq!(r.status, FileStatus::Read, "{:?}", r.status);
        assert_eq!(r.format, FileFormat::Zip);
        assert_eq!(
            details(&r, Place::Csv, false),
            ["batch.zip!dir/people.csv: column `email`, first at data row 2"]
        );
        assert_eq!(
            details(&r, Place::Csv, true),
            ["batch.zip!dir/people.csv: column `learner_id`, first at data row 2"]
        );
        assert_eq!(
            details(&r, Place::MetadataJson, false),
            ["batch.zip!doc.json: /contact/email"]
        );
        assert_eq!(
            details(&r, Place::DataValue, false),
            ["batch.zip!rows.parquet: column `email`, first at row 1"]
        );
        assert_eq!(
            details(&r, Place::DataValue, true),
            ["batch.zip!rows.parquet: column `learner_id`, first at row 1"]
        );
    }

    #[test]
    fn nested_zip_in_tar_gz_and_every_tar_compression() {
        let ts = subject_traces();
        let inner = zip(&[("deep/people.csv", &csv())]);
        let t = tar(&[
            ("inner.zip", &inner),
            ("lines.jsonl", &json()),
            ("clean.csv", b"a,b\n1,2\n"),
        ]);
        let expected_csv = |outer: &str| {
            vec![format!(
                "{outer}!inner.zip!deep/people.csv: column `email`, first at data row 2"
            )]
        };
        let mut zst = Vec::new();
        zstd::stream::copy_encode(t.as_slice(), &mut zst, 3).unwrap();
        let mut xz =
            lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(1)).unwrap();
        xz.write_all(&t).unwrap();
        let xz = xz.finish().unwrap();
        for (name, bytes, gz) in [
            ("x.tar.gz", gzip(&t), true),
            ("x.tgz", gzip(&t), true),
            ("x.tar.zst", zst, false),
            ("x.tar.xz", xz, false),
            ("x.tar", t.clone(), false),
        ] {
            let r = scan_bytes(&ts, name, &bytes, false);
            assert_eq!(r.status, FileStatus::Read, "{name}: {:?}", r.status);
            assert_eq!(r.format, FileFormat::Tar, "{name}");
            assert_eq!(r.gzip, gz, "{name}");
            assert_eq!(details(&r, Place::Csv, false), expected_csv(name), "{name}");
            assert_eq!(
                details(&r, Place::JsonLine, false),
                [format!("{name}!lines.jsonl: line 1, /contact/email")],
                "{name}"
            );
        }
        // A compressed single file keeps working as gzip does.
        let mut zst = Vec::new();
        zstd::stream::copy_encode(csv().as_slice(), &mut zst, 3).unwrap();
        let r = scan_bytes(&ts, "people.csv.zst", &zst, false);
        assert_eq!(r.format, FileFormat::Csv);
        assert_eq!(r.hits.len(), 2, "{:?}", r.hits);
    }

    #[test]
    fn clean_archive_is_read_and_holds_nothing() {
        let ts = subject_traces();
        let r = scan_bytes(&ts, "c.zip", &zip(&[("a.csv", b"learner_id\n12\n")]), false);
        assert_eq!(r.status, FileStatus::Read);
        assert!(r.hits.is_empty());
        let r = scan_bytes(&ts, "empty.zip", &zip(&[]), false);
        assert_eq!(r.status, FileStatus::Read);
    }

    #[test]
    fn corrupt_member_makes_the_archive_unreadable_naming_it() {
        let ts = subject_traces();
        let mut broken = parquet();
        broken.truncate(broken.len() - 20);
        broken.extend_from_slice(b"PAR1");
        let bytes = zip(&[
            ("good.csv", &csv()),
            ("broken.parquet", &broken),
            ("blob.bin", &[0u8, 1, 2, 3, 0, 0xff]),
        ]);
        let r = scan_bytes(&ts, "a.zip", &bytes, false);
        let FileStatus::Unreadable { reason } = &r.status else {
            panic!("read: {r:?}");
        };
        assert!(reason.starts_with("member `broken.parquet`: "), "{reason}");
        assert!(
            reason.ends_with("(and 1 more unreadable members)"),
            "{reason}"
        );
        // The readable member's hits are still reported.
        assert_eq!(details(&r, Place::Csv, false).len(), 1);
        // A corrupt archive itself.
        let mut cut = zip(&[("good.csv", &csv())]);
        cut.truncate(cut.len() - 10);
        let r = scan_bytes(&ts, "cut.zip", &cut, false);
        assert!(r.is_unreadable());
        let mut t = tar(&[("good.csv", &csv())]);
        t.truncate(700);
        let r = scan_bytes(&ts, "cut.tar", &t, false);
        let FileStatus::Unreadable { reason } = &r.status else {
            panic!("read: {r:?}");
        };
        assert!(
            reason.contains("good.csv") || reason.starts_with("tar"),
            "{reason}"
        );
    }

    #[test]
    fn bomb_beyond_the_limit_is_unreadable_with_the_reason() {
        let ts = subject_traces();
        let zeros = vec![b'0'; 3 << 20];
        let bytes = zip(&[("a.csv", &csv()), ("zeros.txt", &zeros)]);
        assert!(bytes.len() < 64 << 10);
        let limits = ArchiveLimits {
            max_bytes: 1 << 20,
            ..ArchiveLimits::default()
        };
        let r = scan_bytes_with_limits(&ts, "bomb.zip", &bytes, false, limits);
        let FileStatus::Unreadable { reason } = &r.status else {
            panic!("read: {r:?}");
        };
        assert_eq!(
            reason,
            "member `zeros.txt`: archive content beyond the limit of 1048576 bytes decompressed (an archive bomb?)"
        );
        // Under the default limit the same archive is read.
        assert_eq!(
            scan_bytes(&ts, "bomb.zip", &bytes, false).status,
            FileStatus::Read
        );
        // Nested: the limit counts every level.
        let t = gzip(&tar(&[("in.zip", &bytes)]));
        let r = scan_bytes_with_limits(&ts, "b.tar.gz", &t, false, limits);
        assert!(r.is_unreadable());
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_unreadable_naming_the_depth() {
        let ts = subject_traces();
        let mut bytes = zip(&[("people.csv", &csv())]);
        for i in 0..4 {
            bytes = zip(&[(&format!("level{i}.zip"), &bytes)]);
        }
        // Five archives deep: the default depth (4) is exceeded.
        let r = scan_bytes(&ts, "deep.zip", &bytes, false);
        let FileStatus::Unreadable { reason } = &r.status else {
            panic!("read: {r:?}");
        };
        assert!(
            reason.ends_with("archives nested more than 4 deep"),
            "{reason}"
        );
        assert!(
            reason.starts_with("member `level3.zip`: member `level2.zip`"),
            "{reason}"
        );
        let limits = ArchiveLimits {
            max_depth: 5,
            ..ArchiveLimits::default()
        };
        let r = scan_bytes_with_limits(&ts, "deep.zip", &bytes, false, limits);
        assert_eq!(r.status, FileStatus::Read);
        assert_eq!(
            details(&r, Place::Csv, false),
            [
                "deep.zip!level3.zip!level2.zip!level1.zip!level0.zip!people.csv: column `email`, first at data row 2"
            ]
        );
    }

    #[test]
    fn member_names_are_searched_and_never_shown_with_a_value() {
        let ts = subject_traces();
        let name = format!("by-email/{EMAIL}/rows.csv");
        let bytes = zip(&[(&name, &csv())]);
        let r = scan_bytes(&ts, "n.zip", &bytes, false);
        assert_eq!(r.status, FileStatus::Read);
        assert_eq!(details(&r, Place::Path, false), ["n.zip!#0: member name"]);
        assert!(
            r.hits.iter().all(|h| !h.detail.contains(EMAIL)),
            "{:?}",
            r.hits
        );
        assert_eq!(
            details(&r, Place::Csv, false),
            ["n.zip!#0: column `email`, first at data row 2"]
        );
    }
}
