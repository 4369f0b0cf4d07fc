//! The catalog: which tables exist, their current metadata, and committing changes to them.
//!
//! [`Catalog`] has three implementations. [`SqlCatalog`] is the Iceberg SQL catalog — the
//! `iceberg_tables` / `iceberg_namespace_properties` schema that PyIceberg's `SqlCatalog` and
//! Java's `JdbcCatalog` share (the "v1" schema with `iceberg_type`) — on SQLite (one file, the
//! embedded default) or on PostgreSQL ([`postgres`]); either engine opens what lethe writes and
//! lethe opens what they write. Its commit writes the new metadata file, then compare-and-swaps
//! the `metadata_location` column, as both of them do. [`rest::RestCatalog`] speaks the Iceberg
//! REST protocol: a commit is a POST of requirements and updates, and the server writes the
//! metadata file.

pub mod postgres;
pub mod rest;

use std::fmt::{self, Debug, Display};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use iceberg::spec::TableMetadataBuilder;
use iceberg::{TableCreation, TableRequirement, TableUpdate};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::FileStore;
use crate::table::{
    LoadedTable, metadata_version, new_metadata_location, read_metadata, serialize_metadata,
};

/// A table's name: its namespace levels and its own name (`crm.learners`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TableName {
    /// Namespace levels (at least one).
    pub namespace: Vec<String>,
    /// The table's own name.
    pub name: String,
}

impl TableName {
    /// Parses `ns.table` or `ns1.ns2.table`.
    pub fn parse(s: &str) -> Result<TableName> {
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() < 2 || parts.iter().any(|p| p.trim().is_empty()) {
            return Err(Error::invalid(format!(
                "`{s}` is not a table name: write namespace.table (e.g. crm.learners)"
            )));
        }
        let (name, ns) = parts.split_last().expect("at least two parts");
        Ok(TableName {
            namespace: ns.iter().map(|s| s.to_string()).collect(),
            name: name.to_string(),
        })
    }

    /// The dotted namespace (`crm`).
    pub fn namespace_str(&self) -> String {
        self.namespace.join(".")
    }

    /// The iceberg crate's identifier.
    pub fn ident(&self) -> Result<iceberg::TableIdent> {
        Ok(iceberg::TableIdent::new(
            iceberg::NamespaceIdent::from_vec(self.namespace.clone())?,
            self.name.clone(),
        ))
    }
}

impl Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.namespace.join("."), self.name)
    }
}

impl TryFrom<String> for TableName {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        TableName::parse(&s)
    }
}

impl From<TableName> for String {
    fn from(t: TableName) -> String {
        t.to_string()
    }
}

/// The result of a compare-and-swap of a table's metadata pointer (the SQL catalogs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwapOutcome {
    /// The pointer now names the new metadata file.
    Swapped,
    /// Another writer moved the pointer first; it now names `current`.
    Conflict {
        /// What the pointer names now (None: the table was dropped).
        current: Option<String>,
    },
}

/// A change to commit: what must still hold of the table, and the updates to apply — the
/// REST protocol's `requirements` + `updates`, which the SQL catalogs apply themselves.
#[derive(Debug, Clone, Copy)]
pub struct TableChange<'a> {
    /// Checked against the table's current state; any failing one is a conflict.
    pub requirements: &'a [TableRequirement],
    /// Applied in order.
    pub updates: &'a [TableUpdate],
    /// Leave no older metadata file referenced (SQL: an empty metadata log; REST, whose server
    /// keeps the log: the files it lists are deleted).
    pub trim_metadata_log: bool,
}

/// How a commit ended.
#[derive(Debug)]
pub enum CommitOutcome {
    /// The change landed; the table as it is now.
    Committed(LoadedTable),
    /// Certainly not applied: another writer changed the table first (a requirement failed,
    /// REST 409). The caller reloads and plans again.
    Conflict(String),
    /// Maybe applied, maybe not (a timeout, a 5xx, a lost acknowledgement). The caller
    /// reconciles by reloading and must not delete the files the commit wrote.
    Unknown(String),
}

/// A catalog of Iceberg tables.
///
/// A commit is catalog-level ([`Catalog::commit_table`]): the SQL catalogs write the new
/// metadata file and compare-and-swap their pointer; the REST catalog POSTs requirements and
/// updates and its server writes the metadata. An `Err` from `commit_table` means the change
/// certainly did not land.
#[async_trait]
pub trait Catalog: Send + Sync + Debug {
    /// The catalog's name.
    fn name(&self) -> &str;
    /// What it is, for messages and evidence (`sql catalog on sqlite /x/catalog.db`), never
    /// with a credential.
    fn describe(&self) -> String;
    /// Every namespace (dotted).
    async fn list_namespaces(&self) -> Result<Vec<String>>;
    /// Creates a namespace; an existing one is fine.
    async fn create_namespace(&self, namespace: &str) -> Result<()>;
    /// Every table, sorted.
    async fn list_tables(&self) -> Result<Vec<TableName>>;
    /// Whether the table exists.
    async fn table_exists(&self, table: &TableName) -> Result<bool>;
    /// Loads a table's current metadata ([`Error::NoSuchTable`] when it doesn't exist), and
    /// hands the storage settings the catalog gives with it to `store`.
    async fn load_table(&self, table: &TableName, store: &dyn FileStore) -> Result<LoadedTable>;
    /// The location of the table's current metadata file, without parsing it (None when the
    /// table doesn't exist): for tables whose metadata the iceberg crate can't represent.
    async fn metadata_location(&self, table: &TableName) -> Result<Option<String>>;
    /// Whether the client chooses new tables' locations (SQL catalogs) or the catalog does
    /// (REST, when `creation.location` is None).
    fn client_places_tables(&self) -> bool;
    /// Creates a table; fails if it exists.
    async fn create_table(
        &self,
        table: &TableName,
        creation: TableCreation,
        store: &dyn FileStore,
    ) -> Result<LoadedTable>;
    /// Commits `change` to the table `base` was loaded from.
    async fn commit_table(
        &self,
        base: &LoadedTable,
        change: TableChange<'_>,
        store: &dyn FileStore,
    ) -> Result<CommitOutcome>;
    /// Removes a table from the catalog (files stay).
    async fn drop_table(&self, table: &TableName) -> Result<()>;
}

/// Where a SQL catalog keeps its pointers.
enum Backend {
    Sqlite(Mutex<Connection>),
    Postgres(postgres::Pg),
}

/// The Iceberg SQL catalog: the `iceberg_tables` / `iceberg_namespace_properties` schema that
/// PyIceberg's `SqlCatalog` and Java's `JdbcCatalog` share, on SQLite (embedded, the default)
/// or PostgreSQL. A commit writes the new metadata file and compare-and-swaps the
/// `metadata_location` column.
pub struct SqlCatalog {
    name: String,
    /// The database, for messages (a path, or `postgresql://user@host:port/db`: no password).
    place: String,
    backend: Backend,
}

impl Debug for SqlCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlCatalog")
            .field("name", &self.name)
            .field("place", &self.place)
            .finish()
    }
}

const CREATE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000) NOT NULL,
    PRIMARY KEY (catalog_name, namespace, property_key)
);";

/// `synchronous=FULL` on every connection, and a catalog database lethe creates in
/// write-ahead-log mode. A database that existed before keeps its journal mode: the mode is
/// stored in the file, and lethe doesn't change a catalog it only reads (`lethe discover` on
/// PyIceberg's catalog) nor the settings of one it writes to.
///
/// Durability: in WAL mode with `synchronous=FULL`, SQLite syncs the log at every commit
/// before the commit returns, so a pointer swap that returned survives a crash or power loss,
/// as with the rollback journal — but at one sync per transaction where the rollback journal
/// (`DELETE` mode) needs about four (the journal, its header, the database, the directory
/// after deleting the journal). The mode is a property of the database file: PyIceberg's
/// `SqlCatalog` (SQLAlchemy over the same SQLite) and Java's JDBC catalog read and write it
/// as before; the last connection to close checkpoints the log into the database file and
/// removes it. When the mode can't be set (another process holds the database, a file
/// system without shared memory) the database keeps its mode: nothing is lost, commits only
/// cost more syncs.
fn sync_settings(conn: &Connection, created: bool) {
    if let Err(e) = conn.pragma_update(None, "synchronous", "FULL") {
        tracing::debug!("catalog database keeps its synchronous setting: {e}");
    }
    if !created {
        return;
    }
    match conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0)) {
        Ok(mode) if mode.eq_ignore_ascii_case("wal") => {}
        Ok(mode) => tracing::debug!("catalog database stays in journal mode {mode}"),
        Err(e) => tracing::debug!("catalog database stays in its journal mode: {e}"),
    }
}

impl SqlCatalog {
    /// Opens (creating if needed) the SQLite catalog database at `path`.
    pub fn open(name: &str, path: &Path) -> Result<SqlCatalog> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::io(parent.display().to_string(), e))?;
        }
        let created = !path.exists();
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        sync_settings(&conn, created);
        conn.execute_batch(CREATE_TABLES)?;
        // A catalog created by an older JdbcCatalog / PyIceberg (v0 schema) lacks iceberg_type.
        if !Self::has_type_column(&conn) {
            tracing::warn!(
                "catalog {} has the v0 schema (no iceberg_type column); lethe writes v0 rows",
                path.display()
            );
        }
        Ok(SqlCatalog {
            name: name.to_string(),
            place: path.display().to_string(),
            backend: Backend::Sqlite(Mutex::new(conn)),
        })
    }

    /// Opens an existing SQLite catalog database; errors when the file doesn't exist.
    pub fn open_existing(name: &str, path: &Path) -> Result<SqlCatalog> {
        if !path.exists() {
            return Err(Error::invalid(format!(
                "catalog database {} does not exist",
                path.display()
            )));
        }
        SqlCatalog::open(name, path)
    }

    /// Connects to a SQL catalog on PostgreSQL (`postgresql://user@host:port/db`; the
    /// password, if any, given apart), creating its two tables if they don't exist.
    pub async fn connect_postgres(
        name: &str,
        uri: &str,
        password: Option<SecretString>,
    ) -> Result<SqlCatalog> {
        let (pg, place) = postgres::Pg::connect(uri, password, true).await?;
        Ok(SqlCatalog {
            name: name.to_string(),
            place,
            backend: Backend::Postgres(pg),
        })
    }

    /// Connects to an existing SQL catalog on PostgreSQL without changing it (an error when
    /// the database has no `iceberg_tables`).
    pub async fn connect_postgres_existing(
        name: &str,
        uri: &str,
        password: Option<SecretString>,
    ) -> Result<SqlCatalog> {
        let (pg, place) = postgres::Pg::connect(uri, password, false).await?;
        Ok(SqlCatalog {
            name: name.to_string(),
            place,
            backend: Backend::Postgres(pg),
        })
    }

    /// The catalog names the database holds, with their table counts.
    pub async fn catalog_names(&self) -> Result<Vec<(String, usize)>> {
        match &self.backend {
            Backend::Postgres(pg) => pg.names().await,
            Backend::Sqlite(_) => {
                let conn = self.sqlite().expect("sqlite")?;
                let mut stmt = conn.prepare(
                    "SELECT catalog_name, count(*) FROM iceberg_tables GROUP BY catalog_name ORDER BY catalog_name",
                )?;
                let rows = stmt
                    .query_map([], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as usize))
                    })?
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                Ok(rows)
            }
        }
    }

    fn sqlite(&self) -> Option<Result<std::sync::MutexGuard<'_, Connection>>> {
        match &self.backend {
            Backend::Sqlite(c) => Some(
                c.lock()
                    .map_err(|_| Error::Internal("catalog connection lock poisoned".into())),
            ),
            Backend::Postgres(_) => None,
        }
    }

    fn has_type_column(conn: &Connection) -> bool {
        conn.prepare("SELECT iceberg_type FROM iceberg_tables LIMIT 0")
            .is_ok()
    }

    /// The table's current metadata location, or None when the table doesn't exist.
    pub async fn current_location(&self, table: &TableName) -> Result<Option<String>> {
        if let Backend::Postgres(pg) = &self.backend {
            return pg
                .current(&self.name, &table.namespace_str(), &table.name)
                .await;
        }
        let conn = self.sqlite().expect("sqlite")?;
        let loc = conn
            .query_row(
                "SELECT metadata_location FROM iceberg_tables
                 WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
                params![self.name, table.namespace_str(), table.name],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?;
        Ok(loc.flatten())
    }

    /// Registers a new table at a metadata location; fails if it exists.
    pub async fn register_table(&self, table: &TableName, location: &str) -> Result<()> {
        let ns = table.namespace_str();
        if let Backend::Postgres(pg) = &self.backend {
            pg.ensure_namespace(&self.name, &ns).await?;
            return if pg.insert(&self.name, &ns, &table.name, location).await? {
                Ok(())
            } else {
                Err(Error::invalid(format!("table `{table}` already exists")))
            };
        }
        let conn = self.sqlite().expect("sqlite")?;
        conn.execute(
            "INSERT OR IGNORE INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value)
             VALUES (?1, ?2, 'exists', 'true')",
            params![self.name, ns],
        )?;
        let sql = if Self::has_type_column(&conn) {
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type)
             VALUES (?1, ?2, ?3, ?4, NULL, 'TABLE')"
        } else {
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location)
             VALUES (?1, ?2, ?3, ?4, NULL)"
        };
        match conn.execute(sql, params![self.name, ns, table.name, location]) {
            Ok(_) => Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                Err(Error::invalid(format!("table `{table}` already exists")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Moves the pointer from `expected` to `new` if it still names `expected`. An `Err`
    /// means the outcome is unknown.
    pub async fn swap_location(
        &self,
        table: &TableName,
        expected: &str,
        new: &str,
    ) -> Result<SwapOutcome> {
        let ns = table.namespace_str();
        if let Backend::Postgres(pg) = &self.backend {
            if pg.swap(&self.name, &ns, &table.name, expected, new).await? == 1 {
                return Ok(SwapOutcome::Swapped);
            }
            let current = pg.current(&self.name, &ns, &table.name).await?;
            return Ok(SwapOutcome::Conflict { current });
        }
        let conn = self.sqlite().expect("sqlite")?;
        let swap = |conn: &Connection| -> Result<usize> {
            Ok(conn.execute(
                "UPDATE iceberg_tables SET metadata_location = ?1, previous_metadata_location = ?2
                 WHERE catalog_name = ?3 AND table_namespace = ?4 AND table_name = ?5 AND metadata_location = ?2",
                params![new, expected, self.name, ns, table.name],
            )?)
        };
        // Tests simulate a commit whose acknowledgement is lost: the swap happens, the caller
        // sees an error and must reconcile. Named per table so parallel tests don't collide.
        #[cfg(feature = "failpoints")]
        if let Some(r) = fail::eval(&format!("catalog-swap-unknown-after/{table}"), |_| {
            swap(&conn).map(|_| ())
        }) {
            r?;
            return Err(Error::Internal(
                "injected: commit acknowledgement lost".into(),
            ));
        }
        if swap(&conn)? == 1 {
            return Ok(SwapOutcome::Swapped);
        }
        let current = conn
            .query_row(
                "SELECT metadata_location FROM iceberg_tables
                 WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
                params![self.name, ns, table.name],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten();
        Ok(SwapOutcome::Conflict { current })
    }
}

#[async_trait]
impl Catalog for SqlCatalog {
    fn name(&self) -> &str {
        &self.name
    }

    fn describe(&self) -> String {
        match &self.backend {
            Backend::Sqlite(_) => format!("sql catalog `{}` on sqlite {}", self.name, self.place),
            Backend::Postgres(_) => {
                format!("sql catalog `{}` on postgresql {}", self.name, self.place)
            }
        }
    }

    async fn list_namespaces(&self) -> Result<Vec<String>> {
        if let Backend::Postgres(pg) = &self.backend {
            return pg.namespaces(&self.name).await;
        }
        let conn = self.sqlite().expect("sqlite")?;
        let mut stmt = conn.prepare(
            "SELECT DISTINCT table_namespace FROM iceberg_tables WHERE catalog_name = ?1
             UNION SELECT DISTINCT namespace FROM iceberg_namespace_properties WHERE catalog_name = ?1
             ORDER BY 1",
        )?;
        let rows = stmt
            .query_map(params![self.name], |r| r.get::<_, String>(0))?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    async fn create_namespace(&self, namespace: &str) -> Result<()> {
        if let Backend::Postgres(pg) = &self.backend {
            return pg.ensure_namespace(&self.name, namespace).await;
        }
        let conn = self.sqlite().expect("sqlite")?;
        conn.execute(
            "INSERT OR IGNORE INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value)
             VALUES (?1, ?2, 'exists', 'true')",
            params![self.name, namespace],
        )?;
        Ok(())
    }

    async fn list_tables(&self) -> Result<Vec<TableName>> {
        let rows = if let Backend::Postgres(pg) = &self.backend {
            pg.tables(&self.name).await?
        } else {
            let conn = self.sqlite().expect("sqlite")?;
            let filter = if Self::has_type_column(&conn) {
                "AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)"
            } else {
                ""
            };
            let mut stmt = conn.prepare(&format!(
                "SELECT table_namespace, table_name FROM iceberg_tables WHERE catalog_name = ?1 {filter}
                 ORDER BY table_namespace, table_name"
            ))?;
            stmt.query_map(params![self.name], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?
        };
        let mut out: Vec<TableName> = rows
            .into_iter()
            .map(|(ns, name)| TableName {
                namespace: ns.split('.').map(str::to_string).collect(),
                name,
            })
            .collect();
        out.sort();
        Ok(out)
    }

    async fn table_exists(&self, table: &TableName) -> Result<bool> {
        Ok(self.current_location(table).await?.is_some())
    }

    async fn load_table(&self, table: &TableName, store: &dyn FileStore) -> Result<LoadedTable> {
        let location = self
            .current_location(table)
            .await?
            .ok_or_else(|| Error::NoSuchTable(table.to_string()))?;
        read_metadata(store, table, &location)
    }

    async fn metadata_location(&self, table: &TableName) -> Result<Option<String>> {
        self.current_location(table).await
    }

    fn client_places_tables(&self) -> bool {
        true
    }

    async fn create_table(
        &self,
        table: &TableName,
        creation: TableCreation,
        store: &dyn FileStore,
    ) -> Result<LoadedTable> {
        if self.current_location(table).await?.is_some() {
            return Err(Error::invalid(format!("table `{table}` already exists")));
        }
        let location = creation.location.clone().ok_or_else(|| {
            Error::Internal(format!(
                "{table}: a SQL catalog's new table needs a location"
            ))
        })?;
        let built = TableMetadataBuilder::from_table_creation(creation)?.build()?;
        let metadata_location = new_metadata_location(&location, 0);
        let bytes = serialize_metadata(&built.metadata)?;
        store.write_new(&metadata_location, &bytes)?;
        self.create_namespace(&table.namespace_str()).await?;
        if let Err(e) = self.register_table(table, &metadata_location).await {
            let _ = store.delete(&metadata_location);
            return Err(e);
        }
        Ok(LoadedTable {
            name: table.clone(),
            metadata_location,
            metadata: std::sync::Arc::new(built.metadata),
        })
    }

    async fn commit_table(
        &self,
        base: &LoadedTable,
        change: TableChange<'_>,
        store: &dyn FileStore,
    ) -> Result<CommitOutcome> {
        let name = &base.name;
        let built = apply_change(base, change)?;
        let version = metadata_version(&base.metadata_location).map_or(1, |v| v + 1);
        let new_location = new_metadata_location(base.location(), version);
        let bytes = serialize_metadata(&built.metadata)?;
        store.write_new(&new_location, &bytes)?;
        match self
            .swap_location(name, &base.metadata_location, &new_location)
            .await
        {
            Ok(SwapOutcome::Swapped) => {
                remove_expired_metadata(store, &built.metadata, &built.expired_metadata_logs);
                Ok(CommitOutcome::Committed(LoadedTable {
                    name: name.clone(),
                    metadata_location: new_location,
                    metadata: std::sync::Arc::new(built.metadata),
                }))
            }
            Ok(SwapOutcome::Conflict { current }) => {
                // Certainly not committed: the metadata file this attempt wrote is nobody's.
                if let Err(e) = store.delete(&new_location) {
                    tracing::warn!("{name}: could not remove {new_location}: {e}");
                }
                match current {
                    None => Err(Error::NoSuchTable(name.to_string())),
                    Some(c) => Ok(CommitOutcome::Conflict(format!(
                        "another writer moved the metadata pointer (now {c})"
                    ))),
                }
            }
            Err(e) => Ok(CommitOutcome::Unknown(format!(
                "the catalog failed during the pointer swap: {e}"
            ))),
        }
    }

    async fn drop_table(&self, table: &TableName) -> Result<()> {
        let n = if let Backend::Postgres(pg) = &self.backend {
            pg.delete(&self.name, &table.namespace_str(), &table.name)
                .await?
        } else {
            let conn = self.sqlite().expect("sqlite")?;
            conn.execute(
                "DELETE FROM iceberg_tables WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
                params![self.name, table.namespace_str(), table.name],
            )?
        };
        if n == 0 {
            return Err(Error::NoSuchTable(table.to_string()));
        }
        Ok(())
    }
}

/// Applies a change to `base`'s metadata (what a SQL catalog commits, and what the REST
/// server does on its side): requirements checked, updates applied in order.
pub fn apply_change(
    base: &LoadedTable,
    change: TableChange<'_>,
) -> Result<iceberg::spec::TableMetadataBuildResult> {
    for r in change.requirements {
        r.check(Some(&base.metadata)).map_err(|e| {
            Error::Internal(format!(
                "{}: a requirement failed on the table it was planned on: {e}",
                base.name
            ))
        })?;
    }
    let mut builder = TableMetadataBuilder::new_from_metadata(
        (*base.metadata).clone(),
        Some(base.metadata_location.clone()),
    );
    for u in change.updates.iter().cloned() {
        builder = u.apply(builder)?;
    }
    let mut built = builder.build()?;
    if change.trim_metadata_log {
        // TableMetadata has no public setter for its log: edit its JSON form.
        let mut json = serde_json::to_value(&built.metadata)?;
        if let Some(obj) = json.as_object_mut() {
            obj.insert("metadata-log".into(), serde_json::Value::Array(Vec::new()));
        }
        built.metadata = serde_json::from_value(json)?;
    }
    Ok(built)
}

/// With `write.metadata.delete-after-commit.enabled`, removes metadata files that fell out of
/// the metadata log (at most `write.metadata.previous-versions-max` are kept, default 100).
fn remove_expired_metadata(
    store: &dyn FileStore,
    metadata: &iceberg::spec::TableMetadata,
    expired: &[iceberg::spec::MetadataLog],
) {
    let enabled = metadata
        .properties()
        .get("write.metadata.delete-after-commit.enabled")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !enabled {
        return;
    }
    for log in expired {
        if let Err(e) = store.delete(&log.metadata_file) {
            tracing::warn!(
                "could not remove old metadata file {}: {e}",
                log.metadata_file
            );
        }
    }
}

/// The catalog's names and tables, read without changing anything.
#[derive(Debug, Clone)]
pub struct CatalogProbe {
    /// Distinct `catalog_name` values with their table counts.
    pub names: Vec<(String, usize)>,
}

/// Opens a SQLite catalog read-only and checks that it is an Iceberg SQL catalog.
pub fn probe_sql_catalog(db: &Path) -> Result<CatalogProbe> {
    if !db.is_file() {
        return Err(Error::invalid(format!(
            "the catalog database {} does not exist (give the SQLite file PyIceberg's SqlCatalog or Java's JdbcCatalog uses, e.g. --catalog sqlite:////path/catalog.db)",
            db.display()
        )));
    }
    let not_catalog = |why: String| {
        Error::invalid(format!(
            "{} is not an Iceberg SQL catalog: {why}",
            db.display()
        ))
    };
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| not_catalog(format!("can't open it as SQLite ({e})")))?;
    let has_table: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'iceberg_tables'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(|e| not_catalog(format!("it is not a SQLite database ({e})")))?
        > 0;
    if !has_table {
        return Err(not_catalog("it has no `iceberg_tables` table".into()));
    }
    let mut stmt = conn
        .prepare("SELECT catalog_name, count(*) FROM iceberg_tables GROUP BY catalog_name ORDER BY catalog_name")
        .map_err(|e| not_catalog(format!("its `iceberg_tables` lacks the catalog columns ({e})")))?;
    let names = stmt
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as usize))
        })?
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(CatalogProbe { names })
}

/// The tables of catalog `name` in a SQL catalog file with their metadata locations, read
/// without changing anything (as [`probe_sql_catalog`]).
pub fn list_sql_catalog(db: &Path, name: &str) -> Result<Vec<(String, Option<String>)>> {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let mut stmt = conn.prepare(
        "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables WHERE catalog_name = ?1 ORDER BY 1, 2",
    )?;
    let rows = stmt
        .query_map([name], |r| {
            Ok((
                format!("{}.{}", r.get::<_, String>(0)?, r.get::<_, String>(1)?),
                r.get::<_, Option<String>>(2)?,
            ))
        })?
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_foreign_database_is_not_a_catalog() {
        let dir = tempfile::tempdir().unwrap();
        let e = probe_sql_catalog(&dir.path().join("nope.db"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
        let f = dir.path().join("text.db");
        std::fs::write(
            &f,
            "hello, not sqlite at all, just some text that is long enough",
        )
        .unwrap();
        let e = probe_sql_catalog(&f).unwrap_err().to_string();
        assert!(e.contains("is not an Iceberg SQL catalog"), "{e}");
        let f = dir.path().join("other.db");
        Connection::open(&f)
            .unwrap()
            .execute_batch("CREATE TABLE t (x INT);")
            .unwrap();
        let e = probe_sql_catalog(&f).unwrap_err().to_string();
        assert!(e.contains("no `iceberg_tables`"), "{e}");
        // Read-only: the foreign database is unchanged.
        let conn = Connection::open(&f).unwrap();
        let n: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    #[tokio::test]
    async fn the_sqlite_catalog_commits_through_a_synced_write_ahead_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let c = SqlCatalog::open("lethe", &path).unwrap();
        let t = TableName::parse("crm.learners").unwrap();
        c.register_table(&t, "file:///m1.json").await.unwrap();
        {
            let conn = c.sqlite().unwrap().unwrap();
            let mode: String = conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            assert_eq!(mode, "wal");
            // FULL = 2: the log is synced at every commit.
            let sync: i64 = conn
                .query_row("PRAGMA synchronous", [], |r| r.get(0))
                .unwrap();
            assert_eq!(sync, 2);
        }
        // Another connection (another process: PyIceberg) sees a swap at once.
        c.swap_location(&t, "file:///m1.json", "file:///m2.json")
            .await
            .unwrap();
        let other = Connection::open(&path).unwrap();
        let loc: String = other
            .query_row("SELECT metadata_location FROM iceberg_tables", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(loc, "file:///m2.json");
        drop(other);
        // The last connection to close folds the log into the database file.
        drop(c);
        assert!(!dir.path().join("c.db-wal").exists());
        let only_file = Connection::open(&path).unwrap();
        let loc: String = only_file
            .query_row("SELECT metadata_location FROM iceberg_tables", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(loc, "file:///m2.json");
        // A database lethe didn't create keeps its journal mode (its file is not changed).
        let theirs = dir.path().join("theirs.db");
        Connection::open(&theirs)
            .unwrap()
            .execute_batch(CREATE_TABLES)
            .unwrap();
        let bytes = std::fs::read(&theirs).unwrap();
        let c = SqlCatalog::open("lethe", &theirs).unwrap();
        c.list_tables().await.unwrap();
        drop(c);
        assert_eq!(std::fs::read(&theirs).unwrap(), bytes);
    }

    #[tokio::test]
    async fn register_swap_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let c = SqlCatalog::open("lethe", &dir.path().join("c.db")).unwrap();
        let t = TableName::parse("crm.learners").unwrap();
        c.register_table(&t, "file:///m1.json").await.unwrap();
        assert!(c.register_table(&t, "file:///m1.json").await.is_err());
        assert_eq!(c.list_tables().await.unwrap(), vec![t.clone()]);
        assert_eq!(c.list_namespaces().await.unwrap(), vec!["crm".to_string()]);
        assert_eq!(
            c.swap_location(&t, "file:///m1.json", "file:///m2.json")
                .await
                .unwrap(),
            SwapOutcome::Swapped
        );
        assert_eq!(
            c.swap_location(&t, "file:///m1.json", "file:///m3.json")
                .await
                .unwrap(),
            SwapOutcome::Conflict {
                current: Some("file:///m2.json".into())
            }
        );
        assert_eq!(
            c.current_location(&t).await.unwrap().as_deref(),
            Some("file:///m2.json")
        );
        c.drop_table(&t).await.unwrap();
        assert_eq!(c.current_location(&t).await.unwrap(), None);
    }

    #[test]
    fn table_names() {
        let t = TableName::parse("a.b.c").unwrap();
        assert_eq!(t.namespace, vec!["a", "b"]);
        assert_eq!(t.to_string(), "a.b.c");
        assert!(TableName::parse("learners").is_err());
        assert!(TableName::parse("crm.").is_err());
    }
}
