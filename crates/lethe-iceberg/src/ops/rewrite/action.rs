//! The table action of a copy-on-write row change, planned file by file and kept across the
//! attempts of its commit.
//!
//! Each data file that may hold selected rows is planned on its own — left as it is, dropped,
//! or rewritten into files of its own — and what planning it gave is kept, with the delete
//! files that applied to it. When the commit loses a race (another writer committed first),
//! the next attempt validates the kept plans against the table as that writer left it, as
//! Iceberg Java's row-level operations validate the snapshots committed since they started
//! (`validateNoConflictingDataFiles`, `validateNoConflictingDeletes`): a file's plan still
//! holds when the file is still live and the same delete files apply to it; the files it
//! wrote are committed again. Only what the other writer's commits touched is planned again —
//! a file it removed (its plan and files go), a file it added delete files to (rows it deleted
//! must stay deleted in the rewrite), a data file it added that may hold selected rows (read
//! like any other). A change of the table's schema, partition spec, sort order, format or
//! properties (metrics modes, bloom filters) plans every file again. Files whose plan was
//! dropped are deleted at once; when the commit gives up, every file still kept is deleted;
//! after an unknown outcome they are left alone (the sweep's), never reused.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::RecordBatch;
use async_trait::async_trait;
use iceberg::spec::{DataFile, Operation};

use super::{
    RewriteReport, RowChange, RowRewrite, apply_change, candidate_files, insert_rows,
    no_stored_match,
};
use crate::commit::{ActionCommit, TableAction};
use crate::deletes::{DeleteIndex, DeleteReader, check_supported};
use crate::error::{Error, Result};
use crate::lineage::{has_row_lineage, read_with_lineage};
use crate::nested::FieldPath;
use crate::ops::expire;
use crate::ops::history::{HistoryReport, applied, plan_expiry};
use crate::ops::manifests::ManifestsReport;
use crate::ops::rewrite_tasks::{FileOutcome, FileState, FileTask, RewriteJob};
use crate::read::read_data_file;
use crate::snapshot::{SnapshotChanges, produce};
use crate::table::{LoadedTable, TrackedFile, Warehouse};
use crate::writer::TableWriter;

/// What planning one data file gave, kept for the attempts after a lost race.
struct Kept {
    /// The delete files that applied to it (location, deletion vector offset or -1), sorted:
    /// the plan holds while exactly these apply.
    deletes: Vec<(String, i64)>,
    /// None: its statistics showed that no stored row is selected (only its footer and the
    /// predicate's columns were read).
    outcome: Option<FileOutcome>,
}

impl Kept {
    /// The files this plan wrote.
    fn written(&self) -> impl Iterator<Item = &str> {
        self.outcome
            .iter()
            .flat_map(|o| o.added.iter().map(|d| d.file_path()))
    }
}

/// The table action of [`super::rewrite_rows`] and [`super::dry_run`].
pub(super) struct Action<'a> {
    spec: &'a RowRewrite,
    dry_run: bool,
    /// Attempts planned so far (names the files of each apart, [`RowRewrite::with_run`]).
    attempts: u32,
    /// What the last attempt planned (the report of the change).
    pub(super) report: RewriteReport,
    /// With a history purge: the table as the planned commit leaves it (before its expiry)
    /// and the files the commit removes (its manifests don't list them), for deleting the
    /// files only expired snapshots reached.
    pub(super) purged_from: Option<(LoadedTable, Vec<String>)>,
    /// Per data file (normalised location), what planning it gave.
    kept: HashMap<String, Kept>,
    /// The table settings the kept plans were made under.
    settings: Option<String>,
}

impl<'a> Action<'a> {
    /// The action of `spec` (with `dry_run`, nothing is written).
    pub(super) fn new(spec: &'a RowRewrite, dry_run: bool) -> Self {
        Action {
            spec,
            dry_run,
            attempts: 0,
            report: RewriteReport::default(),
            purged_from: None,
            kept: HashMap::new(),
            settings: None,
        }
    }

    /// Deletes the files of every kept plan and forgets them.
    fn discard_kept(&mut self, wh: &Warehouse) {
        for k in self.kept.values() {
            for f in k.written() {
                let _ = wh.store.delete(f);
            }
        }
        self.kept.clear();
    }

    /// Keeps the plans that still hold on `table` (see the module's text), deleting the files
    /// of the others.
    fn keep_valid(
        &mut self,
        wh: &Warehouse,
        table: &LoadedTable,
        files: &[TrackedFile],
        index: &DeleteIndex,
    ) -> Result<()> {
        let settings = settings_of(table);
        if self.settings.as_ref() != Some(&settings) {
            self.discard_kept(wh);
            self.settings = Some(settings);
        }
        if self.kept.is_empty() {
            return Ok(());
        }
        let mut live: HashMap<String, Vec<(String, i64)>> = HashMap::new();
        for f in files.iter().filter(|f| f.is_data()) {
            let key = wh.store.normalize(f.entry.data_file.file_path())?;
            live.insert(key, applying(index, f, wh));
        }
        let mut gone: Vec<String> = Vec::new();
        self.kept.retain(|k, plan| {
            let holds = live.get(k) == Some(&plan.deletes);
            if !holds {
                gone.extend(plan.written().map(str::to_string));
            }
            holds
        });
        for f in gone {
            let _ = wh.store.delete(&f);
        }
        Ok(())
    }

    /// Plans every file in `todo` (wanted, without a kept plan) on the spec's engine, keeping
    /// each outcome.
    async fn plan_on_engine(
        &mut self,
        wh: &Warehouse,
        table: &LoadedTable,
        todo: &[&TrackedFile],
        index: &DeleteIndex,
    ) -> Result<()> {
        let engine = self.spec.engine.clone().expect("an engine");
        let schema = table.metadata.current_schema();
        let mut tasks = Vec::new();
        for f in todo {
            let path = f.entry.data_file.file_path();
            let key = wh.store.normalize(path)?;
            let deletes = applying(index, f, wh);
            if self.spec.change != RowChange::RewriteAll
                && no_stored_match(wh, path, schema, &self.spec.predicate)?
            {
                self.kept.insert(
                    key,
                    Kept {
                        deletes,
                        outcome: None,
                    },
                );
                continue;
            }
            tasks.push((
                key,
                deletes,
                FileTask {
                    data_file: path.to_string(),
                    bytes: f.entry.data_file.file_size_in_bytes(),
                    deletes: index.refs_for_data_file(f, wh.store.as_ref()),
                },
            ));
        }
        if tasks.is_empty() {
            return Ok(());
        }
        let job = RewriteJob::new(
            table,
            self.spec,
            tasks.iter().map(|(_, _, t)| t.clone()).collect(),
        )?;
        let outcomes = engine.rewrite_files(&job, wh.store.as_ref()).await?;
        if outcomes.len() != job.tasks.len() {
            for o in &outcomes {
                for d in &o.added {
                    let _ = wh.store.delete(d.file_path());
                }
            }
            return Err(Error::Internal(format!(
                "engine {} returned {} outcomes for {} tasks",
                engine.name(),
                outcomes.len(),
                job.tasks.len()
            )));
        }
        for ((key, deletes, _), o) in tasks.into_iter().zip(outcomes) {
            self.kept.insert(
                key,
                Kept {
                    deletes,
                    outcome: Some(o),
                },
            );
        }
        Ok(())
    }

    /// Plans every file in `todo` here, each file's kept rows written into files of its own
    /// (`writer`: None in a dry run), keeping each outcome.
    #[allow(clippy::too_many_arguments)]
    fn plan_here(
        &mut self,
        wh: &Warehouse,
        table: &LoadedTable,
        todo: &[&TrackedFile],
        index: &DeleteIndex,
        nulled: &[FieldPath],
        writer: &mut Option<TableWriter<'_>>,
    ) -> Result<()> {
        let schema = table.metadata.current_schema().clone();
        let lineage = has_row_lineage(&table.metadata);
        let sort = crate::sort::TableSort::of(&table.metadata)?;
        let mut reader = DeleteReader::new(wh.store.as_ref(), table)?;
        for f in todo {
            let path = f.entry.data_file.file_path();
            let key = wh.store.normalize(path)?;
            let deletes = applying(index, f, wh);
            if self.spec.change != RowChange::RewriteAll
                && no_stored_match(wh, path, &schema, &self.spec.predicate)?
            {
                self.kept.insert(
                    key,
                    Kept {
                        deletes,
                        outcome: None,
                    },
                );
                continue;
            }
            let batches = if lineage {
                read_with_lineage(wh.store.as_ref(), f, &schema)?
            } else {
                read_data_file(wh.store.as_ref(), path, &schema)?
            };
            let applicable = index.for_data_file(f, wh.store.as_ref());
            let live = reader.live_masks(index, &applicable, path, &batches)?;
            let out = apply_change(
                &batches,
                live.as_deref(),
                &self.spec.predicate,
                &self.spec.change,
                nulled,
            )?;
            let mut outcome = FileOutcome {
                data_file: path.to_string(),
                state: FileState::Unchanged,
                matched: out.matched,
                purged: out.purged,
                kept_rows: out.kept.iter().map(RecordBatch::num_rows).sum::<usize>() as u64,
                added: Vec::new(),
            };
            let changes = out.matched > 0 || out.purged > 0;
            if changes || self.spec.change == RowChange::RewriteAll {
                outcome.state = if outcome.kept_rows == 0 {
                    FileState::Dropped
                } else {
                    FileState::Rewritten
                };
            }
            if outcome.state == FileState::Rewritten
                && let Some(w) = writer.as_mut()
            {
                // Rows removed from a file written in the table's order (its entry says so,
                // as the spec's `sort_order_id` means) are still in that order.
                let still_sorted = sort.as_ref().is_some_and(|s| {
                    matches!(self.spec.change, RowChange::Delete | RowChange::RewriteAll)
                        && f.entry.data_file.sort_order_id() == Some(s.order_id())
                });
                match &sort {
                    Some(s) if !still_sorted => {
                        for b in s.sort(&out.kept, 65_536)? {
                            w.write(&b)?;
                        }
                    }
                    _ => {
                        for b in &out.kept {
                            w.write(b)?;
                        }
                    }
                }
                // The file's rows in files of their own: its plan can be kept or dropped
                // alone when the commit is attempted again.
                w.roll()?;
                outcome.added = w.take_done();
            }
            self.kept.insert(
                key,
                Kept {
                    deletes,
                    outcome: Some(outcome),
                },
            );
        }
        Ok(())
    }

    /// The change's plan on `table` (see [`TableAction::plan`]); on an error the caller
    /// discards the kept plans.
    async fn plan_attempt(
        &mut self,
        wh: &Warehouse,
        table: &LoadedTable,
    ) -> Result<Option<ActionCommit>> {
        let tname = table.name.to_string();
        let schema = table.metadata.current_schema().clone();
        let lineage = has_row_lineage(&table.metadata);
        self.spec.predicate.check(&schema, &tname)?;
        self.attempts += 1;
        let run = self
            .spec
            .run
            .as_ref()
            .map(|r| format!("{r}-{}", self.attempts));
        self.purged_from = None;
        if self.spec.history.is_some() {
            expire::check_gc(table)?;
        }
        let nulled = nulled_columns(self.spec, &schema, &tname)?;
        let files = wh.current_files(table).await?;
        check_supported(table, &files)?;
        let index = DeleteIndex::load(wh, table, &files)?;
        self.keep_valid(wh, table, &files, &index)?;
        let wanted = match self.spec.change {
            RowChange::RewriteAll => Arc::new(
                files
                    .iter()
                    .filter(|f| f.is_data())
                    .map(|f| wh.store.normalize(f.entry.data_file.file_path()))
                    .collect::<Result<HashSet<_>>>()?,
            ),
            _ => candidate_files(wh, table, &self.spec.predicate).await?,
        };
        let mut todo: Vec<&TrackedFile> = Vec::new();
        for f in files.iter().filter(|f| f.is_data()) {
            let key = wh.store.normalize(f.entry.data_file.file_path())?;
            if wanted.contains(&key) && !self.kept.contains_key(&key) {
                todo.push(f);
            }
        }
        let mut writer = if self.dry_run {
            None
        } else {
            Some(new_writer(wh, table, self.spec, run.clone())?)
        };
        // Format v3 tables (row lineage, deletion vectors) are rewritten here: their tasks
        // would need each file's lineage and vectors, which a job doesn't carry yet.
        let on_engine = self.spec.engine.is_some() && !self.dry_run && !lineage;
        if self.spec.engine.is_some() && lineage && !self.dry_run {
            tracing::info!("{tname}: a format v3 table is rewritten in this process");
        }
        let planned = if on_engine {
            self.plan_on_engine(wh, table, &todo, &index).await
        } else {
            self.plan_here(wh, table, &todo, &index, &nulled, &mut writer)
        };
        if let Err(e) = planned {
            discard_writer(wh, writer);
            return Err(e);
        }
        // Every wanted file has a plan now: the change is their sum.
        let mut report = RewriteReport {
            table: tname.clone(),
            files_in_table: files.iter().filter(|f| f.is_data()).count(),
            rows_in_table: files
                .iter()
                .filter(|f| f.is_data())
                .map(|f| f.entry.data_file.record_count())
                .sum(),
            ..Default::default()
        };
        let mut removed: HashSet<String> = HashSet::new();
        let mut added: Vec<DataFile> = Vec::new();
        for f in files.iter().filter(|f| f.is_data()) {
            let key = wh.store.normalize(f.entry.data_file.file_path())?;
            if let Some(k) = self.kept.get(&key).filter(|_| wanted.contains(&key)) {
                tally(k, f, &mut report, &mut removed, &mut added);
            }
        }
        // The rows the change adds, in files of their own (this attempt's).
        if let Some(w) = writer.as_mut()
            && !self.spec.insert.is_empty()
        {
            let sort = crate::sort::TableSort::of(&table.metadata)?;
            if let Err(e) = insert_rows(w, table, sort.as_ref(), &self.spec.insert, &mut report) {
                discard_writer(wh, writer);
                return Err(e);
            }
        }
        // Tests stop here to change the table between planning and commit; the name carries
        // the table so parallel tests don't trip each other's failpoints.
        #[cfg(feature = "failpoints")]
        fail::eval(&format!("row-rewrite-planned/{tname}"), |_| ());
        self.commit_of(
            wh, table, report, removed, added, writer, &files, &index, run,
        )
        .await
    }

    /// The commit of a planned change: delete files cleaned up, the snapshot produced (with the
    /// history purge when asked). `added` are the kept plans' files (retained across
    /// attempts); what `writer` wrote (inserted rows) and the cleaned delete files are this
    /// attempt's own.
    #[allow(clippy::too_many_arguments)]
    async fn commit_of(
        &mut self,
        wh: &Warehouse,
        table: &LoadedTable,
        report: RewriteReport,
        removed: HashSet<String>,
        added: Vec<DataFile>,
        writer: Option<TableWriter<'_>>,
        files: &[TrackedFile],
        index: &DeleteIndex,
        run: Option<String>,
    ) -> Result<Option<ActionCommit>> {
        let tname = table.name.to_string();
        let subject = match self.spec.change {
            RowChange::Delete => Some(&self.spec.predicate),
            _ => None,
        };
        let mut reader = DeleteReader::new(wh.store.as_ref(), table)?;
        let cleanup = if removed.is_empty() {
            Default::default()
        } else {
            match reader.plan_cleanup(index, files, &removed, subject, !self.dry_run) {
                Ok(c) => c,
                Err(e) => {
                    discard_writer(wh, writer);
                    return Err(e);
                }
            }
        };
        self.report = report;
        self.report.delete_files_rewritten = cleanup.rewritten.clone();
        self.report.deletion_vectors_removed = cleanup.removed_vectors.len();
        self.report.puffin_files_emptied = cleanup.puffin_files_emptied.clone();
        self.report.delete_files_removed = cleanup
            .removed
            .iter()
            .filter(|p| !cleanup.rewritten.contains(p))
            .cloned()
            .collect();
        let mut own: Vec<String> = cleanup
            .added
            .iter()
            .map(|(f, _)| f.file_path().to_string())
            .collect();
        if (removed.is_empty() && self.report.rows_inserted == 0) || self.dry_run {
            discard_writer(wh, writer);
            for f in &own {
                let _ = wh.store.delete(f);
            }
            // Nothing to change: a plan kept from an earlier attempt is nobody's.
            self.discard_kept(wh);
            return Ok(None);
        }
        let inserted = match writer.map(|w| w.finish()).transpose() {
            Ok(a) => a.unwrap_or_default(),
            Err(e) => {
                for l in &own {
                    let _ = wh.store.delete(l);
                }
                return Err(e);
            }
        };
        own.extend(inserted.iter().map(|d| d.file_path().to_string()));
        let retained: Vec<String> = added.iter().map(|d| d.file_path().to_string()).collect();
        let mut all_added = added;
        all_added.extend(inserted);
        self.report.files_added = all_added
            .iter()
            .map(|d| d.file_path().to_string())
            .collect();
        let operation = match (&self.spec.change, all_added.is_empty()) {
            (RowChange::RewriteAll, _) => Operation::Replace,
            (_, true) => Operation::Delete,
            _ if removed.is_empty() => Operation::Append,
            (_, false) => Operation::Overwrite,
        };
        let mut changes = SnapshotChanges::new(operation);
        changes.added_data = all_added;
        changes.removed = removed;
        changes.removed.extend(cleanup.removed.iter().cloned());
        changes
            .removed_vectors
            .extend(cleanup.removed_vectors.iter().cloned());
        for (f, kept) in cleanup.added {
            changes.kept_deletes.insert(f.file_path().to_string(), kept);
            changes.added_deletes.push(f);
        }
        changes.summary = self.spec.summary.clone();
        changes.name_tag = run;
        changes.drop_removed = self.spec.history.is_some();
        let unlisted: Vec<String> = if changes.drop_removed {
            changes.removed.iter().cloned().collect()
        } else {
            Vec::new()
        };
        let mut planned = match produce(wh, table, changes).await {
            Ok(p) => p,
            Err(e) => {
                for l in &own {
                    let _ = wh.store.delete(l);
                }
                return Err(e);
            }
        };
        planned.written.extend(own);
        planned.retained = retained;
        if let Some(purge) = &self.spec.history {
            let expiry = applied(table, &planned.updates).and_then(|after| {
                let r = plan_expiry(&after, purge.cutoff, purge.clock.now(), &mut planned)?;
                Ok((after, r))
            });
            let (after, expire) = match expiry {
                Ok(x) => x,
                Err(e) => {
                    for w in &planned.written {
                        let _ = wh.store.delete(w);
                    }
                    return Err(e);
                }
            };
            self.report.history = Some(HistoryReport {
                manifests: ManifestsReport {
                    table: tname,
                    snapshot_id: planned.snapshot_id,
                    ..Default::default()
                },
                expire,
            });
            self.purged_from = Some((after, unlisted));
        }
        Ok(Some(planned))
    }
}

#[async_trait]
impl TableAction for Action<'_> {
    async fn plan(&mut self, wh: &Warehouse, table: &LoadedTable) -> Result<Option<ActionCommit>> {
        let planned = self.plan_attempt(wh, table).await;
        if planned.is_err() {
            self.discard_kept(wh);
        }
        planned
    }

    fn forget_retained(&mut self) {
        self.kept.clear();
    }
}

/// The delete files that apply to data file `f` (location, deletion vector offset or -1),
/// sorted: what a kept plan of the file holds under.
fn applying(index: &DeleteIndex, f: &TrackedFile, wh: &Warehouse) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = index
        .for_data_file(f, wh.store.as_ref())
        .into_iter()
        .map(|i| {
            let d = &index.deletes()[i].entry.data_file;
            (d.file_path().to_string(), d.content_offset().unwrap_or(-1))
        })
        .collect();
    out.sort();
    out
}

/// What the files a change writes depend on besides their rows: schema, partition spec, sort
/// order, format version, properties (metrics modes, bloom filters, compression).
fn settings_of(table: &LoadedTable) -> String {
    let m = &table.metadata;
    let props: BTreeMap<&String, &String> = m.properties().iter().collect();
    format!(
        "{} {} {} {:?} {props:?}",
        m.current_schema_id(),
        m.default_partition_spec_id(),
        m.default_sort_order_id(),
        m.format_version()
    )
}

/// The columns a SetNull change nulls, resolved in `schema` (none for other changes).
fn nulled_columns(
    spec: &RowRewrite,
    schema: &iceberg::spec::Schema,
    tname: &str,
) -> Result<Vec<FieldPath>> {
    let mut nulled: Vec<FieldPath> = Vec::new();
    if let RowChange::SetNull(cols) = &spec.change {
        for c in cols {
            let p = crate::nested::resolve(schema, c).map_err(|e| {
                Error::invalid(format!("table `{tname}` has no column `{c}` to erase: {e}"))
            })?;
            if p.field.required || p.map_key {
                return Err(Error::invalid(format!(
                    "column `{tname}.{c}` is required and can't be set to null"
                )));
            }
            nulled.push(p);
        }
    }
    Ok(nulled)
}

/// The writer of an attempt: the table's metrics, row lineage, sort order id, and the run's
/// file names.
fn new_writer<'w>(
    wh: &'w Warehouse,
    table: &LoadedTable,
    spec: &RowRewrite,
    run: Option<String>,
) -> Result<TableWriter<'w>> {
    let w = TableWriter::new(wh.store.as_ref(), &table.metadata, spec.options.clone())?;
    let w = if has_row_lineage(&table.metadata) {
        w.with_row_lineage()
    } else {
        w
    };
    let w = match run {
        Some(r) => w.with_run(r),
        None => w,
    };
    Ok(match crate::sort::TableSort::of(&table.metadata)? {
        Some(s) => w.with_sort_order_id(s.order_id()),
        None => w,
    })
}

/// Deletes what a writer wrote (open files included).
fn discard_writer(wh: &Warehouse, writer: Option<TableWriter<'_>>) {
    if let Some(w) = writer {
        for l in w.locations() {
            let _ = wh.store.delete(&l);
        }
    }
}

/// Adds a data file's plan to the change: its counts to the report, the file to `removed`
/// when it goes, its new files to `added`.
fn tally(
    k: &Kept,
    f: &TrackedFile,
    report: &mut RewriteReport,
    removed: &mut HashSet<String>,
    added: &mut Vec<DataFile>,
) {
    report.files_read += 1;
    let Some(o) = &k.outcome else {
        report.files_skipped += 1;
        return;
    };
    if o.state == FileState::Unchanged {
        return;
    }
    let path = f.entry.data_file.file_path().to_string();
    report.rows_matched += o.matched;
    report.rows_purged += o.purged;
    removed.insert(path.clone());
    if o.state == FileState::Dropped {
        report.files_dropped.push(path);
        return;
    }
    report.files_rewritten.push(path);
    report.rows_rewritten += o.kept_rows;
    added.extend(o.added.iter().cloned());
}
