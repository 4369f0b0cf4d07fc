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

use chrono::{Duration, Utc};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::expire::Cutoff;
use lethe_iceberg::ops::history::purge_history;
use lethe_iceberg::ops::sweep::{TableLocations, purge_versions, sweep_among};

use super::durable_step;
use super::journal::{Journal, TableCleanup, save_journal};
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
/// phase the journal doesn't record as done.
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
        let mut ran = false;
        for (k, table) in tables.iter().enumerate() {
            let mut c = journal.cleanup.get(table).cloned().unwrap_or_default();
            if c.phases.contains(phase) {
                continue;
            }
            let name = TableName::parse(table)?;
            progress(&format!("cleanup {phase} {}/{n} {table}", k + 1));
            run_phase(ws, &name, phase, tag, min_age, &mut c, &mut locations).await?;
            c.phases.insert(phase.to_string());
            journal.cleanup.insert(table.clone(), c);
            ran = true;
        }
        if ran {
            save_journal(ws, journal)?;
            durable_step(&format!("cleanup {phase}"));
        }
    }
    Ok(())
}

/// One cleanup phase on one table, its counts added to `c`. The first sweep loads the
/// warehouse's table locations into `locations`, for every later sweep of the same cleanup.
async fn run_phase(
    ws: &Workspace,
    name: &TableName,
    phase: &str,
    tag: &str,
    min_age: Duration,
    c: &mut TableCleanup,
    locations: &mut Option<TableLocations>,
) -> Result<()> {
    match phase {
        "history" => {
            let summary: BTreeMap<String, String> =
                [("erasure-request".to_string(), tag.to_string())].into();
            let r = purge_history(
                &ws.warehouse,
                name,
                Cutoff::OlderThan(Utc::now() + Duration::seconds(1)),
                summary,
                ws.clock.as_ref(),
            )
            .await?;
            c.snapshots_expired += r.expire.expired.len();
            c.files_removed += r.expire.files_deleted;
            if r.manifests.snapshot_id.is_some() {
                c.manifests_rewritten += 1;
            }
        }
        "purge-versions" => {
            let r = purge_versions(&ws.warehouse, name).await?;
            c.versions_purged += r.versions_deleted;
        }
        _ => {
            if locations.is_none() {
                *locations = Some(TableLocations::load(&ws.warehouse).await?);
            }
            let tables = locations.as_ref().expect("loaded above");
            let r = sweep_among(
                &ws.warehouse,
                name,
                min_age,
                false,
                ws.clock.as_ref(),
                tables,
            )
            .await?;
            c.files_removed += r.removed;
            c.files_too_young = r.too_young;
        }
    }
    Ok(())
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
        for (k, table) in tables.iter().enumerate() {
            progress(&format!("cleanup {phase} {}/{n} {table}", k + 1));
            run_phase(
                ws,
                &TableName::parse(table)?,
                phase,
                tag,
                min_age,
                &mut c,
                &mut locations,
            )
            .await?;
        }
        c.phases.insert(phase.to_string());
    }
    Ok(c)
}
