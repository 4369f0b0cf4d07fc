//! Removing files no metadata references (Iceberg's "orphan files").
//!
//! Follows Iceberg Java's `DeleteOrphanFiles`: a file under a table's location is referenced
//! when it is the current metadata file or one in its metadata log, a manifest list of any
//! snapshot, a manifest in one of those lists, a data or delete file live in any snapshot, or a
//! statistics file the metadata names. Every other file under the location is unreferenced; it
//! is removed only when it is older than the minimum age (default 72 hours, from
//! `retention.toml`'s `[sweep]`, as Java's default of 3 days), so a write in progress keeps its
//! files. `min_age = 0` is only for a single writer.
//!
//! Locations are compared after normalising scheme and authority (`file:/x`, `file:///x`,
//! `/x`; `s3://`, `s3a://`, `s3n://` in the warehouse's bucket); when a referenced location's
//! form can't be matched to the store, the sweep refuses to delete anything in that table.
//! Files under another table's location nested inside this one are left alone. The listing
//! streams: a prefix of millions of objects is walked, never held. A table whose location is
//! outside the warehouse root (unless listed there on purpose) is refused before anything is
//! listed ([`Warehouse::check_changeable`]): the sweep never deletes outside the warehouse.
//!
//! In a versioned bucket a removed file survives as a noncurrent version; [`purge_versions`]
//! deletes, by version id, those of the files an erasure removed (and their delete markers)
//! and those found holding a trace — never another table's, never a current version.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::catalog::TableName;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::ops::expire::reachable_files;
use crate::table::{LoadedTable, Warehouse};

/// A file the sweep found unreferenced.
#[derive(Debug, Clone, Serialize)]
pub struct Unreferenced {
    /// Its location.
    pub location: String,
    /// Its size.
    pub size: u64,
    /// Its age in seconds.
    pub age_seconds: i64,
    /// Whether it was (or, in a dry run, would be) removed.
    pub removed: bool,
}

/// Unreferenced files a report lists one by one; past this, only counted.
pub const LISTED_MAX: usize = 10_000;

/// What a sweep found and did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SweepReport {
    /// The table.
    pub table: String,
    /// Files under the table's location.
    pub files: usize,
    /// Files the metadata references.
    pub referenced: usize,
    /// Unreferenced files found (all of them, listed or not).
    pub unreferenced_count: usize,
    /// Unreferenced files, the first [`LISTED_MAX`] in listing order (the listing streams, so
    /// a prefix of millions of objects is never held).
    pub unreferenced: Vec<Unreferenced>,
    /// How many were removed.
    pub removed: usize,
    /// How many were kept for being younger than the minimum age.
    pub too_young: usize,
}

/// Every location the table's metadata references, normalised.
pub async fn referenced(wh: &Warehouse, table: &LoadedTable) -> Result<HashSet<String>> {
    let meta = &table.metadata;
    let mut out = HashSet::new();
    out.insert(wh.store.normalize(&table.metadata_location)?);
    for log in meta.metadata_log() {
        out.insert(wh.store.normalize(&log.metadata_file)?);
    }
    let ids: Vec<i64> = meta.snapshots().map(|s| s.snapshot_id()).collect();
    out.extend(reachable_files(wh, table, &ids).await?);
    for st in meta.statistics_iter() {
        out.insert(wh.store.normalize(&st.statistics_path)?);
    }
    for ps in meta.partition_statistics_iter() {
        out.insert(wh.store.normalize(&ps.statistics_path)?);
    }
    Ok(out)
}

/// The locations of a warehouse's tables, loaded once for several sweeps: a sweep leaves
/// alone the files of every other table whose location lies inside the swept one's.
///
/// An erasure loads them once for the sweeps of every table it changed (loading every table
/// for each sweep was 11 × 13 loads on the demo). A table created inside a swept table's
/// location after they were loaded isn't known to that sweep; its files are then only as safe
/// as the minimum age keeps them, which is why `min_age = 0` is for a single writer.
#[derive(Debug, Clone, Default)]
pub struct TableLocations(Vec<(TableName, String)>);

impl TableLocations {
    /// Loads every table of the warehouse for its location; a table that can't be loaded (or
    /// whose location can't be normalised) is left out, as a single sweep always did.
    pub async fn load(wh: &Warehouse) -> Result<Self> {
        let mut out = Vec::new();
        for name in wh.tables().await? {
            if let Ok(t) = wh.load(&name).await
                && let Ok(loc) = wh.store.normalize(t.location())
            {
                out.push((name, format!("{loc}/")));
            }
        }
        Ok(Self(out))
    }

    /// The locations of tables other than `name` inside `root`.
    fn nested_in(&self, name: &TableName, root: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(other, loc)| other != name && loc.starts_with(root))
            .map(|(_, loc)| loc.clone())
            .collect()
    }
}

/// Sweeps one table: removes unreferenced files older than `min_age` (lists them with
/// `dry_run`).
pub async fn sweep(
    wh: &Warehouse,
    name: &TableName,
    min_age: Duration,
    dry_run: bool,
    clock: &dyn Clock,
) -> Result<SweepReport> {
    let tables = TableLocations::load(wh).await?;
    sweep_among(wh, name, min_age, dry_run, clock, &tables).await
}

/// [`sweep`] with the warehouse's table locations loaded by the caller, once for several
/// sweeps.
pub async fn sweep_among(
    wh: &Warehouse,
    name: &TableName,
    min_age: Duration,
    dry_run: bool,
    clock: &dyn Clock,
    tables: &TableLocations,
) -> Result<SweepReport> {
    let table = wh.load(name).await?;
    // Never list, let alone delete, under a location outside the warehouse.
    wh.check_changeable(&table)?;
    crate::ops::expire::check_gc(&table)?;
    let refs = referenced(wh, &table).await.map_err(|e| {
        Error::Refused(format!(
            "{name}: the sweep can't match every referenced location, so it deletes nothing: {e}"
        ))
    })?;
    let root = format!("{}/", wh.store.normalize(table.location())?);
    // Other tables whose location is inside this one keep their files.
    let nested = tables.nested_in(name, &root);
    let now = clock.now();
    let mut report = SweepReport {
        table: name.to_string(),
        referenced: refs.len(),
        ..Default::default()
    };
    for f in wh.store.list(&root)? {
        let f = f?;
        if nested.iter().any(|n| f.location.starts_with(n)) {
            continue;
        }
        report.files += 1;
        let loc = wh.store.normalize(&f.location)?;
        if refs.contains(&loc) {
            continue;
        }
        let age = now - f.modified;
        let old_enough = age >= min_age;
        if !old_enough {
            report.too_young += 1;
        }
        let removed = old_enough && !dry_run;
        if removed {
            wh.store.delete(&f.location)?;
            report.removed += 1;
        }
        report.unreferenced_count += 1;
        if report.unreferenced.len() < LISTED_MAX {
            report.unreferenced.push(Unreferenced {
                location: f.location,
                size: f.size,
                age_seconds: age.num_seconds(),
                removed,
            });
        }
    }
    Ok(report)
}

/// Removes the files of table `name` that carry `run` in their name (a change run under that
/// name, [`crate::ops::rewrite::RowRewrite::with_run`]) and that the table's metadata doesn't
/// reference: what a process killed mid-change left (a data file still being written is 0
/// bytes; complete ones, manifests and a manifest list of an attempt that never committed).
/// Whatever their age: the run is known dead — its caller recorded the name before it started
/// and runs the change again now. Returns the locations removed.
pub async fn remove_run_files(wh: &Warehouse, name: &TableName, run: &str) -> Result<Vec<String>> {
    if run.len() < 16 {
        return Err(Error::Internal(format!(
            "{name}: run name `{run}` is too short to tell its files apart"
        )));
    }
    let table = wh.load(name).await?;
    let refs = referenced(wh, &table).await.map_err(|e| {
        Error::Refused(format!(
            "{name}: can't match every referenced location, so no file of run {run} is removed: {e}"
        ))
    })?;
    let root = format!("{}/", wh.store.normalize(table.location())?);
    let mut removed = Vec::new();
    for f in wh.store.list(&root)? {
        let f = f?;
        let file_name = f.location.rsplit('/').next().unwrap_or_default();
        if !file_name.contains(run) || refs.contains(&wh.store.normalize(&f.location)?) {
            continue;
        }
        wh.store.delete(&f.location)?;
        removed.push(f.location);
    }
    Ok(removed)
}

/// What purging a table's noncurrent versions did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PurgeReport {
    /// The table.
    pub table: String,
    /// Noncurrent versions deleted by version id.
    pub versions_deleted: usize,
    /// Delete markers removed: those of objects no version of which is left, so the object
    /// has 0 versions.
    pub delete_markers_removed: usize,
    /// Delete markers left in the purge's scope: an older version of the object is left
    /// (outside the scope), and removing the marker would make it current again.
    pub delete_markers: usize,
    /// Noncurrent versions under the table's location the purge left: objects the erasure
    /// didn't remove and versions holding no trace (another writer's, a backup's), and every
    /// version under the location of another table nested in this one.
    pub versions_left: usize,
}

/// Which noncurrent versions [`purge_versions`] deletes.
#[derive(Debug, Clone)]
pub struct PurgeScope {
    /// Objects the erasure removed: those whose latest version is a delete marker made at or
    /// after this instant (the erasure's start; S3 gives times to the second, so the second it
    /// falls in counts whole). Every version of each of them is deleted, then its delete
    /// markers, so nothing of the object is left. Another writer's delete of a file of the
    /// same table in that time counts too: its versions are that table's garbage.
    pub removed_since: DateTime<Utc>,
    /// Further versions to delete, by normalised location and version id: noncurrent versions
    /// found holding a trace (removed before the erasure started, by retention or another
    /// engine's compaction).
    pub holding: HashSet<(String, String)>,
}

/// One object in a purge's scope, as the listing showed it.
#[derive(Default)]
struct Scoped {
    /// Its delete markers' version ids.
    markers: Vec<String>,
    /// Data versions not deleted (current or left).
    left: usize,
}

/// Deletes, by version id, the noncurrent versions under a table's location in a versioned
/// bucket that `scope` names — the versions of the objects the erasure removed (and then
/// their delete markers: such an object has 0 versions) and the versions found holding a
/// trace — and nothing under the location of another table nested in this one. A version the
/// listing doesn't say is current or not is deleted only after the store says which version
/// is current. Current versions are never touched, so the table, and any other writer's view
/// of it, is unchanged. On a store without versions this finds nothing.
///
/// Two passes over the listing (it streams: a prefix of millions of versions is never held):
/// the first finds the objects the erasure removed, the second deletes; the objects in scope
/// are held, nothing else.
pub async fn purge_versions(
    wh: &Warehouse,
    name: &TableName,
    scope: &PurgeScope,
    tables: &TableLocations,
) -> Result<PurgeReport> {
    let table = wh.load(name).await?;
    wh.check_changeable(&table)?;
    let root = format!("{}/", wh.store.normalize(table.location())?);
    let nested = tables.nested_in(name, &root);
    let mine = |location: &str| !nested.iter().any(|n| location.starts_with(n));
    let mut report = PurgeReport {
        table: name.to_string(),
        ..Default::default()
    };
    // 1. The objects the erasure removed: a latest delete marker made since it started.
    let since = scope.removed_since
        - Duration::nanoseconds(scope.removed_since.timestamp_subsec_nanos().into());
    let mut removed: HashMap<String, Scoped> = HashMap::new();
    for v in wh.store.list_versions(&root)? {
        let v = v?;
        if !(v.delete_marker && v.modified >= since && mine(&v.location)) {
            continue;
        }
        let latest = match v.current {
            Some(c) => c,
            // Unsaid: the marker is the latest when no version of the object is current.
            None => wh.store.current_version(&v.location)?.is_none(),
        };
        if latest {
            removed.insert(wh.store.normalize(&v.location)?, Scoped::default());
        }
    }
    // 2. Their versions and the holding ones, deleted; markers noted.
    let holding_objects: HashSet<&str> = scope.holding.iter().map(|(l, _)| l.as_str()).collect();
    let mut holding: HashMap<String, Scoped> = HashMap::new();
    for v in wh.store.list_versions(&root)? {
        let v = v?;
        if !mine(&v.location) {
            if v.may_be_noncurrent() && !v.delete_marker {
                report.versions_left += 1;
            }
            continue;
        }
        let loc = wh.store.normalize(&v.location)?;
        let in_removed = removed.contains_key(&loc);
        let key = (loc.clone(), v.version.clone());
        let is_holding = scope.holding.contains(&key);
        let scoped = if in_removed {
            removed.get_mut(&loc)
        } else if holding_objects.contains(loc.as_str()) {
            Some(holding.entry(loc.clone()).or_default())
        } else {
            None
        };
        let Some(scoped) = scoped else {
            if v.may_be_noncurrent() && !v.delete_marker {
                report.versions_left += 1;
            }
            continue;
        };
        if v.delete_marker {
            scoped.markers.push(v.version.clone());
            continue;
        }
        let noncurrent = match v.current {
            Some(c) => !c,
            None => wh.store.current_version(&v.location)?.as_deref() != Some(&v.version),
        };
        if noncurrent && (in_removed || is_holding) {
            wh.store.delete_version(&v.location, &v.version)?;
            report.versions_deleted += 1;
        } else {
            scoped.left += 1;
            if noncurrent {
                report.versions_left += 1;
            }
        }
    }
    // 3. The markers of objects left with no version: the object is gone whole.
    for (loc, s) in removed.iter().chain(holding.iter()) {
        if s.left > 0 || wh.store.current_version(loc)?.is_some() {
            report.delete_markers += s.markers.len();
            continue;
        }
        for m in &s.markers {
            wh.store.delete_version(loc, m)?;
            report.delete_markers_removed += 1;
        }
    }
    Ok(report)
}
