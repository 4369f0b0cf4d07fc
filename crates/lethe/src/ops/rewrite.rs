//! Copy-on-write row changes: delete rows, set columns to null, or rewrite every file.
//!
//! Guarantees:
//! - Only live data files that may hold matching rows are read: the iceberg crate's scan
//!   planning prunes by partition values and by the column bounds the manifests keep.
//! - A file with no matching row is left as it is (carried as `EXISTING` only if its manifest
//!   is rewritten anyway). A file whose rows all match is dropped without writing anything. Any
//!   other affected file is rewritten without the matching rows (or with the columns nulled)
//!   through lethe's metrics-aware writer.
//! - The commit records `delete` (files only removed), `overwrite` (files removed and added) or
//!   `replace` (a rewrite that changes no row), the standard counts, and the caller's summary
//!   keys. A change that matches nothing commits nothing.
//! - On a lost commit race the change is planned again from the new table state, so rows a
//!   concurrent writer added are evaluated too (see [`crate::commit`]).
//!
//! Not supported yet (refused before anything is written): tables with delete files
//! (merge-on-read) and format v3.

use std::collections::{BTreeMap, HashSet};

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, new_null_array};
use arrow::compute;
use async_trait::async_trait;
use futures::TryStreamExt;
use iceberg::spec::{DataFile, Operation};
use serde::Serialize;

use crate::catalog::TableName;
use crate::commit::{ActionCommit, TableAction, commit};
use crate::error::{Error, Result};
use crate::predicate::Predicate;
use crate::read::read_data_file;
use crate::snapshot::{SnapshotChanges, check_writable, produce};
use crate::table::{LoadedTable, TrackedFile, Warehouse};
use crate::writer::{TableWriter, WriteOptions};

/// What happens to the rows a predicate selects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowChange {
    /// Remove them.
    Delete,
    /// Keep them with these columns set to null (tombstones, erase_columns).
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
}

impl RowRewrite {
    /// Delete the rows `predicate` selects.
    pub fn delete(predicate: Predicate) -> Self {
        RowRewrite {
            predicate,
            change: RowChange::Delete,
            summary: BTreeMap::new(),
            options: WriteOptions::default(),
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
    /// Files that may hold matching rows after pruning (read).
    pub files_read: usize,
    /// Files rewritten (by location).
    pub files_rewritten: Vec<String>,
    /// Files dropped whole (by location).
    pub files_dropped: Vec<String>,
    /// Files added.
    pub files_added: Vec<String>,
    /// Rows the predicate selected (for SetNull: rows whose columns changed).
    pub rows_matched: u64,
    /// Rows in the table before.
    pub rows_in_table: u64,
    /// Rows written again to keep them.
    pub rows_rewritten: u64,
    /// The snapshot committed, if any.
    pub snapshot_id: Option<i64>,
    /// Commit attempts.
    pub attempts: u32,
}

struct Action<'a> {
    spec: &'a RowRewrite,
    dry_run: bool,
    report: RewriteReport,
}

/// Selects the live data files that may hold rows matching `predicate`.
async fn candidates(
    wh: &Warehouse,
    table: &LoadedTable,
    predicate: &Predicate,
) -> Result<HashSet<String>> {
    let Some(snapshot) = table.current_snapshot() else {
        return Ok(HashSet::new());
    };
    let filter = predicate.to_iceberg(table.metadata.current_schema(), &table.name.to_string())?;
    let t = wh.iceberg_table(table)?;
    let scan = t
        .scan()
        .snapshot_id(snapshot.snapshot_id())
        .with_filter(filter)
        .select_all()
        .build()?;
    let tasks: Vec<_> = scan.plan_files().await?.try_collect().await?;
    let normalize = |p: &str| wh.store.normalize(p).unwrap_or_else(|_| p.to_string());
    Ok(tasks
        .into_iter()
        .map(|t| normalize(&t.data_file_path))
        .collect())
}

/// Whether a table has delete files (merge-on-read) in its current snapshot.
pub fn has_delete_files(files: &[TrackedFile]) -> bool {
    files.iter().any(|f| !f.is_data())
}

#[async_trait]
impl TableAction for Action<'_> {
    async fn plan(&mut self, wh: &Warehouse, table: &LoadedTable) -> Result<Option<ActionCommit>> {
        check_writable(table)?;
        let tname = table.name.to_string();
        let schema = table.metadata.current_schema().clone();
        self.spec.predicate.check(&schema, &tname)?;
        if let RowChange::SetNull(cols) = &self.spec.change {
            for c in cols {
                let f = schema.field_by_name(c).ok_or_else(|| {
                    Error::invalid(format!("table `{tname}` has no column `{c}` to erase"))
                })?;
                if f.required {
                    return Err(Error::invalid(format!(
                        "column `{tname}.{c}` is required and can't be set to null"
                    )));
                }
            }
        }
        let files = wh.current_files(table).await?;
        if has_delete_files(&files) {
            return Err(Error::Unsupported {
                table: tname,
                feature: "merge-on-read delete files".into(),
                detail:
                    "the table has position or equality delete files; lethe can't rewrite it yet"
                        .into(),
            });
        }
        let mut report = RewriteReport {
            table: tname.clone(),
            files_in_table: files.len(),
            rows_in_table: files.iter().map(|f| f.entry.data_file.record_count()).sum(),
            ..Default::default()
        };
        let wanted = match self.spec.change {
            RowChange::RewriteAll => files
                .iter()
                .map(|f| wh.store.normalize(f.entry.data_file.file_path()))
                .collect::<Result<HashSet<_>>>()?,
            _ => candidates(wh, table, &self.spec.predicate).await?,
        };
        let mut writer = if self.dry_run {
            None
        } else {
            Some(TableWriter::new(
                wh.store.as_ref(),
                &table.metadata,
                self.spec.options.clone(),
            )?)
        };
        let mut removed: HashSet<String> = HashSet::new();
        let result: Result<()> = async {
            for f in &files {
                let path = f.entry.data_file.file_path();
                if !wanted.contains(&wh.store.normalize(path)?) {
                    continue;
                }
                report.files_read += 1;
                let batches = read_data_file(wh.store.as_ref(), path, &schema)?;
                let (kept, matched) =
                    apply_change(&batches, &self.spec.predicate, &self.spec.change)?;
                if matched == 0 && self.spec.change != RowChange::RewriteAll {
                    continue;
                }
                report.rows_matched += matched;
                removed.insert(path.to_string());
                let kept_rows: usize = kept.iter().map(RecordBatch::num_rows).sum();
                if kept_rows == 0 {
                    report.files_dropped.push(path.to_string());
                    continue;
                }
                report.files_rewritten.push(path.to_string());
                report.rows_rewritten += kept_rows as u64;
                if let Some(w) = writer.as_mut() {
                    for b in &kept {
                        w.write(b)?;
                    }
                }
            }
            Ok(())
        }
        .await;
        let written_so_far = writer.as_ref().map(|w| w.locations()).unwrap_or_default();
        if let Err(e) = result {
            for l in written_so_far {
                let _ = wh.store.delete(&l);
            }
            return Err(e);
        }
        // Tests stop here to change the table between planning and commit; the name carries
        // the table so parallel tests don't trip each other's failpoints.
        #[cfg(feature = "failpoints")]
        fail::eval(&format!("row-rewrite-planned/{tname}"), |_| ());
        self.report = report;
        if removed.is_empty() || self.dry_run {
            if let Some(w) = writer {
                for l in w.locations() {
                    let _ = wh.store.delete(&l);
                }
            }
            return Ok(None);
        }
        let added: Vec<DataFile> = match writer {
            Some(w) => w.finish()?,
            None => Vec::new(),
        };
        self.report.files_added = added.iter().map(|d| d.file_path().to_string()).collect();
        let operation = match (&self.spec.change, added.is_empty()) {
            (RowChange::RewriteAll, _) => Operation::Replace,
            (_, true) => Operation::Delete,
            (_, false) => Operation::Overwrite,
        };
        let mut changes = SnapshotChanges::new(operation);
        changes.added_data = added;
        changes.removed = removed;
        changes.summary = self.spec.summary.clone();
        let added_paths = self.report.files_added.clone();
        let mut commit = match produce(wh, table, changes).await {
            Ok(c) => c,
            Err(e) => {
                for l in &added_paths {
                    let _ = wh.store.delete(l);
                }
                return Err(e);
            }
        };
        commit.written.extend(added_paths);
        Ok(Some(commit))
    }
}

/// Applies a change to the batches of one file: returns the batches to keep and how many rows
/// the change touched.
fn apply_change(
    batches: &[RecordBatch],
    predicate: &Predicate,
    change: &RowChange,
) -> Result<(Vec<RecordBatch>, u64)> {
    let mut kept = Vec::with_capacity(batches.len());
    let mut matched = 0u64;
    for b in batches {
        match change {
            RowChange::RewriteAll => kept.push(b.clone()),
            RowChange::Delete => {
                let mask = predicate.evaluate(b)?;
                let n = mask.true_count() as u64;
                matched += n;
                if n == 0 {
                    kept.push(b.clone());
                } else if (n as usize) < b.num_rows() {
                    let keep = compute::not(&mask)?;
                    kept.push(compute::filter_record_batch(b, &keep)?);
                }
            }
            RowChange::SetNull(cols) => {
                let mask = predicate.evaluate(b)?;
                // Only rows where some target column still holds a value change.
                let mut changed = BooleanArray::from(vec![false; b.num_rows()]);
                for c in cols {
                    let col = b
                        .column_by_name(c)
                        .ok_or_else(|| Error::invalid(format!("no column `{c}`")))?;
                    let present = compute::is_not_null(col)?;
                    changed = compute::or(&changed, &compute::and(&mask, &present)?)?;
                }
                let n = changed.true_count() as u64;
                matched += n;
                if n == 0 {
                    kept.push(b.clone());
                    continue;
                }
                let mut columns: Vec<ArrayRef> = b.columns().to_vec();
                for c in cols {
                    let i = b.schema().index_of(c)?;
                    let nulls = new_null_array(columns[i].data_type(), b.num_rows());
                    columns[i] = compute::kernels::zip::zip(&changed, &nulls, &columns[i])?;
                }
                kept.push(RecordBatch::try_new(b.schema(), columns)?);
            }
        }
    }
    Ok((kept, matched))
}

/// Applies `spec` to table `name` and commits it (retrying on conflicts). A change that matches
/// nothing commits nothing (`snapshot_id` is None).
pub async fn rewrite_rows(
    wh: &Warehouse,
    name: &TableName,
    spec: &RowRewrite,
) -> Result<RewriteReport> {
    let mut action = Action {
        spec,
        dry_run: false,
        report: RewriteReport::default(),
    };
    let committed = commit(wh, name, &mut action).await?;
    let mut report = action.report;
    if report.table.is_empty() {
        report.table = name.to_string();
    }
    if let Some(c) = committed {
        report.snapshot_id = c.snapshot_id;
        report.attempts = c.attempts;
    }
    Ok(report)
}

/// What `spec` would do, without writing or committing anything.
pub async fn dry_run(wh: &Warehouse, name: &TableName, spec: &RowRewrite) -> Result<RewriteReport> {
    let table = wh.load(name).await?;
    let mut action = Action {
        spec,
        dry_run: true,
        report: RewriteReport::default(),
    };
    action.plan(wh, &table).await?;
    Ok(action.report)
}

/// Counts the rows of a table's current snapshot that `predicate` selects (reading only the
/// files that may hold them) and the rows in the table.
pub async fn count_rows(
    wh: &Warehouse,
    table: &LoadedTable,
    predicate: &Predicate,
) -> Result<(u64, u64)> {
    let files = wh.current_files(table).await?;
    let total = files
        .iter()
        .filter(|f| f.is_data())
        .map(|f| f.entry.data_file.record_count())
        .sum();
    if has_delete_files(&files) {
        return Err(Error::Unsupported {
            table: table.name.to_string(),
            feature: "merge-on-read delete files".into(),
            detail: "counting rows of a table with delete files is not supported yet".into(),
        });
    }
    let schema = table.metadata.current_schema().clone();
    predicate.check(&schema, &table.name.to_string())?;
    let wanted = candidates(wh, table, predicate).await?;
    let mut matched = 0u64;
    for f in files.iter().filter(|f| f.is_data()) {
        let path = f.entry.data_file.file_path();
        if !wanted.contains(&wh.store.normalize(path)?) {
            continue;
        }
        for b in read_data_file(wh.store.as_ref(), path, &schema)? {
            matched += predicate.evaluate(&b)?.true_count() as u64;
        }
    }
    Ok((matched, total))
}

/// Reads the rows of a table's current snapshot that `predicate` selects (pruned by manifests).
pub async fn select_rows(
    wh: &Warehouse,
    table: &LoadedTable,
    predicate: &Predicate,
) -> Result<Vec<RecordBatch>> {
    let files = wh.current_files(table).await?;
    if has_delete_files(&files) {
        return Err(Error::Unsupported {
            table: table.name.to_string(),
            feature: "merge-on-read delete files".into(),
            detail: "reading rows of a table with delete files is not supported yet".into(),
        });
    }
    let schema = table.metadata.current_schema().clone();
    let wanted = candidates(wh, table, predicate).await?;
    let mut out = Vec::new();
    for f in files.iter().filter(|f| f.is_data()) {
        let path = f.entry.data_file.file_path();
        if !wanted.contains(&wh.store.normalize(path)?) {
            continue;
        }
        for b in read_data_file(wh.store.as_ref(), path, &schema)? {
            let mask = predicate.evaluate(&b)?;
            if mask.true_count() > 0 {
                out.push(compute::filter_record_batch(&b, &mask)?);
            }
        }
    }
    Ok(out)
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
    struct Append<'a> {
        batches: &'a [RecordBatch],
        summary: BTreeMap<String, String>,
        options: WriteOptions,
    }
    #[async_trait]
    impl TableAction for Append<'_> {
        async fn plan(
            &mut self,
            wh: &Warehouse,
            table: &LoadedTable,
        ) -> Result<Option<ActionCommit>> {
            write_and_produce(
                wh,
                table,
                self.batches,
                Operation::Append,
                false,
                &self.summary,
                &self.options,
            )
            .await
        }
    }
    let mut a = Append {
        batches,
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
    struct Replace<'a> {
        batches: &'a [RecordBatch],
        summary: BTreeMap<String, String>,
        options: WriteOptions,
    }
    #[async_trait]
    impl TableAction for Replace<'_> {
        async fn plan(
            &mut self,
            wh: &Warehouse,
            table: &LoadedTable,
        ) -> Result<Option<ActionCommit>> {
            write_and_produce(
                wh,
                table,
                self.batches,
                Operation::Overwrite,
                true,
                &self.summary,
                &self.options,
            )
            .await
        }
    }
    let mut a = Replace {
        batches,
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
    check_writable(table)?;
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
    let paths: Vec<String> = added.iter().map(|d| d.file_path().to_string()).collect();
    changes.added_data = added;
    let mut commit = match produce(wh, table, changes).await {
        Ok(c) => c,
        Err(e) => {
            for p in &paths {
                let _ = wh.store.delete(p);
            }
            return Err(e);
        }
    };
    commit.written.extend(paths);
    Ok(Some(commit))
}
