//! The learning platform's application database: the source of truth the warehouse's
//! `crm.learners`, `support.tickets` and `billing.payments` are loaded from every night.
//!
//! SQLite (`app/app.db`) by default, so the demo needs nothing installed; PostgreSQL when
//! `demo init` is given a connection URI (registered in stores.toml with `url_env =
//! "LETHE_DEMO_APP_DB_URL"`). Tables `learners`, `tickets` and `payments`, with foreign keys
//! from tickets and payments to learners, so an erasure must delete children first. Columns
//! have the warehouse's names; dates are stored as days since 1970 and timestamps as
//! microseconds, as the application does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Date32Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Schema as ArrowSchema, TimeUnit};
use secrecy::{ExposeSecret, SecretString};

use lethe::error::{Error, Result};

/// The SQLite application database, relative to the demo folder.
pub const APP_DB: &str = "app/app.db";
/// The variable holding the PostgreSQL application database's URI, when it is PostgreSQL.
pub const APP_DB_URL_ENV: &str = "LETHE_DEMO_APP_DB_URL";

/// Where the application database lives.
#[derive(Clone)]
pub enum AppDb {
    /// `app/app.db` in the demo folder.
    Sqlite,
    /// A PostgreSQL database (the URI holds a password).
    Postgres(Arc<SecretString>),
}

impl std::fmt::Debug for AppDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppDb::Sqlite => f.write_str("Sqlite"),
            AppDb::Postgres(_) => f.write_str("Postgres(<redacted>)"),
        }
    }
}

/// The application's tables: (name, warehouse table, primary key).
pub const TABLES: &[(&str, &str, &str)] = &[
    ("learners", "crm.learners", "learner_id"),
    ("tickets", "support.tickets", "ticket_id"),
    ("payments", "billing.payments", "payment_id"),
];

fn sql_type(dt: &DataType, postgres: bool) -> &'static str {
    match dt {
        DataType::Int64 | DataType::Timestamp(_, _) | DataType::Decimal128(_, _) => {
            if postgres {
                "BIGINT"
            } else {
                "INTEGER"
            }
        }
        DataType::Int32 | DataType::Date32 => "INTEGER",
        DataType::Boolean => {
            if postgres {
                "BOOLEAN"
            } else {
                "INTEGER"
            }
        }
        _ => "TEXT",
    }
}

/// One cell, typed for both engines.
#[derive(Debug, Clone)]
enum Cell {
    Null,
    Int(i64),
    Int32(i32),
    Bool(bool),
    Text(String),
}

fn cell(a: &ArrayRef, i: usize) -> Cell {
    if a.is_null(i) {
        return Cell::Null;
    }
    match a.data_type() {
        DataType::Int64 => Cell::Int(a.as_primitive::<arrow::datatypes::Int64Type>().value(i)),
        DataType::Int32 => Cell::Int32(a.as_primitive::<arrow::datatypes::Int32Type>().value(i)),
        DataType::Date32 => Cell::Int32(a.as_primitive::<arrow::datatypes::Date32Type>().value(i)),
        DataType::Timestamp(TimeUnit::Microsecond, _) => Cell::Int(
            a.as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .value(i),
        ),
        DataType::Decimal128(_, _) => Cell::Int(
            a.as_primitive::<arrow::datatypes::Decimal128Type>()
                .value(i) as i64,
        ),
        DataType::Boolean => Cell::Bool(a.as_boolean().value(i)),
        _ => {
            let c = arrow::compute::cast(a, &DataType::Utf8).expect("any column casts to text");
            Cell::Text(c.as_string::<i32>().value(i).to_string())
        }
    }
}

fn lite(c: &Cell) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match c {
        Cell::Null => V::Null,
        Cell::Int(i) => V::Integer(*i),
        Cell::Int32(i) => V::Integer(i64::from(*i)),
        Cell::Bool(b) => V::Integer(i64::from(*b)),
        Cell::Text(s) => V::Text(s.clone()),
    }
}

fn pg(c: &Cell, dt: &DataType) -> Box<dyn tokio_postgres::types::ToSql + Sync + Send> {
    match (c, dt) {
        (Cell::Null, DataType::Int32 | DataType::Date32) => Box::new(None::<i32>),
        (Cell::Null, DataType::Boolean) => Box::new(None::<bool>),
        (Cell::Null, DataType::Utf8) => Box::new(None::<String>),
        (Cell::Null, _) => Box::new(None::<i64>),
        (Cell::Int(i), _) => Box::new(*i),
        (Cell::Int32(i), _) => Box::new(*i),
        (Cell::Bool(b), _) => Box::new(*b),
        (Cell::Text(s), _) => Box::new(s.clone()),
    }
}

fn pg_err(what: &str, e: tokio_postgres::Error) -> Error {
    let detail = e
        .as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| e.to_string());
    Error::invalid(format!("the demo's application database: {what}: {detail}"))
}

fn lite_err(what: &str, e: rusqlite::Error) -> Error {
    Error::invalid(format!("the demo's application database: {what}: {e}"))
}

async fn pg_connect(url: &SecretString) -> Result<tokio_postgres::Client> {
    let target = lethe_iceberg::pg::parse(url.expose_secret()).map_err(|why| {
        Error::invalid(format!(
            "the demo's application database: its URL can't be used: {why}"
        ))
    })?;
    let (client, conn) = lethe_iceberg::pg::connect(&target, None, None)
        .await
        .map_err(|e| {
            Error::invalid(format!(
                "the demo's application database: can't connect: {e}"
            ))
        })?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

fn create_sql(table: &str, pk: &str, schema: &ArrowSchema, postgres: bool) -> String {
    let mut cols = Vec::new();
    for f in schema.fields() {
        let mut c = format!("{} {}", f.name(), sql_type(f.data_type(), postgres));
        if f.name() == pk {
            c.push_str(" PRIMARY KEY");
        } else if f.name() == "learner_id" {
            c.push_str(" REFERENCES learners(learner_id)");
        }
        cols.push(c);
    }
    format!("CREATE TABLE {table} ({})", cols.join(", "))
}

/// Creates the application database's tables from the generated source data and fills them.
pub async fn create(
    dir: &Path,
    db: &AppDb,
    data: &[crate::platform::data::TableData],
) -> Result<()> {
    let find = |t: &str| {
        data.iter()
            .find(|d| d.table == t)
            .ok_or_else(|| Error::Internal(format!("no data for {t}")))
    };
    match db {
        AppDb::Sqlite => {
            let path = dir.join(APP_DB);
            if let Some(p) = path.parent() {
                std::fs::create_dir_all(p).map_err(|e| Error::io(p.display().to_string(), e))?;
            }
            if path.exists() {
                std::fs::remove_file(&path)
                    .map_err(|e| Error::io(path.display().to_string(), e))?;
            }
            let mut c = rusqlite::Connection::open(&path).map_err(|e| lite_err("create", e))?;
            let tx = c.transaction().map_err(|e| lite_err("create", e))?;
            for (table, wh, pk) in TABLES {
                let d = find(wh)?;
                let schema = d.appends[0].schema();
                tx.execute_batch(&create_sql(table, pk, &schema, false))
                    .map_err(|e| lite_err("create", e))?;
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                let sql = format!(
                    "INSERT INTO {table} ({}) VALUES ({})",
                    names.join(", "),
                    (1..=names.len())
                        .map(|i| format!("?{i}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                let mut stmt = tx.prepare(&sql).map_err(|e| lite_err("insert", e))?;
                for b in &d.appends {
                    for row in 0..b.num_rows() {
                        let vals: Vec<rusqlite::types::Value> =
                            b.columns().iter().map(|a| lite(&cell(a, row))).collect();
                        stmt.execute(rusqlite::params_from_iter(vals.iter()))
                            .map_err(|e| lite_err("insert", e))?;
                    }
                }
            }
            tx.commit().map_err(|e| lite_err("create", e))?;
        }
        AppDb::Postgres(url) => {
            let mut c = pg_connect(url).await?;
            let tx = c.transaction().await.map_err(|e| pg_err("create", e))?;
            tx.batch_execute("DROP TABLE IF EXISTS payments, tickets, learners")
                .await
                .map_err(|e| pg_err("create", e))?;
            for (table, wh, pk) in TABLES {
                let d = find(wh)?;
                let schema = d.appends[0].schema();
                tx.batch_execute(&create_sql(table, pk, &schema, true))
                    .await
                    .map_err(|e| pg_err("create", e))?;
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                let per = (30_000 / names.len()).max(1);
                for b in &d.appends {
                    let mut start = 0;
                    while start < b.num_rows() {
                        let end = (start + per).min(b.num_rows());
                        let mut params: Vec<Box<dyn tokio_postgres::types::ToSql + Sync + Send>> =
                            Vec::new();
                        let mut rows = Vec::new();
                        for row in start..end {
                            let mut ph = Vec::new();
                            for (a, f) in b.columns().iter().zip(schema.fields()) {
                                params.push(pg(&cell(a, row), f.data_type()));
                                ph.push(format!("${}", params.len()));
                            }
                            rows.push(format!("({})", ph.join(", ")));
                        }
                        let sql = format!(
                            "INSERT INTO {table} ({}) VALUES {}",
                            names.join(", "),
                            rows.join(", ")
                        );
                        let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                            .iter()
                            .map(|p| p.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync))
                            .collect();
                        tx.execute(&sql, &refs)
                            .await
                            .map_err(|e| pg_err("insert", e))?;
                        start = end;
                    }
                }
            }
            tx.commit().await.map_err(|e| pg_err("create", e))?;
        }
    }
    Ok(())
}

fn build(schema: &ArrowSchema, columns: Vec<Vec<Cell>>) -> Result<RecordBatch> {
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (f, col) in schema.fields().iter().zip(columns) {
        let int = |c: &Cell| match c {
            Cell::Int(i) => Some(*i),
            Cell::Int32(i) => Some(i64::from(*i)),
            _ => None,
        };
        let a: ArrayRef = match f.data_type() {
            DataType::Int64 => Arc::new(Int64Array::from(col.iter().map(int).collect::<Vec<_>>())),
            DataType::Int32 => Arc::new(Int32Array::from(
                col.iter()
                    .map(|c| int(c).map(|i| i as i32))
                    .collect::<Vec<_>>(),
            )),
            DataType::Date32 => Arc::new(Date32Array::from(
                col.iter()
                    .map(|c| int(c).map(|i| i as i32))
                    .collect::<Vec<_>>(),
            )),
            DataType::Timestamp(TimeUnit::Microsecond, tz) => Arc::new(
                TimestampMicrosecondArray::from(col.iter().map(int).collect::<Vec<_>>())
                    .with_timezone_opt(tz.clone()),
            ),
            DataType::Boolean => Arc::new(BooleanArray::from(
                col.iter()
                    .map(|c| match c {
                        Cell::Bool(b) => Some(*b),
                        Cell::Int(i) => Some(*i != 0),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            )),
            DataType::Utf8 => Arc::new(StringArray::from(
                col.iter()
                    .map(|c| match c {
                        Cell::Text(s) => Some(s.clone()),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            )),
            other => {
                return Err(Error::Internal(format!(
                    "the demo's application database can't load a {other} column"
                )));
            }
        };
        arrays.push(a);
    }
    Ok(RecordBatch::try_new(Arc::new(schema.clone()), arrays)?)
}

/// Reads one application table as a batch with `schema` (the warehouse table's columns).
pub async fn read(
    dir: &Path,
    db: &AppDb,
    table: &str,
    schema: &ArrowSchema,
) -> Result<RecordBatch> {
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let pk = TABLES
        .iter()
        .find(|t| t.0 == table)
        .map(|t| t.2)
        .unwrap_or("1");
    let sql = format!("SELECT {} FROM {table} ORDER BY {pk}", names.join(", "));
    let mut columns: Vec<Vec<Cell>> = vec![Vec::new(); names.len()];
    match db {
        AppDb::Sqlite => {
            let path: PathBuf = dir.join(APP_DB);
            let c = rusqlite::Connection::open(&path).map_err(|e| lite_err("open", e))?;
            let mut stmt = c.prepare(&sql).map_err(|e| lite_err("read", e))?;
            let mut rows = stmt.query([]).map_err(|e| lite_err("read", e))?;
            while let Some(r) = rows.next().map_err(|e| lite_err("read", e))? {
                for (i, col) in columns.iter_mut().enumerate() {
                    use rusqlite::types::ValueRef as V;
                    col.push(match r.get_ref(i).map_err(|e| lite_err("read", e))? {
                        V::Null => Cell::Null,
                        V::Integer(x) => Cell::Int(x),
                        V::Real(x) => Cell::Text(x.to_string()),
                        V::Text(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
                        V::Blob(_) => Cell::Null,
                    });
                }
            }
        }
        AppDb::Postgres(url) => {
            let c = pg_connect(url).await?;
            for r in c.query(&sql, &[]).await.map_err(|e| pg_err("read", e))? {
                for (i, (col, f)) in columns.iter_mut().zip(schema.fields()).enumerate() {
                    col.push(match f.data_type() {
                        DataType::Int32 | DataType::Date32 => {
                            r.get::<_, Option<i32>>(i).map_or(Cell::Null, Cell::Int32)
                        }
                        DataType::Boolean => {
                            r.get::<_, Option<bool>>(i).map_or(Cell::Null, Cell::Bool)
                        }
                        DataType::Utf8 => {
                            r.get::<_, Option<String>>(i).map_or(Cell::Null, Cell::Text)
                        }
                        _ => r.get::<_, Option<i64>>(i).map_or(Cell::Null, Cell::Int),
                    });
                }
            }
        }
    }
    build(schema, columns)
}

/// The application database a demo folder uses: the `app_db` store of its stores.toml when
/// registered (PostgreSQL reads its URI from the store's `url_env`), else `app/app.db`.
pub fn of_demo(dir: &Path) -> Result<AppDb> {
    let reg = lethe::stores::registry::load(&dir.join("governance"))?;
    match reg.value.stores.get("app_db") {
        Some(s) if s.engine.as_deref() == Some("postgres") => {
            let var = s.url_env.clone().unwrap_or_else(|| APP_DB_URL_ENV.into());
            let url = std::env::var(&var).map_err(|_| {
                Error::invalid(format!(
                    "the demo's application database is PostgreSQL: set {var} to its URI"
                ))
            })?;
            Ok(AppDb::Postgres(Arc::new(SecretString::from(url))))
        }
        _ => Ok(AppDb::Sqlite),
    }
}
