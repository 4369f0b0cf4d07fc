//! The catalog: which tables exist and where each one's current metadata file is.
//!
//! [`Catalog`] is the seam for other catalogs (REST: Polaris, Lakekeeper, Nessie...). The
//! embedded default, [`SqlCatalog`], keeps one SQLite file with the `iceberg_tables` /
//! `iceberg_namespace_properties` schema that PyIceberg's `SqlCatalog` and Java's
//! `JdbcCatalog` share (the "v1" schema with `iceberg_type`), so either can open what lethe
//! writes and lethe can open what they write. A commit is a compare-and-swap of the
//! `metadata_location` column, as both of them do.

use std::fmt::{self, Debug, Display};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

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

/// The result of a compare-and-swap of a table's metadata pointer.
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

/// A catalog of Iceberg tables.
///
/// An `Err` from [`Catalog::swap_location`] means the outcome is unknown: the caller must
/// reconcile by reloading the pointer, and must not delete the files the commit wrote.
#[async_trait]
pub trait Catalog: Send + Sync + Debug {
    /// The catalog's name.
    fn name(&self) -> &str;
    /// Every namespace (dotted).
    async fn list_namespaces(&self) -> Result<Vec<String>>;
    /// Creates a namespace; an existing one is fine.
    async fn create_namespace(&self, namespace: &str) -> Result<()>;
    /// Every table, sorted.
    async fn list_tables(&self) -> Result<Vec<TableName>>;
    /// The table's current metadata location, or None when the table doesn't exist.
    async fn current_location(&self, table: &TableName) -> Result<Option<String>>;
    /// Registers a new table at a metadata location; fails if it exists.
    async fn register_table(&self, table: &TableName, location: &str) -> Result<()>;
    /// Moves the pointer from `expected` to `new` if it still names `expected`.
    async fn swap_location(
        &self,
        table: &TableName,
        expected: &str,
        new: &str,
    ) -> Result<SwapOutcome>;
    /// Removes a table from the catalog (files stay).
    async fn drop_table(&self, table: &TableName) -> Result<()>;
}

/// The embedded Iceberg SQL catalog on SQLite.
pub struct SqlCatalog {
    name: String,
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl Debug for SqlCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlCatalog")
            .field("name", &self.name)
            .field("path", &self.path)
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

impl SqlCatalog {
    /// Opens (creating if needed) the catalog database at `path`.
    pub fn open(name: &str, path: &Path) -> Result<SqlCatalog> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::io(parent.display().to_string(), e))?;
        }
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.execute_batch(CREATE_TABLES)?;
        // A catalog created by an older JdbcCatalog / PyIceberg (v0 schema) lacks iceberg_type.
        let has_type = conn
            .prepare("SELECT iceberg_type FROM iceberg_tables LIMIT 0")
            .is_ok();
        Ok(SqlCatalog {
            name: name.to_string(),
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        }
        .with_type_column(has_type))
    }

    /// Opens an existing catalog database; errors when the file doesn't exist.
    pub fn open_existing(name: &str, path: &Path) -> Result<SqlCatalog> {
        if !path.exists() {
            return Err(Error::invalid(format!(
                "catalog database {} does not exist",
                path.display()
            )));
        }
        SqlCatalog::open(name, path)
    }

    fn with_type_column(self, has_type: bool) -> Self {
        if !has_type {
            tracing::warn!(
                "catalog {} has the v0 schema (no iceberg_type column); lethe writes v0 rows",
                self.path.display()
            );
        }
        self
    }

    fn conn(&self) -> Result<std::sync::MutexGuard<'_, Connection>> {
        self.conn
            .lock()
            .map_err(|_| Error::Internal("catalog connection lock poisoned".into()))
    }

    fn has_type_column(conn: &Connection) -> bool {
        conn.prepare("SELECT iceberg_type FROM iceberg_tables LIMIT 0")
            .is_ok()
    }
}

#[async_trait]
impl Catalog for SqlCatalog {
    fn name(&self) -> &str {
        &self.name
    }

    async fn list_namespaces(&self) -> Result<Vec<String>> {
        let conn = self.conn()?;
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
        let conn = self.conn()?;
        conn.execute(
            "INSERT OR IGNORE INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value)
             VALUES (?1, ?2, 'exists', 'true')",
            params![self.name, namespace],
        )?;
        Ok(())
    }

    async fn list_tables(&self) -> Result<Vec<TableName>> {
        let conn = self.conn()?;
        let filter = if Self::has_type_column(&conn) {
            "AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)"
        } else {
            ""
        };
        let mut stmt = conn.prepare(&format!(
            "SELECT table_namespace, table_name FROM iceberg_tables WHERE catalog_name = ?1 {filter}
             ORDER BY table_namespace, table_name"
        ))?;
        let rows = stmt
            .query_map(params![self.name], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?;
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

    async fn current_location(&self, table: &TableName) -> Result<Option<String>> {
        let conn = self.conn()?;
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

    async fn register_table(&self, table: &TableName, location: &str) -> Result<()> {
        let conn = self.conn()?;
        let ns = table.namespace_str();
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

    async fn swap_location(
        &self,
        table: &TableName,
        expected: &str,
        new: &str,
    ) -> Result<SwapOutcome> {
        let conn = self.conn()?;
        let swap = |conn: &Connection| -> Result<usize> {
            Ok(conn.execute(
                "UPDATE iceberg_tables SET metadata_location = ?1, previous_metadata_location = ?2
                 WHERE catalog_name = ?3 AND table_namespace = ?4 AND table_name = ?5 AND metadata_location = ?2",
                params![new, expected, self.name, table.namespace_str(), table.name],
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
                params![self.name, table.namespace_str(), table.name],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten();
        Ok(SwapOutcome::Conflict { current })
    }

    async fn drop_table(&self, table: &TableName) -> Result<()> {
        let conn = self.conn()?;
        let n = conn.execute(
            "DELETE FROM iceberg_tables WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
            params![self.name, table.namespace_str(), table.name],
        )?;
        if n == 0 {
            return Err(Error::NoSuchTable(table.to_string()));
        }
        Ok(())
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
