//! Copy-on-write row changes: delete rows, set columns to null, or rewrite every file.
//!
//! Guarantees:
//! - Only live data files that may hold matching rows are read: the column bounds the
//!   manifests keep prune files ([`crate::prune::file_may_match`], on the entries the
//!   warehouse already read), and in a partitioned table the iceberg crate's scan planning
//!   prunes by partition values and bounds; inside
//!   each file left, row-group statistics, bloom filters, the page index and the predicate's
//!   columns alone decide whether a stored row matches ([`crate::prune`]) before the file is
//!   read whole (`files_skipped` counts the files that don't).
//! - Merge-on-read tables are read through their delete files ([`crate::deletes`]): position
//!   and equality deletes are applied by the spec's sequence-number rules, so counts, selected
//!   rows and rewrites see live rows only.
//! - A table with a sort order keeps it: each rewritten file's rows are written sorted by it
//!   into a file of their own (so a table clustered by a column keeps its narrow bounds), and
//!   the new files record the order's id ([`crate::sort`]); a file whose entry records the
//!   order and that only loses rows is already sorted and is not sorted again.
//! - A file with no matching row is left as it is (carried as `EXISTING` only if its manifest
//!   is rewritten anyway). A file whose rows all match (or are already deleted) is dropped
//!   without writing anything. Any other affected file is rewritten with its live rows minus
//!   the matching ones (or with the columns nulled) through lethe's metrics-aware writer.
//! - A row hidden by a delete file is still stored in its data file: a file holding a hidden
//!   row that matches is rewritten too, so the row is physically gone (`rows_purged`). The
//!   rewritten file holds only live rows, so every row a delete file (or deletion vector)
//!   hid in it is gone from storage as well.
//! - In the same commit, delete files that applied only to removed data files are removed,
//!   the deletion vector of every removed data file is removed (the Puffin file's other
//!   vectors stay live; a Puffin file left with none is reported in `puffin_files_emptied` and
//!   goes with the snapshots that still reference it), position delete files naming removed
//!   data files are rewritten without those rows, and (for a delete) equality delete rows
//!   matching the predicate are dropped — no delete file is left holding the selected rows'
//!   keys or stored rows. Rewritten delete files keep their data sequence numbers.
//! - Format v3: every moved row keeps its `_row_id` and, unless the change modified it, its
//!   `_last_updated_sequence_number`, both written into the new file ([`crate::lineage`]), and
//!   the commit assigns row ids as the spec says ([`crate::snapshot`]).
//! - Rows given with [`RowRewrite::with_rows`] are added by the same commit, written in this
//!   process into files of their own (sorted by the table's order, if any): a delete with rows
//!   replaces the selected rows atomically (a pipeline's incremental recompute). Not for format
//!   v3 tables (the new rows' lineage is not assigned here).
//! - The commit records `delete` (files only removed), `append` (files only added),
//!   `overwrite` (files removed and added) or
//!   `replace` (a rewrite that changes no row), the standard counts, and the caller's summary
//!   keys. A change that matches nothing commits nothing.
//! - Each data file is planned on its own and its kept rows go into files of its own. On a
//!   lost commit race the plans are validated against the snapshots the other writer
//!   committed, as Iceberg Java's row-level operations validate them: a file's plan holds
//!   while the file is live and the same delete files apply to it, and its files are
//!   committed again; a file the other writer removed or added delete files to is planned
//!   again, a data file it added that may hold selected rows is read like any other
//!   (`rewrite/action.rs`, [`crate::commit`]). A change of the table's schema, spec, order,
//!   format or properties plans every file again.
//!
//! Not done: writing deletion vectors instead of rewriting (merge-on-read): an erasure must
//! purge.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, new_null_array};
use arrow::compute;
use async_trait::async_trait;
use futures::TryStreamExt;
use iceberg::spec::Operation;
use serde::{Deserialize, Serialize};

use crate::catalog::TableName;
use crate::commit::{ActionCommit, TableAction, commit};
use crate::deletes::{DeleteIndex, DeleteReader, check_supported};
use crate::error::{Error, Result};
use crate::lineage::{LAST_UPDATED_SEQUENCE_NUMBER, has_row_lineage, read_with_lineage};
use crate::nested::{self, FieldPath};
use crate::ops::expire;
use crate::ops::history::{HistoryReport, PurgeHistory, purge_history};
use crate::ops::rewrite_tasks::RewriteEngine;
use crate::predicate::Predicate;
use crate::prune::read_positions;
use crate::read::read_data_file;
use crate::snapshot::{SnapshotChanges, produce_written};
use crate::table::{LoadedTable, TrackedFile, Warehouse};
use crate::writer::{TableWriter, WriteOptions};

mod action;
use action::Action;

/// What happens to the rows a predicate selects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowChange {
    /// Remove them.
    Delete,
    /// Keep them with these columns set to null (tombstones, erase_columns): top-level
    /// columns, struct fields (`contact.email`), list elements' fields
    /// (`addresses.element.street`) or map values (`attributes.value`), the rest of each row
    /// kept.
    SetNull(Vec<String>),
    /// Rewrite every file unchanged (applies new metrics properties); the predicate is ignored.
    RewriteAll,
}

/// A copy-on-write change to one table.
#[derive(Debug, Clone)]
pub struct RowRewrite {
    /// Which rows.
    pub predicate: Predicate,
    /// What to do with them.
    pub change: RowChange,
    /// Extra snapshot summary keys (never a value of a person).
    pub summary: BTreeMap<String, String>,
    /// Writer options.
    pub options: WriteOptions,
    /// Where the per-file work runs (None: in this process). See [`crate::ops::rewrite_tasks`].
    pub engine: Option<Arc<dyn RewriteEngine>>,
    /// Rows added in the same commit (in any Arrow schema whose columns match the table's by
    /// name; written in this process): with a delete, the commit replaces the selected rows
    /// by these. Empty by default.
    pub insert: Vec<RecordBatch>,
    /// Purge the table's history in the same commit (None by default): see
    /// [`RowRewrite::with_history_purge`].
    pub history: Option<PurgeHistory>,
    /// The name every file the change writes in this process carries (None: random names):
    /// see [`RowRewrite::with_run`].
    pub run: Option<String>,
}

impl RowRewrite {
    /// Delete the rows `predicate` selects.
    pub fn delete(predicate: Predicate) -> Self {
        RowRewrite {
            predicate,
            change: RowChange::Delete,
            summary: BTreeMap::new(),
            options: WriteOptions::default(),
            engine: None,
            insert: Vec::new(),
            history: None,
            run: None,
        }
    }

    /// Null `columns` in the rows `predicate` selects.
    pub fn set_null(predicate: Predicate, columns: Vec<String>) -> Self {
        RowRewrite {
            change: RowChange::SetNull(columns),
            ..Self::delete(predicate)
        }
    }

    /// Rewrite every data file.
    pub fn rewrite_all() -> Self {
        RowRewrite {
            change: RowChange::RewriteAll,
            ..Self::delete(Predicate::True)
        }
    }

    /// Runs the per-file work on `engine` (a dry run still reads in this process).
    pub fn with_engine(mut self, engine: Option<Arc<dyn RewriteEngine>>) -> Self {
        self.engine = engine;
        self
    }

    /// Adds `rows` in the same commit (see [`RowRewrite::insert`]).
    pub fn with_rows(mut self, rows: Vec<RecordBatch>) -> Self {
        self.insert = rows;
        self
    }

    /// Purges the table's history in the change's own commit: the new snapshot's manifests
    /// leave the removed files out (no `DELETED` entries), the snapshots `purge.cutoff`
    /// selects on the table as changed are expired (Iceberg Java's rules, as
    /// [`crate::ops::expire`]), the metadata log is emptied, and after the commit the files
    /// only expired snapshots reached are deleted — the state a row change followed by
    /// [`purge_history`] reaches, in one commit and one metadata file instead of two. A table
    /// with `gc.enabled=false` is refused before anything is written. When the change finds
    /// nothing to change, [`purge_history`] runs on its own, so the history is purged either
    /// way ([`RewriteReport::history`]).
    pub fn with_history_purge(mut self, purge: PurgeHistory) -> Self {
        self.history = Some(purge);
        self
    }

    /// Names the files the change writes here after `run` (a uuid the caller recorded before
    /// starting): data files `NNNNN-{run}-{attempt}.parquet`, manifests
    /// `{run}-{attempt}-mN.avro`, the manifest list `snap-{id}-1-{run}-{attempt}.avro`. A
    /// process killed mid-change leaves files nothing references (a data file still open is
    /// 0 bytes); a rerun removes them by that name ([`crate::ops::sweep::remove_run_files`]).
    /// Files an engine writes elsewhere are named by the engine.
    pub fn with_run(mut self, run: impl Into<String>) -> Self {
        self.run = Some(run.into());
        self
    }

    /// Writer options (files of at most so many rows, …).
    pub fn with_options(mut self, options: WriteOptions) -> Self {
        self.options = options;
        self
    }

    /// Adds a summary key.
    pub fn with_summary(mut self, key: &str, value: impl Into<String>) -> Self {
        self.summary.insert(key.to_string(), value.into());
        self
    }
}

/// What a row change did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RewriteReport {
    /// The table.
    pub table: String,
    /// Live data files in the table.
    pub files_in_table: usize,
    /// Files that may hold matching rows after pruning by manifests (opened).
    pub files_read: usize,
    /// Of `files_read`, files whose Parquet statistics (row groups, page index, bloom
    /// filters) or predicate columns showed that no stored row matches: only their footer
    /// and predicate columns were read, and they are left as they are.
    pub files_skipped: usize,
    /// Files rewritten (by location).
    pub files_rewritten: Vec<String>,
    /// Files dropped whole (by location).
    pub files_dropped: Vec<String>,
    /// Files added.
    pub files_added: Vec<String>,
    /// Live rows the predicate selected (for SetNull: rows whose columns changed).
    pub rows_matched: u64,
    /// Rows already deleted by a delete file but still stored in a data file that the
    /// predicate selects: physically removed by the rewrite.
    pub rows_purged: u64,
    /// Rows stored in the table's data files before (rows hidden by delete files included).
    pub rows_in_table: u64,
    /// Rows written again to keep them.
    pub rows_rewritten: u64,
    /// Rows added by the change itself ([`RowRewrite::insert`]).
    pub rows_inserted: u64,
    /// Delete files removed because they no longer apply to any live data file, or held
    /// only rows the change removed (by location).
    pub delete_files_removed: Vec<String>,
    /// Delete files rewritten without the rows naming removed data files or matching the
    /// predicate (by location of the file replaced).
    pub delete_files_rewritten: Vec<String>,
    /// Deletion vectors removed with their data files (format v3).
    pub deletion_vectors_removed: usize,
    /// Puffin files none of whose deletion vectors is live after the change (by location).
    pub puffin_files_emptied: Vec<String>,
    /// The snapshot committed, if any.
    pub snapshot_id: Option<i64>,
    /// Commit attempts.
    pub attempts: u32,
    /// The history purged with the change ([`RowRewrite::with_history_purge`]); its
    /// `manifests.snapshot_id` is the change's snapshot when its manifests left removed files
    /// out, or a replace snapshot when [`purge_history`] ran on its own.
    pub history: Option<HistoryReport>,
}

/// The live data files (normalized locations) of `table` that may hold rows `predicate`
/// selects, by the manifests' bounds and partition values (once per table state and
/// predicate, [`Warehouse`] keeps the answer).
pub async fn candidate_files(
    wh: &Warehouse,
    table: &LoadedTable,
    predicate: &Predicate,
) -> Result<Arc<HashSet<String>>> {
    wh.candidates_cached(table, predicate, || plan_candidates(wh, table, predicate))
        .await
}

async fn plan_candidates(
    wh: &Warehouse,
    table: &LoadedTable,
    predicate: &Predicate,
) -> Result<HashSet<String>> {
    let Some(snapshot) = table.current_snapshot() else {
        return Ok(HashSet::new());
    };
    let normalize = |p: &str| wh.store.normalize(p).unwrap_or_else(|_| p.to_string());
    if table
        .metadata
        .partition_specs_iter()
        .all(|s| s.is_unpartitioned())
    {
        // No partition values to project the predicate on: the entries' bounds decide, from
        // the manifests as the warehouse already read them.
        let schema = table.metadata.current_schema();
        return Ok(wh
            .current_files(table)
            .await?
            .iter()
            .filter(|f| f.is_data())
            .filter(|f| crate::prune::file_may_match(predicate, schema, &f.entry.data_file))
            .map(|f| normalize(f.entry.data_file.file_path()))
            .collect());
    }
    let filter = predicate.to_iceberg(table.metadata.current_schema(), &table.name.to_string())?;
    let t = wh.iceberg_table(table)?;
    let scan = t
        .scan()
        .snapshot_id(snapshot.snapshot_id())
        .with_filter(filter)
        .select_all()
        .build()?;
    let tasks: Vec<_> = scan.plan_files().await?.try_collect().await?;
    Ok(tasks
        .into_iter()
        .map(|t| normalize(&t.data_file_path))
        .collect())
}

/// Whether the data file at `path` provably holds no stored row `predicate` selects (by its
/// Parquet statistics and predicate columns, [`crate::prune`]); false when it may, or when
/// the predicate can't be evaluated on the file's own columns.
fn no_stored_match(
    wh: &Warehouse,
    path: &str,
    schema: &iceberg::spec::Schema,
    predicate: &Predicate,
) -> Result<bool> {
    Ok(wh
        .matching_rows(path, schema, predicate)?
        .is_some_and(|m| m.positions.is_empty()))
}

/// The bytes of `table`'s live data files that a copy-on-write change selecting rows by
/// `predicate` reads and rewrites: the candidates ([`candidate_files`]) less those that
/// provably hold no stored match, the files the change's plan skips. From what the warehouse
/// keeps when the same selection was read before ([`select_rows`]): no file is read again.
pub async fn bytes_to_rewrite(
    wh: &Warehouse,
    table: &LoadedTable,
    predicate: &Predicate,
) -> Result<u64> {
    let wanted = candidate_files(wh, table, predicate).await?;
    let schema = table.metadata.current_schema();
    let mut bytes = 0;
    for f in wh
        .current_files(table)
        .await?
        .iter()
        .filter(|f| f.is_data())
    {
        let path = f.entry.data_file.file_path();
        if wanted.contains(&wh.store.normalize(path)?)
            && !no_stored_match(wh, path, schema, predicate)?
        {
            bytes += f.entry.data_file.file_size_in_bytes();
        }
    }
    Ok(bytes)
}

/// Whether a table has delete files (merge-on-read) in its current snapshot.
pub fn has_delete_files(files: &[TrackedFile]) -> bool {
    files.iter().any(|f| !f.is_data())
}

/// Writes the rows a change adds ([`RowRewrite::insert`]), aligned to the table's schema and
/// sorted by its sort order, into files of their own.
fn insert_rows(
    w: &mut TableWriter<'_>,
    table: &LoadedTable,
    sort: Option<&crate::sort::TableSort>,
    rows: &[RecordBatch],
    report: &mut RewriteReport,
) -> Result<()> {
    if has_row_lineage(&table.metadata) {
        return Err(Error::invalid(format!(
            "table `{}` is format v3: a row change that adds rows is not supported there",
            table.name
        )));
    }
    let schema = table.metadata.current_schema();
    let target = crate::writer::arrow_schema(schema)?;
    let aligned = rows
        .iter()
        .map(|b| crate::writer::align_batch(b, schema, &target))
        .collect::<Result<Vec<_>>>()?;
    let sorted;
    let batches = match sort {
        Some(s) => {
            sorted = s.sort(&aligned, 65_536)?;
            sorted.as_slice()
        }
        None => aligned.as_slice(),
    };
    w.roll()?;
    for b in batches {
        w.write(b)?;
        report.rows_inserted += b.num_rows() as u64;
    }
    w.roll()
}

/// What a change does to the batches of one file.
pub(crate) struct Changed {
    /// Batches to keep (live rows only).
    pub(crate) kept: Vec<RecordBatch>,
    /// Live rows the change touched.
    pub(crate) matched: u64,
    /// Rows already deleted by delete files that the predicate selects.
    pub(crate) purged: u64,
}

/// Most runs of kept rows a batch is cut into by [`apply_change`] (more are copied out).
const KEPT_RUNS: usize = 16;

/// Applies a change to the batches of one file (`live`: which rows delete files leave live,
/// None when all are; `nulled`: for SetNull, its columns resolved in the current schema).
pub(crate) fn apply_change(
    batches: &[RecordBatch],
    live: Option<&[BooleanArray]>,
    predicate: &Predicate,
    change: &RowChange,
    nulled: &[FieldPath],
) -> Result<Changed> {
    let mut out = Changed {
        kept: Vec::with_capacity(batches.len()),
        matched: 0,
        purged: 0,
    };
    // The kept rows: slices of the batch where they are a few runs (an erasure removes a
    // few rows from a file: no copy of the rest), a filtered copy otherwise.
    let keep_rows = |kept: &mut Vec<RecordBatch>, b: &RecordBatch, keep: &BooleanArray| {
        let n = keep.true_count();
        if n == b.num_rows() {
            kept.push(b.clone());
        } else if n > 0 {
            let runs: Vec<(usize, usize)> = compute::SlicesIterator::new(keep)
                .take(KEPT_RUNS + 1)
                .collect();
            if runs.len() <= KEPT_RUNS {
                kept.extend(runs.into_iter().map(|(s, e)| b.slice(s, e - s)));
            } else {
                kept.push(compute::filter_record_batch(b, keep)?);
            }
        }
        Ok::<_, Error>(())
    };
    for (i, b) in batches.iter().enumerate() {
        let all = BooleanArray::from(vec![true; b.num_rows()]);
        let alive = live.and_then(|l| l.get(i)).unwrap_or(&all);
        match change {
            RowChange::RewriteAll => keep_rows(&mut out.kept, b, alive)?,
            RowChange::Delete => {
                let mask = predicate.evaluate(b)?;
                out.matched += compute::and(&mask, alive)?.true_count() as u64;
                out.purged += compute::kernels::boolean::and_not(&mask, alive)?.true_count() as u64;
                let keep = compute::kernels::boolean::and_not(alive, &mask)?;
                keep_rows(&mut out.kept, b, &keep)?;
            }
            RowChange::SetNull(_) => {
                let mask = predicate.evaluate(b)?;
                out.purged += compute::kernels::boolean::and_not(&mask, alive)?.true_count() as u64;
                let mask = compute::and(&mask, alive)?;
                // Only rows where some target column (or nested field) still holds a value
                // change; a nested field is nulled inside its column, the rest kept.
                let mut changed = BooleanArray::from(vec![false; b.num_rows()]);
                let mut columns: Vec<ArrayRef> = b.columns().to_vec();
                for p in nulled {
                    let (col, c) = nested::set_null(&columns[p.column], &p.steps, &mask)?;
                    columns[p.column] = col;
                    changed = compute::or(&changed, &c)?;
                }
                let n = changed.true_count() as u64;
                out.matched += n;
                let b = if n == 0 {
                    b.clone()
                } else {
                    // A modified row's sequence number is inherited from this commit (row
                    // lineage); its row id stays.
                    if let Ok(i) = b.schema().index_of(LAST_UPDATED_SEQUENCE_NUMBER) {
                        let nulls = new_null_array(columns[i].data_type(), b.num_rows());
                        columns[i] = compute::kernels::zip::zip(&changed, &nulls, &columns[i])?;
                    }
                    RecordBatch::try_new(b.schema(), columns)?
                };
                keep_rows(&mut out.kept, &b, alive)?;
            }
        }
    }
    Ok(out)
}

/// Applies `spec` to table `name` and commits it (retrying on conflicts). A change that matches
/// nothing commits nothing (`snapshot_id` is None).
pub async fn rewrite_rows(
    wh: &Warehouse,
    name: &TableName,
    spec: &RowRewrite,
) -> Result<RewriteReport> {
    let mut action = Action::new(spec, false);
    let committed = commit(wh, name, &mut action).await?;
    let mut report = action.report;
    if report.table.is_empty() {
        report.table = name.to_string();
    }
    if let Some(c) = committed {
        report.snapshot_id = c.snapshot_id;
        report.attempts = c.attempts;
        // The commit carried a history purge: the files only expired snapshots reached go.
        if let (Some((before, unlisted)), Some(h)) = (action.purged_from, report.history.as_mut()) {
            h.expire.committed = true;
            h.expire.files_deleted =
                expire::delete_unreachable(wh, &before, &c.table, &h.expire.expired, &unlisted)
                    .await?;
        }
    } else if let Some(purge) = &spec.history {
        // Nothing to change: the history is purged on its own.
        report.history = Some(
            purge_history(
                wh,
                name,
                purge.cutoff,
                spec.summary.clone(),
                purge.clock.as_ref(),
            )
            .await?,
        );
    }
    Ok(report)
}

/// What `spec` would do, without writing or committing anything.
pub async fn dry_run(wh: &Warehouse, name: &TableName, spec: &RowRewrite) -> Result<RewriteReport> {
    let table = wh.load(name).await?;
    let mut action = Action::new(spec, true);
    action.plan(wh, &table).await?;
    Ok(action.report)
}

/// Counts the live rows of a table's current snapshot that `predicate` selects (reading only
/// the files that may hold them) and the live rows in the table. Data files with delete files
/// that apply to them are read to count what is live; others count by their manifest entry.
pub async fn count_rows(
    wh: &Warehouse,
    table: &LoadedTable,
    predicate: &Predicate,
) -> Result<(u64, u64)> {
    let files = wh.current_files(table).await?;
    check_supported(table, &files)?;
    let schema = table.metadata.current_schema().clone();
    predicate.check(&schema, &table.name.to_string())?;
    let index = DeleteIndex::load(wh, table, &files)?;
    let mut reader = DeleteReader::new(wh.store.as_ref(), table)?;
    let wanted = candidate_files(wh, table, predicate).await?;
    let mut matched = 0u64;
    let mut total = 0u64;
    for f in files.iter().filter(|f| f.is_data()) {
        let path = f.entry.data_file.file_path();
        let applicable = index.for_data_file(f, wh.store.as_ref());
        let is_wanted = wanted.contains(&wh.store.normalize(path)?);
        if !is_wanted && applicable.is_empty() {
            total += f.entry.data_file.record_count();
            continue;
        }
        if is_wanted
            && applicable.is_empty()
            && let Some(m) = wh.matching_rows(path, &schema, predicate)?
        {
            total += f.entry.data_file.record_count();
            matched += m.positions.len() as u64;
            continue;
        }
        let batches = read_data_file(wh.store.as_ref(), path, &schema)?;
        let live = reader.live_masks(&index, &applicable, path, &batches)?;
        for (i, b) in batches.iter().enumerate() {
            let alive = live.as_ref().and_then(|l| l.get(i));
            total += alive.map_or(b.num_rows(), |a| a.true_count()) as u64;
            if is_wanted {
                let mask = predicate.evaluate(b)?;
                matched += match alive {
                    Some(a) => compute::and(&mask, a)?.true_count(),
                    None => mask.true_count(),
                } as u64;
            }
        }
    }
    Ok((matched, total))
}

/// The live rows of a table's current snapshot, as an engine reading it counts them: every
/// data file's record count less the rows its delete files hide — position deletes and
/// deletion vectors by their positions (the data file is not read), equality deletes by
/// reading the data file's rows and matching them. Errors when the table has delete files
/// lethe can't read ([`check_supported`]).
pub async fn live_rows(wh: &Warehouse, table: &LoadedTable) -> Result<u64> {
    let files = wh.current_files(table).await?;
    check_supported(table, &files)?;
    let schema = table.metadata.current_schema().clone();
    let index = DeleteIndex::load(wh, table, &files)?;
    let mut reader = DeleteReader::new(wh.store.as_ref(), table)?;
    let mut total = 0u64;
    for f in files.iter().filter(|f| f.is_data()) {
        let stored = f.entry.data_file.record_count();
        let applicable = index.for_data_file(f, wh.store.as_ref());
        if applicable.is_empty() {
            total += stored;
            continue;
        }
        let path = f.entry.data_file.file_path();
        let equality = applicable.iter().any(|i| {
            index.deletes()[*i].entry.data_file.content_type()
                == iceberg::spec::DataContentType::EqualityDeletes
        });
        if !equality {
            let hidden = reader
                .deleted_positions(&index, &applicable, path)?
                .into_iter()
                .filter(|p| *p < stored)
                .count() as u64;
            total += stored - hidden;
            continue;
        }
        let batches = read_data_file(wh.store.as_ref(), path, &schema)?;
        let live = reader.live_masks(&index, &applicable, path, &batches)?;
        for (i, b) in batches.iter().enumerate() {
            total += live
                .as_ref()
                .and_then(|l| l.get(i))
                .map_or(b.num_rows(), |a| a.true_count()) as u64;
        }
    }
    Ok(total)
}

/// Reads the live rows of a table's current snapshot that `predicate` selects (pruned by
/// manifests, delete files applied).
pub async fn select_rows(
    wh: &Warehouse,
    table: &LoadedTable,
    predicate: &Predicate,
) -> Result<Vec<RecordBatch>> {
    select(wh, table, predicate, false).await
}

/// [`select_rows`] with each row's `_row_id` and `_last_updated_sequence_number` after the
/// table's columns (format v3; an error for tables without row lineage).
pub async fn select_rows_with_lineage(
    wh: &Warehouse,
    table: &LoadedTable,
    predicate: &Predicate,
) -> Result<Vec<RecordBatch>> {
    if !has_row_lineage(&table.metadata) {
        return Err(Error::invalid(format!(
            "table `{}` is format {:?}: only format v3 tables track row lineage",
            table.name,
            table.metadata.format_version()
        )));
    }
    select(wh, table, predicate, true).await
}

async fn select(
    wh: &Warehouse,
    table: &LoadedTable,
    predicate: &Predicate,
    lineage: bool,
) -> Result<Vec<RecordBatch>> {
    let files = wh.current_files(table).await?;
    check_supported(table, &files)?;
    let schema = table.metadata.current_schema().clone();
    let index = DeleteIndex::load(wh, table, &files)?;
    let mut reader = DeleteReader::new(wh.store.as_ref(), table)?;
    let wanted = candidate_files(wh, table, predicate).await?;
    let mut out = Vec::new();
    for f in files.iter().filter(|f| f.is_data()) {
        let path = f.entry.data_file.file_path();
        if !wanted.contains(&wh.store.normalize(path)?) {
            continue;
        }
        let applicable = index.for_data_file(f, wh.store.as_ref());
        let matches = wh.matching_rows(path, &schema, predicate)?;
        match &matches {
            // No stored row matches: no live one does.
            Some(m) if m.positions.is_empty() => continue,
            // No delete file applies: the matching rows are all there is to read.
            Some(m) if applicable.is_empty() && !lineage => {
                for b in read_positions(wh.store.as_ref(), path, &schema, &m.positions)? {
                    let mask = predicate.evaluate(&b)?;
                    if mask.true_count() > 0 {
                        out.push(compute::filter_record_batch(&b, &mask)?);
                    }
                }
                continue;
            }
            _ => {}
        }
        let batches = if lineage {
            read_with_lineage(wh.store.as_ref(), f, &schema)?
        } else {
            read_data_file(wh.store.as_ref(), path, &schema)?
        };
        let live = reader.live_masks(&index, &applicable, path, &batches)?;
        for (i, b) in batches.iter().enumerate() {
            let mut mask = predicate.evaluate(b)?;
            if let Some(a) = live.as_ref().and_then(|l| l.get(i)) {
                mask = compute::and(&mask, a)?;
            }
            if mask.true_count() > 0 {
                out.push(compute::filter_record_batch(b, &mask)?);
            }
        }
    }
    Ok(out)
}

/// Writes batches into a table: appended, or replacing every row (as a pipeline run does).
struct WriteRows<'a> {
    batches: &'a [RecordBatch],
    replace: bool,
    summary: BTreeMap<String, String>,
    options: WriteOptions,
}

#[async_trait]
impl TableAction for WriteRows<'_> {
    async fn plan(&mut self, wh: &Warehouse, table: &LoadedTable) -> Result<Option<ActionCommit>> {
        let operation = if self.replace {
            Operation::Overwrite
        } else {
            Operation::Append
        };
        write_and_produce(
            wh,
            table,
            self.batches,
            operation,
            self.replace,
            &self.summary,
            &self.options,
        )
        .await
    }
}

/// Appends rows (in any Arrow schema whose columns match the table's by name) as a new `append`
/// snapshot.
pub async fn append(
    wh: &Warehouse,
    name: &TableName,
    batches: &[RecordBatch],
    summary: BTreeMap<String, String>,
    options: WriteOptions,
) -> Result<Option<i64>> {
    let mut a = WriteRows {
        batches,
        replace: false,
        summary,
        options,
    };
    Ok(commit(wh, name, &mut a).await?.and_then(|c| c.snapshot_id))
}

/// Replaces every row of a table with `batches` as one `overwrite` snapshot (a pipeline run).
pub async fn replace_contents(
    wh: &Warehouse,
    name: &TableName,
    batches: &[RecordBatch],
    summary: BTreeMap<String, String>,
    options: WriteOptions,
) -> Result<Option<i64>> {
    let mut a = WriteRows {
        batches,
        replace: true,
        summary,
        options,
    };
    Ok(commit(wh, name, &mut a).await?.and_then(|c| c.snapshot_id))
}

async fn write_and_produce(
    wh: &Warehouse,
    table: &LoadedTable,
    batches: &[RecordBatch],
    operation: Operation,
    replace: bool,
    summary: &BTreeMap<String, String>,
    options: &WriteOptions,
) -> Result<Option<ActionCommit>> {
    let schema = table.metadata.current_schema().clone();
    let target = crate::writer::arrow_schema(&schema)?;
    let aligned = batches
        .iter()
        .map(|b| crate::writer::align_batch(b, &schema, &target))
        .collect::<Result<Vec<_>>>()?;
    let added = crate::writer::write_batches(
        wh.store.as_ref(),
        &table.metadata,
        &aligned,
        options.clone(),
    )?;
    let mut changes = SnapshotChanges::new(operation);
    if replace {
        let files = wh.current_files(table).await?;
        changes.removed = files
            .iter()
            .map(|f| f.entry.data_file.file_path().to_string())
            .collect();
        if changes.removed.is_empty() {
            changes.operation = Operation::Append;
        }
    }
    if added.is_empty() && changes.removed.is_empty() {
        return Ok(None);
    }
    changes.summary = summary.clone();
    changes.added_data = added;
    Ok(Some(produce_written(wh, table, changes).await?))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, AsArray, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    use super::*;
    use crate::predicate::Value;

    fn batch(n: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("n{i}")),
                )),
            ],
        )
        .unwrap()
    }

    fn ids(kept: &[RecordBatch]) -> Vec<i64> {
        kept.iter()
            .flat_map(|b| {
                assert_eq!(b.column(1).len(), b.num_rows());
                let names = b.column(1).as_string::<i32>();
                b.column(0)
                    .as_primitive::<Int64Type>()
                    .values()
                    .iter()
                    .zip(names.iter())
                    .map(|(i, n)| {
                        assert_eq!(n, Some(format!("n{i}").as_str()));
                        *i
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// [`apply_change`] deleting `p`'s rows from the one batch `b` (`live`: its live rows).
    fn delete(b: &RecordBatch, live: Option<&BooleanArray>, p: &Predicate) -> Changed {
        apply_change(
            std::slice::from_ref(b),
            live.map(std::slice::from_ref),
            p,
            &RowChange::Delete,
            &[],
        )
        .unwrap()
    }

    #[test]
    fn a_delete_keeps_a_few_runs_as_slices_and_many_as_a_copy() {
        let b = batch(100);
        // Two rows out of a file: three runs around them, each a slice of the batch.
        let few = Predicate::is_in("id", vec![Value::Int(0), Value::Int(41), Value::Int(42)]);
        let out = delete(&b, None, &few);
        assert_eq!(out.matched, 3);
        assert_eq!(out.kept.len(), 2, "runs 1..41 and 43..100");
        let want: Vec<i64> = (1..41).chain(43..100).collect();
        assert_eq!(ids(&out.kept), want);
        // Every other row: more runs than KEPT_RUNS, one filtered batch.
        let many = Predicate::is_in("id", (0..100).step_by(2).map(Value::Int).collect());
        let out = delete(&b, None, &many);
        assert_eq!(out.matched, 50);
        assert_eq!(out.kept.len(), 1);
        assert_eq!(ids(&out.kept), (1..100).step_by(2).collect::<Vec<_>>());
        // Rows delete files already removed stay out, and count as purged when selected.
        let live = BooleanArray::from((0..100).map(|i| i != 7 && i != 41).collect::<Vec<_>>());
        let out = delete(&b, Some(&live), &few);
        assert_eq!((out.matched, out.purged), (2, 1));
        let want: Vec<i64> = (1..7).chain(8..41).chain(43..100).collect();
        assert_eq!(ids(&out.kept), want);
        // Nothing selected: the batch as it was.
        let none = Predicate::is_in("id", vec![Value::Int(1000)]);
        let out = delete(&b, None, &none);
        assert_eq!(ids(&out.kept), (0..100).collect::<Vec<_>>());
    }
}
