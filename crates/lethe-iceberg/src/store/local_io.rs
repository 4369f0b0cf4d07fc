//! The local store's syncs, and the iceberg crate's FileIO over the same local files.
//!
//! Every file a commit points to (data files, delete files, manifests, the manifest list)
//! must be durable before the catalog swaps the table's pointer to the metadata that names
//! them; a file written outside a commit must be durable when its writer finishes. Syncing
//! each file as it is closed does both, at the price of one wait on the disk per file, one
//! after the other. [`Syncs`] lets a commit defer the syncs of the files written while it
//! plans ([`crate::store::FileStore::defer_syncs`]) and make them all durable in one pass
//! before the swap ([`crate::store::FileStore::sync_deferred`]): on Linux each file's
//! writeback is started when it is closed (`sync_file_range`, which waits for nothing), so
//! the disk writes the files while the commit plans the next ones and the pass's syncs, one
//! after the other on the committing thread, mostly find their data written (measured on
//! ext4: 0.23 ms per small file against 0.38 ms synced as closed, and 0.30 ms synced by a
//! thread each, which cost a thread and a malloc arena per file); only then is the metadata
//! file written (synced at once) and the pointer swapped. A crash before the pass leaves
//! files no metadata names (the sweep's to remove); a failed sync fails the commit before the
//! swap. Outside a deferral — and for a FileIO deserialized elsewhere — every file is synced
//! when closed, as before.

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use iceberg::io::{
    FileIO, FileIOBuilder, FileMetadata, FileRead, FileWrite, InputFile, LocalFsStorage,
    OutputFile, Storage, StorageConfig, StorageFactory,
};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Debug, Default)]
struct Deferral {
    depth: usize,
    pending: Vec<(PathBuf, fs::File)>,
}

/// The syncs of one local store: immediate, or deferred while a commit plans.
#[derive(Debug, Clone, Default)]
pub struct Syncs(Arc<Mutex<Deferral>>);

impl Syncs {
    fn lock(&self) -> std::sync::MutexGuard<'_, Deferral> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Defers the syncs of files closed from now on, until the matching [`Syncs::end`].
    pub fn begin(&self) {
        self.lock().depth += 1;
    }

    /// A file was written and flushed: synced now, or kept for the deferral's pass.
    pub fn written(&self, path: PathBuf, file: &fs::File) -> std::io::Result<()> {
        let mut d = self.lock();
        if d.depth == 0 {
            drop(d);
            return file.sync_all();
        }
        start_writeback(file);
        d.pending.push((path, file.try_clone()?));
        Ok(())
    }

    /// Ends a deferral; the outermost one makes every file written during it durable. An
    /// error names a file that could not be synced.
    pub fn end(&self) -> Result<()> {
        let pending = {
            let mut d = self.lock();
            d.depth = d.depth.saturating_sub(1);
            if d.depth > 0 {
                return Ok(());
            }
            std::mem::take(&mut d.pending)
        };
        sync_all(pending)
    }

    /// How many files wait for the deferral's pass.
    pub fn pending(&self) -> usize {
        self.lock().pending.len()
    }
}

/// Syncs files one after the other (their writeback started when they were closed). An
/// error names the file.
fn sync_all(files: Vec<(PathBuf, fs::File)>) -> Result<()> {
    for (p, f) in &files {
        f.sync_all()
            .map_err(|e| Error::io(p.display().to_string(), e))?;
    }
    Ok(())
}

/// Starts writing `file`'s dirty pages to the disk without waiting for them (Linux's
/// `sync_file_range` with `SYNC_FILE_RANGE_WRITE`): a later `fsync` finds less to wait
/// for. Only a hint — it makes nothing durable and its failure is ignored (the `fsync` that
/// follows reports what failed); elsewhere it does nothing.
fn start_writeback(file: &fs::File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: `file` is an open file descriptor for the whole call; the call reads no
        // memory of ours.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

fn to_iceberg(e: impl std::fmt::Display) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.to_string())
}

/// The iceberg crate's local storage, its files' syncs going through a store's [`Syncs`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct LocalStorage {
    /// A copy deserialized elsewhere syncs every file when closed.
    #[serde(skip)]
    syncs: Syncs,
    inner: LocalFsStorage,
}

#[derive(Debug, Serialize, Deserialize)]
struct Factory(LocalStorage);

#[typetag::serde(name = "lethe-local-storage-factory")]
impl StorageFactory for Factory {
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(self.0.clone()))
    }
}

/// A FileIO over local files whose syncs go through `syncs`.
pub(crate) fn file_io(syncs: Syncs) -> FileIO {
    FileIOBuilder::new(Arc::new(Factory(LocalStorage {
        syncs,
        inner: LocalFsStorage::new(),
    })))
    .build()
}

/// Same path forms as the iceberg crate's local storage (`file:///x`, `file:/x`, `/x`).
fn local_path(path: &str) -> PathBuf {
    let p = if let Some(rest) = path.strip_prefix("file://") {
        if rest.starts_with('/') {
            rest.to_string()
        } else {
            format!("/{rest}")
        }
    } else if let Some(rest) = path.strip_prefix("file:") {
        if rest.starts_with('/') {
            rest.to_string()
        } else {
            format!("/{rest}")
        }
    } else {
        path.to_string()
    };
    PathBuf::from(p)
}

fn create(path: &PathBuf) -> iceberg::Result<fs::File> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| to_iceberg(format!("creating {}: {e}", parent.display())))?;
    }
    fs::File::create(path).map_err(|e| to_iceberg(format!("creating {}: {e}", path.display())))
}

struct Writer {
    path: PathBuf,
    file: Option<std::io::BufWriter<fs::File>>,
    syncs: Syncs,
}

#[async_trait]
impl FileWrite for Writer {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        let f = self
            .file
            .as_mut()
            .ok_or_else(|| to_iceberg(format!("{} was already closed", self.path.display())))?;
        f.write_all(&bs)
            .map_err(|e| to_iceberg(format!("writing {}: {e}", self.path.display())))
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        let f = self
            .file
            .take()
            .ok_or_else(|| to_iceberg(format!("{} was already closed", self.path.display())))?;
        let f = f
            .into_inner()
            .map_err(|e| to_iceberg(format!("writing {}: {e}", self.path.display())))?;
        self.syncs
            .written(self.path.clone(), &f)
            .map_err(|e| to_iceberg(format!("syncing {}: {e}", self.path.display())))
    }
}

#[async_trait]
#[typetag::serde(name = "lethe-local-storage")]
impl Storage for LocalStorage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        self.inner.exists(path).await
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        self.inner.metadata(path).await
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        self.inner.read(path).await
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        self.inner.reader(path).await
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        let path = local_path(path);
        let mut f = create(&path)?;
        f.write_all(&bs)
            .map_err(|e| to_iceberg(format!("writing {}: {e}", path.display())))?;
        self.syncs
            .written(path.clone(), &f)
            .map_err(|e| to_iceberg(format!("syncing {}: {e}", path.display())))
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        let path = local_path(path);
        let f = create(&path)?;
        Ok(Box::new(Writer {
            path,
            file: Some(std::io::BufWriter::with_capacity(super::WRITE_BUFFER, f)),
            syncs: self.syncs.clone(),
        }))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        self.inner.delete(path).await
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        self.inner.delete_prefix(path).await
    }

    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        self.inner.delete_stream(paths).await
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deferred_syncs_wait_for_the_outermost_end() {
        let dir = tempfile::tempdir().unwrap();
        let s = Syncs::default();
        let write = |name: &str| {
            let p = dir.path().join(name);
            let mut f = fs::File::create(&p).unwrap();
            f.write_all(b"x").unwrap();
            s.written(p, &f).unwrap();
        };
        write("a");
        assert_eq!(
            s.pending(),
            0,
            "outside a deferral a file is synced when written"
        );
        s.begin();
        s.begin();
        for i in 0..20 {
            write(&format!("f{i}"));
        }
        assert_eq!(s.pending(), 20);
        s.end().unwrap();
        assert_eq!(s.pending(), 20, "an inner end keeps them for the outer one");
        s.end().unwrap();
        assert_eq!(s.pending(), 0, "the outermost end synced them all");
        write("b");
        assert_eq!(s.pending(), 0);
    }
}
