//! Rewriting manifests so that no live manifest keeps a `DELETED` entry.
//!
//! A `DELETED` entry keeps the removed file's column bounds, which can be a removed person's
//! values. This commits a `replace` snapshot whose manifests hold only the live entries (as
//! `EXISTING`, sequence numbers preserved) and no data change. The snapshot before it still
//! references the old manifests until it is expired; the erasure's cleanup expires it.

use std::collections::BTreeMap;

use async_trait::async_trait;
use iceberg::spec::{ManifestStatus, Operation, Snapshot};
use serde::Serialize;

use crate::catalog::TableName;
use crate::commit::{ActionCommit, TableAction, commit};
use crate::error::Result;
use crate::snapshot::{SnapshotChanges, produce};
use crate::table::{LoadedTable, Warehouse};

/// What a manifest rewrite did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ManifestsReport {
    /// The table.
    pub table: String,
    /// Manifests in the current snapshot before.
    pub manifests_before: usize,
    /// Of them, holding DELETED entries.
    pub with_deleted_entries: usize,
    /// The replace snapshot committed, if any.
    pub snapshot_id: Option<i64>,
}

struct Action {
    summary: BTreeMap<String, String>,
    force: bool,
    report: ManifestsReport,
}

#[async_trait]
impl TableAction for Action {
    async fn plan(&mut self, wh: &Warehouse, table: &LoadedTable) -> Result<Option<ActionCommit>> {
        self.report = ManifestsReport {
            table: table.name.to_string(),
            ..Default::default()
        };
        let Some(s) = table.current_snapshot() else {
            return Ok(None);
        };
        (
            self.report.manifests_before,
            self.report.with_deleted_entries,
        ) = count_deleted_entries(wh, table, s).await?;
        if self.report.with_deleted_entries == 0 && !self.force {
            return Ok(None);
        }
        Ok(Some(replace_snapshot(wh, table, &self.summary).await?))
    }
}

/// How many manifests snapshot `s` of `table` has, and how many of them hold DELETED entries.
pub(crate) async fn count_deleted_entries(
    wh: &Warehouse,
    table: &LoadedTable,
    s: &Snapshot,
) -> Result<(usize, usize)> {
    let list = wh.manifest_list(table, s)?;
    let mut with_deleted = 0;
    for mf in list.entries() {
        let has_deleted = match mf.deleted_files_count {
            Some(0) => false,
            Some(_) => true,
            None => wh
                .manifest_entries(mf)
                .await?
                .iter()
                .any(|e| e.status == ManifestStatus::Deleted),
        };
        if has_deleted {
            with_deleted += 1;
        }
    }
    Ok((list.entries().len(), with_deleted))
}

/// The `replace` snapshot whose manifests hold the current snapshot's live entries only.
pub(crate) async fn replace_snapshot(
    wh: &Warehouse,
    table: &LoadedTable,
    summary: &BTreeMap<String, String>,
) -> Result<ActionCommit> {
    let mut changes = SnapshotChanges::new(Operation::Replace);
    changes.rewrite_all_manifests = true;
    changes.summary = summary.clone();
    produce(wh, table, changes).await
}

/// Rewrites the manifests of `name` when any holds a DELETED entry (or always, with `force`).
pub async fn rewrite_manifests(
    wh: &Warehouse,
    name: &TableName,
    summary: BTreeMap<String, String>,
    force: bool,
) -> Result<ManifestsReport> {
    let mut action = Action {
        summary,
        force,
        report: ManifestsReport::default(),
    };
    let c = commit(wh, name, &mut action).await?;
    let mut report = action.report;
    report.snapshot_id = c.and_then(|c| c.snapshot_id);
    Ok(report)
}
