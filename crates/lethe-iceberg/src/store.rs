//! The file store: where table files live, behind a trait so that object storage can arrive as a
//! new implementation.
//!
//! Locations are URIs as Iceberg metadata holds them. [`LocalStore`] accepts `file:/x`,
//! `file:///x` and `/x` for the same file and normalises them before comparing (the sweep relies
//! on this); any other form is refused, never guessed.

use std::fmt::Debug;
use std::io::Write;
use std::path::{Path, PathBuf};
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

/// A writer that must be finished to make the file visible.
pub trait FileSink: Write + Send {
    /// Flushes and makes the file durable; returns the bytes written. Nothing may be written
    /// after it.
    fn finish(&mut self) -> Result<u64>;
}

/// Random-access reading of a stored file (for Parquet).
#[derive(Debug)]
pub enum StoredReader {
    /// A local file.
    File(std::fs::File),
    /// An in-memory copy.
    Bytes(Bytes),
}

impl Length for StoredReader {
    fn len(&self) -> u64 {
        match self {
            StoredReader::File(f) => f.len(),
            StoredReader::Bytes(b) => Length::len(b),
        }
    }
}

impl ChunkReader for StoredReader {
    type T = Box<dyn std::io::Read + Send>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        match self {
            StoredReader::File(f) => Ok(Box::new(f.get_read(start)?)),
            StoredReader::Bytes(b) => Ok(Box::new(b.get_read(start)?)),
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match self {
            StoredReader::File(f) => f.get_bytes(start, length),
            StoredReader::Bytes(b) => b.get_bytes(start, length),
        }
    }
}

/// Where table files live.
pub trait FileStore: Send + Sync + Debug {
    /// The Iceberg `FileIO` for this store (used by the iceberg crate's readers).
    fn file_io(&self) -> &FileIO;
    /// The canonical form of a location, for comparison. Errors when the form can't be matched
    /// to this store (a different scheme or authority): callers that delete must then refuse.
    fn normalize(&self, location: &str) -> Result<String>;
    /// The canonical location for a local path.
    fn location_of(&self, path: &Path) -> String;
    /// The local path of a location, when the store is local.
    fn local_path(&self, location: &str) -> Result<PathBuf>;
    /// Every file under a prefix (recursively), in canonical form.
    fn list(&self, prefix: &str) -> Result<Vec<StoredFile>>;
    /// Reads a whole file.
    fn read(&self, location: &str) -> Result<Bytes>;
    /// Opens a file for random access.
    fn open(&self, location: &str) -> Result<StoredReader>;
    /// Writes a whole file (creating folders); fails if it already exists.
    fn write_new(&self, location: &str, bytes: &[u8]) -> Result<()>;
    /// Creates a file to stream into (creating folders); fails if it already exists.
    fn create(&self, location: &str) -> Result<Box<dyn FileSink>>;
    /// Deletes a file; a file already gone is not an error.
    fn delete(&self, location: &str) -> Result<()>;
    /// Whether a file exists.
    fn exists(&self, location: &str) -> Result<bool>;
}

/// Files on the local file system, written as `file:///absolute/path` locations.
#[derive(Debug, Clone)]
pub struct LocalStore {
    file_io: FileIO,
}

impl Default for LocalStore {
    fn default() -> Self {
        Self::new()
    }
}

impl LocalStore {
    /// A local store.
    pub fn new() -> Self {
        LocalStore {
            file_io: FileIO::new_with_fs(),
        }
    }
}

struct LocalSink {
    path: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    written: u64,
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
        self.file
            .get_ref()
            .sync_all()
            .map_err(|e| Error::io(path, e))?;
        Ok(self.written)
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

    fn normalize(&self, location: &str) -> Result<String> {
        Ok(self.location_of(&normalize_local(location)?))
    }

    fn location_of(&self, path: &Path) -> String {
        format!("file://{}", path.display())
    }

    fn local_path(&self, location: &str) -> Result<PathBuf> {
        normalize_local(location)
    }

    fn list(&self, prefix: &str) -> Result<Vec<StoredFile>> {
        let root = normalize_local(prefix)?;
        let mut out = Vec::new();
        if !root.exists() {
            return Ok(out);
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
        Ok(out)
    }

    fn read(&self, location: &str) -> Result<Bytes> {
        let p = normalize_local(location)?;
        std::fs::read(&p)
            .map(Bytes::from)
            .map_err(|e| Error::io(p.display().to_string(), e))
    }

    fn open(&self, location: &str) -> Result<StoredReader> {
        let p = normalize_local(location)?;
        std::fs::File::open(&p)
            .map(StoredReader::File)
            .map_err(|e| Error::io(p.display().to_string(), e))
    }

    fn write_new(&self, location: &str, bytes: &[u8]) -> Result<()> {
        let mut sink = self.create(location)?;
        sink.write_all(bytes)
            .map_err(|e| Error::io(location.to_string(), e))?;
        sink.finish()?;
        Ok(())
    }

    fn create(&self, location: &str) -> Result<Box<dyn FileSink>> {
        let p = normalize_local(location)?;
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::io(parent.display().to_string(), e))?;
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
            .map_err(|e| Error::io(p.display().to_string(), e))?;
        Ok(Box::new(LocalSink {
            path: p,
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            written: 0,
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
        let listed = store.list(&store.location_of(dir.path())).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].location, loc);
        assert_eq!(listed[0].size, 5);
        assert_eq!(&store.read(&loc).unwrap()[..], b"hello");
        store.delete(&loc).unwrap();
        store.delete(&loc).unwrap();
        assert!(!store.exists(&loc).unwrap());
    }
}
