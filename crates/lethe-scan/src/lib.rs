//! lethe's proof scan: read every file under some folders, each with its own format's
//! reader, and search for the traces of one or many subjects.
//!
//! "A file that can't be read can't be proven clean": a file is either [`FileStatus::Read`]
//! to the end, or [`FileStatus::Unreadable`] with a reason. Malformed input never panics in
//! this crate's code; third-party readers are additionally run under `catch_unwind`, so a
//! panic inside them makes the file unreadable instead of ending the scan.
//!
//! What is searched (see [`dispatch`] for how a reader is chosen, and each format module):
//! Parquet (values, footer statistics, page index, bloom filters, delete files), ORC (values,
//! nested too, file and stripe statistics, user metadata), Avro
//! (Iceberg manifests with typed bounds and partition values, manifest lists, generic Avro),
//! JSON documents and JSON lines, Puffin blobs, CSV, plain text (UTF-8, or UTF-16 by its mark
//! or pattern), gzip, zstd and xz streams (inner content by name/magic), zip and tar archives
//! (every member with its own reader, hits detailed `archive!member: ...`, bounded by
//! [`ArchiveLimits`]); Hadoop `.crc` files are read and hold nothing; the file's own path
//! relative to its root is searched too ([`Place::Path`]).
//!
//! Cost does not grow with the number of subjects: value prefixes of all subjects are one
//! Aho-Corasick automaton and IDs are hash maps (see [`TraceSet`]).
//!
//! Does not: follow symbolic links (a link to a target outside the roots is reported
//! unreadable; one inside is skipped, its target being scanned where it lies), read
//! encrypted Parquet without its keys ([`keys`]), search IDs as free text, or decode sketches.
//!
//! ```no_run
//! use lethe_scan::*;
//! let subjects = vec![SubjectTraces {
//!     label: "req-1".into(),
//!     ids: vec![IdTrace { column: "learner_id".into(), values: vec![IdValue::Int(3590)] }],
//!     values: vec![ValueTrace { kind: "email".into(), value: "someone@example.org".into() }],
//! }];
//! let traces = TraceSet::new(&subjects, 15)?;
//! let options = ScanOptions { roots: vec!["warehouse".into()], ..ScanOptions::default() };
//! let report = scan(&traces, &options, &|p| eprintln!("{}/{}", p.files_done, p.files_total))?;
//! assert!(report.is_clean());
//! # Ok::<(), lethe_scan::Error>(())
//! ```

#![deny(missing_docs)]

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use bytes::Bytes;
use serde::Serialize;

pub mod dispatch;
pub mod engine;
mod formats;
mod grams;
pub mod keys;
mod report;
mod traces;

/// A seed for a randomized unit test: `LETHE_SCAN_SEED` or `default`; always printed.
#[cfg(test)]
fn test_seed(default: u64) -> u64 {
    let seed = std::env::var("LETHE_SCAN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    println!("seed: {seed} (set LETHE_SCAN_SEED to override)");
    seed
}

pub use engine::ScanEngine;
pub use formats::archive::ArchiveLimits;
pub use keys::{KeyFile, Kms, ParquetKeys};
pub use report::{
    FileFormat, FileReport, FileStatus, Hit, MAX_HITS_PER_FILE, Place, Progress, ScanReport,
    TraceKind,
};
pub use traces::{IdTrace, IdValue, SubjectTraces, TraceSet, ValueTrace};

use dispatch::Ctx;
use report::Hits;

/// Files up to this size are read into memory in one read; larger ones are streamed (a
/// Parquet file page by page, other formats block by block), so a scan holds at most this
/// much file data per thread (plus one page or block of a larger file).
pub const WHOLE_FILE: u64 = 8 << 20;

/// Errors of a scan as a whole (a single file's problems are reported in its
/// [`FileReport`], not here). Messages name paths and indices, never values.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The traces cannot be compiled (e.g. an empty value); names the subject/trace index.
    #[error("invalid traces: {0}")]
    InvalidTraces(String),
    /// A scan root does not exist.
    #[error("scan root {} does not exist", path.display())]
    RootNotFound {
        /// The root.
        path: PathBuf,
    },
    /// A scan root cannot be inspected.
    #[error("cannot read scan root {}: {source}", path.display())]
    Root {
        /// The root.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Listing the objects to scan failed: nothing can be proven about what wasn't listed.
    #[error("listing the objects to scan failed: {0}")]
    Listing(String),
    /// The engine the scan ran on failed (a cluster that can't be reached, a task that
    /// failed for good): nothing can be proven about what it didn't read.
    #[error("scan engine: {0}")]
    Engine(String),
    /// A broken invariant of this crate.
    #[error("internal error: {0}")]
    Internal(String),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What to scan and how.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ScanOptions {
    /// Folders (or single files) scanned recursively. Each must exist.
    pub roots: Vec<PathBuf>,
    /// Path prefixes under which ID traces are expected (a table a legal exception keeps):
    /// only identifying values are searched there.
    pub values_only: Vec<PathBuf>,
    /// Files to treat as delete files (their values are reported as [`Place::DeleteFile`]),
    /// as paths the walk produces (root joined with the relative path) or canonical paths.
    pub delete_files: HashSet<PathBuf>,
    /// Worker threads; 0 (the default) means `std::thread::available_parallelism`.
    pub threads: usize,
    /// Bounds on reading archives (nesting depth, bytes decompressed per file).
    pub archive_limits: ArchiveLimits,
    /// Keys for encrypted Parquet files (none: they are unreadable, naming their keys).
    #[serde(skip)]
    pub parquet_keys: ParquetKeys,
}

/// One file found by the walk.
struct Entry {
    path: PathBuf,
    /// Path relative to its root (searched as [`Place::Path`]).
    relative: String,
    bytes: u64,
    what: EntryKind,
}

enum EntryKind {
    File,
    /// A symbolic link; `outside` when its target is not under a root (or is dangling).
    Symlink {
        outside: bool,
    },
    /// A directory that could not be listed.
    Unlistable(String),
}

/// Scan every file under `options.roots` for the traces in `traces`.
///
/// `progress` is called on the calling thread after each file. Errors only for a root that
/// does not exist or cannot be inspected; problems with single files are in the report.
pub fn scan(
    traces: &TraceSet,
    options: &ScanOptions,
    progress: &dyn Fn(Progress),
) -> Result<ScanReport> {
    let started = Instant::now();
    let entries = walk(&options.roots)?;
    let files_total = entries.len() as u64;
    let bytes_total: u64 = entries.iter().map(|e| e.bytes).sum();
    let threads = match options.threads {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        n => n,
    }
    .min(entries.len().max(1));

    let canonical_deletes: HashSet<PathBuf> = options
        .delete_files
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    // Largest files first, so that no large file is left to one thread at the end; the
    // reports are put back in walk order.
    let mut schedule: Vec<usize> = (0..entries.len()).collect();
    schedule.sort_by_key(|&i| std::cmp::Reverse(entries[i].bytes));
    let next = AtomicUsize::new(0);
    let mut reports: Vec<Option<FileReport>> = (0..entries.len()).map(|_| None).collect();
    let (tx, rx) = mpsc::channel::<(usize, FileReport)>();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, entries, canonical_deletes, schedule) =
                (&next, &entries, &canonical_deletes, &schedule);
            s.spawn(move || {
                while let Some(&i) = schedule.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let Some(entry) = entries.get(i) else { break };
                    let report = scan_entry(traces, options, canonical_deletes, entry);
                    if tx.send((i, report)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut done = Progress {
            files_done: 0,
            files_total,
            bytes_done: 0,
            bytes_total,
        };
        for (i, report) in rx {
            done.files_done += 1;
            done.bytes_done += entries.get(i).map_or(0, |e| e.bytes);
            if let Some(slot) = reports.get_mut(i) {
                *slot = Some(report);
            }
            progress(done);
        }
    });

    let mut files = Vec::with_capacity(reports.len());
    for (i, r) in reports.into_iter().enumerate() {
        match r {
            Some(r) => files.push(r),
            None => {
                return Err(Error::Internal(format!(
                    "no report for file {i} of the walk"
                )));
            }
        }
    }
    let mut report = ScanReport::default();
    for f in &files {
        report.count(f);
    }
    report.files = files;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// One object of a store for [`scan_objects`]: plain data, opened by the caller's function.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectEntry {
    /// How reports name it (its location; a noncurrent version as `location?versionId=V`).
    pub name: String,
    /// The location the caller opens.
    pub location: String,
    /// The version the caller opens (None: the current one).
    pub version: Option<String>,
    /// Its key relative to the scanned root (searched as [`Place::Path`]).
    pub relative: String,
    /// Size in bytes, as listed.
    pub bytes: u64,
    /// Only identifying values are searched (a table a legal exception keeps).
    pub values_only: bool,
    /// Its values are reported as [`Place::DeleteFile`].
    pub delete_file: bool,
}

/// Objects found per listing entry sent to the workers ahead of them.
const OBJECTS_AHEAD: usize = 64;

/// Scans objects as a listing streams them (an S3 bucket's millions of keys are never held):
/// `open` gives random access to one (or why it can't be read, which makes it unreadable),
/// `on_file` receives each file's report on the calling thread as it is done. The returned
/// report has the totals and no per-file list. Memory stays flat in the number of objects.
///
/// Errors when the listing fails (an `Err` item): what wasn't listed can't be proven clean.
/// Encrypted Parquet is decrypted with `keys`.
pub fn scan_objects<R, I>(
    traces: &TraceSet,
    objects: I,
    open: &(dyn Fn(&ObjectEntry) -> std::result::Result<R, String> + Sync),
    keys: &ParquetKeys,
    threads: usize,
    on_file: &mut dyn FnMut(FileReport),
    progress: &dyn Fn(Progress),
) -> Result<ScanReport>
where
    R: ::parquet::file::reader::ChunkReader + 'static,
    I: Iterator<Item = std::result::Result<ObjectEntry, String>> + Send,
{
    let started = Instant::now();
    let threads = match threads {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        n => n,
    };
    let mut report = ScanReport::default();
    let (work_tx, work_rx) = mpsc::sync_channel::<ObjectEntry>(OBJECTS_AHEAD);
    let work_rx = std::sync::Mutex::new(work_rx);
    let (done_tx, done_rx) = mpsc::channel::<(u64, FileReport)>();
    let listing_error: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        let listing_error = &listing_error;
        s.spawn(move || {
            for item in objects {
                match item {
                    Ok(entry) => {
                        if work_tx.send(entry).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        if let Ok(mut slot) = listing_error.lock() {
                            *slot = Some(e);
                        }
                        return;
                    }
                }
            }
        });
        for _ in 0..threads {
            let done_tx = done_tx.clone();
            let work_rx = &work_rx;
            s.spawn(move || {
                loop {
                    let next = match work_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(e) = next else { return };
                    let r = scan_object(traces, &e, open, keys);
                    if done_tx.send((e.bytes, r)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        let mut done = Progress {
            files_done: 0,
            files_total: 0,
            bytes_done: 0,
            bytes_total: 0,
        };
        for (bytes, f) in done_rx {
            done.files_done += 1;
            done.bytes_done += bytes;
            done.files_total = done.files_done;
            done.bytes_total = done.bytes_done;
            report.count(&f);
            on_file(f);
            progress(done);
        }
    });
    if let Some(e) = listing_error
        .into_inner()
        .map_err(|_| Error::Internal("listing error lock poisoned".into()))?
    {
        return Err(Error::Listing(e));
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Scans one object: `open` gives random access to it (or why it can't be opened, which makes
/// it unreadable). Never panics; the report is named by `e.name`. What [`scan_objects`] does
/// to each object, for engines that run it in another process.
pub fn scan_object<R: ::parquet::file::reader::ChunkReader + 'static>(
    traces: &TraceSet,
    e: &ObjectEntry,
    open: &(dyn Fn(&ObjectEntry) -> std::result::Result<R, String> + Sync),
    keys: &ParquetKeys,
) -> FileReport {
    run_guarded(
        traces,
        Path::new(&e.name),
        &e.relative,
        e.bytes,
        (e.values_only, e.delete_file),
        (ArchiveLimits::default(), keys),
        |ctx| {
            let src = open(e).map_err(|err| format!("cannot open: {err}"))?;
            dispatch::scan_source(src, &e.location, ctx, 0)
        },
    )
}

/// Scan one in-memory file named `name` (the name chooses the reader where the content has
/// no magic, and is searched as [`Place::Path`]). For fuzzing and tests; never panics.
pub fn scan_bytes(traces: &TraceSet, name: &str, bytes: &[u8], values_only: bool) -> FileReport {
    scan_bytes_with_limits(traces, name, bytes, values_only, ArchiveLimits::default())
}

/// [`scan_bytes`] with other [`ArchiveLimits`] than the default.
pub fn scan_bytes_with_limits(
    traces: &TraceSet,
    name: &str,
    bytes: &[u8],
    values_only: bool,
    limits: ArchiveLimits,
) -> FileReport {
    let data = Bytes::copy_from_slice(bytes);
    run_guarded(
        traces,
        Path::new(name),
        name,
        bytes.len() as u64,
        (values_only, false),
        (limits, &ParquetKeys::default()),
        |ctx| dispatch::scan_source(data, name, ctx, 0),
    )
}

/// [`scan_bytes`] with every Parquet data value decoded and searched one by one, as the scan
/// did before it searched pages' bytes: the reference the fuzz target compares the byte
/// search with (feature `reference`; not for other use).
#[cfg(feature = "reference")]
#[doc(hidden)]
pub fn scan_bytes_reference(
    traces: &TraceSet,
    name: &str,
    bytes: &[u8],
    values_only: bool,
) -> FileReport {
    let data = Bytes::copy_from_slice(bytes);
    run_guarded(
        traces,
        Path::new(name),
        name,
        bytes.len() as u64,
        (values_only, false),
        (ArchiveLimits::default(), &ParquetKeys::default()),
        |ctx| {
            ctx.parquet_values = formats::parquet::Values::Reference;
            dispatch::scan_source(data, name, ctx, 0)
        },
    )
}

/// Run one file's reader with hit collection, redaction and a panic guard (`flags`: values
/// only, marked as a delete file).
fn run_guarded(
    traces: &TraceSet,
    path: &Path,
    relative: &str,
    bytes: u64,
    (values_only, marked_delete): (bool, bool),
    (limits, keys): (ArchiveLimits, &ParquetKeys),
    read: impl FnOnce(&mut Ctx) -> Result<(), String>,
) -> FileReport {
    let mut ctx = Ctx {
        hits: Hits::new(traces, values_only),
        marked_delete,
        parquet_values: formats::parquet::Values::Search,
        format: FileFormat::Unknown,
        gzip: false,
        archive: formats::archive::ArchiveState {
            limits,
            file: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            ..Default::default()
        },
        keys: keys.clone(),
    };
    ctx.hits
        .search(Place::Path, relative.as_bytes(), "path", &|| {
            "file path".to_string()
        });
    let outcome = catch_unwind(AssertUnwindSafe(|| read(&mut ctx)));
    let status = match outcome {
        Ok(Ok(())) => FileStatus::Read,
        Ok(Err(reason)) => FileStatus::Unreadable {
            reason: traces.redact(&reason),
        },
        Err(_) => FileStatus::Unreadable {
            reason: "the format's reader failed (panicked) on this file".into(),
        },
    };
    let (hits, hits_omitted) = ctx.hits.finish();
    FileReport {
        path: path.to_path_buf(),
        format: ctx.format,
        gzip: ctx.gzip,
        bytes,
        status,
        hits,
        hits_omitted,
    }
}

fn scan_entry(
    traces: &TraceSet,
    options: &ScanOptions,
    canonical_deletes: &HashSet<PathBuf>,
    e: &Entry,
) -> FileReport {
    let values_only = options.values_only.iter().any(|p| e.path.starts_with(p));
    let unreadable = |format: FileFormat, reason: String| FileReport {
        path: e.path.clone(),
        format,
        gzip: false,
        bytes: e.bytes,
        status: FileStatus::Unreadable { reason },
        hits: Vec::new(),
        hits_omitted: 0,
    };
    match &e.what {
        EntryKind::Unlistable(reason) => return unreadable(FileFormat::Directory, reason.clone()),
        EntryKind::Symlink { outside: true } => {
            return unreadable(
                FileFormat::Symlink,
                "symbolic link to a target outside the scanned roots (or dangling): not followed"
                    .into(),
            );
        }
        EntryKind::Symlink { outside: false } => {
            return FileReport {
                path: e.path.clone(),
                format: FileFormat::Symlink,
                gzip: false,
                bytes: 0,
                status: FileStatus::Read,
                hits: Vec::new(),
                hits_omitted: 0,
            };
        }
        EntryKind::File => {}
    }
    let marked_delete = !options.delete_files.is_empty()
        && (options.delete_files.contains(&e.path)
            || std::fs::canonicalize(&e.path).is_ok_and(|c| canonical_deletes.contains(&c)));
    let name = e.path.to_string_lossy().into_owned();
    run_guarded(
        traces,
        &e.path,
        &e.relative,
        e.bytes,
        (values_only, marked_delete),
        (options.archive_limits, &options.parquet_keys),
        |ctx| {
            let mut file = File::open(&e.path).map_err(|err| format!("cannot open: {err}"))?;
            if e.bytes <= WHOLE_FILE {
                // One read instead of one per page or block; larger files are streamed.
                let mut data = Vec::with_capacity(e.bytes as usize);
                (&mut file)
                    .take(WHOLE_FILE + 1)
                    .read_to_end(&mut data)
                    .map_err(|err| format!("read error: {err}"))?;
                if data.len() as u64 <= WHOLE_FILE {
                    return dispatch::scan_source(Bytes::from(data), &name, ctx, 0);
                }
            }
            dispatch::scan_source(file, &name, ctx, 0)
        },
    )
}

/// Walk the roots: regular files, symlinks (not followed), unlistable directories. Sorted
/// by path; a path under two roots is listed once.
fn walk(roots: &[PathBuf]) -> Result<Vec<Entry>> {
    let mut canonical_roots = Vec::new();
    for root in roots {
        match std::fs::symlink_metadata(root) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::RootNotFound { path: root.clone() });
            }
            Err(source) => {
                return Err(Error::Root {
                    path: root.clone(),
                    source,
                });
            }
        }
        let c = std::fs::canonicalize(root).map_err(|source| Error::Root {
            path: root.clone(),
            source,
        })?;
        canonical_roots.push(c);
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (root, canonical_root) in roots.iter().zip(&canonical_roots) {
        // A root given as a symlink is followed once (the user named it).
        let meta = std::fs::metadata(root).map_err(|source| Error::Root {
            path: root.clone(),
            source,
        })?;
        if !meta.is_dir() {
            if seen.insert(canonical_root.clone()) {
                let relative = root
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                out.push(Entry {
                    path: root.clone(),
                    relative,
                    bytes: meta.len(),
                    what: EntryKind::File,
                });
            }
            continue;
        }
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let listing =
                std::fs::read_dir(&dir).and_then(|rd| rd.collect::<std::io::Result<Vec<_>>>());
            let mut items = match listing {
                Ok(items) => items,
                Err(e) => {
                    out.push(Entry {
                        path: dir.clone(),
                        relative: relative_to(&dir, root),
                        bytes: 0,
                        what: EntryKind::Unlistable(format!("cannot list directory: {e}")),
                    });
                    continue;
                }
            };
            items.sort_by_key(|i| i.file_name());
            for item in items {
                let path = item.path();
                let relative = relative_to(&path, root);
                let ft = match item.file_type() {
                    Ok(ft) => ft,
                    Err(e) => {
                        out.push(Entry {
                            path,
                            relative,
                            bytes: 0,
                            what: EntryKind::Unlistable(format!("cannot stat: {e}")),
                        });
                        continue;
                    }
                };
                if ft.is_dir() {
                    stack.push(path);
                } else if ft.is_symlink() {
                    let inside = std::fs::canonicalize(&path)
                        .is_ok_and(|t| canonical_roots.iter().any(|r| t.starts_with(r)));
                    out.push(Entry {
                        path,
                        relative,
                        bytes: 0,
                        what: EntryKind::Symlink { outside: !inside },
                    });
                } else {
                    let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
                    if seen.insert(key) {
                        let bytes = item.metadata().map(|m| m.len()).unwrap_or(0);
                        out.push(Entry {
                            path,
                            relative,
                            bytes,
                            what: EntryKind::File,
                        });
                    }
                }
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn relative_to(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}
