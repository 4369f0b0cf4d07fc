//! SQL over tables' current snapshots read as file lists, for engines that run queries
//! elsewhere.
//!
//! A [`QueryEngine`] gets the query's text and, for each table it reads, a [`SnapshotFiles`]:
//! the table's current schema and the data files of its current snapshot. Wherever a file is
//! read, [`SnapshotFiles::read_file`] reads it as lethe reads data files: in the table's current
//! schema, columns matched by field id ([`crate::read::read_data_file`]). The engine returns
//! the query's rows; the caller writes and commits them.
//!
//! Guarantees:
//! - A table is read as file list only when its current snapshot's rows are exactly its data
//!   files' rows: [`SnapshotFiles::of`] declines (saying why) a snapshot with delete files
//!   (their rows would come back) or a format v3 table (row lineage, deletion vectors).
//! - `Debug` shows the table and counts only.

use std::fmt;

use arrow::array::RecordBatch;
use async_trait::async_trait;
use iceberg::spec::{FormatVersion, Schema};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::read::read_data_file;
use crate::store::FileStore;
use crate::table::{LoadedTable, Warehouse};

/// One data file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotFile {
    /// Its location as the manifest spells it.
    pub location: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// A table's current snapshot as the data files that hold its rows.
#[derive(Clone, Serialize, Deserialize)]
pub struct SnapshotFiles {
    /// The table (`namespace.name`).
    pub table: String,
    /// The table's current schema (Iceberg schema JSON).
    pub schema: String,
    /// The snapshot's data files.
    pub files: Vec<SnapshotFile>,
}

impl fmt::Debug for SnapshotFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotFiles")
            .field("table", &self.table)
            .field("files", &self.files.len())
            .finish_non_exhaustive()
    }
}

impl SnapshotFiles {
    /// `table`'s current snapshot as files, or why it can't be read that way (its rows are
    /// not just its data files' rows).
    pub async fn of(
        wh: &Warehouse,
        table: &LoadedTable,
    ) -> Result<std::result::Result<Self, String>> {
        if table.metadata.format_version() == FormatVersion::V3 {
            return Ok(Err(format!(
                "{} is a format v3 table (row lineage, deletion vectors)",
                table.name
            )));
        }
        let tracked = wh.current_files(table).await?;
        let deletes = tracked.iter().filter(|f| !f.is_data()).count();
        if deletes > 0 {
            return Ok(Err(format!(
                "{}'s current snapshot has {deletes} delete file(s)",
                table.name
            )));
        }
        Ok(Ok(SnapshotFiles {
            table: table.name.to_string(),
            schema: serde_json::to_string(table.metadata.current_schema().as_ref())?,
            files: tracked
                .iter()
                .map(|f| SnapshotFile {
                    location: f.entry.data_file.file_path().to_string(),
                    bytes: f.entry.data_file.file_size_in_bytes(),
                })
                .collect(),
        }))
    }

    /// The table's current schema.
    pub fn iceberg_schema(&self) -> Result<Schema> {
        serde_json::from_str(&self.schema)
            .map_err(|e| Error::invalid(format!("the schema of {}: {e}", self.table)))
    }

    /// The rows of file `i` in the table's current schema (`schema`: [`Self::iceberg_schema`]).
    pub fn read_file(
        &self,
        store: &dyn FileStore,
        schema: &Schema,
        i: usize,
    ) -> Result<Vec<RecordBatch>> {
        let f = self.files.get(i).ok_or_else(|| {
            Error::Internal(format!(
                "file {i} of {} with {} files",
                self.table,
                self.files.len()
            ))
        })?;
        read_data_file(store, &f.location, schema)
    }
}

/// What a [`QueryEngine`] made of a query.
#[derive(Debug)]
pub enum QueryOutcome {
    /// The query's rows.
    Rows(Vec<RecordBatch>),
    /// The engine can't run this query (it can't be sent to the engine's workers); the
    /// reason names no value.
    Declined(String),
}

/// Where a SQL query over tables' current snapshots runs when it doesn't run in this process.
#[async_trait]
pub trait QueryEngine: Send + Sync + fmt::Debug {
    /// A short name for reports (`ballista`).
    fn name(&self) -> &str;

    /// Runs `sql` over `tables` (each registered as `namespace.name`) and returns its rows,
    /// or declines a query it can't run. Reads files only; never writes or commits.
    async fn query(&self, name: &str, sql: &str, tables: &[SnapshotFiles]) -> Result<QueryOutcome>;
}
