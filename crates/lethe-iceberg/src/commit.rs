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
//! `commit.retry.max-wait-ms` 60000, `commit.retry.total-timeout-ms` 1800000).
//!
//! Files written by an attempt that certainly failed are deleted. When the outcome is unknown
//! (the catalog errored during the swap, a 5xx, a timeout), nothing is deleted: the table is
//! reloaded, and if it shows the change the commit succeeded; otherwise the files are left
//! for the sweep and the action is planned again.

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
    /// The snapshot this commit adds, if any.
    pub snapshot_id: Option<i64>,
    /// Empty the metadata log: older metadata files (with old summaries and schemas) are then
    /// referenced by nothing and a sweep removes them.
    pub trim_metadata_log: bool,
}

/// A change to one table, planned against the table as it is when each attempt starts.
#[async_trait]
pub trait TableAction: Send {
    /// Plans the change against `table`; `None` when there is nothing to do.
    async fn plan(&mut self, wh: &Warehouse, table: &LoadedTable) -> Result<Option<ActionCommit>>;
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
    loop {
        attempt += 1;
        let table = wh.load(name).await?;
        wh.check_changeable(&table)?;
        let policy = RetryPolicy::of(&table)?;
        // What planning writes is synced in one pass before the swap (store::local_io).
        wh.store.defer_syncs();
        let planned = action.plan(wh, &table).await;
        let synced = wh.store.sync_deferred();
        let Some(planned) = planned? else {
            return Ok(None);
        };
        let cleanup = |files: &[String]| {
            for f in files {
                if let Err(e) = wh.store.delete(f) {
                    tracing::warn!("{name}: could not remove {f} after a failed commit: {e}");
                }
            }
        };
        if let Err(e) = synced {
            cleanup(&planned.written);
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
            other => match other {
                Ok(o) => o,
                Err(e) => {
                    // Certainly not applied: what this attempt wrote is nobody's.
                    cleanup(&planned.written);
                    return Err(e);
                }
            },
        };
        match outcome {
            CommitOutcome::Committed(t) => {
                return Ok(Some(Committed {
                    table: t,
                    snapshot_id: planned.snapshot_id,
                    attempts: attempt,
                }));
            }
            CommitOutcome::Conflict(reason) => {
                tracing::info!(
                    "{name}: commit attempt {attempt} lost the race ({reason}); replanning"
                );
                cleanup(&planned.written);
            }
            CommitOutcome::Unknown(reason) => {
                // The outcome is unknown: reconcile by reloading, never delete what we wrote.
                tracing::warn!("{name}: the commit's outcome is unknown ({reason}); reconciling");
                match wh.load(name).await {
                    Ok(t) if reflects(&planned, &t) => {
                        return Ok(Some(Committed {
                            table: t,
                            snapshot_id: planned.snapshot_id,
                            attempts: attempt,
                        }));
                    }
                    Ok(_) => {
                        tracing::warn!(
                            "{name}: the commit did not land; its files are left for the sweep"
                        );
                    }
                    Err(reload) => {
                        return Err(Error::CommitConflict {
                            table: name.to_string(),
                            attempts: attempt,
                            reason: format!(
                                "the outcome is unknown ({reason}) and reloading failed ({reload}); nothing was deleted, run again to reconcile"
                            ),
                        });
                    }
                }
            }
        }
        if attempt > policy.retries || started.elapsed() > policy.total {
            return Err(Error::CommitConflict {
                table: name.to_string(),
                attempts: attempt,
                reason: "other writers kept changing the table, or the catalog kept failing".into(),
            });
        }
        tokio::time::sleep(policy.wait(attempt - 1)).await;
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
            snapshot_id: None,
            trim_metadata_log: false,
        }))
    }
}
