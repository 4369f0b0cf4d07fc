//! `governance/stores.toml`: every store outside the warehouse that can hold a subject.
//!
//! ```toml
//! [warehouse."crm.learners"]          # warehouse tables loaded from a registered store
//! depends_on = ["app_db"]
//!
//! [stores.app_db]
//! kind = "database"                  # database | index | git | http | files | model | backup | manual
//! owner = "platform team"            # a role, never a person
//! retention = "none"                 # or a period: "35 days", "6 weeks", "12 months", "7 years"
//! engine = "sqlite"                  # database and index: sqlite | postgres
//! path = "app/app.db"                # sqlite: relative to lethe.toml
//! # url_env = "APP_DB_URL"           # postgres: the variable holding the connection URI
//! subject_field = "learner_id"       # the field carrying the subject reference
//! identifier = "learner_id"          # which of the subject's identifiers it holds (default: the root)
//! [[stores.app_db.tables]]
//! table = "payments"
//! action = "tombstone"               # delete (default) | tombstone
//! erase_columns = ["card_number"]    # tombstone: further columns set to NULL
//! [[stores.app_db.tables]]
//! table = "learners"
//! column = "id"                      # default: subject_field
//!
//! [stores.support_search]
//! kind = "index"
//! depends_on = ["support.tickets"]
//! rebuilt_from = "support.tickets"   # a delete here is undone by the next rebuild...
//! schedule = "nightly at 02:00"      # ...which runs on this schedule
//!
//! [stores.helpdesk]
//! kind = "http"
//! delete_request = { method = "DELETE", url = "https://vendor.example/v1/users/{subject}" }
//! probe_request = { method = "GET", url = "https://vendor.example/v1/users/{subject}" }
//! seed_request = { method = "PUT", url = "https://vendor.example/v1/users/{subject}" }   # the drill's test subject
//!
//! [stores.backups]
//! kind = "backup"
//! probe = "none"                     # can't be probed: a residual in every manifest
//! basis = "technical_impossibility"  # technical_impossibility | legal_obligation | retention | disproportionate_effort
//! expires = "35 days after the erasure"
//! control = "restore_replays_erasure_log"
//! ```
//!
//! Checks at load, each naming file, line and key: an unknown kind, a key the kind doesn't
//! take, a store with neither a probe nor a basis, a store name with a dot (dotted names are
//! warehouse tables), a cycle in `depends_on` (through the warehouse too: a store built from a
//! table that is loaded from it). Names of tables are checked against the catalog when an
//! erasure is planned.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use chrono::{Months, NaiveDate};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::tomlfile::{self, TomlFile};

/// The kinds of store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    /// A relational database (PostgreSQL, SQLite): rows deleted or tombstoned per table.
    Database,
    /// A full-text index rebuilt from a source by a job.
    Index,
    /// A dataset versioned in a Git repository (JSON lines).
    Git,
    /// A vendor's system reached through its deletion API.
    Http,
    /// Files outside the warehouse (exports, raw zone): Parquet, CSV, JSON lines.
    Files,
    /// A model or artifact trained on warehouse tables: handed off, never claimed as erased.
    Model,
    /// Copies lethe can't change (backups): a residual with a basis and a control.
    Backup,
    /// Any other place lethe can't reach: a residual with a basis.
    Manual,
}

impl std::fmt::Display for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoreKind::Database => "database",
            StoreKind::Index => "index",
            StoreKind::Git => "git",
            StoreKind::Http => "http",
            StoreKind::Files => "files",
            StoreKind::Model => "model",
            StoreKind::Backup => "backup",
            StoreKind::Manual => "manual",
        })
    }
}

/// Why a store keeps (or can't be shown not to keep) a subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The store can't be changed or read record by record (backups, WORM media).
    TechnicalImpossibility,
    /// A law requires the records to be kept.
    LegalObligation,
    /// The records go when the store's retention ends.
    Retention,
    /// Erasing or probing would take an effort out of proportion (GDPR Art. 14(5)(b)).
    DisproportionateEffort,
}

impl std::fmt::Display for Basis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Basis::TechnicalImpossibility => "technical_impossibility",
            Basis::LegalObligation => "legal_obligation",
            Basis::Retention => "retention",
            Basis::DisproportionateEffort => "disproportionate_effort",
        })
    }
}

/// A table of a database store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbTable {
    /// The table (optionally `schema.table`).
    pub table: String,
    /// The column holding the subject reference (default: the store's `subject_field`).
    #[serde(default)]
    pub column: Option<String>,
    /// `delete` (default) or `tombstone` (keep the row, overwrite the reference).
    #[serde(default)]
    pub action: Option<String>,
    /// Tombstone: further columns set to NULL.
    #[serde(default)]
    pub erase_columns: Vec<String>,
    /// Tombstone: the value the reference column gets (default NULL).
    #[serde(default)]
    pub tombstone_value: Option<toml::Value>,
}

/// An HTTP request of a vendor store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpRequest {
    /// The method (DELETE, POST, GET...).
    pub method: String,
    /// The URL: `{subject}` is replaced by the subject reference (percent-encoded), `${VAR}`
    /// by an environment variable.
    pub url: String,
    /// A JSON body, for POST/PUT: a JSON document whose strings may hold `{subject}` (the
    /// subject's value, inserted as JSON string content) and `${VAR}`.
    #[serde(default)]
    pub body: Option<String>,
    /// Statuses that mean done (delete) or found (probe). Defaults: delete 200, 202, 204;
    /// probe 200.
    #[serde(default)]
    pub ok: Vec<u16>,
    /// Statuses that mean the vendor doesn't know the subject (default 404, 410).
    #[serde(default)]
    pub absent: Vec<u16>,
    /// Probe: a JSON pointer to the count of records in the response (default: found = 1).
    #[serde(default)]
    pub count_pointer: Option<String>,
}

/// One registered store. Keys that a kind doesn't take are refused at load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// The kind.
    pub kind: StoreKind,
    /// Who owns it: a role, never a person's name.
    #[serde(default)]
    pub owner: String,
    /// What it is, for people.
    #[serde(default)]
    pub description: Option<String>,
    /// How long records are kept: `none` or a period (`35 days`).
    #[serde(default)]
    pub retention: Option<String>,
    /// What it is built from: other stores, or warehouse tables (`ns.table`).
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Which subject kind it holds (default: the only subject in subjects.toml).
    #[serde(default)]
    pub subject: Option<String>,
    /// The field carrying the subject reference.
    #[serde(default)]
    pub subject_field: Option<String>,
    /// Which of the subject's identifiers the field holds, by the warehouse column name
    /// (default: the root identifier's column).
    #[serde(default)]
    pub identifier: Option<String>,
    /// `none` when lethe can't delete there; files: `rewrite` (default) or `remove`.
    #[serde(default)]
    pub delete: Option<String>,
    /// `none` when the store can't be probed (then `basis` is required).
    #[serde(default)]
    pub probe: Option<String>,
    /// Why the subject may remain (required with `probe = "none"` or `delete = "none"`).
    #[serde(default)]
    pub basis: Option<Basis>,
    /// When the residual ends, in words or a date.
    #[serde(default)]
    pub expires: Option<String>,
    /// What stops the residual bringing the subject back (`restore_replays_erasure_log`).
    #[serde(default)]
    pub control: Option<String>,
    /// The source a job rebuilds it from (a store or a table); a delete is only verified after
    /// the next rebuild.
    #[serde(default)]
    pub rebuilt_from: Option<String>,
    /// When the rebuild runs, in words.
    #[serde(default)]
    pub schedule: Option<String>,
    /// Data destinations this store accounts for (`lethe stores check --destinations`):
    /// exact, a prefix, or ending in `*`.
    #[serde(default)]
    pub destinations: Vec<String>,
    /// database, index: `sqlite` or `postgres`.
    #[serde(default)]
    pub engine: Option<String>,
    /// sqlite database file, git repository folder, or a file or folder of a files store
    /// (relative to lethe.toml).
    #[serde(default)]
    pub path: Option<String>,
    /// postgres: the environment variable holding the connection URI (a secret).
    #[serde(default)]
    pub url_env: Option<String>,
    /// database: its tables, children before parents is worked out from foreign keys.
    #[serde(default)]
    pub tables: Vec<DbTable>,
    /// index: the table holding the index.
    #[serde(default)]
    pub table: Option<String>,
    /// index: the table the rebuild job appends a `built_at` row to.
    #[serde(default)]
    pub builds_table: Option<String>,
    /// git: the dataset's files (globs relative to the repository root, e.g. `cases/*.jsonl`).
    #[serde(default)]
    pub files: Vec<String>,
    /// http: the deletion request.
    #[serde(default)]
    pub delete_request: Option<HttpRequest>,
    /// http: the probe request.
    #[serde(default)]
    pub probe_request: Option<HttpRequest>,
    /// http: the request that creates a test subject at the vendor, for the drill's synthetic
    /// subject (`lethe drill`); without it the drill can't seed the vendor and says so.
    #[serde(default)]
    pub seed_request: Option<HttpRequest>,
    /// http: the header carrying the credential (default `Authorization`).
    #[serde(default)]
    pub auth_header: Option<String>,
    /// http: the environment variable holding the header's value (a secret, never logged).
    #[serde(default)]
    pub auth_env: Option<String>,
    /// http: seconds before a request times out (default 10).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// http: attempts per request on 5xx, 429 and timeouts (default 3).
    #[serde(default)]
    pub retries: Option<u32>,
    /// http: the first backoff in milliseconds, doubled per attempt (default 200).
    #[serde(default)]
    pub backoff_ms: Option<u64>,
    /// model: the warehouse tables it was trained on.
    #[serde(default)]
    pub trained_on: Vec<String>,
}

/// A warehouse table's sources among the stores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSources {
    /// The stores the table is loaded from.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

/// The file as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStores {
    /// Warehouse tables loaded from stores.
    #[serde(default)]
    pub warehouse: BTreeMap<String, TableSources>,
    /// The stores by name.
    #[serde(default)]
    pub stores: BTreeMap<String, StoreConfig>,
}

/// `governance/stores.toml`, loaded and checked.
pub type Registry = TomlFile<RawStores>;

/// The node of the warehouse in the order (every table is part of it).
pub const WAREHOUSE: &str = "(warehouse)";

/// The order of an erasure: stores before the warehouse (its sources), then the warehouse's
/// steps, then the stores after it (built from its tables, or unrelated to it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// Stores the warehouse is loaded from, sources first.
    pub before: Vec<String>,
    /// Every other store, sources first.
    pub after: Vec<String>,
}

/// A period of retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// Days.
    Days(u64),
    /// Calendar months.
    Months(u32),
}

impl Period {
    /// The longest period: 100 years (as many days, or 1,200 months).
    pub const MAX_DAYS: u64 = lethe_iceberg::clock::MAX_DAYS as u64;

    /// Parses `35 days`, `6 weeks`, `12 months`, `7 years` (singular too); `None` for anything
    /// else, a period longer than 100 years included (see [`Period::check`] for why).
    pub fn parse(s: &str) -> Option<Period> {
        Period::check(s).ok()
    }

    /// Parses a period as [`Period::parse`], saying what is wrong when it isn't one: not a
    /// period at all, or longer than 100 years ([`Period::MAX_DAYS`]; `3000000000000000000
    /// weeks` overflowed the days' count).
    pub fn check(s: &str) -> std::result::Result<Period, String> {
        let not =
            || format!("`{s}` is not a period: write \"none\" or e.g. \"35 days\", \"6 months\"");
        let long = || format!("`{s}` is out of range: at most 100 years");
        let mut it = s.split_whitespace();
        let num = it.next().ok_or_else(not)?;
        let unit = it.next().ok_or_else(not)?.trim_end_matches('s');
        if it.next().is_some() || num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
            return Err(not());
        }
        // Digits only: a parse error is a number past u64.
        let n: u64 = num.parse().map_err(|_| long())?;
        let (per, months) = match unit {
            "day" => (1, false),
            "week" => (7, false),
            "month" => (1, true),
            "year" => (12, true),
            _ => return Err(not()),
        };
        let n = n.checked_mul(per).ok_or_else(long)?;
        if months {
            if n > Period::MAX_DAYS / 365 * 12 {
                return Err(long());
            }
            Ok(Period::Months(n as u32))
        } else {
            if n > Period::MAX_DAYS {
                return Err(long());
            }
            Ok(Period::Days(n))
        }
    }

    /// The day this period after `from` ends.
    pub fn after(&self, from: NaiveDate) -> Option<NaiveDate> {
        match self {
            Period::Days(d) => from.checked_add_days(chrono::Days::new(*d)),
            Period::Months(m) => from.checked_add_months(Months::new(*m)),
        }
    }
}

const COMMON: &[&str] = &[
    "kind",
    "owner",
    "description",
    "retention",
    "depends_on",
    "subject",
    "probe",
    "basis",
    "expires",
    "control",
    "destinations",
    "delete",
];

/// The keys each kind takes beyond the common ones.
fn kind_keys(kind: StoreKind) -> &'static [&'static str] {
    match kind {
        StoreKind::Database => &[
            "engine",
            "path",
            "url_env",
            "tables",
            "subject_field",
            "identifier",
        ],
        StoreKind::Index => &[
            "engine",
            "path",
            "url_env",
            "table",
            "builds_table",
            "subject_field",
            "identifier",
            "rebuilt_from",
            "schedule",
        ],
        StoreKind::Git => &["path", "files", "subject_field", "identifier"],
        StoreKind::Http => &[
            "delete_request",
            "probe_request",
            "seed_request",
            "auth_header",
            "auth_env",
            "timeout_seconds",
            "retries",
            "backoff_ms",
            "identifier",
        ],
        StoreKind::Files => &["path", "subject_field", "identifier"],
        StoreKind::Model => &["trained_on"],
        StoreKind::Backup | StoreKind::Manual => &["path"],
    }
}

impl StoreConfig {
    /// The keys set in this store (those with a value).
    fn set_keys(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        let mut add = |k: &'static str, set: bool| {
            if set {
                v.push(k);
            }
        };
        add("engine", self.engine.is_some());
        add("path", self.path.is_some());
        add("url_env", self.url_env.is_some());
        add("tables", !self.tables.is_empty());
        add("table", self.table.is_some());
        add("builds_table", self.builds_table.is_some());
        add("files", !self.files.is_empty());
        add("subject_field", self.subject_field.is_some());
        add("identifier", self.identifier.is_some());
        add("rebuilt_from", self.rebuilt_from.is_some());
        add("schedule", self.schedule.is_some());
        add("delete_request", self.delete_request.is_some());
        add("probe_request", self.probe_request.is_some());
        add("seed_request", self.seed_request.is_some());
        add("auth_header", self.auth_header.is_some());
        add("auth_env", self.auth_env.is_some());
        add("timeout_seconds", self.timeout_seconds.is_some());
        add("retries", self.retries.is_some());
        add("backoff_ms", self.backoff_ms.is_some());
        add("trained_on", !self.trained_on.is_empty());
        v
    }

    /// True when lethe can probe the store (`probe = "none"` says it can't; backups, manual
    /// places and models have no probe).
    pub fn probed(&self) -> bool {
        self.probe.as_deref() != Some("none")
            && !matches!(
                self.kind,
                StoreKind::Backup | StoreKind::Manual | StoreKind::Model
            )
    }

    /// True when lethe can delete there.
    pub fn deletable(&self) -> bool {
        self.delete.as_deref() != Some("none")
            && !matches!(
                self.kind,
                StoreKind::Backup | StoreKind::Manual | StoreKind::Model
            )
    }

    /// The retention period, `None` for `none` or unset.
    pub fn retention_period(&self) -> Option<Period> {
        self.retention.as_deref().and_then(Period::parse)
    }

    /// The sources (stores and tables) it depends on, `rebuilt_from` included.
    pub fn sources(&self) -> Vec<String> {
        let mut v = self.depends_on.clone();
        if let Some(r) = &self.rebuilt_from
            && !v.contains(r)
        {
            v.push(r.clone());
        }
        if self.kind == StoreKind::Model {
            for t in &self.trained_on {
                if !v.contains(t) {
                    v.push(t.clone());
                }
            }
        }
        v
    }
}

/// Loads and checks `stores.toml` in the governance folder; a missing file registers no store.
pub fn load(governance: &Path) -> Result<Registry> {
    let path = governance.join("stores.toml");
    if !path.exists() {
        return Ok(TomlFile {
            path,
            text: String::new(),
            value: RawStores::default(),
        });
    }
    let text =
        std::fs::read_to_string(&path).map_err(|e| Error::io(path.display().to_string(), e))?;
    parse(&path, &text)
}

/// Parses and checks the text of a `stores.toml` at `path` (errors name file, line and key).
pub fn parse(path: &Path, text: &str) -> Result<Registry> {
    let f = TomlFile {
        path: path.to_path_buf(),
        text: text.to_string(),
        value: tomlfile::parse::<RawStores>(path, text)?,
    };
    check(&f)?;
    Ok(f)
}

fn check(f: &Registry) -> Result<()> {
    let stores = &f.value.stores;
    for (name, s) in stores {
        let at = |k: &str| format!("stores.{name}.{k}");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(f.error_at(
                &tomlfile::key(&["stores", name]),
                "a store's name may hold letters, digits, '_' and '-' only (dotted names are warehouse tables)",
            ));
        }
        if s.owner.trim().is_empty() {
            return Err(f.error_at(
                &format!("stores.{name}"),
                "every store needs an `owner` (a role, never a person's name)",
            ));
        }
        let allowed: BTreeSet<&str> = kind_keys(s.kind).iter().copied().collect();
        for k in s.set_keys() {
            if !allowed.contains(k) && !COMMON.contains(&k) {
                return Err(f.error_at(
                    &at(k),
                    format!("`{k}` is not a setting of a `{}` store", s.kind),
                ));
            }
        }
        if let Some(p) = &s.probe
            && p != "none"
        {
            return Err(f.error_at(
                &at("probe"),
                format!("`{p}`: the only value is \"none\" (the kind's own probe is the default)"),
            ));
        }
        if let Some(r) = &s.retention
            && r != "none"
            && let Err(why) = Period::check(r)
        {
            return Err(f.error_at(&at("retention"), why));
        }
        check_numbers(f, name, s)?;
        if !s.probed() && s.kind != StoreKind::Model && s.basis.is_none() {
            return Err(f.error_at(
                &format!("stores.{name}"),
                if matches!(s.kind, StoreKind::Backup | StoreKind::Manual)
                    && s.probe.is_none()
                {
                    format!(
                        "a `{}` store can't be probed by lethe: say so with probe = \"none\" and give its `basis`",
                        s.kind
                    )
                } else {
                    "a store that can't be probed needs a `basis` (technical_impossibility, legal_obligation, retention, disproportionate_effort)".to_string()
                },
            ));
        }
        if matches!(s.kind, StoreKind::Backup | StoreKind::Manual) && s.probe.is_none() {
            return Err(f.error_at(
                &format!("stores.{name}"),
                format!(
                    "a `{}` store can't be probed by lethe: say so with probe = \"none\"",
                    s.kind
                ),
            ));
        }
        for d in s.sources() {
            if !d.contains('.') && !stores.contains_key(&d) {
                return Err(f.error_at(
                    &at(if s.rebuilt_from.as_deref() == Some(d.as_str()) {
                        "rebuilt_from"
                    } else {
                        "depends_on"
                    }),
                    format!("`{d}` is neither a registered store nor a table (namespace.table)"),
                ));
            }
        }
        if s.rebuilt_from.is_some() && s.schedule.is_none() {
            return Err(f.error_at(
                &at("rebuilt_from"),
                "a rebuilt store needs the `schedule` its rebuild runs on",
            ));
        }
        check_kind(f, name, s)?;
    }
    for (table, t) in &f.value.warehouse {
        if !table.contains('.') {
            return Err(f.error_at(
                &format!("warehouse.{}", tomlfile::quoted(table)),
                "a warehouse table is named namespace.table",
            ));
        }
        for d in &t.depends_on {
            if !stores.contains_key(d) {
                return Err(f.error_at(
                    &format!("warehouse.{}.depends_on", tomlfile::quoted(table)),
                    format!("`{d}` is not a registered store"),
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(&f.value) {
        let first = cycle
            .iter()
            .find(|n| stores.contains_key(*n))
            .cloned()
            .unwrap_or_default();
        return Err(f.error_at(
            &format!("stores.{first}.depends_on"),
            format!(
                "a cycle in depends_on: {} (the warehouse's tables count as one system: a store can't be both a source of the warehouse and built from it)",
                cycle.join(" -> ")
            ),
        ));
    }
    Ok(())
}

/// The most seconds an HTTP request may wait, attempts per request, and milliseconds of the
/// first backoff (doubled per attempt: within these, the last wait stays under a day).
const MAX_TIMEOUT_SECONDS: u64 = 3_600;
const MAX_RETRIES: u32 = 10;
const MAX_BACKOFF_MS: u64 = 60_000;

/// The HTTP store's numbers within range, each named by its key.
fn check_numbers(f: &Registry, name: &str, s: &StoreConfig) -> Result<()> {
    let at = |k: &str| format!("stores.{name}.{k}");
    let range = |k: &str, v: u64, min: u64, max: u64, unit: &str| -> Result<()> {
        if v < min || v > max {
            return Err(f.error_at(
                &at(k),
                format!("{v} is out of range: between {min} and {max} {unit}"),
            ));
        }
        Ok(())
    };
    if let Some(t) = s.timeout_seconds {
        range("timeout_seconds", t, 1, MAX_TIMEOUT_SECONDS, "seconds")?;
    }
    if let Some(r) = s.retries {
        range(
            "retries",
            u64::from(r),
            1,
            u64::from(MAX_RETRIES),
            "attempts",
        )?;
    }
    if let Some(b) = s.backoff_ms {
        range("backoff_ms", b, 0, MAX_BACKOFF_MS, "milliseconds")?;
    }
    Ok(())
}

fn check_kind(f: &Registry, name: &str, s: &StoreConfig) -> Result<()> {
    let at = |k: &str| format!("stores.{name}.{k}");
    let need = |k: &str, set: bool| -> Result<()> {
        if set {
            Ok(())
        } else {
            Err(f.error_at(
                &format!("stores.{name}"),
                format!("a `{}` store needs `{k}`", s.kind),
            ))
        }
    };
    let engine = || -> Result<()> {
        match s.engine.as_deref() {
            Some("sqlite") => need("path", s.path.is_some()),
            Some("postgres") => need("url_env", s.url_env.is_some()),
            Some(other) => Err(f.error_at(
                &at("engine"),
                format!("unknown engine `{other}`: sqlite or postgres"),
            )),
            None => need("engine", false),
        }
    };
    match s.kind {
        StoreKind::Database => {
            engine()?;
            need("tables", !s.tables.is_empty())?;
            for (i, t) in s.tables.iter().enumerate() {
                if t.column.is_none() && s.subject_field.is_none() {
                    return Err(f.error_at(
                        &at("tables"),
                        format!(
                            "table {} (`{}`) needs a `column`, or the store a `subject_field`",
                            i + 1,
                            t.table
                        ),
                    ));
                }
                match t.action.as_deref() {
                    None | Some("delete") if !t.erase_columns.is_empty() => {
                        return Err(f.error_at(
                            &at("tables"),
                            format!(
                                "table `{}`: erase_columns only go with action = \"tombstone\"",
                                t.table
                            ),
                        ));
                    }
                    None | Some("delete") | Some("tombstone") => {}
                    Some(other) => {
                        return Err(f.error_at(
                            &at("tables"),
                            format!(
                                "table `{}`: unknown action `{other}` (delete or tombstone)",
                                t.table
                            ),
                        ));
                    }
                }
            }
        }
        StoreKind::Index => {
            engine()?;
            need("table", s.table.is_some())?;
            need("subject_field", s.subject_field.is_some())?;
            need("builds_table", s.builds_table.is_some())?;
            need("rebuilt_from", s.rebuilt_from.is_some())?;
        }
        StoreKind::Git => {
            need("path", s.path.is_some())?;
            need("files", !s.files.is_empty())?;
            need("subject_field", s.subject_field.is_some())?;
        }
        StoreKind::Http => {
            need(
                "delete_request",
                s.delete_request.is_some() || !s.deletable(),
            )?;
            need("probe_request", s.probe_request.is_some() || !s.probed())?;
            for (k, r) in [
                ("delete_request", &s.delete_request),
                ("probe_request", &s.probe_request),
                ("seed_request", &s.seed_request),
            ] {
                if let Some(r) = r
                    && !(r.url.starts_with("http://")
                        || r.url.starts_with("https://")
                        || r.url.starts_with("${"))
                {
                    return Err(f.error_at(
                        &format!("{}.url", at(k)),
                        "the URL must start with http:// or https:// (or ${VARIABLE})",
                    ));
                }
                if let Some(b) = r.as_ref().and_then(|r| r.body.as_deref())
                    && let Err(why) = super::http::parse_body(b)
                {
                    return Err(f.error_at(&format!("{}.body", at(k)), why));
                }
            }
        }
        StoreKind::Files => {
            need("path", s.path.is_some())?;
            need("subject_field", s.subject_field.is_some())?;
            if let Some(d) = &s.delete
                && !["rewrite", "remove", "none"].contains(&d.as_str())
            {
                return Err(f.error_at(
                    &at("delete"),
                    format!("`{d}`: a files store's delete is rewrite (default), remove or none"),
                ));
            }
        }
        StoreKind::Model => need("trained_on", !s.trained_on.is_empty())?,
        StoreKind::Backup | StoreKind::Manual => {}
    }
    if s.kind != StoreKind::Files
        && let Some(d) = &s.delete
        && d != "none"
    {
        return Err(f.error_at(
            &at("delete"),
            format!("`{d}`: the only value is \"none\" (the kind's own delete is the default)"),
        ));
    }
    Ok(())
}

/// Graph nodes: stores by name, and the warehouse as one node.
fn edges(raw: &RawStores) -> BTreeMap<String, BTreeSet<String>> {
    let node = |d: &str| {
        if d.contains('.') {
            WAREHOUSE.to_string()
        } else {
            d.to_string()
        }
    };
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry(WAREHOUSE.to_string()).or_default();
    for (name, s) in &raw.stores {
        let e = g.entry(name.clone()).or_default();
        for d in s.sources() {
            e.insert(node(&d));
        }
    }
    for t in raw.warehouse.values() {
        let e = g.entry(WAREHOUSE.to_string()).or_default();
        for d in &t.depends_on {
            e.insert(d.clone());
        }
    }
    g
}

/// A cycle in the dependency graph, as the nodes along it.
fn find_cycle(raw: &RawStores) -> Option<Vec<String>> {
    let g = edges(raw);
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(n).copied().unwrap_or(Mark::New) {
            Mark::Done => return None,
            Mark::Open => {
                let start = path.iter().position(|p| p == n).unwrap_or(0);
                let mut c = path[start..].to_vec();
                c.push(n.to_string());
                return Some(c);
            }
            Mark::New => {}
        }
        marks.insert(n.to_string(), Mark::Open);
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, g, marks, path) {
                return Some(c);
            }
        }
        path.pop();
        marks.insert(n.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for n in g.keys() {
        if let Some(c) = visit(n, &g, &mut marks, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

/// The erasure's order over the registered stores (sources first), split around the
/// warehouse: the stores it (transitively) depends on go before its steps.
pub fn order(raw: &RawStores) -> Order {
    let g = edges(raw);
    let mut sorted: Vec<String> = Vec::new();
    let mut done: BTreeSet<String> = BTreeSet::new();
    fn place(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        out: &mut Vec<String>,
    ) {
        if !done.insert(n.to_string()) {
            return;
        }
        for d in g.get(n).into_iter().flatten() {
            place(d, g, done, out);
        }
        out.push(n.to_string());
    }
    for n in g.keys() {
        place(n, &g, &mut done, &mut sorted);
    }
    // Everything the warehouse reaches through depends_on goes before it.
    let mut upstream: BTreeSet<String> = BTreeSet::new();
    let mut stack = vec![WAREHOUSE.to_string()];
    while let Some(n) = stack.pop() {
        for d in g.get(&n).into_iter().flatten() {
            if upstream.insert(d.clone()) {
                stack.push(d.clone());
            }
        }
    }
    let mut o = Order::default();
    for n in sorted {
        if n == WAREHOUSE {
            continue;
        }
        if upstream.contains(&n) {
            o.before.push(n);
        } else {
            o.after.push(n);
        }
    }
    o
}

/// The stores a table is (transitively) loaded from.
pub fn sources_of_table(raw: &RawStores, table: &str) -> Vec<String> {
    raw.warehouse
        .get(table)
        .map(|t| t.depends_on.clone())
        .unwrap_or_default()
}

/// Every table named in the registry (depends_on, rebuilt_from, trained_on, warehouse), with
/// the key it is named at, for the check against the catalog.
pub fn named_tables(raw: &RawStores) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for (name, s) in &raw.stores {
        for d in s.sources() {
            if d.contains('.') {
                let key = if s.trained_on.contains(&d) {
                    "trained_on"
                } else if s.rebuilt_from.as_deref() == Some(d.as_str()) {
                    "rebuilt_from"
                } else {
                    "depends_on"
                };
                v.push((d, format!("stores.{name}.{key}")));
            }
        }
    }
    for t in raw.warehouse.keys() {
        v.push((t.clone(), format!("warehouse.\"{t}\"")));
    }
    v
}

/// Checks that every table the registry names is in the catalog.
pub fn check_tables(f: &Registry, tables: &BTreeSet<String>) -> Result<()> {
    for (t, key) in named_tables(&f.value) {
        if !tables.contains(&t) {
            return Err(f.error_at(&key, format!("`{t}` is not a table in the catalog")));
        }
    }
    Ok(())
}

/// The error for a registry problem found later (a store that can't be opened), at its key.
pub fn store_error(f: &Registry, store: &str, message: impl Into<String>) -> Error {
    f.error_at(&format!("stores.{store}"), message)
}

/// The data destinations each store accounts for: its `destinations`, and what its own settings
/// say — `sqlite:PATH` and `postgres:VAR` for databases and indexes, `git:PATH` and the
/// repository's remote URLs (without credentials), the scheme and host of a vendor's URLs,
/// `file:PATH` for files.
pub fn destinations(f: &Registry, root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, s) in &f.value.stores {
        let mut add = |d: String| out.push((name.clone(), d));
        for d in &s.destinations {
            add(d.clone());
        }
        match s.kind {
            StoreKind::Database | StoreKind::Index => match s.engine.as_deref() {
                Some("sqlite") => add(format!("sqlite:{}", s.path.clone().unwrap_or_default())),
                Some("postgres") => {
                    add(format!(
                        "postgres:{}",
                        s.url_env.clone().unwrap_or_default()
                    ));
                    if let Some(url) = s.url_env.as_ref().and_then(|v| std::env::var(v).ok())
                        && let Ok(mut u) = reqwest::Url::parse(&url)
                    {
                        let _ = u.set_username("");
                        let _ = u.set_password(None);
                        u.set_query(None);
                        add(u.to_string());
                    }
                }
                _ => {}
            },
            StoreKind::Git => {
                let path = s.path.clone().unwrap_or_default();
                add(format!("git:{path}"));
                if let Ok(repo) = git2::Repository::open(root.join(&path))
                    && let Ok(remotes) = repo.remotes()
                {
                    for r in remotes.iter().flatten() {
                        if let Some(url) = repo
                            .find_remote(r)
                            .ok()
                            .and_then(|r| r.url().map(str::to_string))
                        {
                            add(match reqwest::Url::parse(&url) {
                                Ok(mut u) => {
                                    let _ = u.set_username("");
                                    let _ = u.set_password(None);
                                    u.to_string()
                                }
                                Err(_) => url,
                            });
                        }
                    }
                }
            }
            StoreKind::Http => {
                for r in [&s.delete_request, &s.probe_request, &s.seed_request]
                    .into_iter()
                    .flatten()
                {
                    let url = r.url.replace("{subject}", "x");
                    let expanded = expand_vars(&url);
                    if let Ok(u) = reqwest::Url::parse(&expanded) {
                        add(u.origin().ascii_serialization());
                    }
                }
            }
            StoreKind::Files | StoreKind::Backup | StoreKind::Manual => {
                if let Some(p) = &s.path {
                    add(format!("file:{p}"));
                }
            }
            StoreKind::Model => {}
        }
    }
    out.sort();
    out.dedup();
    out
}

/// `${VAR}` replaced by the environment's value (empty when unset).
fn expand_vars(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(j) = after.find('}') else { break };
        out.push_str(&std::env::var(&after[..j]).unwrap_or_default());
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    out
}

/// Whether a store's destination `pattern` covers `destination`: equal, a prefix at a `/`
/// boundary, or a pattern ending in `*`.
pub fn covers(pattern: &str, destination: &str) -> bool {
    let p = pattern.trim().trim_end_matches('/');
    let d = destination.trim().trim_end_matches('/');
    if let Some(prefix) = p.strip_suffix('*') {
        return d.starts_with(prefix);
    }
    d == p || d.starts_with(&format!("{p}/"))
}

/// The destinations of a list (one per line, `#` comments) that no registered store covers.
pub fn uncovered(f: &Registry, root: &Path, list: &str) -> Vec<String> {
    let known = destinations(f, root);
    list.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .filter(|d| !known.iter().any(|(_, p)| covers(p, d)))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Registry> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stores.toml"), text).unwrap();
        load(dir.path())
    }

    const GOOD: &str = r#"
[warehouse."crm.learners"]
depends_on = ["app_db"]

[stores.app_db]
kind = "database"
owner = "platform team"
engine = "sqlite"
path = "app.db"
subject_field = "learner_id"
[[stores.app_db.tables]]
table = "learners"
column = "id"

[stores.search]
kind = "index"
owner = "support team"
engine = "sqlite"
path = "search.db"
table = "tickets_fts"
builds_table = "builds"
subject_field = "learner_id"
rebuilt_from = "support.tickets"
schedule = "nightly"

[stores.vendor]
kind = "http"
owner = "support team"
depends_on = ["app_db"]
delete_request = { method = "DELETE", url = "http://127.0.0.1:1/users/{subject}" }
probe_request = { method = "GET", url = "http://127.0.0.1:1/users/{subject}" }

[stores.backups]
kind = "backup"
owner = "ops"
probe = "none"
basis = "technical_impossibility"
retention = "35 days"
"#;

    #[test]
    fn a_good_registry_orders_sources_first_around_the_warehouse() {
        let r = parse(GOOD).unwrap();
        let o = order(&r.value);
        assert_eq!(o.before, vec!["app_db"]);
        assert_eq!(o.after, vec!["backups", "search", "vendor"]);
        assert!(!r.value.stores["backups"].probed());
        assert_eq!(
            r.value.stores["backups"].retention_period(),
            Some(Period::Days(35))
        );
    }

    #[test]
    fn an_unknown_kind_names_its_line() {
        let e = parse("[stores.x]\nkind = \"ftp\"\nowner = \"ops\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("stores.toml:2: stores.x.kind"), "{e}");
        assert!(e.contains("unknown variant `ftp`"), "{e}");
    }

    #[test]
    fn a_store_with_neither_probe_nor_basis_is_refused() {
        let e = parse("[stores.b]\nkind = \"backup\"\nowner = \"ops\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("stores.toml:1: stores.b:"), "{e}");
        assert!(e.contains("probe = \"none\""), "{e}");
        let e = parse("[stores.b]\nkind = \"backup\"\nowner = \"ops\"\nprobe = \"none\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs a `basis`"), "{e}");
    }

    #[test]
    fn a_cycle_through_the_warehouse_is_refused_with_its_path() {
        let text = GOOD.replace(
            "[stores.app_db]\nkind = \"database\"",
            "[stores.app_db]\ndepends_on = [\"search\"]\nkind = \"database\"",
        );
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("a cycle in depends_on"), "{e}");
        assert!(e.contains("stores.app_db.depends_on"), "{e}");
        let line = text
            .lines()
            .position(|l| l.starts_with("depends_on = [\"search\"]"))
            .unwrap()
            + 1;
        assert!(e.contains(&format!("stores.toml:{line}:")), "{e}");
    }

    #[test]
    fn a_key_the_kind_does_not_take_is_named() {
        let text = GOOD.replace(
            "[stores.vendor]\nkind = \"http\"",
            "[stores.vendor]\nkind = \"http\"\nengine = \"sqlite\"",
        );
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("stores.vendor.engine"), "{e}");
        assert!(e.contains("not a setting of a `http` store"), "{e}");
    }

    #[test]
    fn destinations_are_covered_by_prefix_or_wildcard() {
        assert!(covers("http://127.0.0.1:8080", "http://127.0.0.1:8080/"));
        assert!(covers("s3://exports", "s3://exports/2026/a.csv"));
        assert!(!covers("s3://exports", "s3://exports-old"));
        assert!(covers(
            "https://*.vendor.example",
            "https://*.vendor.example"
        ));
        assert!(covers("https://api.vendor.*", "https://api.vendor.example"));
        let r = parse(GOOD).unwrap();
        let left = uncovered(
            &r,
            Path::new("/nowhere"),
            "# egress\nsqlite:app.db\nhttp://127.0.0.1:1\nhttps://errors.example # the error reporter\n",
        );
        assert_eq!(left, vec!["https://errors.example"]);
    }

    #[test]
    fn periods() {
        assert_eq!(Period::parse("35 days"), Some(Period::Days(35)));
        assert_eq!(Period::parse("1 week"), Some(Period::Days(7)));
        assert_eq!(Period::parse("7 years"), Some(Period::Months(84)));
        assert_eq!(Period::parse("soon"), None);
        let d = NaiveDate::from_ymd_opt(2026, 1, 31).unwrap();
        assert_eq!(
            Period::Months(1).after(d),
            NaiveDate::from_ymd_opt(2026, 2, 28)
        );
    }

    /// Issue 44 (item 5): "3000000000000000000 weeks" overflowed the days' count (a panic in
    /// a debug build, a wrapped period in a release one); an HTTP store's retries and backoff
    /// doubled past what a Duration holds. Each is refused with file, line and key.
    #[test]
    fn numbers_out_of_range_are_refused_with_their_line() {
        let line_of = |text: &str, needle: &str| {
            text.lines().position(|l| l.starts_with(needle)).unwrap() + 1
        };
        for (from, to, key) in [
            (
                "retention = \"35 days\"",
                "retention = \"3000000000000000000 weeks\"",
                "stores.backups.retention",
            ),
            (
                "retention = \"35 days\"",
                "retention = \"36526 days\"",
                "stores.backups.retention",
            ),
            (
                "retention = \"35 days\"",
                "retention = \"101 years\"",
                "stores.backups.retention",
            ),
            (
                "depends_on = [\"app_db\"]\ndelete_request",
                "depends_on = [\"app_db\"]\nretries = 4294967295\ndelete_request",
                "stores.vendor.retries",
            ),
            (
                "depends_on = [\"app_db\"]\ndelete_request",
                "depends_on = [\"app_db\"]\nbackoff_ms = 18446744073709551615\ndelete_request",
                "stores.vendor.backoff_ms",
            ),
            (
                "depends_on = [\"app_db\"]\ndelete_request",
                "depends_on = [\"app_db\"]\ntimeout_seconds = 0\ndelete_request",
                "stores.vendor.timeout_seconds",
            ),
        ] {
            let text = GOOD.replacen(from, to, 1);
            let needle = to.rsplit('\n').nth(1).unwrap_or(to);
            let line = line_of(&text, needle);
            let e = parse(&text).unwrap_err().to_string();
            assert!(
                e.contains(&format!("stores.toml:{line}: {key}: ")) && e.contains("out of range"),
                "{to}: {e}"
            );
        }
        assert_eq!(Period::parse("100 years"), Some(Period::Months(1200)));
        assert_eq!(Period::parse("36525 days"), Some(Period::Days(36_525)));
    }
}
