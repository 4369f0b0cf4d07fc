//! Durable step 4 of an erasure: the cleanup of every table the erasure changed.
//!
//! Two phases, each run on every table and then recorded in the journal: `history`, one commit that
//! rewrites manifests holding DELETED entries, expires every snapshot older than the
//! erasure's commits (the one before the rewrite included) and empties the metadata log
//! ([`lethe_iceberg::ops::history`]: the state Iceberg Java's manifest rewrite, expiry and a
//! trimmed log reach, in one metadata file instead of three or four); and `sweep`, which
//! removes unreferenced files older than the minimum age. With `[storage] purge_versions =
//! true` a third phase deletes, by version id, what a versioned bucket keeps of the files the
//! erasure removed (every version of an object whose delete marker was made since the erasure
//! started, then the marker: the object has 0 versions) and the noncurrent versions under the
//! table found holding the subjects' traces — nothing under another table's location, nothing
//! current ([`purge_versions`]); without it the phase is not recorded, so turning it on later
//! and running the erasure again (`lethe erase --resume REQUEST`) purges then.
//! A journal written by an older lethe, which recorded the history's parts as four phases
//! (`expire`, `manifests`, `expire-again`, `trim-log`), runs `history` again on resume: it
//! commits only what is still to do.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::Duration;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::expire::Cutoff;
use lethe_iceberg::ops::history::{HistoryReport, purge_history};
use lethe_iceberg::ops::sweep::{PurgeScope, TableLocations, purge_versions, sweep_among};

use futures::future::BoxFuture;

use super::durable_step;
use super::journal::{GracePending, Journal, TableCleanup, save_journal};
use super::schedule::{Touch, cores, run_ordered};
use crate::erasure::plan::Action;
use crate::error::Result;
use crate::workspace::Workspace;

/// The cleanup phases, in order.
const PHASES: [&str; 3] = ["history", "sweep", "purge-versions"];

/// Whether a finished erasure still has a phase to run: the version purge, turned on after it
/// finished, or the history and sweep of tables whose grace has passed.
pub(super) fn pending_phases(ws: &Workspace, journal: &Journal) -> bool {
    !grace_passed(journal, ws.clock.now()).is_empty() || pending_purge(ws, journal)
}

/// Whether the version purge, turned on after the erasure finished, is still to run.
pub(super) fn pending_purge(ws: &Workspace, journal: &Journal) -> bool {
    ws.config.storage.purge_versions
        && changed_tables(journal).iter().any(|t| {
            !journal
                .cleanup
                .get(t)
                .is_some_and(|c| c.phases.contains("purge-versions"))
        })
}

/// The tables a DELETE, REWRITE or RECOMPUTE step not held changes, each once, in the order of
/// their first step.
pub(super) fn changed_tables(journal: &Journal) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in &journal.steps {
        let changes = matches!(
            s.action,
            Action::Delete | Action::Rewrite | Action::Recompute
        ) && !s.is_held();
        if changes && !out.contains(&s.table) {
            out.push(s.table.clone());
        }
    }
    out
}

/// Whether the journal records `phase` as done on `table`.
pub(super) fn phase_done(journal: &Journal, table: &str, phase: &str) -> bool {
    journal
        .cleanup
        .get(table)
        .is_some_and(|c| c.phases.contains(phase))
}

/// Records `phase` as done on `table` with its counts (added to the table's earlier phases').
pub(super) fn record_phase(journal: &mut Journal, table: &str, phase: &str, counts: &TableCleanup) {
    let c = journal.cleanup.entry(table.to_string()).or_default();
    c.absorb(counts);
    c.phases.insert(phase.to_string());
}

/// Cleans up every table a DELETE, REWRITE or RECOMPUTE step changed, resuming at the first
/// phase the journal doesn't record as done (an erasure's `run_steps` has usually done the
/// history and sweep phases already, each table's as soon as nothing left to run reads it).
/// A phase runs on its tables concurrently ([`run_ordered`]; each table's commit is its own,
/// its files synced apart from the others'), each table's counts recorded as it lands.
pub(super) async fn clean_up(
    ws: &Workspace,
    journal: &mut Journal,
    tag: &str,
    progress: &dyn Fn(&str),
) -> Result<()> {
    let min_age = Duration::seconds(journal.min_age_seconds);
    let tables = changed_tables(journal);
    let n = tables.len();
    let locations = SharedLocations::default();
    let purge = Arc::new(Inputs::of(ws, journal)?);
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
            .filter(|(_, t)| !phase_done(journal, t, phase))
            .collect();
        if todo.is_empty() {
            continue;
        }
        // Every table's result is recorded before the first failure is returned.
        let touches: Vec<Touch> = todo.iter().map(|(_, t)| Touch::table(t)).collect();
        let done = run_ordered(
            &touches,
            &[],
            cores(),
            |j| {
                let (k, table) = todo[j];
                progress(&format!("cleanup {phase} {}/{n} {table}", k + 1));
                phase_work(
                    ws,
                    table,
                    phase,
                    tag,
                    min_age,
                    locations.clone(),
                    purge.clone(),
                )
            },
            |j, counts| {
                record_phase(journal, todo[j].1, phase, &counts);
                Ok(())
            },
        )
        .await;
        save_journal(ws, journal)?;
        done?;
        durable_step(&format!("cleanup {phase}"));
    }
    note_grace(ws, journal).await?;
    Ok(())
}

/// With a grace: records, per changed table, until when the snapshots from before the
/// erasure stay (the history phase kept them for other writers' operations in flight), or
/// clears the record when none is left. The snapshots "from before" are those committed
/// before the first time this ran for the table.
pub(super) async fn note_grace(ws: &Workspace, journal: &mut Journal) -> Result<()> {
    let grace_ms = journal.grace_seconds.max(0) * 1000;
    if grace_ms == 0 {
        return Ok(());
    }
    let now = ws.clock.now();
    for t in changed_tables(journal) {
        let before_ms = journal
            .cleanup
            .get(&t)
            .and_then(|c| c.grace.as_ref())
            .map_or(now.timestamp_millis(), |g| g.before_ms);
        let table = ws.warehouse.load(&TableName::parse(&t)?).await?;
        let until = lethe_iceberg::ops::expire::grace_ends(&table, grace_ms, before_ms, now)?;
        journal.cleanup.entry(t).or_default().grace = until.map(|u| GracePending {
            before_ms,
            until: u.to_rfc3339(),
        });
    }
    save_journal(ws, journal)
}

/// The tables whose grace has passed at `now`.
pub(super) fn grace_passed(journal: &Journal, now: chrono::DateTime<chrono::Utc>) -> Vec<String> {
    journal
        .cleanup
        .iter()
        .filter(|(_, c)| c.grace.as_ref().is_some_and(|g| g.passed(now)))
        .map(|(t, _)| t.clone())
        .collect()
}

/// Once the grace of `tables` has passed: their history phase again (the snapshots kept for
/// it expire, and the files only they referenced are deleted), their sweep, and with
/// `[storage] purge_versions` their version purge; then the grace is noted again (cleared
/// when nothing from before the erasure is left).
pub(super) async fn finish_grace(
    ws: &Workspace,
    journal: &mut Journal,
    tables: &[String],
    tag: &str,
    progress: &dyn Fn(&str),
) -> Result<()> {
    let min_age = Duration::seconds(journal.min_age_seconds);
    let inputs = Arc::new(Inputs::of(ws, journal)?);
    let locations = SharedLocations::default();
    for phase in PHASES {
        if phase == "purge-versions" && !ws.config.storage.purge_versions {
            continue;
        }
        for t in tables {
            progress(&format!("cleanup {phase} {t}: the grace has passed"));
            let work = phase_work(
                ws,
                t,
                phase,
                tag,
                min_age,
                locations.clone(),
                inputs.clone(),
            )?;
            let counts = work.await?;
            journal
                .cleanup
                .entry(t.clone())
                .or_default()
                .absorb(&counts);
        }
    }
    note_grace(ws, journal).await
}

/// What the cleanup phases need beyond the table: the grace the history keeps replaced
/// snapshots for (and the sweep unreferenced files: `[snapshots] grace_seconds`), and for the
/// version purge when the erasure started (objects deleted since are the ones it removed) and
/// the case files (their traces find the noncurrent versions holding the subjects).
#[derive(Default)]
pub(super) struct Inputs {
    grace: Duration,
    since: Option<chrono::DateTime<chrono::Utc>>,
    cases: Vec<crate::erasure::case::CaseFile>,
}

impl Inputs {
    /// From an erasure's journal (case files read only when the purge will run).
    pub(super) fn of(ws: &Workspace, journal: &Journal) -> Result<Self> {
        let grace = Duration::seconds(journal.grace_seconds.max(0));
        if !ws.config.storage.purge_versions {
            return Ok(Inputs {
                grace,
                ..Default::default()
            });
        }
        let since = chrono::DateTime::parse_from_rfc3339(&journal.started_at)
            .map_err(|e| {
                crate::error::Error::Internal(format!(
                    "journal {}: started_at `{}` is not a time: {e}",
                    journal.batch, journal.started_at
                ))
            })?
            .with_timezone(&chrono::Utc);
        let mut cases = Vec::new();
        for r in &journal.requests {
            match crate::erasure::case::read_case(ws, &r.request) {
                Ok(c) => cases.push(c),
                // Destroyed after a COMPLETE attestation: nothing is left to search for.
                Err(e) => tracing::info!("purge-versions: no traces of {}: {e}", r.request),
            }
        }
        Ok(Inputs {
            grace,
            since: Some(since),
            cases,
        })
    }

    /// For tables changed outside a journal (`lethe register replay`): objects deleted since
    /// `since`, no case files, no grace.
    fn since(since: chrono::DateTime<chrono::Utc>) -> Self {
        Inputs {
            since: Some(since),
            ..Default::default()
        }
    }
}

/// The version purge on one table: the scope from `inputs` ([`PurgeScope`]), the noncurrent
/// versions holding the subjects' traces found by reading them.
async fn purge_table(
    ws: &Workspace,
    wh: &lethe_iceberg::table::Warehouse,
    name: &TableName,
    inputs: &Inputs,
    tables: &TableLocations,
) -> Result<usize> {
    let t = wh.load(name).await?;
    let prefix = format!("{}/", wh.store.normalize(t.location())?);
    let table = name.to_string();
    let values_only = inputs
        .cases
        .iter()
        .any(|c| c.exempt_tables.contains(&table));
    let holding =
        crate::erasure::prove::versions_holding(ws, &inputs.cases, &prefix, values_only).await?;
    let scope = PurgeScope {
        removed_since: inputs.since.unwrap_or_else(chrono::Utc::now),
        holding,
    };
    let r = purge_versions(wh, name, &scope, tables).await?;
    if r.versions_left > 0 || r.delete_markers > 0 {
        tracing::info!(
            "{name}: purge left {} noncurrent version(s) and {} delete marker(s) outside its scope",
            r.versions_left,
            r.delete_markers
        );
    }
    Ok(r.versions_deleted + r.delete_markers_removed)
}

/// The history phase's cutoff: every snapshot the table holds when the purge's commit is
/// planned — each attempt again, so a snapshot another writer committed while the erasure's
/// commit lost races and retried (holding the subject's rows: it was made before the
/// erasure's change landed) expires with the rest, as the table's settings allow — but for
/// those superseded less than `grace` ago ([`Cutoff::Superseded`]): other writers'
/// operations in flight may have started from them.
pub(super) fn history_cutoff(grace: Duration) -> Cutoff {
    Cutoff::Superseded {
        grace_ms: grace.num_milliseconds(),
    }
}

/// The history phase's counts from what purging a table's history did.
pub(super) fn history_counts(r: &HistoryReport) -> TableCleanup {
    TableCleanup {
        snapshots_expired: r.expire.expired.len(),
        files_removed: r.expire.files_deleted,
        manifests_rewritten: usize::from(r.manifests.snapshot_id.is_some()),
        ..Default::default()
    }
}

/// The history phase on one table as work of its own ([`phase_work`]).
pub(super) fn history_work(
    ws: &Workspace,
    table: &str,
    tag: &str,
    inputs: &Arc<Inputs>,
) -> Result<BoxFuture<'static, Result<TableCleanup>>> {
    phase_work(
        ws,
        table,
        "history",
        tag,
        Duration::zero(),
        SharedLocations::default(),
        inputs.clone(),
    )
}

/// The sweep phase on one table as work of its own ([`phase_work`]).
pub(super) fn sweep_work(
    ws: &Workspace,
    table: &str,
    tag: &str,
    min_age: Duration,
    locations: &SharedLocations,
    inputs: &Arc<Inputs>,
) -> Result<BoxFuture<'static, Result<TableCleanup>>> {
    phase_work(
        ws,
        table,
        "sweep",
        tag,
        min_age,
        locations.clone(),
        inputs.clone(),
    )
}

/// The warehouse's table locations for a run's sweeps: loaded by the first sweep that needs
/// them, once (tables are neither created nor moved by a cleanup).
pub(super) type SharedLocations = Arc<tokio::sync::OnceCell<Arc<TableLocations>>>;

/// One cleanup phase on one table, as work that owns what it needs (to run beside the other
/// tables' phases): it returns the phase's counts. A sweep needs the warehouse's table
/// locations, loaded by the first of the run's sweeps that gets to them.
fn phase_work(
    ws: &Workspace,
    table: &str,
    phase: &'static str,
    tag: &str,
    min_age: Duration,
    locations: SharedLocations,
    purge: Arc<Inputs>,
) -> Result<BoxFuture<'static, Result<TableCleanup>>> {
    let name = TableName::parse(table)?;
    let ws = ws.clone();
    let wh = ws.warehouse.for_concurrent_work();
    let clock = ws.clock.clone();
    let summary: BTreeMap<String, String> =
        [("erasure-request".to_string(), tag.to_string())].into();
    Ok(Box::pin(async move {
        let mut c = TableCleanup::default();
        match phase {
            "history" => {
                let cutoff = history_cutoff(purge.grace);
                let r = purge_history(&wh, &name, cutoff, summary, clock.as_ref()).await?;
                c = history_counts(&r);
            }
            "purge-versions" => {
                let tables = locations
                    .get_or_try_init(|| async { TableLocations::load(&wh).await.map(Arc::new) })
                    .await?;
                c.versions_purged = purge_table(&ws, &wh, &name, &purge, tables).await?;
            }
            _ => {
                let tables = locations
                    .get_or_try_init(|| async { TableLocations::load(&wh).await.map(Arc::new) })
                    .await?;
                // Files younger than the grace may be another writer's, in flight.
                let min_age = min_age.max(purge.grace);
                let r = sweep_among(&wh, &name, min_age, false, clock.as_ref(), tables).await?;
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
    started: chrono::DateTime<chrono::Utc>,
    progress: &dyn Fn(&str),
) -> Result<TableCleanup> {
    let mut c = TableCleanup::default();
    let n = tables.len();
    let touches: Vec<Touch> = tables.iter().map(|t| Touch::table(t)).collect();
    let locations = SharedLocations::default();
    let purge = Arc::new(Inputs::since(started));
    for phase in PHASES {
        run_ordered(
            &touches,
            &[],
            cores(),
            |k| {
                progress(&format!("cleanup {phase} {}/{n} {}", k + 1, tables[k]));
                phase_work(
                    ws,
                    &tables[k],
                    phase,
                    tag,
                    min_age,
                    locations.clone(),
                    purge.clone(),
                )
            },
            |_, counts| {
                c.absorb(&counts);
                Ok(())
            },
        )
        .await?;
        c.phases.insert(phase.to_string());
    }
    Ok(c)
}
