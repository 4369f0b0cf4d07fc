//! Committing a change to a table with optimistic concurrency.
//!
//! An action plans against the table as loaded and returns updates plus requirements
//! ([`ActionCommit`], the shape of iceberg-rust's `ActionCommit`). [`commit`] checks the
//! requirements and hands them with the updates to the catalog ([`crate::catalog::Catalog`]:
//! the SQL catalogs write the new metadata file and compare-and-swap their pointer, the REST
//! catalog POSTs them and its server writes the metadata). When another writer changed the
//! table first (a lost swap, REST 409), the table is reloaded and the action planned again
//! against the new state — never committed blindly — with exponential backoff, up to
//! `commit.retry.num-retries` (default 4, as Iceberg Java; `commit.retry.min-wait-ms` 100,
//! `commit.retry.max-wait-ms` 60000, `commit.retry.total-timeout-ms` 1800000). Planning again
//! need not start over: an action may keep what still holds on the new state (a row change
//! keeps the files it rewrote whose plan the other writer's commits didn't touch,
//! [`ActionCommit::retained`]); those files are deleted only when the commit gives up.
//!
//! Files written by an attempt that certainly failed are deleted — after a reload shows the
//! table doesn't reference them: a catalog's "not applied" is never taken on its word alone.
//! When the outcome is unknown (the catalog errored during the swap, a 5xx, a timeout, a 2xx
//! whose answer lethe can't read), nothing is deleted: the table is reloaded, and if it shows
//! the change the commit succeeded; otherwise the files are left for the sweep and the action
//! is planned again.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use iceberg::{TableRequirement, TableUpdate};

use crate::catalog::{CommitOutcome, TableChange, TableName};
use crate::error::{Error, Result};
use crate::table::{LoadedTable, Warehouse};

/// What an action wants committed.
#[derive(Debug, Clone, Default)]
pub struct ActionCommit {
    /// Metadata updates, applied in order.
    pub updates: Vec<TableUpdate>,
    /// What must still hold of the table when the commit lands.
    pub requirements: Vec<TableRequirement>,
    /// Files this attempt wrote (deleted if the attempt certainly failed).
    pub written: Vec<String>,
    /// Files the action wrote that it keeps for its next attempt when this one loses a race
    /// (its plan of them still holds): deleted only when the commit gives up for certain.
    /// After an unknown outcome the action forgets them ([`TableAction::forget_retained`]):
    /// they are left for the sweep, never reused.
    pub retained: Vec<String>,
    /// The snapshot this commit adds, if any.
    pub snapshot_id: Option<i64>,
    /// Empty the metadata log: older metadata files (with old summaries and schemas) are then
    /// referenced by nothing and a sweep removes them.
    pub trim_metadata_log: bool,
}

/// A change to one table, planned against the table as it is when each attempt starts.
#[async_trait]
pub trait TableAction: Send {
    /// Plans the change against `table`; `None` when there is nothing to do. An action that
    /// keeps files across attempts ([`ActionCommit::retained`]) deletes them itself when
    /// planning fails or finds nothing to do.
    async fn plan(&mut self, wh: &Warehouse, table: &LoadedTable) -> Result<Option<ActionCommit>>;

    /// The files retained by the last attempt are no longer the action's to reuse or delete
    /// (the commit's outcome was unknown, or the commit path deleted them): forget them.
    fn forget_retained(&mut self) {}
}

/// A landed commit.
#[derive(Debug, Clone)]
pub struct Committed {
    /// The table after the commit.
    pub table: LoadedTable,
    /// The snapshot the commit added, if any.
    pub snapshot_id: Option<i64>,
    /// How many attempts it took.
    pub attempts: u32,
}

struct RetryPolicy {
    retries: u32,
    min_wait: Duration,
    max_wait: Duration,
    total: Duration,
}

fn prop_u64(table: &LoadedTable, key: &str, default: u64) -> Result<u64> {
    match table.property(key) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| {
            Error::invalid(format!(
                "{}: table property {key} = `{v}` is not a number",
                table.name
            ))
        }),
    }
}

impl RetryPolicy {
    fn of(table: &LoadedTable) -> Result<Self> {
        Ok(RetryPolicy {
            retries: prop_u64(table, "commit.retry.num-retries", 4)? as u32,
            min_wait: Duration::from_millis(prop_u64(table, "commit.retry.min-wait-ms", 100)?),
            max_wait: Duration::from_millis(prop_u64(table, "commit.retry.max-wait-ms", 60_000)?),
            total: Duration::from_millis(prop_u64(
                table,
                "commit.retry.total-timeout-ms",
                1_800_000,
            )?),
        })
    }

    fn wait(&self, attempt: u32) -> Duration {
        let exp = self.min_wait.saturating_mul(1u32 << attempt.min(16));
        let capped = exp.min(self.max_wait);
        // Up to 10% jitter, so that two retrying writers drift apart.
        let jitter = capped.as_millis() as u64 / 10;
        capped
            + Duration::from_millis(if jitter > 0 {
                rand::random::<u64>() % jitter
            } else {
                0
            })
    }
}

/// Whether `table` (reloaded after an unknown outcome) shows `planned` applied. A commit that
/// adds a snapshot landed when that snapshot (its id is random) is in the table; otherwise
/// every update must be visible: properties set or removed, snapshots and refs removed, refs
/// pointing where the commit pointed them.
fn reflects(planned: &ActionCommit, table: &LoadedTable) -> bool {
    let meta = &table.metadata;
    if let Some(id) = planned.snapshot_id {
        return meta.snapshot_by_id(id).is_some();
    }
    let mut seen_any = false;
    for u in &planned.updates {
        seen_any = true;
        let ok = match u {
            TableUpdate::AddSnapshot { snapshot } => {
                meta.snapshot_by_id(snapshot.snapshot_id()).is_some()
            }
            TableUpdate::SetSnapshotRef {
                ref_name,
                reference,
            } => meta
                .snapshot_for_ref(ref_name)
                .is_some_and(|s| s.snapshot_id() == reference.snapshot_id),
            TableUpdate::RemoveSnapshots { snapshot_ids } => snapshot_ids
                .iter()
                .all(|id| meta.snapshot_by_id(*id).is_none()),
            TableUpdate::RemoveSnapshotRef { ref_name } => {
                meta.snapshot_for_ref(ref_name).is_none()
            }
            TableUpdate::SetProperties { updates } => updates
                .iter()
                .all(|(k, v)| meta.properties().get(k) == Some(v)),
            TableUpdate::RemoveProperties { removals } => {
                removals.iter().all(|k| !meta.properties().contains_key(k))
            }
            TableUpdate::AddSchema { schema } => meta
                .schemas_iter()
                .any(|s| s.as_struct() == schema.as_struct()),
            TableUpdate::RemoveStatistics { snapshot_id } => {
                meta.statistics_for_snapshot(*snapshot_id).is_none()
            }
            TableUpdate::RemovePartitionStatistics { snapshot_id } => meta
                .partition_statistics_for_snapshot(*snapshot_id)
                .is_none(),
            // Updates lethe doesn't use to decide (set-current-schema follows add-schema).
            _ => true,
        };
        if !ok {
            return false;
        }
    }
    if !seen_any && planned.trim_metadata_log {
        return meta.metadata_log().is_empty();
    }
    true
}

/// Commits `action` to table `name`, retrying on conflicts. Returns `None` when the action
/// found nothing to do (and nothing was committed).
///
/// The commit itself is the catalog's ([`crate::catalog::Catalog::commit_table`]): a SQL
/// catalog writes the metadata file and swaps its pointer, a REST catalog POSTs the
/// requirements and updates. Failpoints `catalog-commit-unknown-before/TABLE` (the catalog
/// never sees the commit but the client can't tell: a 503, a timeout before the server acted)
/// and `catalog-commit-unknown-after/TABLE` (it landed but the answer was lost) let tests
/// drive the unknown-outcome path on every catalog.
pub async fn commit(
    wh: &Warehouse,
    name: &TableName,
    action: &mut dyn TableAction,
) -> Result<Option<Committed>> {
    let started = Instant::now();
    let mut attempt: u32 = 0;
    // Files the last attempt kept for the next one (deleted if the commit gives up).
    let mut retained: Vec<String> = Vec::new();
    loop {
        attempt += 1;
        let attempted = attempt_once(wh, name, action, attempt).await;
        let (planned, policy) = match attempted {
            Ok(Attempt::Done(c)) => return Ok(c),
            Ok(Attempt::Lost(planned, policy)) => (planned, policy),
            Err(e) => {
                // The action deleted its kept files itself, or never reached the commit.
                if !retained.is_empty() {
                    delete_files(wh, name, &retained);
                    action.forget_retained();
                }
                return Err(e);
            }
        };
        retained = planned;
        if attempt > policy.retries || started.elapsed() > policy.total {
            delete_files(wh, name, &retained);
            action.forget_retained();
            return Err(Error::CommitConflict {
                table: name.to_string(),
                attempts: attempt,
                reason: "other writers kept changing the table, or the catalog kept failing".into(),
            });
        }
        tokio::time::sleep(policy.wait(attempt - 1)).await;
    }
}

/// How one attempt ended.
enum Attempt {
    /// Finished: committed (or nothing to do).
    Done(Option<Committed>),
    /// Not applied (a lost race, or an unknown outcome the reload showed didn't land): try
    /// again; the files the action retained for it (empty after an unknown outcome).
    Lost(Vec<String>, RetryPolicy),
}

fn delete_files(wh: &Warehouse, name: &TableName, files: &[String]) {
    for f in files {
        if let Err(e) = wh.store.delete(f) {
            tracing::warn!("{name}: could not remove {f} after a failed commit: {e}");
        }
    }
}

/// One attempt: load, plan, commit, and find out what happened.
async fn attempt_once(
    wh: &Warehouse,
    name: &TableName,
    action: &mut dyn TableAction,
    attempt: u32,
) -> Result<Attempt> {
    let table = wh.load(name).await?;
    wh.check_changeable(&table)?;
    let policy = RetryPolicy::of(&table)?;
    // What planning writes is synced in one pass before the swap (store::local_io).
    wh.store.defer_syncs();
    let planned = action.plan(wh, &table).await;
    let synced = wh.store.sync_deferred();
    let Some(planned) = planned? else {
        return Ok(Attempt::Done(None));
    };
    if let Err(e) = synced {
        delete_files(wh, name, &planned.written);
        delete_files(wh, name, &planned.retained);
        action.forget_retained();
        return Err(e);
    }
    let change = TableChange {
        requirements: &planned.requirements,
        updates: &planned.updates,
        trim_metadata_log: planned.trim_metadata_log,
    };
    let outcome = match injected_unknown(name, "before") {
        Some(o) => Ok(o),
        None => {
            wh.catalog
                .commit_table(&table, change, wh.store.as_ref())
                .await
        }
    };
    let outcome = match outcome {
        Ok(CommitOutcome::Committed(t)) => match injected_unknown(name, "after") {
            Some(o) => o,
            None => CommitOutcome::Committed(t),
        },
        Ok(o) => o,
        Err(e) => return refused(wh, name, action, &planned, attempt, e).await,
    };
    match outcome {
        CommitOutcome::Committed(t) => Ok(Attempt::Done(Some(Committed {
            table: t,
            snapshot_id: planned.snapshot_id,
            attempts: attempt,
        }))),
        CommitOutcome::Conflict(reason) => {
            tracing::info!(
                "{name}: commit attempt {attempt} lost the race ({reason}); planning again (what still holds is kept)"
            );
            delete_files(wh, name, &planned.written);
            Ok(Attempt::Lost(planned.retained, policy))
        }
        CommitOutcome::Unknown(reason) => {
            // The outcome is unknown: reconcile by reloading, never delete what we wrote.
            tracing::warn!("{name}: the commit's outcome is unknown ({reason}); reconciling");
            match wh.load(name).await {
                Ok(t) if reflects(&planned, &t) => Ok(Attempt::Done(Some(
                    landed(wh, name, &planned, t, attempt).await,
                ))),
                Ok(_) => {
                    tracing::warn!(
                        "{name}: the commit did not land; its files are left for the sweep"
                    );
                    action.forget_retained();
                    Ok(Attempt::Lost(Vec::new(), policy))
                }
                Err(reload) => {
                    action.forget_retained();
                    Err(Error::CommitConflict {
                        table: name.to_string(),
                        attempts: attempt,
                        reason: format!(
                            "the outcome is unknown ({reason}) and reloading failed ({reload}); nothing was deleted, run again to reconcile"
                        ),
                    })
                }
            }
        }
    }
}

/// The catalog refused the commit (`e`): it says the change certainly did not land. Files the
/// table may point at are never deleted on a catalog's word alone: a reload that shows the
/// change (or fails) keeps them.
async fn refused(
    wh: &Warehouse,
    name: &TableName,
    action: &mut dyn TableAction,
    planned: &ActionCommit,
    attempt: u32,
    e: Error,
) -> Result<Attempt> {
    action.forget_retained();
    match wh.load(name).await {
        Ok(t) if reflects(planned, &t) => {
            tracing::warn!(
                "{name}: the catalog failed the commit ({e}) but the table shows it landed"
            );
            Ok(Attempt::Done(Some(
                landed(wh, name, planned, t, attempt).await,
            )))
        }
        Ok(_) => {
            delete_files(wh, name, &planned.written);
            delete_files(wh, name, &planned.retained);
            Err(e)
        }
        Err(reload) => {
            tracing::warn!(
                "{name}: the commit failed ({e}) and reloading failed ({reload}): its files are left for the sweep"
            );
            Err(e)
        }
    }
}

/// A commit found landed by reloading (`table`, after an unknown outcome): what the catalog's
/// answer would have finished is finished here — a trimmed metadata log's older files, which
/// a REST server keeps listing, are deleted.
async fn landed(
    wh: &Warehouse,
    name: &TableName,
    planned: &ActionCommit,
    table: LoadedTable,
    attempts: u32,
) -> Committed {
    let mut table = table;
    if planned.trim_metadata_log && !table.metadata.metadata_log().is_empty() {
        let trim = TableChange {
            requirements: &[],
            updates: &[],
            trim_metadata_log: true,
        };
        match wh
            .catalog
            .commit_table(&table, trim, wh.store.as_ref())
            .await
        {
            Ok(CommitOutcome::Committed(t)) => table = t,
            Ok(_) | Err(_) => tracing::warn!(
                "{name}: the metadata log was not trimmed after the commit; the history purge will trim it when run again"
            ),
        }
    }
    Committed {
        table,
        snapshot_id: planned.snapshot_id,
        attempts,
    }
}

/// The failpoints of the unknown-outcome path (see [`commit`]).
fn injected_unknown(name: &TableName, when: &str) -> Option<CommitOutcome> {
    #[cfg(feature = "failpoints")]
    {
        let fired = fail::eval(&format!("catalog-commit-unknown-{when}/{name}"), |_| ()).is_some();
        if fired {
            return Some(CommitOutcome::Unknown(format!(
                "injected: the catalog's answer was lost ({when} it acted)"
            )));
        }
    }
    let _ = (name, when);
    None
}

/// An action that sets and removes table properties.
#[derive(Debug, Clone, Default)]
pub struct SetProperties {
    /// Properties to set.
    pub set: std::collections::HashMap<String, String>,
    /// Properties to remove.
    pub remove: Vec<String>,
}

#[async_trait]
impl TableAction for SetProperties {
    async fn plan(&mut self, _wh: &Warehouse, table: &LoadedTable) -> Result<Option<ActionCommit>> {
        let props = table.metadata.properties();
        let set: std::collections::HashMap<String, String> = self
            .set
            .iter()
            .filter(|(k, v)| props.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let remove: Vec<String> = self
            .remove
            .iter()
            .filter(|k| props.contains_key(*k))
            .cloned()
            .collect();
        if set.is_empty() && remove.is_empty() {
            return Ok(None);
        }
        let mut updates = Vec::new();
        if !set.is_empty() {
            updates.push(TableUpdate::SetProperties { updates: set });
        }
        if !remove.is_empty() {
            updates.push(TableUpdate::RemoveProperties { removals: remove });
        }
        Ok(Some(ActionCommit {
            updates,
            requirements: vec![TableRequirement::UuidMatch {
                uuid: table.metadata.uuid(),
            }],
            written: Vec::new(),
            retained: Vec::new(),
            snapshot_id: None,
            trim_metadata_log: false,
        }))
    }
}
