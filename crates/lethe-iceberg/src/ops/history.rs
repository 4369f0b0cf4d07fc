//! Purging a table's history in one commit: the manifest rewrite, the expiry of every
//! snapshot it leaves behind, and an emptied metadata log.
//!
//! What an erasure's cleanup needs after its row changes is the state Iceberg Java reaches
//! with `rewriteManifests()` (a `replace` snapshot whose manifests hold only live entries, so
//! no `DELETED` entry keeps a removed file's column bounds), then `expireSnapshots()` (every
//! snapshot the table's settings let go, the one before the rewrite included), then a metadata
//! log referencing no older metadata file. Done as those three operations it takes three
//! commits, and the first two write metadata files that the next commit supersedes at once.
//! [`purge_history`] plans the same changes against the table as loaded and commits them as
//! one set of updates (`add-snapshot`, `set-snapshot-ref main`, `remove-snapshot-ref` for
//! expired refs, `remove-statistics`, `remove-snapshots`) with the log trimmed: one metadata
//! file, and a state equal to the three commits'. The expiry's choice is [`expire::select`]
//! applied to the table as it is after the rewrite (so Java's rules hold: `gc.enabled`,
//! refs, `min-snapshots-to-keep`, the cutoff), and afterwards the files only expired snapshots
//! reached are deleted, as Java's expiry does ([`expire::delete_unreachable`]).
//!
//! Nothing is half-committed: the commit is one catalog swap (SQL) or one request (REST); if
//! it fails for certain, the manifests it wrote are deleted, and a conflict replans against
//! the new state ([`crate::commit`]). Run again, it finds nothing to do and commits nothing.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use iceberg::TableRequirement;
use serde::Serialize;

use crate::catalog::{TableChange, TableName, apply_change};
use crate::clock::Clock;
use crate::commit::{ActionCommit, TableAction, commit};
use crate::error::Result;
use crate::ops::expire::{self, Cutoff, ExpireReport};
use crate::ops::manifests::{ManifestsReport, count_deleted_entries, replace_snapshot};
use crate::table::{LoadedTable, Warehouse};

/// What [`purge_history`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HistoryReport {
    /// The manifest rewrite (its `snapshot_id` the replace snapshot, if one was needed).
    pub manifests: ManifestsReport,
    /// The expiry (`committed` is whether the one commit landed).
    pub expire: ExpireReport,
}

/// A purge of a table's history carried by the commit of a row change
/// ([`crate::ops::rewrite::RowRewrite::with_history_purge`]): the state [`purge_history`]
/// reaches after the change, without a commit of its own.
#[derive(Debug, Clone)]
pub struct PurgeHistory {
    /// The snapshots to expire, chosen on the table as the row change leaves it.
    pub cutoff: Cutoff,
    /// The clock the expiry reads (for refs' ages).
    pub clock: std::sync::Arc<dyn Clock>,
}

struct Action<'a> {
    cutoff: Cutoff,
    summary: BTreeMap<String, String>,
    clock: &'a dyn Clock,
    report: HistoryReport,
    /// The table the expiry was chosen on (after the planned rewrite), for the file deletes.
    before: Option<LoadedTable>,
}

#[async_trait]
impl TableAction for Action<'_> {
    async fn plan(&mut self, wh: &Warehouse, table: &LoadedTable) -> Result<Option<ActionCommit>> {
        expire::check_gc(table)?;
        let name = table.name.to_string();
        let mut manifests = ManifestsReport {
            table: name.clone(),
            ..Default::default()
        };
        let mut planned = ActionCommit {
            requirements: vec![
                TableRequirement::UuidMatch {
                    uuid: table.metadata.uuid(),
                },
                TableRequirement::RefSnapshotIdMatch {
                    r#ref: "main".into(),
                    snapshot_id: table.metadata.current_snapshot_id(),
                },
            ],
            ..Default::default()
        };
        // The rewrite first: the expiry is chosen on the table as the rewrite leaves it.
        let mut after_rewrite = table.clone();
        if let Some(s) = table.current_snapshot() {
            (manifests.manifests_before, manifests.with_deleted_entries) =
                count_deleted_entries(wh, table, s).await?;
            if manifests.with_deleted_entries > 0 {
                let replace = replace_snapshot(wh, table, &self.summary).await?;
                after_rewrite = match applied(table, &replace.updates) {
                    Ok(a) => a,
                    Err(e) => {
                        for w in &replace.written {
                            let _ = wh.store.delete(w);
                        }
                        return Err(e);
                    }
                };
                manifests.snapshot_id = replace.snapshot_id;
                planned.snapshot_id = replace.snapshot_id;
                planned.updates = replace.updates;
                planned.written = replace.written;
            }
        }
        let now: DateTime<Utc> = self.clock.now();
        let expire = match plan_expiry(&after_rewrite, self.cutoff, now, &mut planned) {
            Ok(r) => r,
            Err(e) => {
                for w in &planned.written {
                    let _ = wh.store.delete(w);
                }
                return Err(e);
            }
        };
        self.report = HistoryReport { manifests, expire };
        self.before = Some(after_rewrite);
        if planned.updates.is_empty() && table.metadata.metadata_log().is_empty() {
            return Ok(None);
        }
        Ok(Some(planned))
    }
}

/// Adds to `planned` the expiry of every snapshot `cutoff` selects on `after` (the table as
/// `planned`'s other updates leave it; Iceberg Java's rules, [`expire::select`]) and an emptied
/// metadata log. The report's `files_deleted` and `committed` are for the caller to fill in
/// once the commit has landed and [`expire::delete_unreachable`] has run.
pub(crate) fn plan_expiry(
    after: &LoadedTable,
    cutoff: Cutoff,
    now: DateTime<Utc>,
    planned: &mut ActionCommit,
) -> Result<ExpireReport> {
    let report = ExpireReport::planned(after, expire::select(after, cutoff, now)?);
    planned.updates.extend(expire::expiry_updates(
        after,
        &report.expired,
        &report.refs_removed,
    ));
    planned.trim_metadata_log = true;
    Ok(report)
}

/// The table as `updates` leave it (nothing written or committed).
pub(crate) fn applied(
    table: &LoadedTable,
    updates: &[iceberg::TableUpdate],
) -> Result<LoadedTable> {
    let built = apply_change(
        table,
        TableChange {
            requirements: &[],
            updates,
            trim_metadata_log: false,
        },
    )?;
    let mut after = table.clone();
    after.metadata = std::sync::Arc::new(built.metadata);
    Ok(after)
}

/// Rewrites the manifests of `name` when any holds a DELETED entry (the replace snapshot
/// carries `summary`), expires the snapshots `cutoff` selects on the table as rewritten, and
/// empties the metadata log — in one commit — then deletes the files only expired snapshots
/// reached. Commits nothing when there is nothing to do.
pub async fn purge_history(
    wh: &Warehouse,
    name: &TableName,
    cutoff: Cutoff,
    summary: BTreeMap<String, String>,
    clock: &dyn Clock,
) -> Result<HistoryReport> {
    let mut action = Action {
        cutoff,
        summary,
        clock,
        report: HistoryReport::default(),
        before: None,
    };
    let committed = commit(wh, name, &mut action).await?;
    let mut report = action.report;
    let Some(c) = committed else {
        return Ok(report);
    };
    report.expire.committed = true;
    if let Some(before) = action.before {
        report.expire.files_deleted =
            expire::delete_unreachable(wh, &before, &c.table, &report.expire.expired, &[]).await?;
    }
    Ok(report)
}
