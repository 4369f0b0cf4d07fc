//! The file store: where table files live, behind a trait so that object storage arrives as a
//! new implementation.
//!
//! Locations are URIs as Iceberg metadata holds them. [`LocalStore`] accepts `file:/x`,
//! `file:///x` and `/x` for the same file and normalises them before comparing (the sweep relies
//! on this); [`s3::S3Store`] accepts `s3://`, `s3a://` and `s3n://` in its own bucket. Any
//! other form is refused, never guessed: a location that can't be matched is never deleted.
//!
//! Listings stream ([`Listing`]): the sweep and the proof scan walk millions of objects without
//! holding them. A versioned bucket's noncurrent versions and delete markers are listed by
//! [`FileStore::list_versions`], read by [`FileStore::open_version`] and removed by
//! [`FileStore::delete_version`].

pub mod iceberg_io;
pub mod local_io;
pub mod s3;

use std::fmt::Debug;
use std::io::{Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use iceberg::io::FileIO;
use parquet::file::reader::{ChunkReader, Length};

use crate::error::{Error, Result};

/// A file found under a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// Its location, in the store's canonical form.
    pub location: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification time.
    pub modified: DateTime<Utc>,
}

/// A version of an object in a versioned bucket: a noncurrent version still holds the bytes an
/// overwrite or delete replaced; a delete marker holds nothing but hides the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredVersion {
    /// The object's location, in the store's canonical form.
    pub location: String,
    /// The version id the store gave it (`null` for an object written while versioning was off).
    pub version: String,
    /// Whether it is the object's current version (or the marker hiding it): `Some(true)` or
    /// `Some(false)` as the store's listing says, None when it says nothing. Unknown is not
    /// current: the proof scan reads such a version as it reads a noncurrent one, and a purge
    /// asks the store which version is current before it deletes one
    /// ([`StoredVersion::may_be_noncurrent`], [`FileStore::current_version`]).
    pub current: Option<bool>,
    /// Whether it is a delete marker.
    pub delete_marker: bool,
    /// Size in bytes (0 for a delete marker).
    pub size: u64,
    /// When it was written.
    pub modified: DateTime<Utc>,
}

impl StoredVersion {
    /// Whether the listing said this is the current version (or the marker hiding it).
    pub fn is_current(&self) -> bool {
        self.current == Some(true)
    }

    /// Whether it may be a noncurrent version: the listing said so, or said nothing (such a
    /// version is read by the proof scan, never skipped as current).
    pub fn may_be_noncurrent(&self) -> bool {
        !self.is_current()
    }
}

/// A streamed listing: items arrive page by page, errors in place.
pub type Listing<'a, T> = Box<dyn Iterator<Item = Result<T>> + Send + 'a>;

/// What a store physically is, for the attestation's statement of what a delete means there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// A local file system: a delete unlinks the file; the medium is not sanitised.
    Local,
    /// Object storage: a delete removes the object (or, with versioning, hides it behind a
    /// delete marker); the service reclaims the space on its own schedule.
    Object {
        /// What and where, without credentials (`s3 bucket lethe at http://127.0.0.1:8333`).
        description: String,
    },
}

/// A writer that must be finished to make the file visible.
pub trait FileSink: Write + Send {
    /// Flushes and makes the file durable; returns the bytes written. Nothing may be written
    /// after it.
    fn finish(&mut self) -> Result<u64>;
}

/// Ranged reads of a remote object, for [`StoredReader::Remote`].
pub trait RangeRead: Send + Sync + Debug {
    /// The bytes in `range` (which lies inside the object).
    fn read_range(&self, range: Range<u64>) -> std::io::Result<Bytes>;
}

/// A remote object read by ranges: Parquet footers and pages are fetched as needed.
#[derive(Debug, Clone)]
pub struct RemoteReader {
    len: u64,
    source: Arc<dyn RangeRead>,
}

impl RemoteReader {
    /// A reader of an object of `len` bytes.
    pub fn new(len: u64, source: Arc<dyn RangeRead>) -> Self {
        RemoteReader { len, source }
    }
}

/// Bytes fetched per request when a remote object is read sequentially.
const SEQUENTIAL_CHUNK: u64 = 8 << 20;

struct SequentialRead {
    reader: RemoteReader,
    pos: u64,
    buf: Bytes,
}

impl Read for SequentialRead {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.buf.is_empty() {
            if self.pos >= self.reader.len {
                return Ok(0);
            }
            let end = (self.pos + SEQUENTIAL_CHUNK).min(self.reader.len);
            self.buf = self.reader.source.read_range(self.pos..end)?;
            if self.buf.is_empty() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the object ended before its listed size",
                ));
            }
            self.pos += self.buf.len() as u64;
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        let _ = self.buf.split_to(n);
        Ok(n)
    }
}

/// A local file read by position (`pread`), its length taken once when opened.
///
/// Parquet's own `ChunkReader for File` duplicates the descriptor, seeks and closes the copy
/// for every page header and every page it reads, and asks the file system for the length
/// each time it is wanted: three extra system calls per read, ~720 of each in a one-learner
/// erasure of the demo at scale 1. Reading by position needs none of them.
#[derive(Debug, Clone)]
pub struct LocalReader {
    file: Arc<std::fs::File>,
    len: u64,
}

impl LocalReader {
    /// Opens `path` for reading.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Ok(LocalReader {
            file: Arc::new(file),
            len,
        })
    }
}

/// Reads `buf.len()` bytes or fewer of `file` at `pos`, without moving a cursor.
fn read_at(file: &std::fs::File, buf: &mut [u8], pos: u64) -> std::io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, pos)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, pos)
    }
}

/// A sequential read of a [`LocalReader`] from a position.
#[derive(Debug)]
pub struct PositionedRead {
    file: Arc<std::fs::File>,
    pos: u64,
}

impl Read for PositionedRead {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = read_at(&self.file, out, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Length for LocalReader {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for LocalReader {
    type T = std::io::BufReader<PositionedRead>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(std::io::BufReader::new(PositionedRead {
            file: Arc::clone(&self.file),
            pos: start,
        }))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let mut buf = vec![0u8; length];
        let mut done = 0;
        while done < length {
            match read_at(&self.file, &mut buf[done..], start + done as u64) {
                Ok(0) => {
                    return Err(parquet::errors::ParquetError::EOF(format!(
                        "expected to read {length} bytes at {start}, read only {done}"
                    )));
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(buf.into())
    }
}

/// Random-access reading of a stored file (for Parquet).
#[derive(Debug)]
pub enum StoredReader {
    /// A local file.
    File(LocalReader),
    /// An in-memory copy.
    Bytes(Bytes),
    /// A remote object, read by ranges.
    Remote(RemoteReader),
}

impl Length for StoredReader {
    fn len(&self) -> u64 {
        match self {
            StoredReader::File(f) => f.len(),
            StoredReader::Bytes(b) => Length::len(b),
            StoredReader::Remote(r) => r.len,
        }
    }
}

impl ChunkReader for StoredReader {
    type T = Box<dyn std::io::Read + Send>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        match self {
            StoredReader::File(f) => Ok(Box::new(f.get_read(start)?)),
            StoredReader::Bytes(b) => Ok(Box::new(b.get_read(start)?)),
            StoredReader::Remote(r) => Ok(Box::new(SequentialRead {
                reader: r.clone(),
                pos: start.min(r.len),
                buf: Bytes::new(),
            })),
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match self {
            StoredReader::File(f) => f.get_bytes(start, length),
            StoredReader::Bytes(b) => b.get_bytes(start, length),
            StoredReader::Remote(r) => {
                let end = start.saturating_add(length as u64);
                if end > r.len {
                    return Err(parquet::errors::ParquetError::EOF(format!(
                        "range {start}..{end} is past the object's {} bytes",
                        r.len
                    )));
                }
                r.source
                    .read_range(start..end)
                    .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
            }
        }
    }
}

/// Where table files live.
pub trait FileStore: Send + Sync + Debug {
    /// The Iceberg `FileIO` for this store (used by the iceberg crate's readers), over the same
    /// I/O library as the store's own methods.
    fn file_io(&self) -> &FileIO;
    /// What the store physically is.
    fn kind(&self) -> StoreKind;
    /// The canonical form of a location, for comparison. Errors when the form can't be matched
    /// to this store (a different scheme or authority): callers that delete must then refuse.
    fn normalize(&self, location: &str) -> Result<String>;
    /// The local path of a location, when the store is local.
    fn local_path(&self, location: &str) -> Result<PathBuf>;
    /// Every file under a prefix (recursively), in canonical form, streamed.
    fn list(&self, prefix: &str) -> Result<Listing<'_, StoredFile>>;
    /// Every version under a prefix — current, noncurrent and delete markers — streamed. A
    /// store without versions lists nothing.
    fn list_versions(&self, prefix: &str) -> Result<Listing<'_, StoredVersion>> {
        let _ = prefix;
        Ok(Box::new(std::iter::empty()))
    }
    /// Reads a whole file.
    fn read(&self, location: &str) -> Result<Bytes>;
    /// Opens a file for random access.
    fn open(&self, location: &str) -> Result<StoredReader>;
    /// Opens a file whose size a listing gave (object stores skip the lookup of its size).
    fn open_listed(&self, location: &str, size: u64) -> Result<StoredReader> {
        let _ = size;
        self.open(location)
    }
    /// Opens one version of an object (see [`FileStore::list_versions`]).
    fn open_version(&self, location: &str, version: &str) -> Result<StoredReader> {
        let _ = version;
        Err(Error::invalid(format!(
            "{location}: this store keeps no versions"
        )))
    }
    /// Writes a whole file (creating folders); fails if it already exists.
    fn write_new(&self, location: &str, bytes: &[u8]) -> Result<()>;
    /// Creates a file to stream into (creating folders); fails if it already exists.
    fn create(&self, location: &str) -> Result<Box<dyn FileSink>>;
    /// Deletes a file; a file already gone is not an error. In a versioned bucket this leaves
    /// the bytes in a noncurrent version.
    fn delete(&self, location: &str) -> Result<()>;
    /// The version id of an object's current version: None when the object doesn't exist (or
    /// its latest version is a delete marker), or the store keeps no versions.
    fn current_version(&self, location: &str) -> Result<Option<String>> {
        let _ = location;
        Ok(None)
    }
    /// Deletes one version of an object for good (a noncurrent version or a delete marker).
    fn delete_version(&self, location: &str, version: &str) -> Result<()> {
        let _ = version;
        Err(Error::invalid(format!(
            "{location}: this store keeps no versions"
        )))
    }
    /// Whether a file exists.
    fn exists(&self, location: &str) -> Result<bool>;
    /// Defers the syncs of the files written from now on until [`FileStore::sync_deferred`]
    /// (a commit calls it before planning: see [`crate::store::local_io`]). Stores that make
    /// each write durable by itself (object stores) ignore it.
    fn defer_syncs(&self) {}
    /// Ends a deferral begun by [`FileStore::defer_syncs`]: every file written since is
    /// durable when this returns (for the outermost deferral).
    fn sync_deferred(&self) -> Result<()> {
        Ok(())
    }
    /// The same files behind a deferral of their own, for work that commits concurrently with
    /// other work on this store ([`crate::table::Warehouse::for_concurrent_work`]): one
    /// deferral's end must not wait for, nor be cut short by, another's (a shared one would
    /// leave the first commit's files unsynced at its pointer swap while the second plans).
    /// `None` for stores without deferrals (object stores): the store itself serves.
    fn with_own_syncs(&self) -> Option<Arc<dyn FileStore>> {
        None
    }
    /// Takes the storage settings a catalog returned with a table (`loadTable`'s `config`:
    /// vended credentials, endpoint) for the files under `table_location`. Stores that need
    /// none ignore them.
    fn use_table_config(&self, table_location: &str, config: &TableConfig) -> Result<()> {
        let _ = (table_location, config);
        Ok(())
    }
}

/// Storage settings a catalog returns with a table (the REST `loadTable` result's `config`,
/// and its `storage-credentials`). Values may be credentials: `Debug` shows only the keys.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TableConfig {
    /// Settings that apply to the whole table.
    pub config: std::collections::BTreeMap<String, String>,
    /// Credentials for location prefixes (`storage-credentials`): the longest matching prefix
    /// wins over `config`.
    pub credentials: Vec<(String, std::collections::BTreeMap<String, String>)>,
}

impl Debug for TableConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableConfig")
            .field("config_keys", &self.config.keys().collect::<Vec<_>>())
            .field(
                "credential_prefixes",
                &self.credentials.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Files on the local file system, written as `file:///absolute/path` locations.
#[derive(Debug, Clone)]
pub struct LocalStore {
    file_io: FileIO,
    syncs: local_io::Syncs,
}

impl Default for LocalStore {
    fn default() -> Self {
        Self::new()
    }
}

impl LocalStore {
    /// A local store.
    pub fn new() -> Self {
        let syncs = local_io::Syncs::default();
        LocalStore {
            file_io: local_io::file_io(syncs.clone()),
            syncs,
        }
    }

    /// The canonical location for a local path.
    pub fn location_of(&self, path: &Path) -> String {
        format!("file://{}", path.display())
    }
}

/// The buffer a new local file is written through. Writers hand over large pieces (Parquet
/// its column chunks through its own buffer, Avro a manifest's blocks), which pass a buffer
/// they fill by themselves; it gathers the small pieces (page headers, a footer) into fewer
/// system calls. A megabyte per file (as once here) is a fresh, zero-filled allocation for
/// every file of a commit — most of the anonymous memory a one-learner erasure touched.
pub(crate) const WRITE_BUFFER: usize = 64 * 1024;

/// Creates `location`'s folders and the file itself, which must not exist yet.
fn create_new_file(location: &str) -> Result<(PathBuf, std::fs::File)> {
    let p = normalize_local(location)?;
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent.display().to_string(), e))?;
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&p)
        .map_err(|e| Error::io(p.display().to_string(), e))?;
    Ok((p, file))
}

struct LocalSink {
    path: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    written: u64,
    syncs: local_io::Syncs,
}

impl Write for LocalSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl FileSink for LocalSink {
    fn finish(&mut self) -> Result<u64> {
        let path = self.path.display().to_string();
        self.file.flush().map_err(|e| Error::io(path.clone(), e))?;
        self.syncs
            .written(self.path.clone(), self.file.get_ref())
            .map_err(|e| Error::io(path, e))?;
        Ok(self.written)
    }
}

/// When `file` (a key or secret file) may be read or written by its group or others (Unix):
/// "PATH is open to its group or others (mode M): make it private with `chmod 600 PATH`; …",
/// for the caller to put after what the file is. None when it is private, or can't be looked
/// at (left to the read's own error).
pub fn not_private(file: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file).ok()?.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then(|| {
            format!(
                "{} is open to its group or others (mode {mode:04o}): make it private with `chmod 600 {}`; lethe won't use it until then",
                file.display(),
                file.display()
            )
        })
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        None
    }
}

/// Normalises a local location: `file:/x`, `file:///x`, `file://localhost/x` and `/x` all become
/// `/x` (with `.` and `..` segments resolved lexically). Anything else is an error.
pub fn normalize_local(location: &str) -> Result<PathBuf> {
    let path = if let Some(rest) = location.strip_prefix("file://") {
        if let Some(abs) = rest.strip_prefix("localhost/") {
            format!("/{abs}")
        } else if rest.starts_with('/') {
            rest.to_string()
        } else {
            return Err(Error::invalid(format!(
                "location `{location}` names a host; lethe can't match it to a local file"
            )));
        }
    } else if let Some(rest) = location.strip_prefix("file:") {
        if !rest.starts_with('/') {
            return Err(Error::invalid(format!(
                "location `{location}` is not absolute; lethe can't match it"
            )));
        }
        rest.to_string()
    } else if location.starts_with('/') {
        location.to_string()
    } else {
        return Err(Error::invalid(format!(
            "location `{location}` is not a local file location (file:/..., file:///..., /...)"
        )));
    };
    let mut out = PathBuf::from("/");
    for part in Path::new(&path).components() {
        match part {
            std::path::Component::Normal(p) => out.push(p),
            std::path::Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    Ok(out)
}

impl FileStore for LocalStore {
    fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    fn defer_syncs(&self) {
        self.syncs.begin();
    }

    fn sync_deferred(&self) -> Result<()> {
        self.syncs.end()
    }

    fn with_own_syncs(&self) -> Option<Arc<dyn FileStore>> {
        Some(Arc::new(LocalStore::new()))
    }

    fn kind(&self) -> StoreKind {
        StoreKind::Local
    }

    fn normalize(&self, location: &str) -> Result<String> {
        Ok(self.location_of(&normalize_local(location)?))
    }

    fn local_path(&self, location: &str) -> Result<PathBuf> {
        normalize_local(location)
    }

    fn list(&self, prefix: &str) -> Result<Listing<'_, StoredFile>> {
        let root = normalize_local(prefix)?;
        let mut out = Vec::new();
        if !root.exists() {
            return Ok(Box::new(out.into_iter().map(Ok)));
        }
        let mut stack = vec![root];
        while let Some(dir) = stack.pop() {
            let entries =
                std::fs::read_dir(&dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
            for entry in entries {
                let entry = entry.map_err(|e| Error::io(dir.display().to_string(), e))?;
                let path = entry.path();
                let meta = std::fs::symlink_metadata(&path)
                    .map_err(|e| Error::io(path.display().to_string(), e))?;
                if meta.is_dir() {
                    stack.push(path);
                } else if meta.is_file() {
                    let modified: DateTime<Utc> =
                        meta.modified().unwrap_or(SystemTime::UNIX_EPOCH).into();
                    out.push(StoredFile {
                        location: self.location_of(&path),
                        size: meta.len(),
                        modified,
                    });
                }
            }
        }
        out.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(Box::new(out.into_iter().map(Ok)))
    }

    fn read(&self, location: &str) -> Result<Bytes> {
        let p = normalize_local(location)?;
        std::fs::read(&p)
            .map(Bytes::from)
            .map_err(|e| Error::io(p.display().to_string(), e))
    }

    fn open(&self, location: &str) -> Result<StoredReader> {
        let p = normalize_local(location)?;
        LocalReader::open(&p)
            .map(StoredReader::File)
            .map_err(|e| Error::io(p.display().to_string(), e))
    }

    fn write_new(&self, location: &str, bytes: &[u8]) -> Result<()> {
        // The bytes in one write, without a sink's buffer to copy them through.
        let (p, mut file) = create_new_file(location)?;
        let path = p.display().to_string();
        file.write_all(bytes)
            .map_err(|e| Error::io(path.clone(), e))?;
        self.syncs.written(p, &file).map_err(|e| Error::io(path, e))
    }

    fn create(&self, location: &str) -> Result<Box<dyn FileSink>> {
        let (p, file) = create_new_file(location)?;
        Ok(Box::new(LocalSink {
            path: p,
            file: std::io::BufWriter::with_capacity(WRITE_BUFFER, file),
            written: 0,
            syncs: self.syncs.clone(),
        }))
    }

    fn delete(&self, location: &str) -> Result<()> {
        let p = normalize_local(location)?;
        match std::fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(p.display().to_string(), e)),
        }
    }

    fn exists(&self, location: &str) -> Result<bool> {
        Ok(normalize_local(location)?.exists())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_reader_reads_by_position_and_refuses_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let r = LocalReader::open(&path).unwrap();
        assert_eq!(Length::len(&r), 10_000);
        // Ranges read in any order, and a sequential read from a position, see the same bytes.
        assert_eq!(&r.get_bytes(9_000, 1_000).unwrap()[..], &data[9_000..]);
        assert_eq!(&r.get_bytes(17, 300).unwrap()[..], &data[17..317]);
        let mut tail = Vec::new();
        r.get_read(8_000).unwrap().read_to_end(&mut tail).unwrap();
        assert_eq!(tail, &data[8_000..]);
        let mut two = [0u8; 2];
        let mut a = r.get_read(5).unwrap();
        let mut b = r.get_read(5_000).unwrap();
        a.read_exact(&mut two).unwrap();
        assert_eq!(two, [data[5], data[6]]);
        b.read_exact(&mut two).unwrap();
        assert_eq!(two, [data[5_000], data[5_001]]);
        // A range past the end is an error, not a short buffer.
        let e = r.get_bytes(9_990, 20).unwrap_err().to_string();
        assert!(e.contains("read only 10"), "{e}");
    }

    #[test]
    fn local_forms_normalise_to_one_path() {
        for form in [
            "file:/w/t/a.parquet",
            "file:///w/t/a.parquet",
            "/w/t/a.parquet",
            "file://localhost/w/t/a.parquet",
            "/w/t/x/../a.parquet",
        ] {
            assert_eq!(
                normalize_local(form).unwrap(),
                PathBuf::from("/w/t/a.parquet"),
                "{form}"
            );
        }
    }

    #[test]
    fn foreign_forms_are_refused() {
        for form in [
            "s3://bucket/w/a.parquet",
            "file://host/w/a",
            "relative/a",
            "file:relative",
        ] {
            assert!(normalize_local(form).is_err(), "{form}");
        }
    }

    /// Two commits at once, one per store from `with_own_syncs`: the first one's deferral
    /// ends with its files synced although the other is still planning (with one shared
    /// deferral its end would only count down, and its pointer swap would name unsynced files).
    #[test]
    fn a_deferral_of_its_own_ends_with_its_files_synced() {
        let dir = tempfile::tempdir().unwrap();
        let a = LocalStore::new();
        let b = a.with_own_syncs().expect("a local store has deferrals");
        b.defer_syncs();
        let b_file = a.location_of(&dir.path().join("b.avro"));
        b.write_new(&b_file, b"planning").unwrap();
        a.defer_syncs();
        a.write_new(&a.location_of(&dir.path().join("a.avro")), b"planned")
            .unwrap();
        assert_eq!(a.syncs.pending(), 1, "only a's file waits in a's deferral");
        a.sync_deferred().unwrap();
        assert_eq!(a.syncs.pending(), 0, "a's end synced a's file");
        // Outside a deferral a file is synced when written, whatever b does.
        a.write_new(&a.location_of(&dir.path().join("c.json")), b"metadata")
            .unwrap();
        assert_eq!(a.syncs.pending(), 0);
        b.sync_deferred().unwrap();
        assert_eq!(&b.read(&b_file).unwrap()[..], b"planning");
    }

    #[test]
    fn write_list_read_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new();
        let loc = store.location_of(&dir.path().join("a/b/c.txt"));
        store.write_new(&loc, b"hello").unwrap();
        assert!(
            store.write_new(&loc, b"again").is_err(),
            "write_new must not overwrite"
        );
        let listed: Vec<StoredFile> = store
            .list(&store.location_of(dir.path()))
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].location, loc);
        assert_eq!(listed[0].size, 5);
        assert_eq!(&store.read(&loc).unwrap()[..], b"hello");
        store.delete(&loc).unwrap();
        store.delete(&loc).unwrap();
        assert!(!store.exists(&loc).unwrap());
    }
}
