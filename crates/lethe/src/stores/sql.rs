//! The SQL both the database and the index connectors speak, on PostgreSQL
//! (`tokio-postgres`) and SQLite (`rusqlite`): typed parameters only, identifiers quoted,
//! every change in one transaction.
//!
//! Values arrive as text (the case file keeps IDs as text) and are bound in the type the store
//! actually holds, so that a probe sees what is there:
//! - PostgreSQL: as the column's type — integer columns take `bigint` parameters, text columns
//!   `text`, numeric columns `numeric`, anything else is compared as text
//!   (`column::text = ANY($1)`);
//! - SQLite: whatever the declared type (a column's type is only an affinity there: an FTS5
//!   column has none and holds integers and text side by side), a value is bound as text and,
//!   when it is an integer, as an integer too, narrowed to the rows whose value reads as the
//!   value ([`lite_match`]).
//!
//! Counts are keyed by the value asked, so they add up per subject. [`Target::text_counts`]
//! reads the same rows by the column's text form alone, with no typed parameter: the second
//! path the blind check compares a probe with (`crate::erasure::erase::stores`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};

use super::error;
use crate::error::Result;
use crate::stores::blocking;

/// Where a SQL store lives.
#[derive(Clone)]
pub(crate) enum Target {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL server: the connection URI (a secret: it holds the password).
    Postgres(Arc<SecretString>),
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Sqlite(p) => write!(f, "Sqlite({})", p.display()),
            Target::Postgres(_) => f.write_str("Postgres(<redacted>)"),
        }
    }
}

impl Target {
    /// From a store's `engine`, `path` and `url_env` (the variable read through `vars`).
    pub(crate) fn from_config(
        store: &str,
        root: &std::path::Path,
        engine: Option<&str>,
        path: Option<&str>,
        url_env: Option<&str>,
        vars: super::Vars<'_>,
    ) -> Result<Target> {
        match engine {
            Some("sqlite") => {
                let p = PathBuf::from(path.unwrap_or_default());
                Ok(Target::Sqlite(if p.is_absolute() {
                    p
                } else {
                    root.join(p)
                }))
            }
            Some("postgres") => {
                let var = url_env.unwrap_or_default();
                let url = vars(var).ok_or_else(|| {
                    error(
                        store,
                        format!("the environment variable {var} (url_env) holding its connection URI is not set"),
                    )
                })?;
                Ok(Target::Postgres(Arc::new(SecretString::from(url))))
            }
            other => Err(error(store, format!("unknown engine {other:?}"))),
        }
    }

    /// "sqlite file X" or "postgresql", for mechanisms (never the URI).
    pub(crate) fn describe(&self) -> String {
        match self {
            Target::Sqlite(p) => format!("SQLite {}", p.display()),
            Target::Postgres(_) => "PostgreSQL".to_string(),
        }
    }
}

/// Quotes an identifier, `schema.table` as two.
pub(crate) fn quote(name: &str) -> String {
    name.split('.')
        .map(|p| format!("\"{}\"", p.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(".")
}

/// A change to one table, in the order given.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// `DELETE FROM table WHERE column IN values`.
    Delete {
        /// The table.
        table: String,
        /// The reference column.
        column: String,
    },
    /// `UPDATE table SET column = tombstone, erase.. = NULL WHERE column IN values`.
    Tombstone {
        /// The table.
        table: String,
        /// The reference column.
        column: String,
        /// Further columns set to NULL.
        erase: Vec<String>,
        /// The reference's new value (None: NULL).
        value: Option<toml::Value>,
    },
}

impl Change {
    fn table(&self) -> &str {
        match self {
            Change::Delete { table, .. } | Change::Tombstone { table, .. } => table,
        }
    }
    fn column(&self) -> &str {
        match self {
            Change::Delete { column, .. } | Change::Tombstone { column, .. } => column,
        }
    }
}

/// Rows per value, for one (table, column).
pub(crate) type Counts = BTreeMap<String, u64>;

fn pg_err(store: &str, what: &str, e: tokio_postgres::Error) -> crate::Error {
    // tokio-postgres errors carry the server's message, never the connection URI.
    let detail = match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    };
    error(store, format!("{what}: {detail}"))
}

fn lite_err(store: &str, what: &str, e: rusqlite::Error) -> crate::Error {
    error(store, format!("{what}: {e}"))
}

/// Connects with TLS as the URL's `sslmode` and `sslrootcert` say (default `prefer`;
/// [`lethe_iceberg::pg`]). Errors never show the URL (it may hold a password).
async fn pg_connect(store: &str, url: &SecretString) -> Result<tokio_postgres::Client> {
    let target = lethe_iceberg::pg::parse(url.expose_secret())
        .map_err(|why| error(store, format!("its connection URL can't be used: {why}")))?;
    let (client, conn) = lethe_iceberg::pg::connect(&target, None, None)
        .await
        .map_err(|e| error(store, format!("can't connect: {e}")))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::warn!("postgres connection ended: {e}");
        }
    });
    Ok(client)
}

/// How a PostgreSQL column is compared with the values (which arrive as text).
#[derive(Debug, Clone, Copy, PartialEq)]
enum PgType {
    /// smallint, integer, bigint: compared with `bigint` parameters.
    Int,
    /// text, varchar, char: compared with `text` parameters.
    Text,
    /// numeric (decimal): compared with `numeric` parameters, so that `1113` finds `1113.00`.
    Numeric,
    /// Anything else: compared as text (`column::text`).
    Other,
}

async fn pg_type(
    store: &str,
    c: &impl tokio_postgres::GenericClient,
    table: &str,
    column: &str,
) -> Result<PgType> {
    let (schema, name) = match table.split_once('.') {
        Some((s, t)) => (Some(s.to_string()), t.to_string()),
        None => (None, table.to_string()),
    };
    let row = c
        .query_opt(
            "SELECT data_type FROM information_schema.columns \
             WHERE table_schema = COALESCE($1, current_schema()) AND table_name = $2 AND column_name = $3",
            &[&schema, &name, &column],
        )
        .await
        .map_err(|e| pg_err(store, "reading the catalog", e))?
        .ok_or_else(|| error(store, format!("no column `{column}` in table `{table}`")))?;
    let t: String = row.get(0);
    Ok(match t.as_str() {
        "smallint" | "integer" | "bigint" => PgType::Int,
        "text" | "character varying" | "character" => PgType::Text,
        "numeric" => PgType::Numeric,
        _ => PgType::Other,
    })
}

/// `v` as an integer when `v` is that integer's own text form (`1113`; not `01113`, `+1113`
/// or `1113.0`): only then are the integer and the text the same value, counted under the same
/// key.
fn canonical_int(v: &str) -> Option<i64> {
    v.parse::<i64>().ok().filter(|i| i.to_string() == v)
}

/// True when `v` is a plain decimal number (`-12`, `12.50`): what a `numeric` parameter takes.
fn decimal(v: &str) -> bool {
    let d = v.strip_prefix('-').unwrap_or(v);
    let (int, frac) = match d.split_once('.') {
        Some((i, f)) if !f.is_empty() => (i, f),
        Some(_) => return false,
        None => (d, ""),
    };
    !int.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

/// The WHERE clause comparing `column` with parameter `$n`, and the parameter, bound as the
/// column's type: `bigint` for integer columns (only values that are integers' own text forms:
/// no other text equals an integer's), `text` for text columns, `numeric` for numeric ones
/// (only decimal values), the column's text form (`::text`) for anything else.
fn pg_match(
    ty: PgType,
    column: &str,
    n: usize,
    values: &[String],
) -> (String, Box<dyn tokio_postgres::types::ToSql + Sync + Send>) {
    let c = quote(column);
    match ty {
        PgType::Int => {
            let ints: Vec<i64> = values.iter().filter_map(|v| canonical_int(v)).collect();
            (format!("{c} = ANY(${n}::bigint[])"), Box::new(ints))
        }
        PgType::Numeric => {
            let nums: Vec<String> = values.iter().filter(|v| decimal(v)).cloned().collect();
            (
                format!("{c} = ANY(${n}::text[]::numeric[])"),
                Box::new(nums),
            )
        }
        PgType::Text => (
            format!("{c} = ANY(${n}::text[])"),
            Box::new(values.to_vec()),
        ),
        PgType::Other => (
            format!("{c}::text = ANY(${n}::text[])"),
            Box::new(values.to_vec()),
        ),
    }
}

/// Rows per value of `values` in `table.column`, compared as the column's type
/// ([`pg_match`]). The counts are keyed by the value asked: the column's text form for
/// integer, text and other columns (equal to the value they matched), the value itself for a
/// numeric column (whose text form may differ: `1113.00`).
async fn pg_counts(
    store: &str,
    c: &impl tokio_postgres::GenericClient,
    table: &str,
    column: &str,
    values: &[String],
) -> Result<Counts> {
    let ty = pg_type(store, c, table, column).await?;
    let (cond, p) = pg_match(ty, column, 1, values);
    let sql = match ty {
        PgType::Numeric => format!(
            "SELECT lethe_keys.lethe_key, count(*) FROM {t} \
             JOIN unnest($1::text[]) AS lethe_keys(lethe_key) ON {c} = lethe_keys.lethe_key::numeric \
             GROUP BY 1",
            c = quote(column),
            t = quote(table)
        ),
        _ => format!(
            "SELECT {}::text, count(*) FROM {} WHERE {cond} GROUP BY 1",
            quote(column),
            quote(table)
        ),
    };
    let rows = c
        .query(
            &sql,
            &[p.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync)],
        )
        .await
        .map_err(|e| pg_err(store, &format!("counting in `{table}`"), e))?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1) as u64))
        .collect())
}

/// Rows per value in `table.column` read by the column's text form alone
/// (`column::text = ANY($1::text[])`): no typed parameter, the second path of the blind check.
async fn pg_text_counts(
    store: &str,
    c: &impl tokio_postgres::GenericClient,
    table: &str,
    column: &str,
    values: &[String],
) -> Result<Counts> {
    let sql = format!(
        "SELECT {c}::text, count(*) FROM {t} WHERE {c}::text = ANY($1::text[]) GROUP BY 1",
        c = quote(column),
        t = quote(table)
    );
    let rows = c
        .query(&sql, &[&values])
        .await
        .map_err(|e| pg_err(store, &format!("reading `{table}` by text"), e))?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1) as u64))
        .collect())
}

fn toml_to_pg(v: &toml::Value) -> Box<dyn tokio_postgres::types::ToSql + Sync + Send> {
    match v {
        toml::Value::Integer(i) => Box::new(*i),
        toml::Value::Float(f) => Box::new(*f),
        toml::Value::Boolean(b) => Box::new(*b),
        toml::Value::String(s) => Box::new(s.clone()),
        other => Box::new(other.to_string()),
    }
}

fn toml_to_lite(v: &toml::Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match v {
        toml::Value::Integer(i) => V::Integer(*i),
        toml::Value::Float(f) => V::Real(*f),
        toml::Value::Boolean(b) => V::Integer(i64::from(*b)),
        toml::Value::String(s) => V::Text(s.clone()),
        other => V::Text(other.to_string()),
    }
}

/// Checks that SQLite's `table` has `column`: an error names both.
fn lite_column(store: &str, c: &rusqlite::Connection, table: &str, column: &str) -> Result<()> {
    let mut stmt = c
        .prepare(&format!("PRAGMA table_info({})", quote(table)))
        .map_err(|e| lite_err(store, "reading the schema", e))?;
    let rows = stmt
        .query_map([], |r| r.get::<_, String>(1))
        .map_err(|e| lite_err(store, "reading the schema", e))?;
    for r in rows {
        if r.map_err(|e| lite_err(store, "reading the schema", e))? == column {
            return Ok(());
        }
    }
    Err(error(
        store,
        format!("no column `{column}` in table `{table}`"),
    ))
}

/// A row's value of `column` as the value it is compared with: its text form
/// (`CAST(column AS TEXT)`), except that a REAL holding an integer reads as that integer
/// (`1113`, not `1113.0`: what a REAL column makes of an integer ID written to it).
fn lite_key(column: &str) -> String {
    let c = quote(column);
    format!(
        "(CASE WHEN typeof({c}) = 'real' AND {c} = CAST({c} AS INTEGER) \
         THEN CAST(CAST({c} AS INTEGER) AS TEXT) ELSE CAST({c} AS TEXT) END)"
    )
}

/// SQLite's comparison of `column` with `values`, from parameter `?from` on, and its
/// parameters.
///
/// SQLite keeps a type per value, not per column: a column with no declared type (every FTS5
/// column) or BLOB affinity holds integers and text side by side as they were written, and a
/// column's declared type says little about what it holds. So whatever the declared type, each
/// value is bound as text and, when it is an integer's own text form, as an integer too —
/// `column IN (texts, integers)` (which can use an index on the column) — narrowed by
/// [`lite_key`]`(column) IN (texts)`, so that exactly the rows whose value reads as one of
/// `values` match: what the counts are keyed by, so that they add up per value.
fn lite_match(
    column: &str,
    values: &[String],
    from: usize,
) -> (String, Vec<rusqlite::types::Value>) {
    use rusqlite::types::Value as V;
    let mut params: Vec<V> = values.iter().map(|v| V::Text(v.clone())).collect();
    params.extend(
        values
            .iter()
            .filter_map(|v| canonical_int(v))
            .map(V::Integer),
    );
    let cond = format!(
        "{} IN ({}) AND {} IN ({})",
        quote(column),
        placeholders(params.len(), from),
        lite_key(column),
        placeholders(values.len(), from)
    );
    (cond, params)
}

fn placeholders(n: usize, from: usize) -> String {
    (0..n)
        .map(|i| format!("?{}", from + i))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Values per SQLite statement: each is bound twice at most (text and integer), well under
/// SQLite's limit on parameters.
const LITE_CHUNK: usize = 10_000;

/// Rows per value of `values` in `table.column` ([`lite_match`]), keyed by the value.
fn lite_counts(
    store: &str,
    c: &rusqlite::Connection,
    table: &str,
    column: &str,
    values: &[String],
) -> Result<Counts> {
    lite_column(store, c, table, column)?;
    let mut out = Counts::new();
    for chunk in values.chunks(LITE_CHUNK) {
        let (cond, params) = lite_match(column, chunk, 1);
        let sql = format!(
            "SELECT {k}, count(*) FROM {t} WHERE {cond} GROUP BY 1",
            k = lite_key(column),
            t = quote(table),
        );
        lite_count_query(store, c, table, &sql, &params, &mut out)?;
    }
    Ok(out)
}

/// Rows per value in `table.column` read by the column's text form alone
/// (`CAST(column AS TEXT) IN (values)`): no typed parameter, no affinity — the second path of
/// the blind check.
fn lite_text_counts(
    store: &str,
    c: &rusqlite::Connection,
    table: &str,
    column: &str,
    values: &[String],
) -> Result<Counts> {
    lite_column(store, c, table, column)?;
    let mut out = Counts::new();
    for chunk in values.chunks(LITE_CHUNK) {
        let params: Vec<rusqlite::types::Value> = chunk
            .iter()
            .map(|v| rusqlite::types::Value::Text(v.clone()))
            .collect();
        let sql = format!(
            "SELECT CAST({c} AS TEXT), count(*) FROM {t} WHERE CAST({c} AS TEXT) IN ({p}) GROUP BY 1",
            c = quote(column),
            t = quote(table),
            p = placeholders(chunk.len(), 1)
        );
        lite_count_query(store, c, table, &sql, &params, &mut out)?;
    }
    Ok(out)
}

fn lite_count_query(
    store: &str,
    c: &rusqlite::Connection,
    table: &str,
    sql: &str,
    params: &[rusqlite::types::Value],
    out: &mut Counts,
) -> Result<()> {
    let mut stmt = c
        .prepare(sql)
        .map_err(|e| lite_err(store, &format!("counting in `{table}`"), e))?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(params.iter()), |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
        })
        .map_err(|e| lite_err(store, &format!("counting in `{table}`"), e))?;
    for r in rows {
        let (v, n) = r.map_err(|e| lite_err(store, "counting", e))?;
        *out.entry(v).or_default() += n;
    }
    Ok(())
}

fn lite_open(store: &str, path: &std::path::Path) -> Result<rusqlite::Connection> {
    if !path.exists() {
        return Err(error(
            store,
            format!("the SQLite database {} does not exist", path.display()),
        ));
    }
    let c = rusqlite::Connection::open(path)
        .map_err(|e| lite_err(store, &format!("can't open {}", path.display()), e))?;
    c.execute_batch("PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000;")
        .map_err(|e| lite_err(store, "can't open", e))?;
    Ok(c)
}

impl Target {
    /// Rows per value in each (table, column), in one read, each value compared as the type
    /// the column holds (see [`pg_match`] and [`lite_match`]): what a probe counts.
    pub(crate) async fn counts(
        &self,
        store: &str,
        columns: &[(String, String)],
        values: &[String],
    ) -> Result<Vec<Counts>> {
        self.read_counts(store, columns, values, false).await
    }

    /// Rows per value in each (table, column), read by the column's text form alone
    /// (`CAST(column AS TEXT)`, `column::text`) with no typed parameter: a second path to what
    /// [`Target::counts`] reads, for the blind check.
    pub(crate) async fn text_counts(
        &self,
        store: &str,
        columns: &[(String, String)],
        values: &[String],
    ) -> Result<Vec<Counts>> {
        self.read_counts(store, columns, values, true).await
    }

    async fn read_counts(
        &self,
        store: &str,
        columns: &[(String, String)],
        values: &[String],
        by_text: bool,
    ) -> Result<Vec<Counts>> {
        if values.is_empty() {
            return Ok(vec![Counts::new(); columns.len()]);
        }
        match self {
            Target::Postgres(url) => {
                let c = pg_connect(store, url).await?;
                let mut out = Vec::new();
                for (t, col) in columns {
                    out.push(if by_text {
                        pg_text_counts(store, &c, t, col, values).await?
                    } else {
                        pg_counts(store, &c, t, col, values).await?
                    });
                }
                Ok(out)
            }
            Target::Sqlite(path) => {
                let (store, path, columns, values) = (
                    store.to_string(),
                    path.clone(),
                    columns.to_vec(),
                    values.to_vec(),
                );
                blocking(move || {
                    let c = lite_open(&store, &path)?;
                    columns
                        .iter()
                        .map(|(t, col)| {
                            if by_text {
                                lite_text_counts(&store, &c, t, col, &values)
                            } else {
                                lite_counts(&store, &c, t, col, &values)
                            }
                        })
                        .collect()
                })
                .await
            }
        }
    }

    /// Applies `changes` in order in one transaction; returns, per change, the rows per value
    /// it changed (counted inside the transaction before the change).
    pub(crate) async fn apply(
        &self,
        store: &str,
        changes: &[Change],
        values: &[String],
    ) -> Result<Vec<Counts>> {
        match self {
            Target::Postgres(url) => {
                let mut c = pg_connect(store, url).await?;
                let tx = c
                    .transaction()
                    .await
                    .map_err(|e| pg_err(store, "BEGIN", e))?;
                let mut out = Vec::new();
                for ch in changes {
                    let (t, col) = (ch.table(), ch.column());
                    out.push(pg_counts(store, &tx, t, col, values).await?);
                    let ty = pg_type(store, &tx, t, col).await?;
                    let (cond, p) = pg_match(ty, col, 1, values);
                    let (sql, params): (
                        String,
                        Vec<Box<dyn tokio_postgres::types::ToSql + Sync + Send>>,
                    ) = match ch {
                        Change::Delete { .. } => {
                            (format!("DELETE FROM {} WHERE {cond}", quote(t)), vec![p])
                        }
                        Change::Tombstone { erase, value, .. } => {
                            let mut sets = Vec::new();
                            let mut params = vec![p];
                            match value {
                                Some(v) => {
                                    params.push(toml_to_pg(v));
                                    sets.push(format!("{} = $2", quote(col)));
                                }
                                None => sets.push(format!("{} = NULL", quote(col))),
                            }
                            for e in erase {
                                sets.push(format!("{} = NULL", quote(e)));
                            }
                            (
                                format!("UPDATE {} SET {} WHERE {cond}", quote(t), sets.join(", ")),
                                params,
                            )
                        }
                    };
                    let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                        .iter()
                        .map(|p| p.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync))
                        .collect();
                    tx.execute(&sql, &refs)
                        .await
                        .map_err(|e| pg_err(store, &format!("changing `{t}`"), e))?;
                }
                tx.commit().await.map_err(|e| pg_err(store, "COMMIT", e))?;
                Ok(out)
            }
            Target::Sqlite(path) => {
                let (store, path, changes, values) = (
                    store.to_string(),
                    path.clone(),
                    changes.to_vec(),
                    values.to_vec(),
                );
                blocking(move || {
                    let mut c = lite_open(&store, &path)?;
                    let tx = c.transaction().map_err(|e| lite_err(&store, "BEGIN", e))?;
                    let mut out = Vec::new();
                    for ch in &changes {
                        let (t, col) = (ch.table(), ch.column());
                        out.push(lite_counts(&store, &tx, t, col, &values)?);
                        for chunk in values.chunks(LITE_CHUNK) {
                            let (cond, mut params) = lite_match(col, chunk, 1);
                            let sql = match ch {
                                Change::Delete { .. } => {
                                    format!("DELETE FROM {} WHERE {cond}", quote(t))
                                }
                                Change::Tombstone { erase, value, .. } => {
                                    let mut sets = Vec::new();
                                    match value {
                                        Some(v) => {
                                            params.push(toml_to_lite(v));
                                            sets.push(format!(
                                                "{} = ?{}",
                                                quote(col),
                                                params.len()
                                            ));
                                        }
                                        None => sets.push(format!("{} = NULL", quote(col))),
                                    }
                                    for e in erase {
                                        sets.push(format!("{} = NULL", quote(e)));
                                    }
                                    format!(
                                        "UPDATE {} SET {} WHERE {cond}",
                                        quote(t),
                                        sets.join(", ")
                                    )
                                }
                            };
                            tx.execute(&sql, rusqlite::params_from_iter(params.iter()))
                                .map_err(|e| lite_err(&store, &format!("changing `{t}`"), e))?;
                        }
                    }
                    tx.commit().map_err(|e| lite_err(&store, "COMMIT", e))?;
                    Ok(out)
                })
                .await
            }
        }
    }

    /// Foreign keys among `tables`: (child, parent) pairs, names as configured.
    pub(crate) async fn foreign_keys(
        &self,
        store: &str,
        tables: &[String],
    ) -> Result<Vec<(String, String)>> {
        match self {
            Target::Postgres(url) => {
                let c = pg_connect(store, url).await?;
                let schema: String = c
                    .query_one("SELECT current_schema()", &[])
                    .await
                    .map_err(|e| pg_err(store, "reading the catalog", e))?
                    .get(0);
                let full = |t: &str| {
                    if t.contains('.') {
                        t.to_string()
                    } else {
                        format!("{schema}.{t}")
                    }
                };
                let rows = c
                    .query(
                        "SELECT cn.nspname || '.' || c.relname, pn.nspname || '.' || p.relname \
                         FROM pg_constraint k \
                         JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace cn ON cn.oid = c.relnamespace \
                         JOIN pg_class p ON p.oid = k.confrelid JOIN pg_namespace pn ON pn.oid = p.relnamespace \
                         WHERE k.contype = 'f'",
                        &[],
                    )
                    .await
                    .map_err(|e| pg_err(store, "reading foreign keys", e))?;
                let by_full: BTreeMap<String, String> =
                    tables.iter().map(|t| (full(t), t.clone())).collect();
                Ok(rows
                    .iter()
                    .filter_map(|r| {
                        let (ch, pa): (String, String) = (r.get(0), r.get(1));
                        Some((by_full.get(&ch)?.clone(), by_full.get(&pa)?.clone()))
                    })
                    .collect())
            }
            Target::Sqlite(path) => {
                let (store, path, tables) = (store.to_string(), path.clone(), tables.to_vec());
                blocking(move || {
                    let c = lite_open(&store, &path)?;
                    let mut out = Vec::new();
                    for t in &tables {
                        let mut stmt = c
                            .prepare(&format!("PRAGMA foreign_key_list({})", quote(t)))
                            .map_err(|e| lite_err(&store, "reading foreign keys", e))?;
                        let parents = stmt
                            .query_map([], |r| r.get::<_, String>(2))
                            .map_err(|e| lite_err(&store, "reading foreign keys", e))?;
                        for p in parents {
                            let p = p.map_err(|e| lite_err(&store, "reading foreign keys", e))?;
                            if let Some(parent) = tables.iter().find(|x| x.eq_ignore_ascii_case(&p))
                            {
                                out.push((t.clone(), parent.clone()));
                            }
                        }
                    }
                    Ok(out)
                })
                .await
            }
        }
    }

    /// Every distinct non-null value of each (table, column), as text.
    pub(crate) async fn distinct(
        &self,
        store: &str,
        columns: &[(String, String)],
    ) -> Result<Vec<String>> {
        let mut out = Vec::new();
        match self {
            Target::Postgres(url) => {
                let c = pg_connect(store, url).await?;
                for (t, col) in columns {
                    let sql = format!(
                        "SELECT DISTINCT {c}::text FROM {t} WHERE {c} IS NOT NULL",
                        c = quote(col),
                        t = quote(t)
                    );
                    for r in c
                        .query(&sql, &[])
                        .await
                        .map_err(|e| pg_err(store, &format!("reading `{t}`"), e))?
                    {
                        out.push(r.get::<_, String>(0));
                    }
                }
            }
            Target::Sqlite(path) => {
                let (store, path, columns) = (store.to_string(), path.clone(), columns.to_vec());
                out = blocking(move || {
                    let c = lite_open(&store, &path)?;
                    let mut out = Vec::new();
                    for (t, col) in &columns {
                        let sql = format!(
                            "SELECT DISTINCT CAST({c} AS TEXT) FROM {t} WHERE {c} IS NOT NULL",
                            c = quote(col),
                            t = quote(t)
                        );
                        let mut stmt = c
                            .prepare(&sql)
                            .map_err(|e| lite_err(&store, &format!("reading `{t}`"), e))?;
                        let rows = stmt
                            .query_map([], |r| r.get::<_, String>(0))
                            .map_err(|e| lite_err(&store, &format!("reading `{t}`"), e))?;
                        for r in rows {
                            out.push(r.map_err(|e| lite_err(&store, "reading", e))?);
                        }
                    }
                    Ok(out)
                })
                .await?;
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The largest value of a timestamp column (`max(column)`), as RFC 3339 text or SQLite's
    /// stored text; `None` when the table is empty.
    pub(crate) async fn max_text(
        &self,
        store: &str,
        table: &str,
        column: &str,
    ) -> Result<Option<String>> {
        match self {
            Target::Postgres(url) => {
                let c = pg_connect(store, url).await?;
                let sql = format!(
                    "SELECT to_char(max({c}) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM {t}",
                    c = quote(column),
                    t = quote(table)
                );
                let row = c
                    .query_one(&sql, &[])
                    .await
                    .map_err(|e| pg_err(store, &format!("reading `{table}`"), e))?;
                Ok(row.get::<_, Option<String>>(0))
            }
            Target::Sqlite(path) => {
                let (store, path, table, column) = (
                    store.to_string(),
                    path.clone(),
                    table.to_string(),
                    column.to_string(),
                );
                blocking(move || {
                    let c = lite_open(&store, &path)?;
                    c.query_row(
                        &format!("SELECT max({}) FROM {}", quote(&column), quote(&table)),
                        [],
                        |r| r.get::<_, Option<String>>(0),
                    )
                    .map_err(|e| lite_err(&store, &format!("reading `{table}`"), e))
                })
                .await
            }
        }
    }
}

/// The column and value that find a seeded row (its single-column primary key).
pub(crate) type Locator = (String, String);

/// A column as the seeding hook sees it.
#[derive(Debug, Clone)]
struct SeedColumn {
    name: String,
    ty: PgType,
    primary: bool,
    foreign: bool,
    nullable: bool,
}

/// What a seeded column gets.
#[derive(Debug)]
enum SeedValue {
    /// The template's value.
    Copy,
    /// NULL.
    Null,
    /// A parameter: integer or text.
    Int(i64),
    Text(String),
}

/// `INSERT INTO t (cols) SELECT exprs FROM t LIMIT 1`: a copy of one row of `t` with the
/// seeded values — a template's value is its column, NULL is NULL, and every integer or text
/// value becomes the placeholder `param` returns (after binding it), so no value is ever
/// spliced into the SQL text.
fn seed_insert(
    t: &str,
    cols: &[SeedColumn],
    vals: Vec<SeedValue>,
    mut param: impl FnMut(SeedValue) -> String,
) -> String {
    let exprs: Vec<String> = cols
        .iter()
        .zip(vals)
        .map(|(c, v)| match v {
            SeedValue::Copy => quote(&c.name),
            SeedValue::Null => "NULL".to_string(),
            v => param(v),
        })
        .collect();
    format!(
        "INSERT INTO {t} ({}) SELECT {} FROM {t} LIMIT 1",
        cols.iter()
            .map(|c| quote(&c.name))
            .collect::<Vec<_>>()
            .join(", "),
        exprs.join(", "),
        t = quote(t)
    )
}

/// The value of each column of a seeded row: the subject column `column` gets `value`, a
/// single-column primary key `key` (as text for a text key: `drill-<key>`), other text columns
/// `text(name)` unless they are foreign keys (copied: they point at rows that exist), other
/// columns NULL when nullable and the template's value otherwise. Returns the values and the
/// key (column, value) that finds the row, if there is a single-column primary key.
fn seed_values(
    store: &str,
    table: &str,
    cols: &[SeedColumn],
    column: &str,
    value: &str,
    key: i64,
    text: &str,
) -> Result<(Vec<SeedValue>, Option<Locator>)> {
    if !cols.iter().any(|c| c.name == column) {
        return Err(error(
            store,
            format!("no column `{column}` in table `{table}`"),
        ));
    }
    let pks: Vec<&SeedColumn> = cols.iter().filter(|c| c.primary).collect();
    let single_pk = (pks.len() == 1).then(|| pks[0].name.clone());
    let mut found = None;
    let mut out = Vec::new();
    for c in cols {
        let v = if c.name == column {
            match c.ty {
                PgType::Int => SeedValue::Int(value.parse().map_err(|_| {
                    error(
                        store,
                        format!(
                            "`{table}.{column}` is an integer column; the subject's value isn't"
                        ),
                    )
                })?),
                _ => SeedValue::Text(value.to_string()),
            }
        } else if single_pk.as_deref() == Some(c.name.as_str()) {
            match c.ty {
                PgType::Int => SeedValue::Int(key),
                PgType::Text => SeedValue::Text(format!("drill-{key}")),
                PgType::Numeric | PgType::Other => SeedValue::Copy,
            }
        } else if c.foreign {
            SeedValue::Copy
        } else if c.ty == PgType::Text {
            SeedValue::Text(format!("{text} {}", c.name))
        } else if c.nullable {
            SeedValue::Null
        } else {
            SeedValue::Copy
        };
        if single_pk.as_deref() == Some(c.name.as_str()) {
            found = match &v {
                SeedValue::Int(i) => Some((c.name.clone(), i.to_string())),
                SeedValue::Text(t) => Some((c.name.clone(), t.clone())),
                _ => None,
            };
        }
        out.push(v);
    }
    Ok((out, found))
}

fn lite_columns(store: &str, c: &rusqlite::Connection, table: &str) -> Result<Vec<SeedColumn>> {
    let mut fks = std::collections::BTreeSet::new();
    {
        let mut stmt = c
            .prepare(&format!("PRAGMA foreign_key_list({})", quote(table)))
            .map_err(|e| lite_err(store, "reading foreign keys", e))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(3))
            .map_err(|e| lite_err(store, "reading foreign keys", e))?;
        for r in rows {
            fks.insert(r.map_err(|e| lite_err(store, "reading foreign keys", e))?);
        }
    }
    let mut stmt = c
        .prepare(&format!("PRAGMA table_info({})", quote(table)))
        .map_err(|e| lite_err(store, "reading the schema", e))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(5)?,
            ))
        })
        .map_err(|e| lite_err(store, "reading the schema", e))?;
    let mut out = Vec::new();
    for r in rows {
        let (name, ty, notnull, pk) = r.map_err(|e| lite_err(store, "reading the schema", e))?;
        let up = ty.to_ascii_uppercase();
        // SQLite's affinity rules: INT → integer; CHAR, CLOB, TEXT or no type (an FTS5
        // column) → text.
        let ty = if up.contains("INT") {
            PgType::Int
        } else if up.is_empty() || up.contains("CHAR") || up.contains("CLOB") || up.contains("TEXT")
        {
            PgType::Text
        } else {
            PgType::Other
        };
        out.push(SeedColumn {
            foreign: fks.contains(&name),
            name,
            ty,
            primary: pk > 0,
            nullable: notnull == 0 && pk == 0,
        });
    }
    if out.is_empty() {
        return Err(error(store, format!("no table `{table}`")));
    }
    Ok(out)
}

async fn pg_columns(
    store: &str,
    c: &impl tokio_postgres::GenericClient,
    table: &str,
) -> Result<Vec<SeedColumn>> {
    let rows = c
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull, \
             EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = a.attrelid AND k.contype = 'p' AND a.attnum = ANY(k.conkey)), \
             EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = a.attrelid AND k.contype = 'f' AND a.attnum = ANY(k.conkey)) \
             FROM pg_attribute a WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
            &[&table],
        )
        .await
        .map_err(|e| pg_err(store, &format!("reading the columns of `{table}`"), e))?;
    Ok(rows
        .iter()
        .map(|r| {
            let t: String = r.get(1);
            SeedColumn {
                name: r.get(0),
                ty: match t.as_str() {
                    "smallint" | "integer" | "bigint" => PgType::Int,
                    t if t == "text" || t.starts_with("character") => PgType::Text,
                    _ => PgType::Other,
                },
                nullable: r.get(2),
                primary: r.get(3),
                foreign: r.get(4),
            }
        })
        .collect())
}

impl Target {
    /// The drill's seeding hook for SQL stores: into each of `tables` ((table, subject column),
    /// parents first), in one transaction, one row copied from the table's first row (see
    /// [`seed_values`]). Returns, per table, the rows inserted (0 for an empty table) and the
    /// key that finds the row.
    pub(crate) async fn seed(
        &self,
        store: &str,
        tables: &[(String, String)],
        value: &str,
        key: i64,
        text: &str,
    ) -> Result<Vec<(u64, Option<Locator>)>> {
        match self {
            Target::Postgres(url) => {
                let mut c = pg_connect(store, url).await?;
                let tx = c
                    .transaction()
                    .await
                    .map_err(|e| pg_err(store, "BEGIN", e))?;
                let mut out = Vec::new();
                for (t, col) in tables {
                    let cols = pg_columns(store, &tx, t).await?;
                    let (vals, found) = seed_values(store, t, &cols, col, value, key, text)?;
                    let mut params: Vec<Box<dyn tokio_postgres::types::ToSql + Sync + Send>> =
                        Vec::new();
                    let sql = seed_insert(t, &cols, vals, |v| match v {
                        SeedValue::Int(i) => {
                            params.push(Box::new(i));
                            format!("${}::bigint", params.len())
                        }
                        SeedValue::Text(s) => {
                            params.push(Box::new(s));
                            format!("${}::text", params.len())
                        }
                        SeedValue::Copy | SeedValue::Null => unreachable!("not a parameter"),
                    });
                    let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                        .iter()
                        .map(|p| p.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync))
                        .collect();
                    let n = tx
                        .execute(&sql, &refs)
                        .await
                        .map_err(|e| pg_err(store, &format!("seeding `{t}`"), e))?;
                    out.push((n, found.filter(|_| n > 0)));
                }
                tx.commit().await.map_err(|e| pg_err(store, "COMMIT", e))?;
                Ok(out)
            }
            Target::Sqlite(path) => {
                let (store, path, tables, value, text) = (
                    store.to_string(),
                    path.clone(),
                    tables.to_vec(),
                    value.to_string(),
                    text.to_string(),
                );
                blocking(move || {
                    let store = store.as_str();
                    let mut c = lite_open(store, &path)?;
                    let tx = c.transaction().map_err(|e| lite_err(store, "BEGIN", e))?;
                    let mut out = Vec::new();
                    for (t, col) in &tables {
                        let cols = lite_columns(store, &tx, t)?;
                        let (vals, found) = seed_values(store, t, &cols, col, &value, key, &text)?;
                        let mut params: Vec<rusqlite::types::Value> = Vec::new();
                        let sql = seed_insert(t, &cols, vals, |v| {
                            params.push(match v {
                                SeedValue::Int(i) => rusqlite::types::Value::Integer(i),
                                SeedValue::Text(s) => rusqlite::types::Value::Text(s),
                                SeedValue::Copy | SeedValue::Null => {
                                    unreachable!("not a parameter")
                                }
                            });
                            format!("?{}", params.len())
                        });
                        let n = tx
                            .execute(&sql, rusqlite::params_from_iter(params.iter()))
                            .map_err(|e| lite_err(store, &format!("seeding `{t}`"), e))?
                            as u64;
                        out.push((n, found.filter(|_| n > 0)));
                    }
                    tx.commit().map_err(|e| lite_err(store, "COMMIT", e))?;
                    Ok(out)
                })
                .await
            }
        }
    }

    /// Deletes the rows found by `keys` ((table, key column, key value), children first), in
    /// one transaction. Returns the rows deleted.
    pub(crate) async fn delete_keys(
        &self,
        store: &str,
        keys: &[(String, String, String)],
    ) -> Result<u64> {
        let mut n = 0u64;
        match self {
            Target::Postgres(url) => {
                let mut c = pg_connect(store, url).await?;
                let tx = c
                    .transaction()
                    .await
                    .map_err(|e| pg_err(store, "BEGIN", e))?;
                for (t, col, v) in keys {
                    let ty = pg_type(store, &tx, t, col).await?;
                    let (cond, p) = pg_match(ty, col, 1, std::slice::from_ref(v));
                    n += tx
                        .execute(
                            &format!("DELETE FROM {} WHERE {cond}", quote(t)),
                            &[p.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync)],
                        )
                        .await
                        .map_err(|e| {
                            pg_err(store, &format!("removing the drill's row from `{t}`"), e)
                        })?;
                }
                tx.commit().await.map_err(|e| pg_err(store, "COMMIT", e))?;
            }
            Target::Sqlite(path) => {
                let (store, path, keys) = (store.to_string(), path.clone(), keys.to_vec());
                n = blocking(move || {
                    let store = store.as_str();
                    let mut c = lite_open(store, &path)?;
                    let tx = c.transaction().map_err(|e| lite_err(store, "BEGIN", e))?;
                    let mut n = 0u64;
                    for (t, col, v) in &keys {
                        lite_column(store, &tx, t, col)?;
                        let (cond, p) = lite_match(col, std::slice::from_ref(v), 1);
                        n += tx
                            .execute(
                                &format!("DELETE FROM {} WHERE {cond}", quote(t)),
                                rusqlite::params_from_iter(p.iter()),
                            )
                            .map_err(|e| {
                                lite_err(store, &format!("removing the drill's row from `{t}`"), e)
                            })? as u64;
                    }
                    tx.commit().map_err(|e| lite_err(store, "COMMIT", e))?;
                    Ok(n)
                })
                .await?;
            }
        }
        Ok(n)
    }
}

/// Orders `tables` so that every child (a table with a foreign key to another) comes before
/// its parent; ties keep the configured order. A cycle of foreign keys keeps the configured
/// order for the tables in it.
pub(crate) fn children_first(tables: &[String], fks: &[(String, String)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut placed = std::collections::BTreeSet::new();
    fn place(
        t: &str,
        fks: &[(String, String)],
        placed: &mut std::collections::BTreeSet<String>,
        visiting: &mut std::collections::BTreeSet<String>,
        out: &mut Vec<String>,
    ) {
        if placed.contains(t) || !visiting.insert(t.to_string()) {
            return;
        }
        // Children of t go first.
        for (child, parent) in fks {
            if parent == t && child != t {
                place(child, fks, placed, visiting, out);
            }
        }
        visiting.remove(t);
        if placed.insert(t.to_string()) {
            out.push(t.to_string());
        }
    }
    for t in tables {
        place(t, fks, &mut placed, &mut Default::default(), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, ty: PgType, primary: bool, foreign: bool, nullable: bool) -> SeedColumn {
        SeedColumn {
            name: name.into(),
            ty,
            primary,
            foreign,
            nullable,
        }
    }

    #[test]
    fn a_seeded_row_copies_no_value_of_a_person() {
        let cols = [
            col("ticket_id", PgType::Text, true, false, false),
            col("learner_id", PgType::Int, false, true, true),
            col("course_id", PgType::Int, false, true, false),
            col("body", PgType::Text, false, false, true),
            col("opened_on", PgType::Other, false, false, true),
            col("amount", PgType::Other, false, false, false),
        ];
        let (vals, key) = seed_values(
            "s",
            "tickets",
            &cols,
            "learner_id",
            "990000000",
            7,
            "lethe drill d-7",
        )
        .unwrap();
        assert_eq!(key, Some(("ticket_id".into(), "drill-7".into())));
        assert!(matches!(&vals[0], SeedValue::Text(t) if t == "drill-7"));
        // The subject column gets the synthetic subject, though it is a foreign key too.
        assert!(matches!(vals[1], SeedValue::Int(990000000)));
        // Other foreign keys point at rows that exist: copied.
        assert!(matches!(vals[2], SeedValue::Copy));
        assert!(matches!(&vals[3], SeedValue::Text(t) if t == "lethe drill d-7 body"));
        assert!(matches!(vals[4], SeedValue::Null));
        // Not nullable and not text: the template's value (a count, an amount; not a person's).
        assert!(matches!(vals[5], SeedValue::Copy));
        // Without a single-column key there is no locator (the erasure removes the row).
        let two = [
            col("a", PgType::Int, true, false, false),
            col("b", PgType::Int, true, false, false),
            col("learner_id", PgType::Int, false, false, true),
        ];
        let (_, key) = seed_values("s", "t", &two, "learner_id", "1", 7, "x").unwrap();
        assert_eq!(key, None);
        let e = seed_values("s", "t", &two, "email", "1", 7, "x").unwrap_err();
        assert!(
            e.to_string().contains("no column `email` in table `t`"),
            "{e}"
        );
        let e = seed_values("s", "t", &two, "learner_id", "not-a-number", 7, "x").unwrap_err();
        assert!(e.to_string().contains("is an integer column"), "{e}");
    }

    #[test]
    fn children_go_before_parents() {
        let tables: Vec<String> = ["learners", "payments", "tickets", "replies"]
            .map(String::from)
            .to_vec();
        let fks = vec![
            ("payments".to_string(), "learners".to_string()),
            ("tickets".to_string(), "learners".to_string()),
            ("replies".to_string(), "tickets".to_string()),
        ];
        let o = children_first(&tables, &fks);
        let pos = |t: &str| o.iter().position(|x| x == t).unwrap();
        assert!(pos("payments") < pos("learners"));
        assert!(pos("tickets") < pos("learners"));
        assert!(pos("replies") < pos("tickets"));
        assert_eq!(o.len(), 4);
    }

    #[test]
    fn integers_are_bound_only_for_their_own_text_form() {
        assert_eq!(canonical_int("1113"), Some(1113));
        assert_eq!(canonical_int("-5"), Some(-5));
        assert_eq!(canonical_int("0"), Some(0));
        for v in [
            "01113",
            "+1113",
            "1113.0",
            " 1113",
            "u-17",
            "",
            "99999999999999999999",
        ] {
            assert_eq!(canonical_int(v), None, "{v}");
        }
        for v in ["12", "-12.50", "0.5"] {
            assert!(decimal(v), "{v}");
        }
        for v in ["1e3", "12.", ".5", "abc", "-", "", "NaN", "1 2"] {
            assert!(!decimal(v), "{v}");
        }
    }

    /// SQLite keeps a type per value: an FTS5 column (no declared type) holds integers and
    /// text side by side, a REAL column turns an integer into 1113.0, an INTEGER column keeps
    /// text it can't convert. Each is found by the value's text, counted under it, and nothing
    /// else is (`01113` is another value).
    #[test]
    fn sqlite_matches_integers_and_text_whatever_the_declared_type() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE VIRTUAL TABLE f USING fts5(uid UNINDEXED, body);
             CREATE TABLE r (uid REAL);
             CREATE TABLE i (uid INTEGER);
             INSERT INTO f VALUES (1113, 'a'), ('1113', 'b'), (11130, 'c'), ('01113', 'd'), ('x', 'e');
             INSERT INTO r VALUES (1113), ('1113'), (1113.5);
             INSERT INTO i VALUES (1113), ('x'), (7);",
        )
        .unwrap();
        let values = vec!["1113".to_string(), "x".to_string()];
        let counts = |t: &str| lite_counts("s", &c, t, "uid", &values).unwrap();
        let by_text = |t: &str| lite_text_counts("s", &c, t, "uid", &values).unwrap();
        let m =
            |v: &[(&str, u64)]| -> Counts { v.iter().map(|(k, n)| (k.to_string(), *n)).collect() };
        assert_eq!(counts("f"), m(&[("1113", 2), ("x", 1)]));
        assert_eq!(counts("r"), m(&[("1113", 2)]));
        assert_eq!(counts("i"), m(&[("1113", 1), ("x", 1)]));
        // By text alone: the FTS5 rows too; a REAL's 1113.0 doesn't read as 1113.
        assert_eq!(by_text("f"), m(&[("1113", 2), ("x", 1)]));
        assert_eq!(by_text("r"), m(&[]));
        // The delete takes exactly the rows counted.
        let (cond, params) = lite_match("uid", &values, 1);
        let n = c
            .execute(
                &format!("DELETE FROM f WHERE {cond}"),
                rusqlite::params_from_iter(params.iter()),
            )
            .unwrap();
        assert_eq!(n, 3);
        let left: i64 = c
            .query_row("SELECT count(*) FROM f", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 2, "11130 and '01113' are kept");
        let e = lite_counts("s", &c, "f", "nope", &values).unwrap_err();
        assert!(
            e.to_string().contains("no column `nope` in table `f`"),
            "{e}"
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("app.learners"), "\"app\".\"learners\"");
        assert_eq!(quote("we\"ird"), "\"we\"\"ird\"");
    }
}
