//! Copy-on-write rewrites as per-file tasks, for engines that run them elsewhere.
//!
//! A [`RowRewrite`] given a [`RewriteEngine`] (`RowRewrite::with_engine`) plans on the client
//! as always — which data files may hold matching rows, which delete files apply to each —
//! and hands the per-file work to the engine as a [`RewriteJob`]: plain data (serde), one
//! [`FileTask`] per data file. Wherever a task runs, [`PreparedRewrite::run`] does what the
//! local rewrite does to that file: reads it in the table's current schema with its delete
//! files applied, drops the selected rows or nulls the erased columns, and writes the kept
//! rows through lethe's metrics-aware writer into the table's data folder. It returns a
//! [`FileOutcome`] with the new files' metadata. The client collects the outcomes, plans the
//! delete-file cleanup and makes the one commit, exactly as for a local rewrite: an engine
//! never commits.
//!
//! Guarantees:
//! - A task's output is the same rows as the local rewrite writes for that file, into files of
//!   its own as the local rewrite writes them (so the plan of each file can be kept across
//!   the attempts of a commit, `ops/rewrite/action.rs`).
//! - Files a task writes are named `<n>-<run>-<task>-<attempt>.parquet`: every file of a job
//!   carries the job's run id, so files of attempts whose outcome was not used (an executor
//!   that died mid-task, a job that failed) can be found and removed
//!   ([`RewriteJob::is_own_file`]); they are never referenced by a commit, so the sweep
//!   removes them too.
//! - A job carries the table's metadata without its snapshot history (schemas, partition
//!   specs, properties, location), the predicate and the change. Its `Debug` shows the table
//!   and counts only: the predicate holds the subjects' IDs.

use std::fmt;

use async_trait::async_trait;
use iceberg::spec::{DataFile, StructType, TableMetadata};
use serde::{Deserialize, Serialize};

use crate::catalog::TableName;
use crate::deletes::{DeleteFileRef, DeleteReader};
use crate::error::{Error, Result};
use crate::nested::{self, FieldPath};
use crate::ops::rewrite::{RowChange, RowRewrite, apply_change};
use crate::predicate::Predicate;
use crate::read::read_data_file;
use crate::store::FileStore;
use crate::table::{LoadedTable, parse_metadata};
use crate::writer::{TableWriter, WriteOptions};

/// Where the per-file work of copy-on-write rewrites runs when it doesn't run in this process.
#[async_trait]
pub trait RewriteEngine: Send + Sync + fmt::Debug {
    /// A short name for reports (`ballista`).
    fn name(&self) -> &str;

    /// Runs every task of `job` and returns one outcome per task, in the order of
    /// `job.tasks`. Errors when any task can't be completed; then files its tasks wrote are
    /// removed where the engine can (through `store`, the caller's view of the table's
    /// store), and are unreferenced (swept) otherwise. Never commits.
    async fn rewrite_files(
        &self,
        job: &RewriteJob,
        store: &dyn FileStore,
    ) -> Result<Vec<FileOutcome>>;
}

/// The per-file work of one table's rewrite, as plain data.
#[derive(Clone, Serialize, Deserialize)]
pub struct RewriteJob {
    /// The table (`namespace.name`).
    pub table: String,
    /// The table's metadata JSON without snapshots, refs and logs.
    pub metadata: String,
    /// Which rows.
    pub predicate: Predicate,
    /// What to do with them.
    pub change: RowChange,
    /// Rows per output file at most (None: one file per partition).
    pub max_rows_per_file: Option<usize>,
    /// The job's run id: part of every file name it writes.
    pub run: String,
    /// One task per data file.
    pub tasks: Vec<FileTask>,
}

impl fmt::Debug for RewriteJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RewriteJob")
            .field("table", &self.table)
            .field("run", &self.run)
            .field("tasks", &self.tasks.len())
            .finish_non_exhaustive()
    }
}

/// One data file to rewrite and the delete files that apply to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileTask {
    /// The data file's location as the manifest spells it.
    pub data_file: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The delete files that apply to it.
    pub deletes: Vec<DeleteFileRef>,
}

/// What a task did to its data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileState {
    /// No row matched: the file stays as it is.
    Unchanged,
    /// Every live row was removed: the file goes, nothing replaces it.
    Dropped,
    /// The file goes and the files in [`FileOutcome::added`] replace it.
    Rewritten,
}

/// The result of one [`FileTask`].
#[derive(Debug, Clone)]
pub struct FileOutcome {
    /// The data file (as in the task).
    pub data_file: String,
    /// What happened to it.
    pub state: FileState,
    /// Live rows the change touched.
    pub matched: u64,
    /// Rows hidden by delete files that the predicate selects (physically removed).
    pub purged: u64,
    /// Rows written again.
    pub kept_rows: u64,
    /// The files written (metadata as the commit needs it).
    pub added: Vec<DataFile>,
}

/// The metadata a task needs: the table's without its history (snapshot list, refs, logs,
/// statistics), which can be large and which no task reads.
pub fn task_metadata(metadata: &TableMetadata) -> Result<String> {
    let mut v = serde_json::to_value(metadata)?;
    if let Some(o) = v.as_object_mut() {
        for k in [
            "snapshots",
            "snapshot-log",
            "metadata-log",
            "refs",
            "statistics",
            "partition-statistics",
            "current-snapshot-id",
        ] {
            o.remove(k);
        }
    }
    Ok(serde_json::to_string(&v)?)
}

impl RewriteJob {
    /// A job for `tasks` of `table` under `spec`.
    pub fn new(table: &LoadedTable, spec: &RowRewrite, tasks: Vec<FileTask>) -> Result<Self> {
        Ok(RewriteJob {
            table: table.name.to_string(),
            metadata: task_metadata(&table.metadata)?,
            predicate: spec.predicate.clone(),
            change: spec.change.clone(),
            max_rows_per_file: spec.options.max_rows_per_file,
            run: uuid::Uuid::new_v4().to_string(),
            tasks,
        })
    }

    /// Parses and checks the job once, for running its tasks (or reading their outcomes).
    pub fn prepare(&self) -> Result<PreparedRewrite> {
        let metadata = parse_metadata(
            &format!("the job of {}", self.table),
            self.metadata.as_bytes(),
        )?;
        let name = TableName::parse(&self.table)?;
        let schema = metadata.current_schema().clone();
        let mut nulled = Vec::new();
        if let RowChange::SetNull(cols) = &self.change {
            for c in cols {
                nulled.push(nested::resolve(&schema, c).map_err(|e| {
                    Error::invalid(format!(
                        "table `{}` has no column `{c}` to erase: {e}",
                        self.table
                    ))
                })?);
            }
        }
        self.predicate.check(&schema, &self.table)?;
        let partition_type = metadata.default_partition_spec().partition_type(&schema)?;
        Ok(PreparedRewrite {
            table: LoadedTable {
                name,
                metadata_location: String::new(),
                metadata: std::sync::Arc::new(metadata),
            },
            nulled,
            partition_type,
            job: self.clone(),
        })
    }

    /// Whether `location` is a file some task of this job writes (any attempt).
    pub fn is_own_file(&self, location: &str) -> bool {
        location
            .rsplit('/')
            .next()
            .is_some_and(|name| name.contains(&format!("-{}-", self.run)))
    }
}

/// A [`RewriteJob`] parsed and checked, ready to run its tasks.
pub struct PreparedRewrite {
    job: RewriteJob,
    table: LoadedTable,
    nulled: Vec<FieldPath>,
    partition_type: StructType,
}

impl fmt::Debug for PreparedRewrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedRewrite")
            .field("job", &self.job)
            .finish_non_exhaustive()
    }
}

impl PreparedRewrite {
    /// The job.
    pub fn job(&self) -> &RewriteJob {
        &self.job
    }

    /// The table's location (no trailing slash).
    pub fn location(&self) -> &str {
        self.table.location()
    }

    /// Runs task `task`; `attempt` tells this attempt's files from another's (a task rerun
    /// after its executor died writes files of its own). Files written before an error are
    /// removed.
    pub fn run(&self, store: &dyn FileStore, task: usize, attempt: &str) -> Result<FileOutcome> {
        let t = self.job.tasks.get(task).ok_or_else(|| {
            Error::Internal(format!(
                "task {task} of a job with {} tasks",
                self.job.tasks.len()
            ))
        })?;
        let schema = self.table.metadata.current_schema().clone();
        let batches = read_data_file(store, &t.data_file, &schema)?;
        let mut reader = DeleteReader::new(store, &self.table)?;
        let live = reader.live_masks_of(&t.deletes, &t.data_file, &batches)?;
        let out = apply_change(
            &batches,
            live.as_deref(),
            &self.job.predicate,
            &self.job.change,
            &self.nulled,
        )?;
        let mut outcome = FileOutcome {
            data_file: t.data_file.clone(),
            state: FileState::Unchanged,
            matched: out.matched,
            purged: out.purged,
            kept_rows: 0,
            added: Vec::new(),
        };
        if out.matched == 0 && out.purged == 0 && self.job.change != RowChange::RewriteAll {
            return Ok(outcome);
        }
        let kept: usize = out.kept.iter().map(|b| b.num_rows()).sum();
        if kept == 0 {
            outcome.state = FileState::Dropped;
            return Ok(outcome);
        }
        let options = WriteOptions {
            max_rows_per_file: self.job.max_rows_per_file,
        };
        let mut writer = TableWriter::new(store, &self.table.metadata, options)?
            .with_run(format!("{}-{task:05}-{attempt}", self.job.run));
        // A sorted table keeps its order: the file's rows sorted by it (as the local rewrite
        // writes them, in a file of their own), the order's id recorded.
        let sort = crate::sort::TableSort::of(&self.table.metadata)?;
        let kept_batches = match &sort {
            Some(s) => {
                writer = writer.with_sort_order_id(s.order_id());
                s.sort(&out.kept, 65_536)?
            }
            None => out.kept,
        };
        let written: Result<()> = kept_batches.iter().try_for_each(|b| writer.write(b));
        let locations = writer.locations();
        let added = written.and_then(|()| writer.finish());
        let added = match added {
            Ok(a) => a,
            Err(e) => {
                for l in locations {
                    let _ = store.delete(&l);
                }
                return Err(e);
            }
        };
        outcome.state = FileState::Rewritten;
        outcome.kept_rows = kept as u64;
        outcome.added = added;
        Ok(outcome)
    }

    /// A data file's metadata as JSON, to send it back to the client.
    pub fn encode_data_file(&self, file: DataFile) -> Result<String> {
        Ok(iceberg::spec::serialize_data_file_to_json(
            file,
            &self.partition_type,
            self.table.metadata.format_version(),
        )?)
    }

    /// A data file's metadata from [`Self::encode_data_file`]'s JSON.
    pub fn decode_data_file(&self, json: &str) -> Result<DataFile> {
        let spec = self.table.metadata.default_partition_spec();
        Ok(iceberg::spec::deserialize_data_file_from_json(
            json,
            spec.spec_id(),
            &self.partition_type,
            self.table.metadata.current_schema(),
        )?)
    }
}
