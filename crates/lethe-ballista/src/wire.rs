//! What travels to executors: the jobs as plain data, and the store they read and write.
//!
//! A job goes inside the physical plan the scheduler hands each task (JSON, zstd-compressed,
//! behind a magic prefix so the codec can tell lethe's operators from Ballista's own). The
//! traces travel in their searched form ([`lethe_scan::SubjectTraces::searched_form`]): no
//! request IDs, the IDs, and each identifying value cut to the prefix that is searched —
//! never a whole value. `Debug` of every type here shows counts only.

use std::fmt;
use std::sync::Arc;

use lethe_iceberg::ops::rewrite_tasks::RewriteJob;
use lethe_iceberg::store::s3::{S3Settings, S3Store};
use lethe_iceberg::store::{FileStore, LocalStore};
use lethe_scan::{IdTrace, IdValue, ObjectEntry, SubjectTraces, ValueTrace};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The store executors read and write: the same files the client's store names. Carries no
/// credentials: an executor reaching object storage takes its own from its environment
/// (`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`, else the standard AWS
/// chain).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum StoreSpec {
    /// The local file system (a folder every executor mounts at the same path).
    Local,
    /// An S3 bucket (any S3-compatible service).
    S3 {
        /// The bucket.
        bucket: String,
        /// The endpoint (None: AWS for the region).
        endpoint: Option<String>,
        /// The region (None: the executor's `AWS_REGION`, else `us-east-1`).
        region: Option<String>,
        /// Path-style addressing.
        path_style: bool,
    },
}

impl StoreSpec {
    /// The store, on the executor.
    pub fn open(&self) -> Result<Arc<dyn FileStore>> {
        match self {
            StoreSpec::Local => Ok(Arc::new(LocalStore::new())),
            StoreSpec::S3 {
                bucket,
                endpoint,
                region,
                path_style,
            } => {
                let env = |name: &str| {
                    std::env::var(name)
                        .ok()
                        .filter(|v| !v.is_empty())
                        .map(SecretString::from)
                };
                let settings = S3Settings {
                    endpoint: endpoint.clone(),
                    region: region.clone(),
                    path_style: *path_style,
                    access_key_id: env("AWS_ACCESS_KEY_ID"),
                    secret_access_key: env("AWS_SECRET_ACCESS_KEY"),
                    session_token: env("AWS_SESSION_TOKEN"),
                    ..S3Settings::default()
                };
                Ok(Arc::new(S3Store::new(bucket, settings)?))
            }
        }
    }
}

/// One ID of a subject, as it travels.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireId {
    /// An integer ID.
    Int(i64),
    /// A text ID.
    Text(String),
}

/// One subject's traces in their searched form, named by its index in the job.
#[derive(Clone, Serialize, Deserialize)]
pub struct WireSubject {
    /// ID values by column name.
    pub ids: Vec<(String, Vec<WireId>)>,
    /// (kind, searched prefix) of each identifying value.
    pub values: Vec<(String, String)>,
}

impl WireSubject {
    /// The searched form of `s` for `prefix_len`.
    pub fn of(s: &SubjectTraces, prefix_len: usize) -> Self {
        let s = s.searched_form(prefix_len);
        WireSubject {
            ids: s
                .ids
                .into_iter()
                .map(|t| {
                    (
                        t.column,
                        t.values
                            .into_iter()
                            .map(|v| match v {
                                IdValue::Int(i) => WireId::Int(i),
                                IdValue::Text(t) => WireId::Text(t),
                            })
                            .collect(),
                    )
                })
                .collect(),
            values: s.values.into_iter().map(|v| (v.kind, v.value)).collect(),
        }
    }

    /// Back to the scan's traces (on the executor).
    pub fn traces(&self) -> SubjectTraces {
        SubjectTraces {
            label: String::new(),
            ids: self
                .ids
                .iter()
                .map(|(column, values)| IdTrace {
                    column: column.clone(),
                    values: values
                        .iter()
                        .map(|v| match v {
                            WireId::Int(i) => IdValue::Int(*i),
                            WireId::Text(t) => IdValue::Text(t.clone()),
                        })
                        .collect(),
                })
                .collect(),
            values: self
                .values
                .iter()
                .map(|(kind, value)| ValueTrace {
                    kind: kind.clone(),
                    value: value.clone(),
                })
                .collect(),
        }
    }
}

/// A proof-scan job: the traces, the store, and the objects of each task.
#[derive(Clone, Serialize, Deserialize)]
pub struct ScanJob {
    /// The prefix length the values were cut to (and are searched by).
    pub prefix_len: usize,
    /// The subjects, in the order hits name them.
    pub subjects: Vec<WireSubject>,
    /// Where the objects are.
    pub store: StoreSpec,
    /// Each task's objects (a task is one partition of the plan).
    pub tasks: Vec<Vec<ObjectEntry>>,
}

impl fmt::Debug for ScanJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScanJob")
            .field("subjects", &self.subjects.len())
            .field("tasks", &self.tasks.len())
            .field("objects", &self.tasks.iter().map(Vec::len).sum::<usize>())
            .finish_non_exhaustive()
    }
}

/// A rewrite job: lethe-iceberg's per-file job, the store, and the files of each task.
#[derive(Clone, Serialize, Deserialize)]
pub struct RewriteWork {
    /// The per-file job (its predicate holds the subjects' IDs).
    pub job: RewriteJob,
    /// Where the table's files are.
    pub store: StoreSpec,
    /// Each task's indices into `job.tasks`.
    pub tasks: Vec<Vec<usize>>,
}

impl fmt::Debug for RewriteWork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RewriteWork")
            .field("job", &self.job)
            .field("tasks", &self.tasks.len())
            .finish_non_exhaustive()
    }
}

/// The largest job a payload may decode to (its JSON, uncompressed): 256 MiB. A payload
/// claiming more is refused before anything is allocated — the length is the sender's word,
/// and a few KiB of zstd can claim gigabytes.
pub const MAX_DECODED_BYTES: u64 = 256 << 20;

/// Magic prefixes of the codec's payloads.
pub(crate) const SCAN_MAGIC: &[u8] = b"lethe-scan/1\0";
pub(crate) const REWRITE_MAGIC: &[u8] = b"lethe-rewrite/1\0";
pub(crate) const TABLE_MAGIC: &[u8] = b"lethe-table/1\0";
pub(crate) const TABLE_SCAN_MAGIC: &[u8] = b"lethe-table-scan/1\0";

/// `magic` + the JSON's length + zstd(JSON of `value`); a job over [`MAX_DECODED_BYTES`] is an
/// error here already (no executor would take it).
pub(crate) fn encode<T: Serialize>(magic: &[u8], value: &T, buf: &mut Vec<u8>) -> Result<()> {
    let json = serde_json::to_vec(value).map_err(|e| Error::Wire(e.to_string()))?;
    if json.len() as u64 > MAX_DECODED_BYTES {
        return Err(Error::Wire(format!(
            "a job of {} bytes is more than the {MAX_DECODED_BYTES} a payload may carry: cut it into smaller batches",
            json.len()
        )));
    }
    let packed = zstd::bulk::compress(&json, 3).map_err(|e| Error::Wire(e.to_string()))?;
    buf.extend_from_slice(magic);
    buf.extend_from_slice(&(json.len() as u64).to_le_bytes());
    buf.extend_from_slice(&packed);
    Ok(())
}

/// The value behind `magic`, or None when `buf` doesn't start with it.
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(magic: &[u8], buf: &[u8]) -> Option<Result<T>> {
    let rest = buf.strip_prefix(magic)?;
    Some((|| {
        let (len, packed) = rest
            .split_first_chunk::<8>()
            .ok_or_else(|| Error::Wire("truncated payload".into()))?;
        let claimed = u64::from_le_bytes(*len);
        if claimed > MAX_DECODED_BYTES {
            return Err(Error::Wire(format!(
                "a payload claims {claimed} bytes decoded, more than the {MAX_DECODED_BYTES} a job may have: refused"
            )));
        }
        // Decompression stops at the claimed size: a payload that decodes to more is an error.
        let json = zstd::bulk::decompress(packed, claimed as usize)
            .map_err(|e| Error::Wire(e.to_string()))?;
        if json.len() as u64 != claimed {
            return Err(Error::Wire(format!(
                "a payload claims {claimed} bytes decoded but holds {}",
                json.len()
            )));
        }
        serde_json::from_slice(&json).map_err(|e| Error::Wire(e.to_string()))
    })())
}

/// Splits `sizes` (in order) into consecutive groups of at most `max_bytes` bytes and
/// `max_items` items each (an item larger than `max_bytes` is a group of its own).
pub fn group_by_size(sizes: &[u64], max_bytes: u64, max_items: usize) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut bytes = 0u64;
    for (i, s) in sizes.iter().enumerate() {
        let start_new = match out.last() {
            None => true,
            Some(g) => g.len() >= max_items.max(1) || (bytes + s > max_bytes && !g.is_empty()),
        };
        if start_new {
            out.push(Vec::new());
            bytes = 0;
        }
        if let Some(g) = out.last_mut() {
            g.push(i);
        }
        bytes += s;
    }
    out
}
