//! Snapshot expiry that respects each table's own settings.
//!
//! Follows Iceberg Java's `RemoveSnapshots`:
//! - `gc.enabled=false` refuses, naming the table and the reason;
//! - every ref's head is kept (a tag until its `max-ref-age-ms` passes; `main` always);
//! - on each branch, ancestors are kept while fewer than `min-snapshots-to-keep` (the branch's
//!   own setting, else `history.expire.min-snapshots-to-keep`, default 1) are kept or while they
//!   are newer than the cutoff; the walk stops at the first one that is neither;
//! - snapshots no ref reaches are kept only when newer than the cutoff.
//!
//! The cutoff is `--older-than`, or with `--by-age` the clock's now minus the branch's
//! `max-snapshot-age-ms` (else `history.expire.max-snapshot-age-ms`, default 5 days). The
//! clock is a parameter ([`crate::clock`]).
//!
//! After the commit, files only the expired snapshots reached (their manifest lists, manifests
//! and data/delete files) are deleted, as Java's expiry does, unless `keep_files` is set.
//! Files the retained snapshots reach are never deleted. Statistics files of expired snapshots
//! are dropped from the metadata and deleted.

use std::collections::{BTreeMap, HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use iceberg::spec::{SnapshotReference, SnapshotRetention};
use iceberg::{TableRequirement, TableUpdate};
use serde::Serialize;

use crate::catalog::TableName;
use crate::clock::Clock;
use crate::commit::{ActionCommit, TableAction, commit};
use crate::error::{Error, Result};
use crate::table::{LoadedTable, Warehouse};

/// Default `history.expire.max-snapshot-age-ms`: 5 days, as Java.
pub const DEFAULT_MAX_SNAPSHOT_AGE_MS: i64 = 5 * 24 * 60 * 60 * 1000;

/// Which snapshots are old enough.
#[derive(Debug, Clone, Copy)]
pub enum Cutoff {
    /// Snapshots older than this instant.
    OlderThan(DateTime<Utc>),
    /// Every snapshot, whenever it was made: only what the table's own rules keep stays (the
    /// current snapshot, refs, `min-snapshots-to-keep`). Decided on the table as each commit
    /// attempt finds it, so a snapshot another writer committed while the expiry retried is
    /// judged too (an instant taken once, before the retries, would keep it).
    Every,
    /// As [`Cutoff::Every`], but a snapshot that stopped being current less than `grace_ms`
    /// ago stays — a branch's ancestor until its child has been committed that long, a
    /// snapshot no branch reaches until it has — with the files it references: other writers'
    /// operations in flight may have started from it (PyIceberg's commit retry validates from
    /// its starting snapshot) and read its files. `grace_ms` 0 is [`Cutoff::Every`].
    Superseded {
        /// The grace, in milliseconds.
        grace_ms: i64,
    },
    /// By each table's (or branch's) `max-snapshot-age-ms`, measured on the clock.
    ByAge,
}

/// Why a snapshot kept for a grace ([`Cutoff::Superseded`]) is kept: the prefix of its reason.
pub const KEPT_FOR_GRACE: &str = "superseded less than the grace ago";

/// An expiry request.
#[derive(Debug, Clone, Copy)]
pub struct ExpireOptions {
    /// The cutoff.
    pub cutoff: Cutoff,
    /// Compute and report only; change nothing.
    pub dry_run: bool,
    /// Don't delete the files only expired snapshots reached (leave them to the sweep).
    pub keep_files: bool,
}

/// A snapshot kept, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Kept {
    /// The snapshot.
    pub snapshot_id: i64,
    /// Why it is kept.
    pub reason: String,
}

/// What an expiry did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ExpireReport {
    /// The table.
    pub table: String,
    /// Snapshots expired.
    pub expired: Vec<i64>,
    /// Snapshots kept, with reasons.
    pub kept: Vec<Kept>,
    /// Refs removed because their max-ref-age passed.
    pub refs_removed: Vec<String>,
    /// Files deleted because only expired snapshots reached them.
    pub files_deleted: usize,
    /// Whether anything was committed.
    pub committed: bool,
}

/// Refuses a table whose `gc.enabled` is false.
pub fn check_gc(table: &LoadedTable) -> Result<()> {
    if table
        .property("gc.enabled")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
    {
        return Err(Error::Refused(format!(
            "{} has gc.enabled=false, which turns off garbage collection for the table",
            table.name
        )));
    }
    Ok(())
}

fn prop_i64(table: &LoadedTable, key: &str) -> Result<Option<i64>> {
    table
        .property(key)
        .map(|v| {
            v.trim().parse::<i64>().map_err(|_| {
                Error::invalid(format!(
                    "{}: table property {key} = `{v}` is not a number",
                    table.name
                ))
            })
        })
        .transpose()
}

/// What expiry keeps (snapshot id -> reason), expires (snapshot ids), and which refs it drops.
pub type Selection = (BTreeMap<i64, String>, Vec<i64>, Vec<String>);

impl ExpireReport {
    /// The report of an expiry of `table` planned as `selection` says, before it commits
    /// (`files_deleted` 0, `committed` false).
    pub(crate) fn planned(table: &LoadedTable, selection: Selection) -> Self {
        let (keep, expired, refs_removed) = selection;
        ExpireReport {
            table: table.name.to_string(),
            expired,
            kept: keep
                .into_iter()
                .map(|(snapshot_id, reason)| Kept {
                    snapshot_id,
                    reason,
                })
                .collect(),
            refs_removed,
            files_deleted: 0,
            committed: false,
        }
    }
}

/// Decides which snapshots to keep (with reasons) and which refs expire.
pub fn select(table: &LoadedTable, cutoff: Cutoff, now: DateTime<Utc>) -> Result<Selection> {
    let meta = &table.metadata;
    let default_min = prop_i64(table, "history.expire.min-snapshots-to-keep")?
        .unwrap_or(1)
        .max(1) as usize;
    let default_age = prop_i64(table, "history.expire.max-snapshot-age-ms")?
        .unwrap_or(DEFAULT_MAX_SNAPSHOT_AGE_MS);
    let default_max_ref_age = prop_i64(table, "history.expire.max-ref-age-ms")?;
    let now_ms = now.timestamp_millis();
    let older_than = |branch_age: Option<i64>| -> i64 {
        match cutoff {
            Cutoff::OlderThan(t) => t.timestamp_millis(),
            Cutoff::Every | Cutoff::Superseded { .. } => i64::MAX,
            Cutoff::ByAge => now_ms - branch_age.unwrap_or(default_age),
        }
    };
    // With a grace: what stopped being current after this instant stays.
    let graced_after = match cutoff {
        Cutoff::Superseded { grace_ms } if grace_ms > 0 => Some(now_ms - grace_ms),
        _ => None,
    };
    let mut keep: BTreeMap<i64, String> = BTreeMap::new();
    let mut refs_removed = Vec::new();
    let refs: Vec<(String, SnapshotReference)> = meta_refs(table);
    for (name, r) in &refs {
        let head = meta.snapshot_by_id(r.snapshot_id);
        let max_ref_age = match &r.retention {
            SnapshotRetention::Branch { max_ref_age_ms, .. } => *max_ref_age_ms,
            SnapshotRetention::Tag { max_ref_age_ms } => *max_ref_age_ms,
        }
        .or(default_max_ref_age);
        if name != "main"
            && let (Some(age), Some(h)) = (max_ref_age, head)
            && now_ms - h.timestamp_ms() > age
        {
            refs_removed.push(name.clone());
            continue;
        }
        keep.entry(r.snapshot_id).or_insert_with(|| {
            if name == "main" {
                "current snapshot of main".to_string()
            } else if r.is_branch() {
                format!("head of branch `{name}`")
            } else {
                format!("tagged `{name}`")
            }
        });
        if let SnapshotRetention::Branch {
            min_snapshots_to_keep,
            max_snapshot_age_ms,
            ..
        } = &r.retention
        {
            let min = min_snapshots_to_keep.map_or(default_min, |m| m.max(1) as usize);
            let oldest = older_than(*max_snapshot_age_ms);
            let mut count = 0usize;
            let mut cur = head.cloned();
            // When the snapshot walked stopped being current: its child's commit (the head
            // still is).
            let mut superseded_at = i64::MAX;
            while let Some(s) = cur {
                if count < min {
                    keep.entry(s.snapshot_id()).or_insert_with(|| {
                        format!("one of the last {min} snapshots of branch `{name}` (min-snapshots-to-keep={min})")
                    });
                } else if graced_after.is_some_and(|g| superseded_at > g) {
                    keep.entry(s.snapshot_id()).or_insert_with(|| {
                        format!("{KEPT_FOR_GRACE} on branch `{name}`: another writer's operation in flight may have started from it")
                    });
                } else if s.timestamp_ms() >= oldest {
                    keep.entry(s.snapshot_id()).or_insert_with(|| {
                        format!("ancestor of branch `{name}` newer than the cutoff")
                    });
                } else {
                    break;
                }
                count += 1;
                superseded_at = s.timestamp_ms();
                cur = s
                    .parent_snapshot_id()
                    .and_then(|p| meta.snapshot_by_id(p).cloned());
            }
        }
    }
    // Snapshots reachable from no retained ref: kept only when newer than the default cutoff.
    let mut reachable: HashSet<i64> = HashSet::new();
    for (name, r) in &refs {
        if refs_removed.contains(name) {
            continue;
        }
        let mut cur = meta.snapshot_by_id(r.snapshot_id).cloned();
        while let Some(s) = cur {
            if !reachable.insert(s.snapshot_id()) {
                break;
            }
            if !r.is_branch() {
                break;
            }
            cur = s
                .parent_snapshot_id()
                .and_then(|p| meta.snapshot_by_id(p).cloned());
        }
    }
    let default_cut = older_than(None);
    let mut expired = Vec::new();
    for s in meta.snapshots() {
        if keep.contains_key(&s.snapshot_id()) {
            continue;
        }
        if !reachable.contains(&s.snapshot_id()) && s.timestamp_ms() >= default_cut {
            keep.insert(
                s.snapshot_id(),
                "unreferenced but newer than the cutoff".into(),
            );
            continue;
        }
        if !reachable.contains(&s.snapshot_id())
            && graced_after.is_some_and(|g| s.timestamp_ms() > g)
        {
            keep.insert(
                s.snapshot_id(),
                format!("{KEPT_FOR_GRACE}: unreferenced, committed within the grace"),
            );
            continue;
        }
        expired.push(s.snapshot_id());
    }
    expired.sort_unstable();
    Ok((keep, expired, refs_removed))
}

/// When the last snapshot of `table` committed before `before_ms` that [`Cutoff::Superseded`]
/// with `grace_ms` keeps only for its grace stops being kept: None when there is none (every
/// snapshot from before that [`Cutoff::Every`] would expire is expired already). An erasure
/// with a grace is pending until then: those snapshots hold the rows it removed.
pub fn grace_ends(
    table: &LoadedTable,
    grace_ms: i64,
    before_ms: i64,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>> {
    if grace_ms <= 0 {
        return Ok(None);
    }
    let (kept, _, _) = select(table, Cutoff::Superseded { grace_ms }, now)?;
    let (_, every, _) = select(table, Cutoff::Every, now)?;
    let meta = &table.metadata;
    // A snapshot's end of grace: when its child on main was committed (else its own
    // commit), plus the grace.
    let mut child_of: HashMap<i64, i64> = HashMap::new();
    for s in meta.snapshots() {
        if let Some(p) = s.parent_snapshot_id() {
            let t = child_of.entry(p).or_insert(i64::MAX);
            *t = (*t).min(s.timestamp_ms());
        }
    }
    let mut end: Option<i64> = None;
    for id in every {
        let Some(s) = meta.snapshot_by_id(id) else {
            continue;
        };
        let graced = kept.get(&id).is_some_and(|r| r.starts_with(KEPT_FOR_GRACE));
        if !graced || s.timestamp_ms() >= before_ms {
            continue;
        }
        let from = child_of
            .get(&id)
            .copied()
            .filter(|t| *t != i64::MAX)
            .unwrap_or(s.timestamp_ms());
        end = Some(end.map_or(from + grace_ms, |e: i64| e.max(from + grace_ms)));
    }
    Ok(end.and_then(DateTime::<Utc>::from_timestamp_millis))
}

fn meta_refs(table: &LoadedTable) -> Vec<(String, SnapshotReference)> {
    // TableMetadata exposes refs through its JSON form only; read them from there.
    let mut out: Vec<(String, SnapshotReference)> = Vec::new();
    if let Ok(v) = serde_json::to_value(table.metadata.as_ref())
        && let Some(refs) = v.get("refs").and_then(|r| r.as_object())
    {
        for (name, r) in refs {
            if let Ok(parsed) = serde_json::from_value::<RefJson>(r.clone()) {
                out.push((name.clone(), parsed.into_ref()));
            }
        }
    }
    if !out.iter().any(|(n, _)| n == "main")
        && let Some(id) = table.metadata.current_snapshot_id()
    {
        out.push((
            "main".into(),
            SnapshotReference::new(id, SnapshotRetention::branch(None, None, None)),
        ));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RefJson {
    snapshot_id: i64,
    #[serde(rename = "type")]
    kind: String,
    min_snapshots_to_keep: Option<i32>,
    max_snapshot_age_ms: Option<i64>,
    max_ref_age_ms: Option<i64>,
}

impl RefJson {
    fn into_ref(self) -> SnapshotReference {
        let retention = if self.kind == "tag" {
            SnapshotRetention::Tag {
                max_ref_age_ms: self.max_ref_age_ms,
            }
        } else {
            SnapshotRetention::branch(
                self.min_snapshots_to_keep,
                self.max_snapshot_age_ms,
                self.max_ref_age_ms,
            )
        };
        SnapshotReference::new(self.snapshot_id, retention)
    }
}

/// The refs of a table, by name (branches and tags).
pub fn refs(table: &LoadedTable) -> Vec<(String, SnapshotReference)> {
    meta_refs(table)
}

struct Action<'a> {
    options: ExpireOptions,
    clock: &'a dyn Clock,
    report: ExpireReport,
    before: Option<LoadedTable>,
}

#[async_trait]
impl TableAction for Action<'_> {
    async fn plan(&mut self, _wh: &Warehouse, table: &LoadedTable) -> Result<Option<ActionCommit>> {
        check_gc(table)?;
        self.report =
            ExpireReport::planned(table, select(table, self.options.cutoff, self.clock.now())?);
        let (expired, refs_removed) = (&self.report.expired, &self.report.refs_removed);
        self.before = Some(table.clone());
        if (expired.is_empty() && refs_removed.is_empty()) || self.options.dry_run {
            return Ok(None);
        }
        let updates = expiry_updates(table, expired, refs_removed);
        Ok(Some(ActionCommit {
            updates,
            requirements: vec![
                TableRequirement::UuidMatch {
                    uuid: table.metadata.uuid(),
                },
                TableRequirement::RefSnapshotIdMatch {
                    r#ref: "main".into(),
                    snapshot_id: table.metadata.current_snapshot_id(),
                },
            ],
            written: Vec::new(),
            retained: Vec::new(),
            snapshot_id: None,
            trim_metadata_log: false,
        }))
    }
}

/// The metadata updates that expire `expired` and drop `refs_removed` from `table`: the refs,
/// the expired snapshots' statistics files, the snapshots.
pub fn expiry_updates(
    table: &LoadedTable,
    expired: &[i64],
    refs_removed: &[String],
) -> Vec<TableUpdate> {
    let mut updates: Vec<TableUpdate> = refs_removed
        .iter()
        .map(|r| TableUpdate::RemoveSnapshotRef {
            ref_name: r.clone(),
        })
        .collect();
    for id in expired {
        if table.metadata.statistics_for_snapshot(*id).is_some() {
            updates.push(TableUpdate::RemoveStatistics { snapshot_id: *id });
        }
        if table
            .metadata
            .partition_statistics_for_snapshot(*id)
            .is_some()
        {
            updates.push(TableUpdate::RemovePartitionStatistics { snapshot_id: *id });
        }
    }
    if !expired.is_empty() {
        updates.push(TableUpdate::RemoveSnapshots {
            snapshot_ids: expired.to_vec(),
        });
    }
    updates
}

/// Deletes the files only `expired` snapshots of `before` reached, none that a snapshot of
/// `after` (the table as committed) reaches; returns how many.
///
/// Two ways to find them, as Iceberg Java's `RemoveSnapshots` has (`IncrementalFileCleanup`
/// and `ReachableFileCleanup`), with the same result:
/// - **incremental**, when the history is one line (only the `main` ref, every snapshot an
///   ancestor of the current one, nothing cherry-picked, the expired snapshots all older than
///   the retained ones) and the table is not format v3 (a Puffin file holds several deletion
///   vectors): a data or delete file only expired snapshots reached was removed by a snapshot
///   `d` no newer than the oldest retained one, whose parent expired — and `d` wrote a
///   `DELETED` entry for it in a manifest `d` added (as lethe's, Java's and PyIceberg's
///   commits do). So only the manifests added by expired snapshots or by the oldest retained
///   one that hold deleted entries (by the manifest list's counts) are read, instead of every
///   manifest of the history; the candidates are then checked against the live files of the
///   retained snapshots. Manifests and manifest lists go by the manifest lists alone.
/// - **reachable** otherwise: every file the expired snapshots reach minus every file the
///   retained ones reach (each manifest of both read).
///
/// `unlisted` names the files a retained snapshot removed without writing `DELETED` entries
/// for them (a commit that purged the history with its change,
/// [`crate::snapshot::SnapshotChanges::drop_removed`]): the incremental way can't find those
/// in manifests, so they join its candidates (and are deleted unless a retained snapshot
/// reaches them); the reachable way finds them anyway. Empty for every other commit.
pub async fn delete_unreachable(
    wh: &Warehouse,
    before: &LoadedTable,
    after: &LoadedTable,
    expired: &[i64],
    unlisted: &[String],
) -> Result<usize> {
    let incremental = incremental_unreachable(wh, before, after, expired, unlisted).await?;
    let mut doomed: Vec<String> = match incremental {
        Some(d) => d.into_iter().collect(),
        None => reachable_unreachable(wh, before, after, expired)
            .await?
            .into_iter()
            .collect(),
    };
    doomed.sort();
    for f in &doomed {
        wh.store.delete(f)?;
    }
    Ok(doomed.len())
}

/// The files only `expired` snapshots of `before` reach, by reading every manifest of both
/// sides (Java's `ReachableFileCleanup`).
async fn reachable_unreachable(
    wh: &Warehouse,
    before: &LoadedTable,
    after: &LoadedTable,
    expired: &[i64],
) -> Result<HashSet<String>> {
    let retained: Vec<i64> = after
        .metadata
        .snapshots()
        .map(|s| s.snapshot_id())
        .collect();
    let expired_reach = reachable_files(wh, before, expired).await?;
    let retained_reach = reachable_files(wh, after, &retained).await?;
    Ok(expired_reach.difference(&retained_reach).cloned().collect())
}

/// The files only `expired` snapshots of `before` reached, found incrementally (see
/// [`delete_unreachable`]); `None` when the history is not a single line or the table is
/// format v3: then the reachable way applies.
async fn incremental_unreachable(
    wh: &Warehouse,
    before: &LoadedTable,
    after: &LoadedTable,
    expired: &[i64],
    unlisted: &[String],
) -> Result<Option<HashSet<String>>> {
    let meta = &before.metadata;
    if meta.format_version() >= iceberg::spec::FormatVersion::V3 || expired.is_empty() {
        return Ok(None);
    }
    let refs = meta_refs(before);
    if refs.len() != 1 || refs[0].0 != "main" {
        return Ok(None);
    }
    // The line from the current snapshot back: retained snapshots first, then expired ones.
    let expired_set: HashSet<i64> = expired.iter().copied().collect();
    let retained: HashSet<i64> = after
        .metadata
        .snapshots()
        .map(|s| s.snapshot_id())
        .collect();
    let mut line: Vec<i64> = Vec::new();
    let mut cur = meta.current_snapshot().cloned();
    while let Some(s) = cur {
        if line.contains(&s.snapshot_id()) {
            return Ok(None);
        }
        line.push(s.snapshot_id());
        cur = s
            .parent_snapshot_id()
            .and_then(|p| meta.snapshot_by_id(p).cloned());
    }
    if line.len() != meta.snapshots().count()
        || meta.snapshots().any(|s| {
            s.summary()
                .additional_properties
                .contains_key("source-snapshot-id")
        })
    {
        return Ok(None);
    }
    let kept = line.iter().take_while(|id| retained.contains(id)).count();
    if kept == 0
        || kept != retained.len()
        || line[kept..].iter().any(|id| !expired_set.contains(id))
        || line.len() - kept != expired_set.len()
    {
        return Ok(None);
    }
    let oldest_kept = line[kept - 1];
    let writers: HashSet<i64> = expired_set.iter().copied().chain([oldest_kept]).collect();
    let mut doomed: HashSet<String> = HashSet::new();
    let mut retained_manifests: HashSet<String> = HashSet::new();
    let mut retained_lists: HashSet<String> = HashSet::new();
    let mut to_scan: BTreeMap<String, iceberg::spec::ManifestFile> = BTreeMap::new();
    let mut consider = |mf: &iceberg::spec::ManifestFile, path: &str| {
        if writers.contains(&mf.added_snapshot_id) && mf.deleted_files_count != Some(0) {
            to_scan
                .entry(path.to_string())
                .or_insert_with(|| mf.clone());
        }
    };
    for s in after.metadata.snapshots() {
        retained_lists.insert(wh.store.normalize(s.manifest_list())?);
        for mf in wh.manifest_list(after, s)?.entries() {
            let path = wh.store.normalize(&mf.manifest_path)?;
            consider(mf, &path);
            retained_manifests.insert(path);
        }
    }
    for id in expired {
        let Some(s) = meta.snapshot_by_id(*id) else {
            continue;
        };
        let list = wh.store.normalize(s.manifest_list())?;
        if !retained_lists.contains(&list) {
            doomed.insert(list);
        }
        for mf in wh.manifest_list(before, s)?.entries() {
            let path = wh.store.normalize(&mf.manifest_path)?;
            consider(mf, &path);
            if !retained_manifests.contains(&path) {
                doomed.insert(path);
            }
        }
        let stats = [
            meta.statistics_for_snapshot(*id)
                .map(|x| x.statistics_path.clone()),
            meta.partition_statistics_for_snapshot(*id)
                .map(|x| x.statistics_path.clone()),
        ];
        for st in stats.into_iter().flatten() {
            doomed.insert(wh.store.normalize(&st)?);
        }
    }
    // Files removed by a snapshot whose parent expired: live in an expired snapshot only,
    // unless a retained snapshot holds them again (checked below).
    let mut candidates: HashSet<String> = HashSet::new();
    for f in unlisted {
        candidates.insert(wh.store.normalize(f)?);
    }
    for mf in to_scan.values() {
        for e in wh.manifest_entries(mf).await? {
            if e.status != iceberg::spec::ManifestStatus::Deleted {
                continue;
            }
            let removed_by = e.snapshot_id.unwrap_or(mf.added_snapshot_id);
            let parent = meta
                .snapshot_by_id(removed_by)
                .and_then(|s| s.parent_snapshot_id());
            if parent.is_some_and(|p| expired_set.contains(&p)) {
                candidates.insert(wh.store.normalize(e.data_file.file_path())?);
            }
        }
    }
    let statistics_expired = expired.iter().any(|id| {
        meta.statistics_for_snapshot(*id).is_some()
            || meta.partition_statistics_for_snapshot(*id).is_some()
    });
    if !candidates.is_empty() || statistics_expired {
        let retained_ids: Vec<i64> = retained.iter().copied().collect();
        let live = reachable_files(wh, after, &retained_ids).await?;
        candidates.retain(|c| !live.contains(c));
        doomed.retain(|d| !live.contains(d));
    }
    doomed.extend(candidates);
    Ok(Some(doomed))
}

/// Every file a set of snapshots reaches: manifest lists, manifests, data and delete files,
/// and statistics files. Locations are normalised.
pub async fn reachable_files(
    wh: &Warehouse,
    table: &LoadedTable,
    snapshot_ids: &[i64],
) -> Result<HashSet<String>> {
    let mut out = HashSet::new();
    let mut seen_manifests: HashSet<String> = HashSet::new();
    for id in snapshot_ids {
        let Some(s) = table.metadata.snapshot_by_id(*id) else {
            continue;
        };
        out.insert(wh.store.normalize(s.manifest_list())?);
        for mf in wh.manifest_list(table, s)?.entries() {
            let m = wh.store.normalize(&mf.manifest_path)?;
            if !seen_manifests.insert(m.clone()) {
                continue;
            }
            out.insert(m);
            for e in wh.manifest_entries(mf).await? {
                if e.status != iceberg::spec::ManifestStatus::Deleted {
                    out.insert(wh.store.normalize(e.data_file.file_path())?);
                }
            }
        }
        if let Some(st) = table.metadata.statistics_for_snapshot(*id) {
            out.insert(wh.store.normalize(&st.statistics_path)?);
        }
        if let Some(ps) = table.metadata.partition_statistics_for_snapshot(*id) {
            out.insert(wh.store.normalize(&ps.statistics_path)?);
        }
    }
    Ok(out)
}

/// Expires snapshots of `name` as `options` says.
pub async fn expire(
    wh: &Warehouse,
    name: &TableName,
    options: ExpireOptions,
    clock: &dyn Clock,
) -> Result<ExpireReport> {
    let mut action = Action {
        options,
        clock,
        report: ExpireReport::default(),
        before: None,
    };
    let committed = commit(wh, name, &mut action).await?;
    let mut report = action.report;
    let Some(c) = committed else {
        return Ok(report);
    };
    report.committed = true;
    if !options.keep_files
        && let Some(before) = action.before
    {
        report.files_deleted =
            delete_unreachable(wh, &before, &c.table, &report.expired, &[]).await?;
    }
    Ok(report)
}

/// Expiry settings of a table that would keep a snapshot from before an erasure, by table:
/// used by the erasure preflight. Empty when expiry can remove everything but the current
/// snapshot.
pub fn blockers(table: &LoadedTable) -> Result<Vec<String>> {
    let mut out = gc_blockers(table);
    out.extend(history_blockers(table)?);
    Ok(out)
}

/// Of [`blockers`], `gc.enabled=false`: nothing lethe may do about it.
pub fn gc_blockers(table: &LoadedTable) -> Vec<String> {
    let mut out = Vec::new();
    if table
        .property("gc.enabled")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
    {
        out.push("gc.enabled=false turns off garbage collection for the table".to_string());
    }
    out
}

/// Of [`blockers`], the history the table keeps: `min-snapshots-to-keep` above 1, refs other
/// than `main` (what a rewrite of kept history, [`crate::ops::twins`], can replace).
pub fn history_blockers(table: &LoadedTable) -> Result<Vec<String>> {
    let mut out = Vec::new();
    if let Some(n) = prop_i64(table, "history.expire.min-snapshots-to-keep")?
        && n > 1
    {
        out.push(format!(
            "history.expire.min-snapshots-to-keep={n} keeps the snapshot from before the delete"
        ));
    }
    let mut others: HashMap<String, &'static str> = HashMap::new();
    for (name, r) in refs(table) {
        if name != "main" {
            others.insert(name, if r.is_branch() { "branch" } else { "tag" });
        }
    }
    let mut others: Vec<_> = others.into_iter().collect();
    others.sort();
    for (name, kind) in others {
        out.push(format!(
            "{kind} `{name}` keeps a snapshot that expiry may not remove"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use iceberg::spec::{FormatVersion, NestedField, PrimitiveType, Schema, Type};
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::catalog::{SqlCatalog, TableChange, apply_change};
    use crate::ops::manifests::rewrite_manifests;
    use crate::ops::rewrite::{RowRewrite, append, rewrite_rows};
    use crate::predicate::{Predicate, Value};
    use crate::store::LocalStore;
    use crate::writer::WriteOptions;

    fn schema() -> Schema {
        Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "v", Type::Primitive(PrimitiveType::String)).into(),
            ])
            .build()
            .unwrap()
    }

    fn batch(ids: &[i64]) -> RecordBatch {
        RecordBatch::try_new(
            crate::writer::arrow_schema(&schema()).unwrap(),
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from_iter_values(
                    ids.iter().map(|i| format!("v{i}")),
                )),
            ],
        )
        .unwrap()
    }

    /// The table with `expired` removed from its metadata, as the expiry commits it.
    fn expired_away(table: &LoadedTable, expired: &[i64]) -> LoadedTable {
        let updates = expiry_updates(table, expired, &[]);
        let built = apply_change(
            table,
            TableChange {
                requirements: &[],
                updates: &updates,
                trim_metadata_log: false,
            },
        )
        .unwrap();
        LoadedTable {
            metadata: Arc::new(built.metadata),
            ..table.clone()
        }
    }

    /// Issue 44 item 7: with a grace, a snapshot superseded less than the grace ago stays
    /// (another writer's operation in flight may have started from it); once its child has
    /// been committed that long it expires as with `Cutoff::Every`; `grace_ends` says when
    /// the last snapshot from before an instant leaves its grace.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_grace_keeps_snapshots_superseded_within_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(LocalStore::new());
        let catalog = Arc::new(SqlCatalog::open("lethe", &dir.path().join("c.db")).unwrap());
        let root = store.location_of(&dir.path().join("warehouse"));
        let wh = Warehouse::new(catalog, store, root);
        let name = TableName::parse("shop.graced").unwrap();
        wh.create_table(
            &name,
            schema(),
            None,
            None,
            HashMap::new(),
            FormatVersion::V2,
        )
        .await
        .unwrap();
        for i in 0..4 {
            append(
                &wh,
                &name,
                &[batch(&[i])],
                BTreeMap::new(),
                WriteOptions::default(),
            )
            .await
            .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let t = wh.load(&name).await.unwrap();
        let mut line: Vec<i64> = Vec::new();
        let mut cur = t.current_snapshot().cloned();
        while let Some(s) = cur {
            line.push(s.snapshot_id());
            cur = s
                .parent_snapshot_id()
                .and_then(|p| t.metadata.snapshot_by_id(p).cloned());
        }
        line.reverse();
        let ts = |id: i64| t.metadata.snapshot_by_id(id).unwrap().timestamp_ms();
        let at = |ms: i64| DateTime::<Utc>::from_timestamp_millis(ms).unwrap();
        let grace = 60_000;
        let graced = Cutoff::Superseded { grace_ms: grace };
        // Within the grace of the last supersession: nothing expires.
        let (keep, expired, _) = select(&t, graced, at(ts(line[3]) + 1_000)).unwrap();
        assert!(expired.is_empty(), "{expired:?}");
        for id in &line[..3] {
            assert!(keep[id].starts_with(KEPT_FOR_GRACE), "{}", keep[id]);
        }
        // Past it for the older ones only: each stays while its child is younger than it.
        let (_, expired, _) = select(&t, graced, at(ts(line[2]) + grace + 1)).unwrap();
        let mut want = vec![line[0], line[1]];
        want.sort_unstable();
        assert_eq!(expired, want);
        // Past every grace: as Cutoff::Every.
        let later = at(ts(line[3]) + grace + 1);
        let (_, expired, _) = select(&t, graced, later).unwrap();
        let (_, every, _) = select(&t, Cutoff::Every, later).unwrap();
        assert_eq!(expired, every);
        assert_eq!(expired.len(), 3);
        let (_, none, _) = select(&t, Cutoff::Superseded { grace_ms: 0 }, at(ts(line[3]))).unwrap();
        assert_eq!(none, every, "grace 0 is Every");
        // When the grace of what came before an instant ends.
        let now = at(ts(line[3]) + 1_000);
        assert_eq!(
            grace_ends(&t, grace, ts(line[3]) + 1, now).unwrap(),
            Some(at(ts(line[3]) + grace))
        );
        assert_eq!(
            grace_ends(&t, grace, ts(line[0]) + 1, now).unwrap(),
            Some(at(ts(line[1]) + grace)),
            "only the first snapshot is from before: its child's commit starts its grace"
        );
        assert_eq!(grace_ends(&t, 0, ts(line[3]) + 1, now).unwrap(), None);
        assert_eq!(grace_ends(&t, grace, ts(line[3]) + 1, later).unwrap(), None);
    }

    /// Random linear histories (appends, copy-on-write deletes, manifest rewrites): expiring
    /// the oldest k snapshots, for every k, the incremental cleanup finds exactly the files the
    /// reachable one finds; a set that is not the oldest ones goes the reachable way.
    #[tokio::test(flavor = "multi_thread")]
    async fn incremental_cleanup_finds_what_the_reachable_one_finds() {
        let seed = crate::test_seed();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(LocalStore::new());
        let catalog = Arc::new(SqlCatalog::open("lethe", &dir.path().join("c.db")).unwrap());
        let root = store.location_of(&dir.path().join("warehouse"));
        let wh = Warehouse::new(catalog, store, root);
        let mut data_files_doomed = 0usize;
        for round in 0..3 {
            let name = TableName::parse(&format!("shop.t{round}")).unwrap();
            wh.create_table(
                &name,
                schema(),
                None,
                None,
                HashMap::new(),
                FormatVersion::V2,
            )
            .await
            .unwrap();
            let mut next = 0i64;
            for _ in 0..9 {
                match rng.random_range(0..10) {
                    0..6 => {
                        let n = rng.random_range(1..30);
                        let ids: Vec<i64> = (next..next + n).collect();
                        next += n;
                        append(
                            &wh,
                            &name,
                            &[batch(&ids)],
                            BTreeMap::new(),
                            WriteOptions::default(),
                        )
                        .await
                        .unwrap();
                    }
                    6..9 => {
                        let pick: Vec<Value> = (0..3)
                            .map(|_| Value::Int(rng.random_range(0..next.max(1))))
                            .collect();
                        rewrite_rows(
                            &wh,
                            &name,
                            &RowRewrite::delete(Predicate::is_in("id", pick)),
                        )
                        .await
                        .unwrap();
                    }
                    _ => {
                        rewrite_manifests(&wh, &name, BTreeMap::new(), true)
                            .await
                            .unwrap();
                    }
                }
            }
            let table = wh.load(&name).await.unwrap();
            // Oldest first.
            let mut line: Vec<i64> = Vec::new();
            let mut cur = table.current_snapshot().cloned();
            while let Some(s) = cur {
                line.push(s.snapshot_id());
                cur = s
                    .parent_snapshot_id()
                    .and_then(|p| table.metadata.snapshot_by_id(p).cloned());
            }
            line.reverse();
            for k in 1..line.len() {
                let expired = &line[..k];
                let after = expired_away(&table, expired);
                let full = reachable_unreachable(&wh, &table, &after, expired)
                    .await
                    .unwrap();
                let inc = incremental_unreachable(&wh, &table, &after, expired, &[])
                    .await
                    .unwrap()
                    .expect("a single line of history goes the incremental way");
                let mut a: Vec<_> = inc.iter().collect();
                let mut b: Vec<_> = full.iter().collect();
                a.sort();
                b.sort();
                assert_eq!(a, b, "seed {seed}, round {round}, oldest {k} expired");
                data_files_doomed += full.iter().filter(|f| f.ends_with(".parquet")).count();
            }
            if line.len() > 2 {
                let middle = [line[1]];
                let after = expired_away(&table, &middle);
                assert!(
                    incremental_unreachable(&wh, &table, &after, &middle, &[])
                        .await
                        .unwrap()
                        .is_none(),
                    "seed {seed}: a snapshot newer than a retained one expired"
                );
            }
        }
        assert!(
            data_files_doomed > 0,
            "seed {seed}: no expiry doomed a data file"
        );
    }
}
