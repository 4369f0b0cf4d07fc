//! S3-compatible object storage as a [`FileStore`], on Apache OpenDAL.
//!
//! Why OpenDAL: it is what the `iceberg` crate's FileIO family uses, and it speaks every S3
//! call lethe needs — ranged reads, multipart uploads, paginated listings that stream, and the
//! versioned-bucket calls (`ListObjectVersions`, reads and deletes by version id) that the
//! proof scan and `purge_versions` need. (`object_store`, which DataFusion uses, can read a
//! version but neither list nor delete versions.) The iceberg crate's FileIO for this store is
//! built on the same OpenDAL operator ([`super::iceberg_io`]), so manifests, scans and
//! lethe's own reads and writes share one client, one credential chain and one connection
//! pool.
//!
//! Locations are `s3://bucket/key`; `s3a://` and `s3n://` in the same bucket are the same
//! object (as Iceberg Java's remove-orphan-files treats them), anything else is refused: a
//! location whose scheme or bucket can't be matched is never deleted.
//!
//! Credentials come from [`S3Settings`] (keys lethe read from the environment or a file), or
//! else from the standard AWS chain (environment, profile, web identity, instance metadata);
//! a catalog's vended credentials ([`FileStore::use_table_config`]) take over for the table
//! locations they were given for. Secrets live in `secrecy` types and never reach a log line,
//! an error or `Debug`.

use std::collections::BTreeMap;
use std::fmt::{self, Debug};
use std::io::Write;
use std::ops::Range;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use iceberg::io::FileIO;
use opendal::Operator;
use opendal::layers::{ConcurrentLimitLayer, RetryLayer, TimeoutLayer};
use opendal::services::S3;
use secrecy::{ExposeSecret, SecretString};

use super::{
    FileSink, FileStore, Listing, RangeRead, RemoteReader, StoreKind, StoredFile, StoredReader,
    StoredVersion, TableConfig,
};
use crate::error::{Error, Result};
use crate::io;

/// Objects up to this size are read whole by [`FileStore::open`]; larger ones by ranges.
const READ_WHOLE_MAX: u64 = 16 << 20;
/// Part size of multipart uploads (and the buffer a streaming write holds).
const PART_SIZE: usize = 16 << 20;
/// Parts uploaded at once by one streaming write.
const PART_CONCURRENCY: usize = 4;
/// Entries a listing buffers ahead of its reader.
const LISTING_AHEAD: usize = 2048;

/// How to reach a bucket. Defaults: AWS's endpoint for the region, virtual-host-style
/// addressing, the standard AWS credential chain, 16 requests at once.
#[derive(Clone)]
pub struct S3Settings {
    /// The S3 endpoint (`http://127.0.0.1:8333`); None: AWS for the region.
    pub endpoint: Option<String>,
    /// The region; None: `AWS_REGION`/`AWS_DEFAULT_REGION`, else `us-east-1`.
    pub region: Option<String>,
    /// Path-style addressing (`endpoint/bucket/key`), which most S3-compatible servers need.
    pub path_style: bool,
    /// An access key id; None: the standard AWS chain.
    pub access_key_id: Option<SecretString>,
    /// The secret access key (with `access_key_id`).
    pub secret_access_key: Option<SecretString>,
    /// A session token (temporary credentials).
    pub session_token: Option<SecretString>,
    /// Requests in flight at once (all operations of this store together).
    pub max_concurrency: usize,
    /// Timeout of one request.
    pub timeout: Duration,
}

impl Default for S3Settings {
    fn default() -> Self {
        S3Settings {
            endpoint: None,
            region: None,
            path_style: false,
            access_key_id: None,
            secret_access_key: None,
            session_token: None,
            max_concurrency: 16,
            timeout: Duration::from_secs(60),
        }
    }
}

impl Debug for S3Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("path_style", &self.path_style)
            .field(
                "access_key_id",
                &self.access_key_id.as_ref().map(|_| "[set]"),
            )
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "[set]"),
            )
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "[set]"),
            )
            .field("max_concurrency", &self.max_concurrency)
            .finish()
    }
}

impl S3Settings {
    /// The region used: the configured one, `AWS_REGION`, `AWS_DEFAULT_REGION`, `us-east-1`.
    pub fn region_or_default(&self) -> String {
        self.region
            .clone()
            .or_else(|| std::env::var("AWS_REGION").ok())
            .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
            .unwrap_or_else(|| "us-east-1".into())
    }

    /// These settings with a table's `loadTable` config laid over them (`s3.endpoint`,
    /// `s3.region`, `s3.path-style-access`, `s3.access-key-id`, `s3.secret-access-key`,
    /// `s3.session-token`, as Iceberg's S3FileIO names them).
    pub fn overlaid(&self, config: &BTreeMap<String, String>) -> S3Settings {
        let mut s = self.clone();
        if let Some(v) = config.get("s3.endpoint") {
            s.endpoint = Some(v.clone());
        }
        if let Some(v) = config
            .get("s3.region")
            .or_else(|| config.get("client.region"))
        {
            s.region = Some(v.clone());
        }
        if let Some(v) = config.get("s3.path-style-access") {
            s.path_style = v.eq_ignore_ascii_case("true");
        }
        if let (Some(k), Some(v)) = (
            config.get("s3.access-key-id"),
            config.get("s3.secret-access-key"),
        ) {
            s.access_key_id = Some(SecretString::from(k.clone()));
            s.secret_access_key = Some(SecretString::from(v.clone()));
            s.session_token = config
                .get("s3.session-token")
                .map(|t| SecretString::from(t.clone()));
        }
        s
    }

    fn operator(&self, bucket: &str) -> Result<Operator> {
        io::ensure_tls();
        let mut b = S3::default()
            .bucket(bucket)
            .root("/")
            .region(&self.region_or_default());
        if let Some(e) = &self.endpoint {
            b = b.endpoint(e);
        }
        if !self.path_style {
            b = b.enable_virtual_host_style();
        }
        if let (Some(k), Some(s)) = (&self.access_key_id, &self.secret_access_key) {
            // Not the builder's key setters: the keys would sit in its (logged) config and in
            // reqsign's static provider, whose Debug shows them.
            b = b.credential_provider_chain(reqsign_core::ProvideCredentialChain::new().push(
                io::AwsKeys {
                    access_key_id: k.clone(),
                    secret_access_key: s.clone(),
                    session_token: self.session_token.clone(),
                },
            ));
        }
        let op = Operator::new(b)
            .map_err(|e| Error::Storage(format!("s3 bucket `{bucket}`: bad settings: {e}")))?
            .layer(
                TimeoutLayer::new()
                    .with_timeout(self.timeout)
                    .with_io_timeout(self.timeout),
            )
            .layer(RetryLayer::new().with_jitter())
            .layer(ConcurrentLimitLayer::new(self.max_concurrency.max(1)))
            .finish();
        Ok(op)
    }
}

/// The shared part of an [`S3Store`]: the bucket, its operator and any vended-credential
/// operators. The iceberg FileIO holds it too.
pub(crate) struct S3Core {
    bucket: String,
    settings: S3Settings,
    op: Operator,
    /// Operators for table locations a catalog vended credentials (or another endpoint) for:
    /// (key prefix, settings' fingerprint, operator), longest prefix first.
    vended: RwLock<Vec<(String, String, Operator)>>,
}

impl Debug for S3Core {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Core")
            .field("bucket", &self.bucket)
            .field("settings", &self.settings)
            .finish()
    }
}

const NO_CREDENTIALS: &str = "no S3 credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the variables [storage] access_key_id_env / secret_access_key_env name), or configure an AWS profile or role";

/// What a failed object operation means, in words a person can act on.
fn storage_error(what: &str, location: &str, e: &opendal::Error) -> Error {
    use opendal::ErrorKind as K;
    if e.to_string().contains("failed to load signing credential") {
        return Error::Storage(format!("{what} {location}: {NO_CREDENTIALS}"));
    }
    let hint = match e.kind() {
        K::NotFound => "not found",
        K::PermissionDenied => "access denied (check the S3 credentials and the bucket's policy)",
        K::ConfigInvalid => "bad storage settings",
        K::RateLimited => "rate limited by the service",
        _ => "the request failed",
    };
    Error::Storage(format!("{what} {location}: {hint}: {e}"))
}

impl S3Core {
    /// The key of a location in this bucket, or an error naming why it doesn't match.
    pub(crate) fn key_of(&self, location: &str) -> Result<String> {
        let (scheme, rest) = location.split_once("://").ok_or_else(|| {
            Error::invalid(format!(
                "location `{location}` is not an s3:// location in bucket `{}`",
                self.bucket
            ))
        })?;
        if !matches!(scheme, "s3" | "s3a" | "s3n") {
            return Err(Error::invalid(format!(
                "location `{location}` has scheme `{scheme}`: this warehouse is in s3 bucket `{}` (s3://, s3a://, s3n://)",
                self.bucket
            )));
        }
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket != self.bucket {
            return Err(Error::invalid(format!(
                "location `{location}` is in bucket `{bucket}`, outside the warehouse's bucket `{}`",
                self.bucket
            )));
        }
        Ok(key.to_string())
    }

    fn location(&self, key: &str) -> String {
        format!("s3://{}/{}", self.bucket, key.trim_start_matches('/'))
    }

    /// The operator for a key: a vended one when its table was given one.
    pub(crate) fn op_for(&self, key: &str) -> Operator {
        if let Ok(v) = self.vended.read() {
            for (prefix, _, op) in v.iter() {
                if key.starts_with(prefix.as_str()) {
                    return op.clone();
                }
            }
        }
        self.op.clone()
    }

    pub(crate) async fn read(&self, location: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        let key = self.key_of(location)?;
        let op = self.op_for(&key);
        let r = match range {
            Some(r) => io::run(async move { op.read_with(&key).range(r).await }).await?,
            None => io::run(async move { op.read(&key).await }).await?,
        };
        r.map(|b| b.to_bytes())
            .map_err(|e| storage_error("reading", location, &e))
    }

    pub(crate) async fn size(&self, location: &str) -> Result<u64> {
        let key = self.key_of(location)?;
        let op = self.op_for(&key);
        io::run(async move { op.stat(&key).await })
            .await?
            .map(|m| m.content_length())
            .map_err(|e| storage_error("looking up", location, &e))
    }

    pub(crate) async fn exists(&self, location: &str) -> Result<bool> {
        let key = self.key_of(location)?;
        let op = self.op_for(&key);
        io::run(async move { op.exists(&key).await })
            .await?
            .map_err(|e| storage_error("looking up", location, &e))
    }

    pub(crate) async fn write(&self, location: &str, bytes: Bytes) -> Result<()> {
        let key = self.key_of(location)?;
        let op = self.op_for(&key);
        io::run(async move { op.write(&key, bytes).await })
            .await?
            .map(|_| ())
            .map_err(|e| storage_error("writing", location, &e))
    }

    pub(crate) async fn delete(&self, location: &str, version: Option<String>) -> Result<()> {
        let key = self.key_of(location)?;
        let op = self.op_for(&key);
        let r = io::run(async move {
            match version {
                Some(v) => op.delete_with(&key).version(&v).await,
                None => op.delete(&key).await,
            }
        })
        .await?;
        match r {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == opendal::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(storage_error("deleting", location, &e)),
        }
    }

    /// Checks that the bucket exists and the credentials are accepted (one small listing).
    pub(crate) fn check(&self) -> Result<()> {
        let op = self.op.clone();
        let bucket = self.bucket.clone();
        let endpoint = self
            .settings
            .endpoint
            .clone()
            .unwrap_or_else(|| "AWS".into());
        let r = io::block_on(async move {
            let mut l = op.lister_with("/").limit(1).await?;
            match l.next().await {
                Some(Err(e)) => Err(e),
                _ => Ok(()),
            }
        })?;
        r.map_err(|e| {
            let text = e.to_string();
            let what = if text.contains("failed to load signing credential") {
                return Error::Storage(format!("s3 bucket `{bucket}` at {endpoint}: {NO_CREDENTIALS}"));
            } else if text.contains("NoSuchBucket") {
                format!("s3 bucket `{bucket}` does not exist at {endpoint}")
            } else if text.contains("InvalidAccessKeyId")
                || text.contains("SignatureDoesNotMatch")
                || e.kind() == opendal::ErrorKind::PermissionDenied
            {
                format!(
                    "s3 at {endpoint} refused the credentials for bucket `{bucket}` (check the access key id and secret)"
                )
            } else {
                format!("can't reach s3 bucket `{bucket}` at {endpoint}")
            };
            Error::Storage(format!("{what}: {e}"))
        })
    }

    /// Streams a listing from the I/O runtime through a bounded channel.
    fn stream<T: Send + 'static>(
        &self,
        prefix: &str,
        versions: bool,
        map: impl Fn(&S3Core, opendal::Entry) -> Option<T> + Send + Sync + 'static,
        core: Arc<S3Core>,
    ) -> Result<Listing<'static, T>> {
        let key = self.key_of(prefix)?;
        let dir = if key.is_empty() {
            "/".to_string()
        } else if key.ends_with('/') {
            key
        } else {
            format!("{key}/")
        };
        let op = self.op_for(&dir);
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<T>>(LISTING_AHEAD);
        let location = prefix.to_string();
        io::spawn(async move {
            let lister = if versions {
                op.lister_with(&dir)
                    .recursive(true)
                    .versions(true)
                    .deleted(true)
                    .await
            } else {
                op.lister_with(&dir).recursive(true).await
            };
            let mut lister = match lister {
                Ok(l) => l,
                Err(e) => {
                    let _ = tx.send(Err(storage_error("listing", &location, &e))).await;
                    return;
                }
            };
            while let Some(item) = lister.next().await {
                let out = match item {
                    Ok(entry) => match map(&core, entry) {
                        Some(v) => Ok(v),
                        None => continue,
                    },
                    Err(e) => Err(storage_error("listing", &location, &e)),
                };
                let stop = out.is_err();
                if tx.send(out).await.is_err() || stop {
                    return;
                }
            }
        });
        Ok(Box::new(ChannelIter { rx }))
    }
}

struct ChannelIter<T> {
    rx: tokio::sync::mpsc::Receiver<Result<T>>,
}

impl<T> Iterator for ChannelIter<T> {
    type Item = Result<T>;
    fn next(&mut self) -> Option<Result<T>> {
        // Unconstrained: called from inside a Tokio task, a budgeted `recv` would keep
        // answering Pending once the task's budget is spent (it is never reset here).
        futures::executor::block_on(tokio::task::unconstrained(self.rx.recv()))
    }
}

/// A listed version as lethe sees it. A listing that doesn't say whether the version is the
/// latest leaves `current` unknown (None), never current: the proof scan then reads it.
fn stored_version(location: String, meta: &opendal::Metadata) -> StoredVersion {
    StoredVersion {
        location,
        version: meta.version().unwrap_or("null").to_string(),
        current: meta.is_current(),
        delete_marker: meta.is_deleted(),
        size: if meta.is_deleted() {
            0
        } else {
            meta.content_length()
        },
        modified: modified(meta),
    }
}

fn modified(meta: &opendal::Metadata) -> DateTime<Utc> {
    meta.last_modified()
        .map(|t| DateTime::<Utc>::from(std::time::SystemTime::from(t)))
        .unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}

/// An S3 bucket (or a prefix of one) holding a warehouse.
#[derive(Clone)]
pub struct S3Store {
    core: Arc<S3Core>,
    file_io: FileIO,
}

impl Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store").field("core", &self.core).finish()
    }
}

impl S3Store {
    /// A store for `bucket`. Nothing is requested until [`S3Store::check`] or the first
    /// operation.
    pub fn new(bucket: &str, settings: S3Settings) -> Result<S3Store> {
        if bucket.is_empty() || bucket.contains('/') {
            return Err(Error::invalid(format!(
                "`{bucket}` is not an S3 bucket name"
            )));
        }
        let op = settings.operator(bucket)?;
        let core = Arc::new(S3Core {
            bucket: bucket.to_string(),
            settings,
            op,
            vended: RwLock::new(Vec::new()),
        });
        let file_io = super::iceberg_io::file_io(core.clone());
        Ok(S3Store { core, file_io })
    }

    /// The store for an `s3://bucket/prefix` warehouse location.
    pub fn for_location(location: &str, settings: S3Settings) -> Result<S3Store> {
        let bucket = bucket_of(location)?;
        S3Store::new(&bucket, settings)
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.core.bucket
    }

    /// Checks that the bucket exists and accepts the credentials; the error says which failed.
    pub fn check(&self) -> Result<()> {
        self.core.check()
    }
}

/// The bucket of an `s3://`, `s3a://` or `s3n://` location.
pub fn bucket_of(location: &str) -> Result<String> {
    let rest = ["s3://", "s3a://", "s3n://"]
        .iter()
        .find_map(|p| location.strip_prefix(p))
        .ok_or_else(|| {
            Error::invalid(format!(
                "`{location}` is not an S3 location (s3://bucket/prefix)"
            ))
        })?;
    let bucket = rest.split('/').next().unwrap_or_default();
    if bucket.is_empty() {
        return Err(Error::invalid(format!(
            "`{location}` names no bucket (s3://bucket/prefix)"
        )));
    }
    Ok(bucket.to_string())
}

#[derive(Debug)]
struct S3Range {
    core: Arc<S3Core>,
    key: String,
    location: String,
    version: Option<String>,
}

impl RangeRead for S3Range {
    fn read_range(&self, range: Range<u64>) -> std::io::Result<Bytes> {
        let op = self.core.op_for(&self.key);
        let key = self.key.clone();
        let version = self.version.clone();
        let r = io::block_on(async move {
            match version {
                Some(v) => op.read_with(&key).range(range).version(&v).await,
                None => op.read_with(&key).range(range).await,
            }
        })
        .map_err(std::io::Error::other)?;
        r.map(|b| b.to_bytes()).map_err(|e| {
            std::io::Error::other(storage_error("reading", &self.location, &e).to_string())
        })
    }
}

struct S3Sink {
    core: Arc<S3Core>,
    key: String,
    location: String,
    buf: Vec<u8>,
    writer: Option<opendal::Writer>,
    written: u64,
    finished: bool,
}

impl S3Sink {
    /// Uploads the buffer as a part (starting the multipart upload on the first one).
    fn flush_part(&mut self) -> Result<()> {
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        let writer = self.writer.take();
        let op = self.core.op_for(&self.key);
        let key = self.key.clone();
        let (w, r) = io::block_on(async move {
            let mut w = match writer {
                Some(w) => w,
                None => match op
                    .writer_with(&key)
                    .chunk(PART_SIZE)
                    .concurrent(PART_CONCURRENCY)
                    .await
                {
                    Ok(w) => w,
                    Err(e) => return (None, Err(e)),
                },
            };
            let r = w.write(chunk).await;
            (Some(w), r)
        })?;
        self.writer = w;
        r.map_err(|e| storage_error("writing", &self.location, &e))
    }
}

impl Write for S3Sink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.finished {
            return Err(std::io::Error::other("write after finish"));
        }
        self.buf.extend_from_slice(data);
        self.written += data.len() as u64;
        if self.buf.len() >= PART_SIZE {
            self.flush_part()
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl FileSink for S3Sink {
    fn finish(&mut self) -> Result<u64> {
        if self.finished {
            return Ok(self.written);
        }
        self.finished = true;
        match self.writer.take() {
            None => {
                let bytes = Bytes::from(std::mem::take(&mut self.buf));
                io::block_on({
                    let core = self.core.clone();
                    let location = self.location.clone();
                    async move { core.write(&location, bytes).await }
                })??;
            }
            Some(w) => {
                self.writer = Some(w);
                if !self.buf.is_empty() {
                    self.flush_part()?;
                }
                let mut w = self
                    .writer
                    .take()
                    .ok_or_else(|| Error::Internal("multipart writer lost".into()))?;
                io::block_on(async move { w.close().await })?
                    .map_err(|e| storage_error("writing", &self.location, &e))?;
            }
        }
        Ok(self.written)
    }
}

impl Drop for S3Sink {
    fn drop(&mut self) {
        // An unfinished multipart upload is aborted, so it leaves no parts behind.
        if let Some(mut w) = self.writer.take() {
            let _ = io::block_on(async move { w.abort().await });
        }
    }
}

impl FileStore for S3Store {
    fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    fn kind(&self) -> StoreKind {
        StoreKind::Object {
            description: format!(
                "s3 bucket {} at {}",
                self.core.bucket,
                self.core
                    .settings
                    .endpoint
                    .clone()
                    .unwrap_or_else(|| "AWS".into())
            ),
        }
    }

    fn normalize(&self, location: &str) -> Result<String> {
        let key = self.core.key_of(location)?;
        Ok(self.core.location(&key))
    }

    fn local_path(&self, location: &str) -> Result<std::path::PathBuf> {
        Err(Error::invalid(format!(
            "{location} is in object storage, not a local file"
        )))
    }

    fn list(&self, prefix: &str) -> Result<Listing<'_, StoredFile>> {
        self.core.stream(
            prefix,
            false,
            |core, e| {
                let meta = e.metadata();
                if meta.is_dir() || e.path().ends_with('/') {
                    return None;
                }
                Some(StoredFile {
                    location: core.location(e.path()),
                    size: meta.content_length(),
                    modified: modified(meta),
                })
            },
            self.core.clone(),
        )
    }

    fn list_versions(&self, prefix: &str) -> Result<Listing<'_, StoredVersion>> {
        self.core.stream(
            prefix,
            true,
            |core, e| {
                if e.metadata().is_dir() || e.path().ends_with('/') {
                    return None;
                }
                Some(stored_version(core.location(e.path()), e.metadata()))
            },
            self.core.clone(),
        )
    }

    fn read(&self, location: &str) -> Result<Bytes> {
        let core = self.core.clone();
        let location = location.to_string();
        io::block_on(async move { core.read(&location, None).await })?
    }

    fn open(&self, location: &str) -> Result<StoredReader> {
        let core = self.core.clone();
        let loc = location.to_string();
        let size = io::block_on(async move { core.size(&loc).await })??;
        self.open_listed(location, size)
    }

    fn open_listed(&self, location: &str, size: u64) -> Result<StoredReader> {
        if size == 0 {
            // Nothing to fetch (and `key_of` still refuses a location outside the bucket).
            self.core.key_of(location)?;
            return Ok(StoredReader::Bytes(Bytes::new()));
        }
        if size <= READ_WHOLE_MAX {
            return Ok(StoredReader::Bytes(self.read(location)?));
        }
        Ok(StoredReader::Remote(RemoteReader::new(
            size,
            Arc::new(S3Range {
                core: self.core.clone(),
                key: self.core.key_of(location)?,
                location: location.to_string(),
                version: None,
            }),
        )))
    }

    fn open_version(&self, location: &str, version: &str) -> Result<StoredReader> {
        let key = self.core.key_of(location)?;
        let op = self.core.op_for(&key);
        let (k, v) = (key.clone(), version.to_string());
        let size = io::block_on(async move { op.stat_with(&k).version(&v).await })?
            .map(|m| m.content_length())
            .map_err(|e| storage_error("looking up", location, &e))?;
        let range = Arc::new(S3Range {
            core: self.core.clone(),
            key,
            location: location.to_string(),
            version: Some(version.to_string()),
        });
        if size <= READ_WHOLE_MAX {
            let bytes = if size == 0 {
                Bytes::new()
            } else {
                range
                    .read_range(0..size)
                    .map_err(|e| Error::io(location, e))?
            };
            return Ok(StoredReader::Bytes(bytes));
        }
        Ok(StoredReader::Remote(RemoteReader::new(size, range)))
    }

    fn write_new(&self, location: &str, bytes: &[u8]) -> Result<()> {
        if self.exists(location)? {
            return Err(Error::invalid(format!("{location} already exists")));
        }
        let core = self.core.clone();
        let loc = location.to_string();
        let bytes = Bytes::copy_from_slice(bytes);
        io::block_on(async move { core.write(&loc, bytes).await })?
    }

    fn create(&self, location: &str) -> Result<Box<dyn FileSink>> {
        if self.exists(location)? {
            return Err(Error::invalid(format!("{location} already exists")));
        }
        Ok(Box::new(S3Sink {
            core: self.core.clone(),
            key: self.core.key_of(location)?,
            location: location.to_string(),
            buf: Vec::new(),
            writer: None,
            written: 0,
            finished: false,
        }))
    }

    fn delete(&self, location: &str) -> Result<()> {
        let core = self.core.clone();
        let loc = location.to_string();
        io::block_on(async move { core.delete(&loc, None).await })?
    }

    fn delete_version(&self, location: &str, version: &str) -> Result<()> {
        let core = self.core.clone();
        let loc = location.to_string();
        let v = version.to_string();
        io::block_on(async move { core.delete(&loc, Some(v)).await })?
    }

    fn current_version(&self, location: &str) -> Result<Option<String>> {
        let key = self.core.key_of(location)?;
        let op = self.core.op_for(&key);
        let loc = location.to_string();
        io::block_on(async move {
            match op.stat(&key).await {
                Ok(m) => Ok(m.version().map(str::to_string)),
                Err(e) if e.kind() == opendal::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(storage_error("looking up", &loc, &e)),
            }
        })?
    }

    fn exists(&self, location: &str) -> Result<bool> {
        let core = self.core.clone();
        let loc = location.to_string();
        io::block_on(async move { core.exists(&loc).await })?
    }

    fn use_table_config(&self, table_location: &str, config: &TableConfig) -> Result<()> {
        let Ok(table_key) = self.core.key_of(table_location) else {
            return Ok(());
        };
        let mut wanted: Vec<(String, BTreeMap<String, String>)> = Vec::new();
        // Prefix credentials first (longest wins), then the table-wide config.
        let mut prefixed: Vec<&(String, BTreeMap<String, String>)> =
            config.credentials.iter().collect();
        prefixed.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        for (prefix, c) in prefixed {
            if let Ok(k) = self.core.key_of(prefix) {
                let mut merged = config.config.clone();
                merged.extend(c.clone());
                wanted.push((k, merged));
            }
        }
        wanted.push((
            format!("{}/", table_key.trim_end_matches('/')),
            config.config.clone(),
        ));
        for (prefix, c) in wanted {
            let settings = self.core.settings.overlaid(&c);
            let fingerprint = fingerprint(&settings);
            if fingerprint == self::fingerprint(&self.core.settings) {
                continue;
            }
            let mut v = self
                .core
                .vended
                .write()
                .map_err(|_| Error::Internal("vended credentials lock poisoned".into()))?;
            if v.iter().any(|(p, f, _)| *p == prefix && *f == fingerprint) {
                continue;
            }
            let op = settings.operator(&self.core.bucket)?;
            v.retain(|(p, _, _)| *p != prefix);
            v.push((prefix, fingerprint, op));
            v.sort_by_key(|(p, _, _)| std::cmp::Reverse(p.len()));
        }
        Ok(())
    }
}

/// A comparable digest of settings (a hash, so no secret is kept in clear beside them).
fn fingerprint(s: &S3Settings) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [
        s.endpoint.clone().unwrap_or_default(),
        s.region.clone().unwrap_or_default(),
        s.path_style.to_string(),
        s.access_key_id
            .as_ref()
            .map(|v| v.expose_secret().to_string())
            .unwrap_or_default(),
        s.secret_access_key
            .as_ref()
            .map(|v| v.expose_secret().to_string())
            .unwrap_or_default(),
        s.session_token
            .as_ref()
            .map(|v| v.expose_secret().to_string())
            .unwrap_or_default(),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> S3Store {
        S3Store::new(
            "wh",
            S3Settings {
                endpoint: Some("http://127.0.0.1:1".into()),
                path_style: true,
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn s3_schemes_in_the_bucket_normalise_to_one_location() {
        let s = store();
        for form in [
            "s3://wh/a/b.parquet",
            "s3a://wh/a/b.parquet",
            "s3n://wh/a/b.parquet",
        ] {
            assert_eq!(s.normalize(form).unwrap(), "s3://wh/a/b.parquet", "{form}");
        }
    }

    #[test]
    fn other_buckets_and_schemes_are_refused() {
        let s = store();
        for form in [
            "s3://other/a.parquet",
            "gs://wh/a.parquet",
            "file:///wh/a.parquet",
            "/wh/a.parquet",
            "wh/a.parquet",
        ] {
            assert!(s.normalize(form).is_err(), "{form}");
        }
        let e = s.normalize("s3://other/a").unwrap_err().to_string();
        assert!(e.contains("outside the warehouse's bucket `wh`"), "{e}");
    }

    #[test]
    fn debug_shows_no_secret() {
        let settings = S3Settings {
            access_key_id: Some(SecretString::from("AKIDSECRETVALUE")),
            secret_access_key: Some(SecretString::from("s3cr3t-value")),
            ..Default::default()
        };
        let text = format!("{settings:?}");
        assert!(
            !text.contains("AKIDSECRETVALUE") && !text.contains("s3cr3t-value"),
            "{text}"
        );
        let s = S3Store::new("wh", settings).unwrap();
        let text = format!("{s:?}");
        assert!(!text.contains("s3cr3t-value"), "{text}");
        let mut c = TableConfig::default();
        c.config
            .insert("s3.secret-access-key".into(), "vended-secret".into());
        assert!(!format!("{c:?}").contains("vended-secret"));
    }

    /// Regression (issue 44 item 2): a version the listing gives without an "is latest" flag
    /// was taken as current, so the proof scan skipped it.
    #[test]
    fn a_version_with_no_latest_flag_may_be_noncurrent() {
        let unsaid = opendal::Metadata::new(opendal::EntryMode::FILE).with_version("v1".into());
        let v = stored_version("s3://wh/t/data/a.parquet".into(), &unsaid);
        assert_eq!(v.current, None);
        assert!(!v.is_current() && v.may_be_noncurrent());
        let mut latest = opendal::Metadata::new(opendal::EntryMode::FILE);
        latest.set_version("v2");
        latest.set_is_current(true);
        assert!(stored_version("s3://wh/t/data/a.parquet".into(), &latest).is_current());
        let mut older = opendal::Metadata::new(opendal::EntryMode::FILE);
        older.set_is_current(false);
        let v = stored_version("s3://wh/t/data/a.parquet".into(), &older);
        assert_eq!((v.current, v.version.as_str()), (Some(false), "null"));
    }

    #[test]
    fn vended_credentials_take_over_their_prefix_only() {
        let s = store();
        let mut c = TableConfig::default();
        c.config.insert("s3.access-key-id".into(), "k".into());
        c.config.insert("s3.secret-access-key".into(), "v".into());
        s.use_table_config("s3://wh/ns/t", &c).unwrap();
        let v = s.core.vended.read().unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].0, "ns/t/");
        drop(v);
        // The same config again changes nothing; a config equal to the store's own is ignored.
        s.use_table_config("s3://wh/ns/t", &c).unwrap();
        s.use_table_config("s3://wh/ns/u", &TableConfig::default())
            .unwrap();
        assert_eq!(s.core.vended.read().unwrap().len(), 1);
        assert_eq!(bucket_of("s3a://b/x/y").unwrap(), "b");
        assert!(bucket_of("s3://").is_err());
    }
}
