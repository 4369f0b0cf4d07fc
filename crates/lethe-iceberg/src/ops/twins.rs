//! Rewriting the history a table keeps without some rows: a *twin* for every snapshot the
//! table's refs and retention keep, in one commit.
//!
//! An erasure that only rewrote `main` and expired the rest would take time travel away from
//! everyone (a tag kept so a quarter's report can be reproduced, a branch, the snapshots
//! `min-snapshots-to-keep` keeps); one that left them would keep the person. Here, for each
//! snapshot expiry keeps (by [`expire::select`] with [`Cutoff::Every`]: the heads of refs that
//! haven't outlived `max-ref-age-ms`, and the ancestors each branch's `min-snapshots-to-keep`
//! keeps — `main` included), a twin is written:
//! - the same live data files, but for the files that hold rows the predicate selects, each
//!   rewritten without those rows (a DELETE) or with the change's columns nulled in them (a
//!   REWRITE under a legal exception), in the table's current schema and default spec, with
//!   its metrics and bloom-filter properties, sorted as the table is, row lineage (format v3)
//!   kept for the rows kept;
//! - its delete files resolved: every data file a delete file applies to is rewritten with the
//!   deletes applied, and the twin has no delete file (a delete file can hold the person's
//!   values: an equality delete's key, a position delete's `row`);
//! - parent: the twin of the original's parent when that has one, else the original's parent
//!   (kept as it is, or expired — Iceberg allows a parent that is gone).
//!
//! Then every ref is pointed at the twin of the snapshot it pointed at (its retention
//! settings unchanged), and every snapshot the table's rules let go now — the originals among
//! them — is expired, with the files only they reached deleted. One commit: `add-snapshot` per
//! twin, `set-snapshot-ref` per ref, `remove-snapshots`, so REST catalogs take it as any other
//! commit, and a failure leaves the table as it was. A conflict (another writer committed)
//! replans against the new state; run again when nothing holds matching rows, it commits
//! nothing.
//!
//! What time travel reads afterwards (as faithful as the spec allows):
//! - by ref name (a tag, a branch, `main`): the twin — the same rows but the removed ones;
//! - by snapshot ID: a twin has a new ID (an ID names one immutable snapshot; the original is
//!   expired because it held the rows). Each twin's summary names the original
//!   (`lethe.twin-of`) and its commit time (`lethe.twin-of-timestamp-ms`), so a reader can map
//!   old IDs to new;
//! - by timestamp on `main`: the snapshot log, which (as after any expiry, in Iceberg Java's
//!   rules too) starts at the twins: a twin's own timestamp is its commit time, because a
//!   snapshot with an older timestamp than the table's last update is refused by catalogs.
//!
//! Branch ancestry is preserved: a branch's kept snapshots are twinned as a chain in the same
//! order, so `min-snapshots-to-keep` still finds them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::RecordBatch;
use async_trait::async_trait;
use iceberg::TableRequirement;
use iceberg::TableUpdate;
use iceberg::spec::{DataFile, Operation, Snapshot, SnapshotReference};
use serde::{Deserialize, Serialize};

use crate::catalog::TableName;
use crate::commit::{ActionCommit, TableAction, commit};
use crate::deletes::{DeleteIndex, DeleteReader, check_supported};
use crate::error::{Error, Result};
use crate::lineage::{has_row_lineage, read_with_lineage};
use crate::nested::FieldPath;
use crate::ops::expire::{self, Cutoff};
use crate::ops::history::{applied, plan_expiry};
use crate::ops::rewrite::{RowChange, apply_change};
use crate::predicate::Predicate;
use crate::read::read_data_file;
use crate::snapshot::{On, SnapshotChanges, produce_on};
use crate::table::{LoadedTable, TrackedFile, Warehouse};
use crate::writer::{TableWriter, WriteOptions};

/// A rewrite of a table's kept history.
#[derive(Debug, Clone)]
pub struct TwinsSpec {
    /// Which rows.
    pub predicate: Predicate,
    /// What happens to them: [`RowChange::Delete`] or [`RowChange::SetNull`].
    pub change: RowChange,
    /// Extra summary keys for every twin (never a value of a person).
    pub summary: BTreeMap<String, String>,
    /// Writer options.
    pub options: WriteOptions,
}

/// One kept snapshot and its twin.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Twin {
    /// The snapshot replaced.
    pub original: i64,
    /// Its twin (None in a plan).
    pub twin: Option<i64>,
    /// The refs pointing at it (`main`, tags, branches); empty for a kept ancestor.
    pub refs: Vec<String>,
    /// Why expiry keeps it (`tagged q3_close`, `one of the last 3 snapshots of branch audit`).
    pub kept_because: String,
    /// Live rows the original reads.
    pub rows_before: u64,
    /// Live rows the twin reads.
    pub rows_after: u64,
    /// Rows the predicate selected in it (removed, or with columns nulled).
    pub rows_matched: u64,
    /// Data files of the original the twin replaces by rewritten ones (or drops).
    pub files_rewritten: usize,
    /// Their bytes.
    pub bytes_rewritten: u64,
    /// Delete files the twin resolves (leaves out, their deletes applied).
    pub delete_files_resolved: usize,
}

/// What a rewrite of kept history did (or, as a plan, would do).
#[derive(Debug, Clone, Default, Serialize)]
pub struct TwinsReport {
    /// The table.
    pub table: String,
    /// Every kept snapshot that holds matching rows (or delete files), oldest first.
    pub twins: Vec<Twin>,
    /// Distinct data files rewritten (a file twins share is rewritten once).
    pub files_rewritten: usize,
    /// Their bytes.
    pub bytes_rewritten: u64,
    /// Snapshots expired (the originals and whatever else the table's rules let go).
    pub expired: Vec<i64>,
    /// Files deleted because only expired snapshots reached them.
    pub files_deleted: usize,
    /// `main`'s new head, when main was twinned.
    pub snapshot_id: Option<i64>,
    /// Commit attempts.
    pub attempts: u32,
}

impl TwinsReport {
    /// Rows the predicate selected in `main`'s current snapshot (what a plain erasure of the
    /// table would count).
    pub fn rows_matched_on_main(&self) -> u64 {
        self.twins
            .iter()
            .find(|t| t.refs.iter().any(|r| r == "main"))
            .map_or(0, |t| t.rows_matched)
    }
}

/// A data file as a twin rewrote it: the files written (none when every row went), the rows
/// selected, the rows kept.
#[derive(Debug, Clone)]
struct Rewritten {
    added: Vec<DataFile>,
    matched: u64,
    kept: u64,
}

struct Action<'a> {
    spec: &'a TwinsSpec,
    dry_run: bool,
    report: TwinsReport,
    /// The table as loaded for the attempt that committed (for the file deletes).
    before: Option<LoadedTable>,
}

/// The live files of `s` and its delete index.
async fn files_of(
    wh: &Warehouse,
    table: &LoadedTable,
    s: &Snapshot,
) -> Result<(Vec<TrackedFile>, DeleteIndex)> {
    let files = wh.live_files(table, s).await?;
    let mut specs = HashMap::new();
    for mf in wh.manifest_list(table, s)?.entries() {
        specs.insert(mf.manifest_path.clone(), mf.partition_spec_id);
    }
    let index = DeleteIndex::new(&table.metadata, &files, specs);
    Ok((files, index))
}

impl Action<'_> {
    /// The columns a SetNull change nulls, resolved in the table's current schema.
    fn nulled(&self, table: &LoadedTable) -> Result<Vec<FieldPath>> {
        let RowChange::SetNull(cols) = &self.spec.change else {
            return Ok(Vec::new());
        };
        let schema = table.metadata.current_schema();
        cols.iter()
            .map(|c| {
                crate::nested::resolve(schema, c).map_err(|e| {
                    Error::invalid(format!(
                        "table `{}` has no column `{c}` to erase: {e}",
                        table.name
                    ))
                })
            })
            .collect()
    }

    /// Rewrites one data file of a kept snapshot (its `deletes` applied) unless it holds no
    /// selected row and no delete applies: None then.
    #[allow(clippy::too_many_arguments)]
    fn rewrite_file(
        &self,
        wh: &Warehouse,
        table: &LoadedTable,
        f: &TrackedFile,
        index: &DeleteIndex,
        deletes: &[usize],
        reader: &mut DeleteReader<'_>,
        nulled: &[FieldPath],
    ) -> Result<Option<Rewritten>> {
        let schema = table.metadata.current_schema();
        let path = f.entry.data_file.file_path();
        let lineage = has_row_lineage(&table.metadata);
        if deletes.is_empty()
            && wh
                .matching_rows(path, schema, &self.spec.predicate)?
                .is_some_and(|m| m.positions.is_empty())
        {
            return Ok(None);
        }
        let batches = if lineage {
            read_with_lineage(wh.store.as_ref(), f, schema)?
        } else {
            read_data_file(wh.store.as_ref(), path, schema)?
        };
        let live = reader.live_masks(index, deletes, path, &batches)?;
        let out = apply_change(
            &batches,
            live.as_deref(),
            &self.spec.predicate,
            &self.spec.change,
            nulled,
        )?;
        if out.matched == 0 && out.purged == 0 && deletes.is_empty() {
            return Ok(None);
        }
        let kept: u64 = out.kept.iter().map(|b| b.num_rows() as u64).sum();
        let mut added = Vec::new();
        if kept > 0 && !self.dry_run {
            added = write_kept(wh, table, &self.spec.options, &out.kept)?;
        }
        Ok(Some(Rewritten {
            added,
            matched: out.matched,
            kept,
        }))
    }
}

/// Writes the rows kept of one file into new files of the table (its properties, its sort
/// order), returning them.
fn write_kept(
    wh: &Warehouse,
    table: &LoadedTable,
    options: &WriteOptions,
    kept: &[RecordBatch],
) -> Result<Vec<DataFile>> {
    let sort = crate::sort::TableSort::of(&table.metadata)?;
    let mut w = TableWriter::new(wh.store.as_ref(), &table.metadata, options.clone())?;
    if has_row_lineage(&table.metadata) {
        w = w.with_row_lineage();
    }
    if let Some(s) = &sort {
        w = w.with_sort_order_id(s.order_id());
        for b in s.sort(kept, 65_536)? {
            w.write(&b)?;
        }
    } else {
        for b in kept {
            w.write(b)?;
        }
    }
    w.finish()
}

#[async_trait]
impl TableAction for Action<'_> {
    async fn plan(&mut self, wh: &Warehouse, table: &LoadedTable) -> Result<Option<ActionCommit>> {
        expire::check_gc(table)?;
        self.spec
            .predicate
            .check(table.metadata.current_schema(), &table.name.to_string())?;
        let nulled = self.nulled(table)?;
        let now = chrono::Utc::now();
        let (keep, _, refs_removed) = expire::select(table, Cutoff::Every, now)?;
        let refs: Vec<(String, SnapshotReference)> = expire::refs(table)
            .into_iter()
            .filter(|(n, _)| !refs_removed.contains(n))
            .collect();
        let mut kept: Vec<Arc<Snapshot>> = keep
            .keys()
            .filter_map(|id| table.metadata.snapshot_by_id(*id).cloned())
            .collect();
        kept.sort_by_key(|s| (s.sequence_number(), s.timestamp_ms(), s.snapshot_id()));
        self.report = TwinsReport {
            table: table.name.to_string(),
            ..Default::default()
        };
        let mut work = table.clone();
        let mut planned = ActionCommit::default();
        let mut twin_of: HashMap<i64, i64> = HashMap::new();
        let mut rewritten: HashMap<(String, Vec<String>), Option<Rewritten>> = HashMap::new();
        let mut reader = DeleteReader::new(wh.store.as_ref(), table)?;
        let result: Result<()> = async {
            for s in &kept {
                let (files, index) = files_of(wh, table, s).await?;
                check_supported(table, &files)?;
                let mut twin = Twin {
                    original: s.snapshot_id(),
                    refs: refs
                        .iter()
                        .filter(|(_, r)| r.snapshot_id == s.snapshot_id())
                        .map(|(n, _)| n.clone())
                        .collect(),
                    kept_because: keep.get(&s.snapshot_id()).cloned().unwrap_or_default(),
                    ..Default::default()
                };
                let mut changes = SnapshotChanges::new(Operation::Overwrite);
                for f in files.iter().filter(|f| f.is_data()) {
                    let deletes = index.for_data_file(f, wh.store.as_ref());
                    let mut key_deletes: Vec<String> = deletes
                        .iter()
                        .map(|i| index.deletes()[*i].entry.data_file.file_path().to_string())
                        .collect();
                    key_deletes.sort();
                    let key = (
                        wh.store.normalize(f.entry.data_file.file_path())?,
                        key_deletes,
                    );
                    let out = match rewritten.get(&key) {
                        Some(o) => o.clone(),
                        None => {
                            let o = self.rewrite_file(
                                wh,
                                table,
                                f,
                                &index,
                                &deletes,
                                &mut reader,
                                &nulled,
                            )?;
                            if o.is_some() {
                                self.report.files_rewritten += 1;
                                self.report.bytes_rewritten +=
                                    f.entry.data_file.file_size_in_bytes();
                            }
                            rewritten.insert(key, o.clone());
                            o
                        }
                    };
                    let Some(out) = out else {
                        // Untouched: no delete applies to it, so its rows are all live.
                        twin.rows_after += f.entry.data_file.record_count();
                        continue;
                    };
                    twin.rows_after += out.kept;
                    twin.files_rewritten += 1;
                    twin.bytes_rewritten += f.entry.data_file.file_size_in_bytes();
                    twin.rows_matched += out.matched;
                    changes
                        .removed
                        .insert(f.entry.data_file.file_path().to_string());
                    changes.added_data.extend(out.added.iter().cloned());
                }
                for d in files.iter().filter(|f| !f.is_data()) {
                    let df = &d.entry.data_file;
                    match df.content_offset() {
                        Some(o) if crate::deletion_vector::is_deletion_vector(df) => {
                            changes
                                .removed_vectors
                                .insert((df.file_path().to_string(), o));
                        }
                        _ => {
                            changes.removed.insert(df.file_path().to_string());
                        }
                    }
                    twin.delete_files_resolved += 1;
                }
                if changes.removed.is_empty() && changes.removed_vectors.is_empty() {
                    continue;
                }
                // The twin has no delete file: its rows are exact; the original read those
                // and the rows the change removed.
                twin.rows_before = twin.rows_after
                    + match self.spec.change {
                        RowChange::Delete => twin.rows_matched,
                        _ => 0,
                    };
                if self.dry_run {
                    self.report.twins.push(twin);
                    continue;
                }
                changes.summary = self.spec.summary.clone();
                changes
                    .summary
                    .insert("lethe.twin-of".into(), s.snapshot_id().to_string());
                changes.summary.insert(
                    "lethe.twin-of-timestamp-ms".into(),
                    s.timestamp_ms().to_string(),
                );
                let parent = s
                    .parent_snapshot_id()
                    .map(|p| twin_of.get(&p).copied().unwrap_or(p));
                let produced = produce_on(
                    wh,
                    &work,
                    On {
                        base: Some(s.clone()),
                        parent,
                        set_ref: None,
                    },
                    changes,
                )
                .await?;
                planned.written.extend(produced.written);
                work = applied(&work, &produced.updates)?;
                planned.updates.extend(produced.updates);
                let id = produced.snapshot_id.expect("a produced snapshot has an id");
                twin_of.insert(s.snapshot_id(), id);
                twin.twin = Some(id);
                self.report.twins.push(twin);
            }
            Ok(())
        }
        .await;
        // Every file a twin wrote, written or not yet listed by a produced snapshot.
        let mut all_written: Vec<String> = planned.written.clone();
        for r in rewritten.values().flatten() {
            all_written.extend(r.added.iter().map(|f| f.file_path().to_string()));
        }
        let discard = |files: &[String]| {
            for f in files {
                let _ = wh.store.delete(f);
            }
        };
        if let Err(e) = result {
            discard(&all_written);
            return Err(e);
        }
        if self.dry_run || twin_of.is_empty() {
            discard(&all_written);
            return Ok(None);
        }
        planned.written = all_written;
        // Tests stop here to change the table between planning and commit; the name carries
        // the table so parallel tests don't trip each other's failpoints.
        #[cfg(feature = "failpoints")]
        fail::eval(&format!("twins-planned/{}", table.name), |_| ());
        self.point_refs(table, &refs, &twin_of, &mut work, &mut planned)?;
        let expiry = plan_expiry(&work, Cutoff::Every, now, &mut planned)?;
        self.report.expired = expiry.expired;
        self.report.snapshot_id = table
            .metadata
            .current_snapshot_id()
            .and_then(|c| twin_of.get(&c).copied());
        planned.snapshot_id = self.report.snapshot_id;
        self.before = Some(table.clone());
        Ok(Some(planned))
    }
}

impl Action<'_> {
    /// Points every ref at the twin of its snapshot (retention settings kept), and requires
    /// every ref to be where it was when planned.
    fn point_refs(
        &self,
        table: &LoadedTable,
        refs: &[(String, SnapshotReference)],
        twin_of: &HashMap<i64, i64>,
        work: &mut LoadedTable,
        planned: &mut ActionCommit,
    ) -> Result<()> {
        planned.requirements = vec![TableRequirement::UuidMatch {
            uuid: table.metadata.uuid(),
        }];
        let mut moves = Vec::new();
        for (name, r) in refs {
            planned
                .requirements
                .push(TableRequirement::RefSnapshotIdMatch {
                    r#ref: name.clone(),
                    snapshot_id: Some(r.snapshot_id),
                });
            if let Some(t) = twin_of.get(&r.snapshot_id) {
                moves.push(TableUpdate::SetSnapshotRef {
                    ref_name: name.clone(),
                    reference: SnapshotReference::new(*t, r.retention.clone()),
                });
            }
        }
        *work = applied(work, &moves)?;
        planned.updates.extend(moves);
        Ok(())
    }
}

/// Rewrites the kept history of table `name` without the rows `spec` selects (or with their
/// columns nulled) and commits it, retrying on conflicts; then deletes the files only the
/// expired snapshots reached. Commits nothing when no kept snapshot holds a selected row or a
/// delete file.
pub async fn rewrite_history(
    wh: &Warehouse,
    name: &TableName,
    spec: &TwinsSpec,
) -> Result<TwinsReport> {
    let mut action = Action {
        spec,
        dry_run: false,
        report: TwinsReport::default(),
        before: None,
    };
    let committed = commit(wh, name, &mut action).await?;
    let mut report = action.report;
    report.table = name.to_string();
    if let (Some(c), Some(before)) = (committed, action.before) {
        report.attempts = c.attempts;
        report.files_deleted =
            expire::delete_unreachable(wh, &before, &c.table, &report.expired, &[]).await?;
    } else {
        report.twins.clear();
        report.snapshot_id = None;
    }
    Ok(report)
}

/// What [`rewrite_history`] would do: the kept snapshots that would get twins, with their refs,
/// rows and the files rewritten. Reads the tables; writes and commits nothing.
pub async fn plan_twins(wh: &Warehouse, name: &TableName, spec: &TwinsSpec) -> Result<TwinsReport> {
    let table = wh.load(name).await?;
    let mut action = Action {
        spec,
        dry_run: true,
        report: TwinsReport::default(),
        before: None,
    };
    action.plan(wh, &table).await?;
    Ok(action.report)
}

/// The ids of the snapshots of `table` that expiry keeps, with why ([`expire::select`] with
/// [`Cutoff::Every`]): what [`rewrite_history`] twins.
pub fn kept_snapshots(table: &LoadedTable) -> Result<BTreeMap<i64, String>> {
    Ok(expire::select(table, Cutoff::Every, chrono::Utc::now())?.0)
}
