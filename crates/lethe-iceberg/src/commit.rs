//! Committing a change to a table with optimistic concurrency.
//!
//! An action plans against the table as loaded and returns updates plus requirements
//! ([`ActionCommit`], the shape of iceberg-rust's `ActionCommit`). [`commit`] checks the
//! requirements, writes the new metadata file and compare-and-swaps the catalog pointer. When
//! another writer moved the pointer first, the table is reloaded and the action planned again
//! against the new state — never committed blindly — with exponential backoff, up to
//! `commit.retry.num-retries` (default 4, as Iceberg Java; `commit.retry.min-wait-ms` 100,
//! `commit.retry.max-wait-ms` 60000, `commit.retry.total-timeout-ms` 1800000).
//!
//! Files written by an attempt that certainly failed are deleted. When the outcome is unknown
//! (the catalog errored during the swap), nothing is deleted: the pointer is reloaded, and if it
//! names the new metadata the commit succeeded; otherwise the files are left for the sweep.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use iceberg::spec::TableMetadataBuilder;
use iceberg::{TableRequirement, TableUpdate};

use crate::catalog::{SwapOutcome, TableName};
use crate::error::{Error, Result};
use crate::table::{
    LoadedTable, Warehouse, metadata_version, new_metadata_location, serialize_metadata,
};

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

/// Applies `commit` to `table`'s metadata and returns the new metadata and the metadata files
/// that fell out of the metadata log.
fn apply(
    table: &LoadedTable,
    commit: &ActionCommit,
) -> Result<iceberg::spec::TableMetadataBuildResult> {
    for r in &commit.requirements {
        r.check(Some(&table.metadata)).map_err(|e| {
            Error::Internal(format!(
                "{}: a requirement failed on the table it was planned on: {e}",
                table.name
            ))
        })?;
    }
    let mut builder = TableMetadataBuilder::new_from_metadata(
        (*table.metadata).clone(),
        Some(table.metadata_location.clone()),
    );
    for u in commit.updates.iter().cloned() {
        builder = u.apply(builder)?;
    }
    let mut built = builder.build()?;
    if commit.trim_metadata_log {
        // TableMetadata has no public setter for its log: edit its JSON form.
        let mut json = serde_json::to_value(&built.metadata)?;
        if let Some(obj) = json.as_object_mut() {
            obj.insert("metadata-log".into(), serde_json::Value::Array(Vec::new()));
        }
        built.metadata = serde_json::from_value(json)?;
    }
    Ok(built)
}

/// Commits `action` to table `name`, retrying on conflicts. Returns `None` when the action
/// found nothing to do (and nothing was committed).
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
        let policy = RetryPolicy::of(&table)?;
        let Some(planned) = action.plan(wh, &table).await? else {
            return Ok(None);
        };
        let cleanup = |files: &[String]| {
            for f in files {
                if let Err(e) = wh.store.delete(f) {
                    tracing::warn!("{name}: could not remove {f} after a failed commit: {e}");
                }
            }
        };
        let built = match apply(&table, &planned) {
            Ok(b) => b,
            Err(e) => {
                cleanup(&planned.written);
                return Err(e);
            }
        };
        let version = metadata_version(&table.metadata_location).map_or(1, |v| v + 1);
        let new_location = new_metadata_location(table.location(), version);
        let bytes = serialize_metadata(&built.metadata)?;
        if let Err(e) = wh.store.write_new(&new_location, &bytes) {
            cleanup(&planned.written);
            return Err(e);
        }
        match wh
            .catalog
            .swap_location(name, &table.metadata_location, &new_location)
            .await
        {
            Ok(SwapOutcome::Swapped) => {
                remove_expired_metadata(wh, &built.metadata, &built.expired_metadata_logs);
                return Ok(Some(Committed {
                    table: LoadedTable {
                        name: name.clone(),
                        metadata_location: new_location,
                        metadata: std::sync::Arc::new(built.metadata),
                    },
                    snapshot_id: planned.snapshot_id,
                    attempts: attempt,
                }));
            }
            Ok(SwapOutcome::Conflict { current }) => {
                tracing::info!(
                    "{name}: commit attempt {attempt} lost the race (pointer now {}); replanning",
                    current.as_deref().unwrap_or("gone")
                );
                let mut files = planned.written.clone();
                files.push(new_location);
                cleanup(&files);
                if current.is_none() {
                    return Err(Error::NoSuchTable(name.to_string()));
                }
            }
            Err(e) => {
                // The outcome is unknown: reconcile by reloading, never delete what we wrote.
                tracing::warn!("{name}: the catalog failed during the commit ({e}); reconciling");
                match wh.catalog.current_location(name).await {
                    Ok(Some(loc)) if loc == new_location => {
                        let table = wh.load_at(name, &loc)?;
                        return Ok(Some(Committed {
                            table,
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
                                "the outcome is unknown ({e}) and reloading failed ({reload}); nothing was deleted, run again to reconcile"
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
                reason: "other writers kept changing the table".into(),
            });
        }
        tokio::time::sleep(policy.wait(attempt - 1)).await;
    }
}

/// With `write.metadata.delete-after-commit.enabled`, removes metadata files that fell out of
/// the metadata log (at most `write.metadata.previous-versions-max` are kept, default 100).
fn remove_expired_metadata(
    wh: &Warehouse,
    metadata: &iceberg::spec::TableMetadata,
    expired: &[iceberg::spec::MetadataLog],
) {
    let enabled = metadata
        .properties()
        .get("write.metadata.delete-after-commit.enabled")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !enabled {
        return;
    }
    for log in expired {
        if let Err(e) = wh.store.delete(&log.metadata_file) {
            tracing::warn!(
                "could not remove old metadata file {}: {e}",
                log.metadata_file
            );
        }
    }
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

/// An action that commits no change but an emptied metadata log.
#[derive(Debug, Clone, Default)]
pub struct TrimMetadataLog;

#[async_trait]
impl TableAction for TrimMetadataLog {
    async fn plan(&mut self, _wh: &Warehouse, table: &LoadedTable) -> Result<Option<ActionCommit>> {
        if table.metadata.metadata_log().is_empty() {
            return Ok(None);
        }
        Ok(Some(ActionCommit {
            requirements: vec![TableRequirement::UuidMatch {
                uuid: table.metadata.uuid(),
            }],
            trim_metadata_log: true,
            ..Default::default()
        }))
    }
}
