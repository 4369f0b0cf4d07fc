//! The support team's search index: SQLite FTS5 (`search/support.db`) over the warehouse's
//! `support.tickets`, rebuilt every night by [`rebuild`], which appends a row to
//! `index_builds(built_at)` each time it runs. A delete from the index is undone by the next
//! rebuild unless `support.tickets` was erased first.

use std::path::Path;

use arrow::array::{Array, AsArray};
use chrono::Utc;
use lethe::error::{Error, Result};
use lethe::workspace::Workspace;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::select_rows;
use lethe_iceberg::predicate::Predicate;

/// The index database, relative to the demo folder.
pub const SEARCH_DB: &str = "search/support.db";

fn err(e: rusqlite::Error) -> Error {
    Error::invalid(format!("the demo's search index: {e}"))
}

/// Rebuilds the index from `support.tickets`; returns the documents indexed.
pub async fn rebuild(ws: &Workspace) -> Result<u64> {
    let name = TableName::parse("support.tickets")?;
    let t = ws.warehouse.load(&name).await?;
    let rows = select_rows(&ws.warehouse, &t, &Predicate::True).await?;
    let mut docs: Vec<(String, String, String, String)> = Vec::new();
    for b in &rows {
        let text = |c: &str| -> Result<Vec<String>> {
            let a = b
                .column_by_name(c)
                .ok_or_else(|| Error::invalid(format!("support.tickets has no column {c}")))?;
            let a = arrow::compute::cast(a, &arrow::datatypes::DataType::Utf8)?;
            let s = a.as_string::<i32>();
            Ok((0..s.len()).map(|i| s.value(i).to_string()).collect())
        };
        let (ids, learners, subjects, bodies) = (
            text("ticket_id")?,
            text("learner_id")?,
            text("subject")?,
            text("body")?,
        );
        for i in 0..ids.len() {
            docs.push((
                ids[i].clone(),
                learners[i].clone(),
                subjects[i].clone(),
                bodies[i].clone(),
            ));
        }
    }
    let path = ws.config.root.join(SEARCH_DB);
    let n = docs.len() as u64;
    tokio::task::spawn_blocking(move || -> Result<()> {
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p).map_err(|e| Error::io(p.display().to_string(), e))?;
        }
        let mut c = rusqlite::Connection::open(&path).map_err(err)?;
        let tx = c.transaction().map_err(err)?;
        tx.execute_batch(
            "CREATE VIRTUAL TABLE IF NOT EXISTS tickets_fts USING fts5(ticket_id UNINDEXED, learner_id UNINDEXED, subject, body);
             CREATE TABLE IF NOT EXISTS index_builds (built_at TEXT NOT NULL, documents INTEGER NOT NULL);
             DELETE FROM tickets_fts;",
        )
        .map_err(err)?;
        {
            let mut stmt = tx
                .prepare("INSERT INTO tickets_fts (ticket_id, learner_id, subject, body) VALUES (?1, ?2, ?3, ?4)")
                .map_err(err)?;
            for d in &docs {
                stmt.execute(rusqlite::params![d.0, d.1, d.2, d.3]).map_err(err)?;
            }
        }
        tx.execute(
            "INSERT INTO index_builds (built_at, documents) VALUES (?1, ?2)",
            rusqlite::params![Utc::now().to_rfc3339(), docs.len() as i64],
        )
        .map_err(err)?;
        tx.commit().map_err(err)
    })
    .await
    .map_err(|e| Error::Internal(format!("the rebuild failed: {e}")))??;
    Ok(n)
}

/// Documents of a learner in the index (what a support agent's search by learner finds).
pub fn documents_of(dir: &Path, learner: i64) -> Result<u64> {
    let c = rusqlite::Connection::open(dir.join(SEARCH_DB)).map_err(err)?;
    c.query_row(
        "SELECT count(*) FROM tickets_fts WHERE learner_id = ?1",
        [learner.to_string()],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as u64)
    .map_err(err)
}
