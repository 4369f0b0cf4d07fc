//! `lethe.toml`: which catalog lethe works on, where its files are, and where its reviewed
//! files live.
//!
//! ```toml
//! [catalog]
//! kind = "sql"                 # sql: the Iceberg SQL catalog (SQLite or PostgreSQL); rest
//! name = "lethe"               # the catalog_name column in iceberg_tables
//! uri = "sqlite:catalog.db"    # relative paths are relative to this file
//! warehouse = "warehouse"      # a folder, file:///absolute/path, or s3://bucket/prefix
//!
//! # kind = "sql", uri = "postgresql://lethe@db.internal:5432/lakehouse": the password comes
//! #   from $PGPASSWORD, or password_env / password_file; never from the URI.
//! # kind = "rest", uri = "https://catalog.internal", warehouse = "s3://warehouse": auth is
//! #   OAuth2 client credentials `id:secret` from $LETHE_REST_CREDENTIAL (credential_env /
//! #   credential_file), a bearer token from $LETHE_REST_TOKEN (token_env / token_file), or
//! #   sigv4 = true (signing_name, signing_region; keys as for [storage]).
//!
//! [storage]                    # object storage, when the warehouse is s3://
//! endpoint = "http://127.0.0.1:8333"   # default: AWS
//! region = "us-east-1"
//! path_style = true            # most S3-compatible servers need it
//! # keys: $AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY (access_key_id_env ...), else the AWS chain
//! purge_versions = false       # on a versioned bucket, the erasure deletes old versions by id
//! reclaim = "SeaweedFS compacts a volume once 30% of it is garbage"   # stated in attestations
//! reclaim_days = 1             # ... with the date by which space is reclaimed
//!
//! [storage.encryption]         # optional: encrypted Parquet files the proof scan decrypts
//! keys_file = "parquet-keys.txt"  # master keys `id:base64key` per line (mode 0600);
//! #   else $LETHE_PARQUET_KEYS (the list) or $LETHE_PARQUET_KEYS_FILE
//!
//! [paths]                      # all optional, these are the defaults
//! governance = "governance"
//! pipelines = "pipelines"
//! lineage = "lineage"
//! state = "state"
//!
//! [scan]
//! roots = ["raw"]              # folders outside the warehouse that the proof scan also reads
//!
//! [tables_outside_warehouse]   # optional: tables lethe may change although their location
//! "legacy.events" = "file:///data/old/legacy.db/events"   # is outside the warehouse
//!
//! [engine]                     # optional: where the scan's and erasures' per-file work runs
//! kind = "ballista"            # "local" (the default: this process) or "ballista"
//! scheduler = "127.0.0.1:50050"  # the Ballista scheduler (`lethe scheduler`)
//! task_mib = 64                # scan tasks of at most this many MiB of files
//! task_objects = 256           # ... and this many files
//! secret_file = "cluster.secret"  # the cluster's secret (mode 0600; else LETHE_CLUSTER_SECRET)
//! tls_ca = "cluster-ca.pem"    # TLS to the cluster, its certificates checked against this CA
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::tomlfile;

/// The file name lethe looks for in the working directory.
pub const CONFIG_FILE: &str = "lethe.toml";

/// The parsed `lethe.toml`, with every path resolved against the file's folder.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file this came from.
    pub file: PathBuf,
    /// The folder holding the file; relative paths are resolved against it.
    pub root: PathBuf,
    /// The catalog.
    pub catalog: CatalogConfig,
    /// Folders.
    pub paths: Paths,
    /// Extra roots for the proof scan.
    pub scan_roots: Vec<PathBuf>,
    /// Object storage settings.
    pub storage: StorageConfig,
    /// Where the heavy per-file work runs (`[engine]`).
    pub engine: EngineConfig,
    /// `[tables_outside_warehouse]`: tables lethe may change (erase, expire, sweep) although
    /// their location is outside the warehouse, each with the location it must have, as a
    /// location URI (`file:///...` or `s3://...`). Every other table outside the warehouse is
    /// refused: a workspace copied with its catalog (`cp -a demo copy`) still names the
    /// original's files, and must not change them.
    pub tables_outside_warehouse: Vec<(String, String)>,
}

/// Which engine runs the per-file work of scans and erasures' rewrites.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EngineKind {
    /// This process.
    #[default]
    Local,
    /// A DataFusion Ballista cluster whose executors carry lethe's operators.
    Ballista,
}

impl EngineKind {
    /// Parses `local` or `ballista`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "local" => Some(EngineKind::Local),
            "ballista" => Some(EngineKind::Ballista),
            _ => None,
        }
    }
}

/// The `[engine]` section. Defaults: the local engine; scan tasks of 64 MiB or 256 files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineConfig {
    /// The engine.
    pub kind: EngineKind,
    /// The Ballista scheduler, `HOST:PORT`.
    pub scheduler: Option<String>,
    /// MiB of files per scan task at most.
    pub task_mib: Option<u64>,
    /// Files per scan task at most.
    pub task_objects: Option<usize>,
    /// The file holding the cluster's shared secret (relative paths from lethe.toml's folder).
    pub secret_file: Option<PathBuf>,
    /// The CA file the cluster's TLS certificates are checked against (None: clear).
    pub tls_ca: Option<PathBuf>,
}

/// The catalog section.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    /// `sql` (the Iceberg SQL catalog, on SQLite or PostgreSQL by `uri`) or `rest`.
    pub kind: String,
    /// The catalog's name (`catalog_name` in `iceberg_tables`).
    pub name: String,
    /// sql: `sqlite:PATH` or `sqlite:///PATH` (relative to lethe.toml), `sqlite:////ABSOLUTE`,
    /// or `postgresql://user@host:port/database`; rest: the catalog's `http(s)://` base URI.
    pub uri: String,
    /// The warehouse: a folder (relative to lethe.toml), `file:///...`, or `s3://bucket/prefix`;
    /// for rest, the warehouse asked for in `/v1/config`.
    pub warehouse: String,
    /// PostgreSQL: the environment variable holding the password (default `PGPASSWORD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    /// PostgreSQL: a file holding the password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_file: Option<String>,
    /// rest: the variable holding OAuth2 client credentials `id:secret` (default
    /// `LETHE_REST_CREDENTIAL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_env: Option<String>,
    /// rest: a file holding OAuth2 client credentials `id:secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_file: Option<String>,
    /// rest: the variable holding a bearer token (default `LETHE_REST_TOKEN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// rest: a file holding a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<String>,
    /// rest: the OAuth2 token endpoint (default `{uri}/v1/oauth/tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth2_server_uri: Option<String>,
    /// rest: the OAuth2 scope (default `catalog`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// rest: sign requests with AWS SigV4 instead of OAuth2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigv4: Option<bool>,
    /// rest: the SigV4 signing name (default `s3tables`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_name: Option<String>,
    /// rest: the SigV4 signing region (default: [storage] region, else `us-east-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_region: Option<String>,
    /// rest: the `X-Iceberg-Access-Delegation` header to send (e.g. `vended-credentials`;
    /// default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_delegation: Option<String>,
    /// rest: seconds one request may take (default 60); a commit past it has an unknown outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// The `[storage]` section: object storage (all optional).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// Where the warehouse's files are, when the catalog's `warehouse` is not a location (a REST
    /// catalog's warehouse name): `s3://bucket/prefix`. Default: the catalog's `warehouse`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// The S3 endpoint; default: AWS for the region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The region; default `$AWS_REGION`, else `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Path-style addressing (default false, as AWS; most S3-compatible servers need true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_style: Option<bool>,
    /// The variable holding the access key id (default `AWS_ACCESS_KEY_ID`; unset: the AWS chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id_env: Option<String>,
    /// The variable holding the secret access key (default `AWS_SECRET_ACCESS_KEY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key_env: Option<String>,
    /// The variable holding a session token (default `AWS_SESSION_TOKEN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token_env: Option<String>,
    /// Requests in flight at once (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<usize>,
    /// On a versioned bucket, erasures delete the noncurrent versions (and delete markers)
    /// under the tables they changed, by version id (default false: physical purge PENDING).
    #[serde(default)]
    pub purge_versions: bool,
    /// How the storage service reclaims the space of deleted objects, stated in attestations
    /// ("SeaweedFS compacts a volume once 30% of it is garbage").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim: Option<String>,
    /// Days after an erasure by which the space is reclaimed (a vendor's fail-safe window);
    /// the attestation states the date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_days: Option<u32>,
    /// `[storage.encryption]`: master keys for encrypted Parquet files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<EncryptionConfig>,
}

/// The `[storage.encryption]` section: where the master keys of Parquet modular encryption
/// are, so that the proof scan reads encrypted Parquet files (see [`crate::keys::parquet_keys`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EncryptionConfig {
    /// A file of master keys, `id:base64key` per line (mode 0600), relative to `lethe.toml`'s
    /// folder; `$LETHE_PARQUET_KEYS` (the list itself) or `$LETHE_PARQUET_KEYS_FILE` win over it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_file: Option<String>,
}

/// Where the warehouse's files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WarehouseLocation {
    /// A local folder.
    Local(PathBuf),
    /// Object storage: `s3://bucket/prefix` (no trailing slash).
    Object(String),
}

impl WarehouseLocation {
    /// As a location URI (`file:///...` or `s3://...`).
    pub fn uri(&self) -> String {
        match self {
            WarehouseLocation::Local(p) => format!("file://{}", p.display()),
            WarehouseLocation::Object(s) => s.clone(),
        }
    }
}

/// Folders lethe reads and writes, resolved to absolute paths.
#[derive(Debug, Clone)]
pub struct Paths {
    /// Reviewed governance files (metadata, retention, subjects, policy).
    pub governance: PathBuf,
    /// SQL pipelines.
    pub pipelines: PathBuf,
    /// OpenLineage events.
    pub lineage: PathBuf,
    /// lethe's own state: journals, case files, register, audit log.
    pub state: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    catalog: CatalogConfig,
    #[serde(default)]
    paths: RawPaths,
    #[serde(default)]
    scan: RawScan,
    #[serde(default)]
    engine: RawEngine,
    /// Gone: places outside the warehouse are stores in governance/stores.toml now.
    #[serde(default)]
    residuals: Option<toml::Value>,
    #[serde(default)]
    storage: StorageConfig,
    #[serde(default)]
    tables_outside_warehouse: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPaths {
    governance: Option<String>,
    pipelines: Option<String>,
    lineage: Option<String>,
    state: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEngine {
    kind: Option<String>,
    scheduler: Option<String>,
    task_mib: Option<u64>,
    task_objects: Option<usize>,
    secret_file: Option<String>,
    tls_ca: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScan {
    #[serde(default)]
    roots: Vec<String>,
}

impl Config {
    /// Finds `lethe.toml`: the given path, or the working directory's.
    pub fn discover(explicit: Option<&Path>) -> Result<Config> {
        let file = match explicit {
            Some(p) => p.to_path_buf(),
            None => std::env::current_dir()
                .map_err(|e| Error::io(".", e))?
                .join(CONFIG_FILE),
        };
        if !file.exists() {
            return Err(Error::invalid(format!(
                "no {} at {}: run `lethe demo init` or `lethe init`, or pass --config",
                CONFIG_FILE,
                file.display()
            )));
        }
        Config::load(&file)
    }

    /// Reads and validates a `lethe.toml`.
    pub fn load(file: &Path) -> Result<Config> {
        let file = absolute(file)?;
        let text =
            std::fs::read_to_string(&file).map_err(|e| Error::io(file.display().to_string(), e))?;
        Config::from_text(&file, &text)
    }

    /// Validates the text of a `lethe.toml` that is (or will be) at `file`.
    pub fn from_text(file: &Path, text: &str) -> Result<Config> {
        let file = absolute(file)?;
        let parsed = tomlfile::TomlFile {
            path: file.clone(),
            text: text.to_string(),
            value: tomlfile::parse::<RawConfig>(&file, text)?,
        };
        let root = file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let raw = &parsed.value;
        if raw.residuals.is_some() {
            return Err(parsed.error_at(
                "residuals",
                "[[residuals]] moved to governance/stores.toml: register each place as a store with probe = \"none\" and its basis, expires and control (e.g. [stores.backups] kind = \"backup\")",
            ));
        }
        let c = &raw.catalog;
        if c.name.trim().is_empty() {
            return Err(parsed.error_at("catalog.name", "must not be empty"));
        }
        match c.kind.as_str() {
            "sql" => {
                if sqlite_path(&root, &c.uri).is_none() && !is_postgres_uri(&c.uri) {
                    return Err(parsed.error_at(
                        "catalog.uri",
                        format!(
                            "`{}` is not a SQL catalog URI: use sqlite:PATH (relative to lethe.toml), sqlite:////ABSOLUTE or postgresql://user@host:port/database",
                            redact_uri(&c.uri)
                        ),
                    ));
                }
                if is_postgres_uri(&c.uri) && uri_has_password(&c.uri) {
                    return Err(parsed.error_at(
                        "catalog.uri",
                        "the URI carries a password: remove it and set PGPASSWORD (or password_env / password_file), so it never sits in lethe.toml",
                    ));
                }
            }
            "rest" => {
                if !(c.uri.starts_with("http://") || c.uri.starts_with("https://")) {
                    return Err(parsed.error_at(
                        "catalog.uri",
                        format!(
                            "`{}` is not a REST catalog URI: use http(s)://host:port",
                            redact_uri(&c.uri)
                        ),
                    ));
                }
                if uri_has_password(&c.uri) {
                    return Err(parsed.error_at(
                        "catalog.uri",
                        "the URI carries a password: give credentials through credential_env or token_env",
                    ));
                }
            }
            other => {
                return Err(parsed.error_at(
                    "catalog.kind",
                    format!(
                        "unknown catalog kind `{other}`: use `sql` (SQLite or PostgreSQL) or `rest`"
                    ),
                ));
            }
        }
        let location_key = if raw.storage.root.is_some() {
            "storage.root"
        } else {
            "catalog.warehouse"
        };
        let location_text = raw
            .storage
            .root
            .clone()
            .unwrap_or_else(|| c.warehouse.clone());
        match warehouse_location(&root, &location_text) {
            Some(WarehouseLocation::Local(_)) if c.kind == "rest" && raw.storage.root.is_none() => {
                return Err(parsed.error_at(
                    "catalog.warehouse",
                    format!(
                        "`{}`: a REST catalog's tables are in object storage: give its warehouse as s3://bucket (or set [storage] root)",
                        c.warehouse
                    ),
                ));
            }
            Some(_) => {}
            None => {
                return Err(parsed.error_at(
                    location_key,
                    format!(
                        "`{location_text}` is not a warehouse location: use a folder, file:///ABSOLUTE or s3://bucket/prefix"
                    ),
                ));
            }
        }
        if let Some(e) = &raw.storage.endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            return Err(parsed.error_at(
                "storage.endpoint",
                format!("`{e}` is not an endpoint URL: use http(s)://host:port"),
            ));
        }
        let engine = &raw.engine;
        let kind = match engine.kind.as_deref() {
            None => EngineKind::Local,
            Some(k) => EngineKind::parse(k).ok_or_else(|| {
                parsed.error_at(
                    "engine.kind",
                    format!("unknown engine `{k}`: use \"local\" or \"ballista\""),
                )
            })?,
        };
        if kind == EngineKind::Ballista && engine.scheduler.is_none() {
            return Err(parsed.error_at(
                "engine.kind",
                "the ballista engine needs its scheduler: add scheduler = \"HOST:PORT\" to [engine]",
            ));
        }
        check_numbers(&parsed)?;
        let tables_outside_warehouse = outside_warehouse(&parsed, &root)?;
        let resolve =
            |p: &Option<String>, default: &str| root.join(p.as_deref().unwrap_or(default));
        let paths = Paths {
            governance: resolve(&raw.paths.governance, "governance"),
            pipelines: resolve(&raw.paths.pipelines, "pipelines"),
            lineage: resolve(&raw.paths.lineage, "lineage"),
            state: resolve(&raw.paths.state, "state"),
        };
        Ok(Config {
            catalog: raw.catalog.clone(),
            scan_roots: raw.scan.roots.iter().map(|r| root.join(r)).collect(),
            storage: raw.storage.clone(),
            engine: EngineConfig {
                kind,
                scheduler: engine.scheduler.clone(),
                task_mib: engine.task_mib,
                task_objects: engine.task_objects,
                secret_file: engine.secret_file.as_ref().map(|p| root.join(p)),
                tls_ca: engine.tls_ca.as_ref().map(|p| root.join(p)),
            },
            file: file.clone(),
            root,
            paths,
            tables_outside_warehouse,
        })
    }

    /// The SQLite database file of the catalog (None for PostgreSQL and REST catalogs).
    pub fn catalog_db(&self) -> Option<PathBuf> {
        if self.catalog.kind != "sql" {
            return None;
        }
        sqlite_path(&self.root, &self.catalog.uri)
    }

    /// Where the warehouse's files are.
    pub fn warehouse_location(&self) -> WarehouseLocation {
        let text = self
            .storage
            .root
            .clone()
            .unwrap_or_else(|| self.catalog.warehouse.clone());
        warehouse_location(&self.root, &text)
            .unwrap_or_else(|| WarehouseLocation::Local(self.root.join("warehouse")))
    }

    /// The warehouse folder, when the warehouse is local.
    pub fn warehouse_dir(&self) -> Option<PathBuf> {
        match self.warehouse_location() {
            WarehouseLocation::Local(p) => Some(p),
            WarehouseLocation::Object(_) => None,
        }
    }

    /// Renders a `lethe.toml` for an embedded SQLite catalog and a local warehouse (used by
    /// `demo init` and `init`).
    pub fn render(name: &str, uri: &str, warehouse: &str, scan_roots: &[&str]) -> String {
        let catalog = CatalogConfig {
            kind: "sql".into(),
            name: name.into(),
            uri: uri.into(),
            warehouse: warehouse.into(),
            ..Default::default()
        };
        Config::render_with(&catalog, &StorageConfig::default(), scan_roots)
    }

    /// Renders a `lethe.toml` for any catalog and storage.
    pub fn render_with(
        catalog: &CatalogConfig,
        storage: &StorageConfig,
        scan_roots: &[&str],
    ) -> String {
        let roots = scan_roots
            .iter()
            .map(|r| format!("{r:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let what = match (catalog.kind.as_str(), is_postgres_uri(&catalog.uri)) {
            ("rest", _) => "an Iceberg REST catalog",
            (_, true) => {
                "the Iceberg SQL catalog on PostgreSQL, as PyIceberg's SqlCatalog and Java's JdbcCatalog"
            }
            _ => "the embedded Iceberg SQL catalog (SQLite), as PyIceberg's SqlCatalog",
        };
        let mut out = format!(
            "# lethe's configuration: the catalog it works on and where its reviewed files live.\n\
             [catalog]\n\
             kind = {:?}                 # {what}\n",
            catalog.kind
        );
        let table = toml::to_string(&WithoutKind(catalog)).unwrap_or_default();
        out.push_str(&table);
        let storage_text = toml::to_string(storage).unwrap_or_default();
        if storage != &StorageConfig::default() {
            out.push_str("\n[storage]                    # object storage; keys come from the environment, never this file\n");
            out.push_str(&storage_text);
        }
        out.push_str(&format!(
            "\n[paths]\n\
             governance = \"governance\"\n\
             pipelines = \"pipelines\"\n\
             lineage = \"lineage\"\n\
             state = \"state\"\n\n\
             [scan]\n\
             roots = [{roots}]            # folders outside the warehouse that the proof scan reads too\n"
        ));
        out
    }
}

/// A catalog section without its `kind` (rendered first, with a comment).
struct WithoutKind<'a>(&'a CatalogConfig);

impl Serialize for WithoutKind<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut v = toml::Value::try_from(self.0).map_err(serde::ser::Error::custom)?;
        if let Some(t) = v.as_table_mut() {
            t.remove("kind");
        }
        v.serialize(s)
    }
}

/// Bounds of `lethe.toml`'s counts: a request's seconds (an hour), requests in flight, days
/// until a deleted object's space is reclaimed (100 years), MiB and files per scan task.
const MAX_TIMEOUT_SECONDS: u64 = 3_600;
const MAX_CONCURRENCY: usize = 1_024;
const MAX_TASK_MIB: u64 = 1 << 20;
const MAX_TASK_OBJECTS: usize = 1_000_000;

/// Every count of `lethe.toml` within its range, each error naming the file, line and key (a
/// `task_mib` of 2^44 shifted to a task of 0 bytes; `reclaim_days` past chrono's calendar
/// panicked in the attestation).
fn check_numbers(parsed: &tomlfile::TomlFile<RawConfig>) -> Result<()> {
    fn range<N: PartialOrd + std::fmt::Display>(
        parsed: &tomlfile::TomlFile<RawConfig>,
        key: &str,
        value: Option<N>,
        min: N,
        max: N,
    ) -> Result<()> {
        match value {
            Some(v) if v < min || v > max => {
                Err(parsed.error_at(key, format!("{v} is out of range: between {min} and {max}")))
            }
            _ => Ok(()),
        }
    }
    let raw = &parsed.value;
    range(
        parsed,
        "catalog.timeout_seconds",
        raw.catalog.timeout_seconds,
        1,
        MAX_TIMEOUT_SECONDS,
    )?;
    range(
        parsed,
        "storage.max_concurrency",
        raw.storage.max_concurrency,
        1,
        MAX_CONCURRENCY,
    )?;
    range(
        parsed,
        "storage.reclaim_days",
        raw.storage.reclaim_days.map(i64::from),
        0,
        lethe_iceberg::clock::MAX_DAYS,
    )?;
    range(
        parsed,
        "engine.task_mib",
        raw.engine.task_mib,
        1,
        MAX_TASK_MIB,
    )?;
    range(
        parsed,
        "engine.task_objects",
        raw.engine.task_objects,
        1,
        MAX_TASK_OBJECTS,
    )
}

/// `[tables_outside_warehouse]`: each key a table name, each value a location (a folder
/// relative to lethe.toml, `file:///...` or `s3://bucket/prefix`), resolved to a location URI.
fn outside_warehouse(
    parsed: &tomlfile::TomlFile<RawConfig>,
    root: &Path,
) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (table, location) in &parsed.value.tables_outside_warehouse {
        let key = format!("tables_outside_warehouse.{}", tomlfile::quoted(table));
        if lethe_iceberg::catalog::TableName::parse(table).is_err() {
            return Err(parsed.error_at(
                &key,
                format!("`{table}` is not a table name: write namespace.table"),
            ));
        }
        let Some(at) = warehouse_location(root, location) else {
            return Err(parsed.error_at(
                &key,
                format!("`{location}` is not a location: use a folder, file:///ABSOLUTE or s3://bucket/prefix"),
            ));
        };
        out.push((table.clone(), at.uri()));
    }
    Ok(out)
}

/// Whether a URI names a PostgreSQL database.
pub fn is_postgres_uri(uri: &str) -> bool {
    uri.starts_with("postgresql://") || uri.starts_with("postgres://")
}

/// Whether a URI carries a password (`scheme://user:password@host`).
pub fn uri_has_password(uri: &str) -> bool {
    let Some((_, rest)) = uri.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// A URI with any password replaced by `***`.
pub fn redact_uri(uri: &str) -> String {
    lethe_iceberg::catalog::postgres::redact_uri(uri)
}

/// Resolves a warehouse given as a folder, `file:` URI or `s3://` location against `root`.
pub fn warehouse_location(root: &Path, warehouse: &str) -> Option<WarehouseLocation> {
    for scheme in ["s3://", "s3a://", "s3n://"] {
        if let Some(rest) = warehouse.strip_prefix(scheme) {
            let rest = rest.trim_end_matches('/');
            if rest.is_empty() || rest.starts_with('/') {
                return None;
            }
            return Some(WarehouseLocation::Object(format!("s3://{rest}")));
        }
    }
    warehouse_path(root, warehouse).map(WarehouseLocation::Local)
}

fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        Ok(std::env::current_dir()
            .map_err(|e| Error::io(".", e))?
            .join(p))
    }
}

/// Resolves a SQLite URI against `root`, in SQLAlchemy's (and so PyIceberg's) forms:
/// `sqlite:///relative.db`, `sqlite:////absolute.db`, and lethe's short `sqlite:relative.db`.
pub fn sqlite_path(root: &Path, uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("sqlite:")?;
    let rest = rest.strip_prefix("///").unwrap_or(rest);
    if rest.is_empty() {
        return None;
    }
    let p = Path::new(rest);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    })
}

/// Resolves a warehouse given as a path or a `file:` URI against `root`.
pub fn warehouse_path(root: &Path, warehouse: &str) -> Option<PathBuf> {
    if let Some(rest) = warehouse.strip_prefix("file:") {
        let rest = rest.trim_start_matches('/');
        return Some(PathBuf::from(format!("/{rest}")));
    }
    if warehouse.contains("://") || warehouse.is_empty() {
        return None;
    }
    let p = Path::new(warehouse);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let f = dir.join("lethe.toml");
        std::fs::write(&f, text).unwrap();
        f
    }

    #[test]
    fn rendered_config_loads_and_resolves_paths() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            &Config::render("lethe", "sqlite:catalog.db", "warehouse", &["raw"]),
        );
        let c = Config::load(&f).unwrap();
        assert_eq!(c.catalog_db(), Some(dir.path().join("catalog.db")));
        assert_eq!(c.warehouse_dir(), Some(dir.path().join("warehouse")));
        assert_eq!(c.paths.lineage, dir.path().join("lineage"));
        assert_eq!(c.scan_roots, vec![dir.path().join("raw")]);
    }

    #[test]
    fn malformed_config_names_file_line_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "[catalog]\nkind = \"sql\"\nname = \"x\"\nuri = \"sqlite:c.db\"\nwarehouse = \"w\"\n[paths]\nlineage = 3\n",
        );
        let e = Config::load(&f).unwrap_err().to_string();
        assert!(e.contains("lethe.toml:7: paths.lineage:"), "{e}");
    }

    #[test]
    fn unknown_catalog_kind_is_refused_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "[catalog]\nkind = \"glue\"\nname = \"x\"\nuri = \"sqlite:c.db\"\nwarehouse = \"w\"\n",
        );
        let e = Config::load(&f).unwrap_err().to_string();
        assert!(
            e.contains("lethe.toml:2: catalog.kind: unknown catalog kind `glue`"),
            "{e}"
        );
    }

    #[test]
    fn engine_section_is_checked_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let base =
            "[catalog]\nkind = \"sql\"\nname = \"x\"\nuri = \"sqlite:c.db\"\nwarehouse = \"w\"\n";
        let c = Config::load(&write(dir.path(), base)).unwrap();
        assert_eq!(c.engine, EngineConfig::default());
        let f = write(
            dir.path(),
            &format!(
                "{base}[engine]\nkind = \"ballista\"\nscheduler = \"127.0.0.1:50050\"\ntask_mib = 8\n"
            ),
        );
        let c = Config::load(&f).unwrap();
        assert_eq!(c.engine.kind, EngineKind::Ballista);
        assert_eq!(c.engine.scheduler.as_deref(), Some("127.0.0.1:50050"));
        assert_eq!(c.engine.task_mib, Some(8));
        let f = write(dir.path(), &format!("{base}[engine]\nkind = \"spark\"\n"));
        let e = Config::load(&f).unwrap_err().to_string();
        assert!(
            e.contains("lethe.toml:7: engine.kind: unknown engine `spark`"),
            "{e}"
        );
        let f = write(
            dir.path(),
            &format!("{base}[engine]\nkind = \"ballista\"\n"),
        );
        let e = Config::load(&f).unwrap_err().to_string();
        assert!(
            e.contains("lethe.toml:7: engine.kind: the ballista engine needs its scheduler"),
            "{e}"
        );
        let f = write(dir.path(), &format!("{base}[engine]\nschedulr = \"x\"\n"));
        assert!(Config::load(&f).is_err());
    }

    /// Issue 44 (item 5): every count is range-checked, naming file, line and key.
    #[test]
    fn counts_out_of_range_are_refused_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let base =
            "[catalog]\nkind = \"sql\"\nname = \"x\"\nuri = \"sqlite:c.db\"\nwarehouse = \"w\"\n";
        for (extra, want) in [
            (
                "[engine]\ntask_mib = 17592186044416\n",
                "lethe.toml:7: engine.task_mib: 17592186044416 is out of range",
            ),
            ("[engine]\ntask_mib = 0\n", "lethe.toml:7: engine.task_mib:"),
            (
                "[engine]\ntask_objects = 0\n",
                "lethe.toml:7: engine.task_objects:",
            ),
            (
                "[storage]\nreclaim_days = 4000000000\n",
                "lethe.toml:7: storage.reclaim_days: 4000000000 is out of range",
            ),
            (
                "[storage]\nmax_concurrency = 0\n",
                "lethe.toml:7: storage.max_concurrency:",
            ),
        ] {
            let f = write(dir.path(), &format!("{base}{extra}"));
            let e = Config::load(&f).unwrap_err().to_string();
            assert!(e.contains(want), "{extra}: {e}");
        }
        let f = write(
            dir.path(),
            &base.replace(
                "warehouse = \"w\"\n",
                "warehouse = \"w\"\ntimeout_seconds = 18446744073709551615\n",
            ),
        );
        let e = Config::load(&f).unwrap_err().to_string();
        assert!(e.contains("lethe.toml:6: catalog.timeout_seconds:"), "{e}");
    }

    #[test]
    fn uri_forms() {
        let root = Path::new("/r");
        assert_eq!(
            sqlite_path(root, "sqlite:c.db"),
            Some(PathBuf::from("/r/c.db"))
        );
        assert_eq!(
            sqlite_path(root, "sqlite:////abs/c.db"),
            Some(PathBuf::from("/abs/c.db"))
        );
        assert_eq!(
            sqlite_path(root, "sqlite:///c.db"),
            Some(PathBuf::from("/r/c.db"))
        );
        assert_eq!(sqlite_path(root, "postgres://x"), None);
        assert_eq!(warehouse_path(root, "file:///w"), Some(PathBuf::from("/w")));
        assert_eq!(warehouse_path(root, "s3://b/w"), None);
    }

    #[test]
    fn production_catalogs_render_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let rest = CatalogConfig {
            kind: "rest".into(),
            name: "lethe".into(),
            uri: "http://127.0.0.1:8181".into(),
            warehouse: "s3://warehouse".into(),
            sigv4: Some(true),
            signing_name: Some("s3tables".into()),
            ..Default::default()
        };
        let storage = StorageConfig {
            endpoint: Some("http://127.0.0.1:8333".into()),
            path_style: Some(true),
            purge_versions: true,
            ..Default::default()
        };
        let f = write(dir.path(), &Config::render_with(&rest, &storage, &[]));
        let c = Config::load(&f).unwrap();
        assert_eq!(c.catalog.kind, "rest");
        assert_eq!(c.catalog.sigv4, Some(true));
        assert_eq!(c.storage, storage);
        assert_eq!(
            c.warehouse_location(),
            WarehouseLocation::Object("s3://warehouse".into())
        );
        assert_eq!(c.catalog_db(), None);
        let pg = CatalogConfig {
            kind: "sql".into(),
            name: "lethe".into(),
            uri: "postgresql://lethe@127.0.0.1:5432/lethe".into(),
            warehouse: "s3://bucket/wh/".into(),
            ..Default::default()
        };
        let f = write(dir.path(), &Config::render_with(&pg, &storage, &[]));
        let c = Config::load(&f).unwrap();
        assert_eq!(
            c.warehouse_location(),
            WarehouseLocation::Object("s3://bucket/wh".into())
        );
    }

    #[test]
    fn passwords_in_uris_and_local_rest_warehouses_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "[catalog]\nkind = \"sql\"\nname = \"x\"\nuri = \"postgresql://u:hunter2@h/db\"\nwarehouse = \"s3://b\"\n",
        );
        let e = Config::load(&f).unwrap_err().to_string();
        assert!(
            e.contains("lethe.toml:4: catalog.uri: the URI carries a password"),
            "{e}"
        );
        assert!(!e.contains("hunter2"), "{e}");
        let f = write(
            dir.path(),
            "[catalog]\nkind = \"rest\"\nname = \"x\"\nuri = \"http://h:1\"\nwarehouse = \"w\"\n",
        );
        let e = Config::load(&f).unwrap_err().to_string();
        assert!(e.contains("lethe.toml:5: catalog.warehouse:"), "{e}");
        let f = write(
            dir.path(),
            "[catalog]\nkind = \"sql\"\nname = \"x\"\nuri = \"sqlite:c.db\"\nwarehouse = \"s3://\"\n",
        );
        let e = Config::load(&f).unwrap_err().to_string();
        assert!(
            e.contains("catalog.warehouse: `s3://` is not a warehouse location"),
            "{e}"
        );
        assert!(uri_has_password("postgresql://a:b@h/d"));
        assert!(!uri_has_password("postgresql://a@h/d?x=y:z"));
    }
}
