//! Durable step 4 of an erasure: the cleanup of every table the erasure changed.
//!
//! Two phases, each run on every table and then recorded in the journal: `history`, one commit that
//! rewrites manifests holding DELETED entries, expires every snapshot older than the
//! erasure's commits (the one before the rewrite included) and empties the metadata log
//! ([`lethe_iceberg::ops::history`]: the state Iceberg Java's manifest rewrite, expiry and a
//! trimmed log reach, in one metadata file instead of three or four); and `sweep`, which
//! removes unreferenced files older than the minimum age. With `[storage] purge_versions =
//! true` a third phase deletes, by version id, the noncurrent versions a versioned bucket keeps
//! under the table (the removed files' bytes); without it the phase is not recorded, so turning
//! it on later and running the erasure again (`lethe erase --resume REQUEST`) purges then.
//! A journal written by an older lethe, which recorded the history's parts as four phases
//! (`expire`, `manifests`, `expire-again`, `trim-log`), runs `history` again on resume: it
//! commits only what is still to do.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{Duration, Utc};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::expire::Cutoff;
use lethe_iceberg::ops::history::purge_history;
use lethe_iceberg::ops::sweep::{TableLocations, purge_versions, sweep_among};

use futures::future::BoxFuture;

use super::journal::{Journal, TableCleanup, save_journal};
use super::{durable_step, on_all_cores};
use crate::erasure::plan::Action;
use crate::error::Result;
use crate::workspace::Workspace;

/// The cleanup phases, in order.
const PHASES: [&str; 3] = ["history", "sweep", "purge-versions"];

/// Whether a finished erasure still has a phase to run: the version purge, turned on after it
/// finished.
pub(super) fn pending_phases(ws: &Workspace, journal: &Journal) -> bool {
    ws.config.storage.purge_versions
        && changed_tables(journal).iter().any(|t| {
            !journal
                .cleanup
                .get(t)
                .is_some_and(|c| c.phases.contains("purge-versions"))
        })
}

fn changed_tables(journal: &Journal) -> Vec<String> {
    journal
        .steps
        .iter()
        .filter(|s| {
            matches!(
                s.action,
                Action::Delete | Action::Rewrite | Action::Recompute
            ) && !s.is_held()
        })
        .map(|s| s.table.clone())
        .collect()
}

/// Cleans up every table a DELETE, REWRITE or RECOMPUTE step changed, resuming at the first
/// phase the journal doesn't record as done. A phase runs on its tables concurrently
/// ([`on_all_cores`]; each table's commit is its own, its files synced apart from the
/// others'), the counts recorded in the tables' order.
pub(super) async fn clean_up(
    ws: &Workspace,
    journal: &mut Journal,
    tag: &str,
    progress: &dyn Fn(&str),
) -> Result<()> {
    let min_age = Duration::seconds(journal.min_age_seconds);
    let tables = changed_tables(journal);
    let n = tables.len();
    let mut locations = None;
    // Phase by phase over every table, the journal saved once per phase: each phase is
    // idempotent (a history already purged commits nothing more, a sweep finds nothing left
    // to remove), so a crash before the save only repeats the phase on the tables already
    // done — to the same end state; their counts then say what the repeat did.
    for phase in PHASES {
        if phase == "purge-versions" && !ws.config.storage.purge_versions {
            continue;
        }
        let todo: Vec<(usize, &String)> = tables
            .iter()
            .enumerate()
            .filter(|(_, t)| {
                !journal
                    .cleanup
                    .get(*t)
                    .is_some_and(|c| c.phases.contains(phase))
            })
            .collect();
        if todo.is_empty() {
            continue;
        }
        let mut work = Vec::new();
        for (k, table) in &todo {
            progress(&format!("cleanup {phase} {}/{n} {table}", k + 1));
            work.push(phase_work(ws, table, phase, tag, min_age, &mut locations).await?);
        }
        // Every table's result is recorded before the first failure is returned.
        let mut failed = None;
        for ((_, table), done) in todo.into_iter().zip(on_all_cores(work).await) {
            match done {
                Ok(counts) => {
                    let c = journal.cleanup.entry(table.clone()).or_default();
                    c.absorb(&counts);
                    c.phases.insert(phase.to_string());
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        save_journal(ws, journal)?;
        if let Some(e) = failed {
            return Err(e);
        }
        durable_step(&format!("cleanup {phase}"));
    }
    Ok(())
}

/// One cleanup phase on one table, as work that owns what it needs (to run beside the other
/// tables' phases): it returns the phase's counts. The first sweep loads the warehouse's
/// table locations into `locations`, shared by every later sweep of the same cleanup.
async fn phase_work(
    ws: &Workspace,
    table: &str,
    phase: &'static str,
    tag: &str,
    min_age: Duration,
    locations: &mut Option<Arc<TableLocations>>,
) -> Result<BoxFuture<'static, Result<TableCleanup>>> {
    let name = TableName::parse(table)?;
    let wh = ws.warehouse.for_concurrent_work();
    let clock = ws.clock.clone();
    if phase == "sweep" && locations.is_none() {
        *locations = Some(Arc::new(TableLocations::load(&ws.warehouse).await?));
    }
    let tables = locations.clone();
    let summary: BTreeMap<String, String> =
        [("erasure-request".to_string(), tag.to_string())].into();
    Ok(Box::pin(async move {
        let mut c = TableCleanup::default();
        match phase {
            "history" => {
                let r = purge_history(
                    &wh,
                    &name,
                    Cutoff::OlderThan(Utc::now() + Duration::seconds(1)),
                    summary,
                    clock.as_ref(),
                )
                .await?;
                c.snapshots_expired = r.expire.expired.len();
                c.files_removed = r.expire.files_deleted;
                c.manifests_rewritten = usize::from(r.manifests.snapshot_id.is_some());
            }
            "purge-versions" => {
                c.versions_purged = purge_versions(&wh, &name).await?.versions_deleted;
            }
            _ => {
                let tables = tables.expect("loaded above for a sweep");
                let r = sweep_among(&wh, &name, min_age, false, clock.as_ref(), &tables).await?;
                c.files_removed = r.removed;
                c.files_too_young = r.too_young;
            }
        }
        Ok(c)
    }))
}

/// Every cleanup phase, in order, on tables changed outside an erasure's journal (`lethe
/// register replay`); the counts summed over the tables.
pub(crate) async fn clean_tables(
    ws: &Workspace,
    tables: &[String],
    tag: &str,
    min_age: Duration,
    progress: &dyn Fn(&str),
) -> Result<TableCleanup> {
    let mut c = TableCleanup::default();
    let n = tables.len();
    let mut locations = None;
    for phase in PHASES {
        let mut work = Vec::new();
        for (k, table) in tables.iter().enumerate() {
            progress(&format!("cleanup {phase} {}/{n} {table}", k + 1));
            work.push(phase_work(ws, table, phase, tag, min_age, &mut locations).await?);
        }
        for done in on_all_cores(work).await {
            c.absorb(&done?);
        }
        c.phases.insert(phase.to_string());
    }
    Ok(c)
}
