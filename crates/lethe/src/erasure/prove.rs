//! PROVE: read every file the warehouse (and the configured roots) store, each with its own
//! format's reader ([`lethe_scan`]), and search for subjects' traces.
//!
//! Traces come from case files (an erasure's, or one computed before an erasure with
//! `--subject`): IDs by column, searched as exact values, and the first (truncation length − 1)
//! characters of each identifying value, lowercased — 15 for Iceberg's default `truncate(16)`,
//! because a truncated upper bound's last character was raised. In a table an exception keeps,
//! the subject's IDs are expected, so only values are searched there (the erased columns' old
//! values included).
//!
//! A file that can't be read is listed as unreadable and the result is INCOMPLETE: a file that
//! can't be read can't be proven clean. On object storage every object under the warehouse is
//! read through the store, and on a versioned bucket every noncurrent version too (reported
//! as `location?versionId=V`): a deleted object survives there until it is deleted by id. Reports name files, places and kinds of traces, never a
//! value.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use lethe_scan::{
    IdTrace, IdValue, ParquetKeys, ScanOptions, ScanReport, SubjectTraces, TraceSet, ValueTrace,
};
use serde::Serialize;

use crate::config::WarehouseLocation;
use crate::erasure::case::CaseFile;
use crate::error::{Error, Result};
use crate::workspace::Workspace;
use lethe_iceberg::metrics::{MetricsConfig, MetricsMode, primitive_leaves};
use lethe_iceberg::store::FileStore;

/// A hit as reported: where, which kind of trace, for which request — never the value.
#[derive(Debug, Clone, Serialize)]
pub struct HitView {
    /// The request (or subject label) the trace belongs to.
    pub request: String,
    /// The file.
    pub file: String,
    /// The table whose location holds the file, if any.
    pub table: Option<String>,
    /// Where in the file.
    pub place: String,
    /// The kind of trace (`id learner_id`, `value email`).
    pub trace: String,
    /// Where exactly (column, field id, row group, line...).
    pub detail: String,
    /// How many occurrences.
    pub count: u64,
}

/// Per-table counts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TableCounts {
    /// Files read.
    pub files_read: u64,
    /// Files holding a subject's traces.
    pub files_holding: u64,
    /// Files that could not be read.
    pub unreadable: u64,
    /// Noncurrent versions (versioned bucket) holding a subject's traces.
    pub versions_holding: u64,
}

/// What a versioned bucket keeps under the warehouse after deletes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VersionsReport {
    /// Whether any object under the warehouse has a version id (the bucket is or was
    /// versioned).
    pub versioned: bool,
    /// Noncurrent versions read (they still hold the bytes an overwrite or delete replaced).
    pub noncurrent_read: u64,
    /// Noncurrent versions holding a subject's traces.
    pub noncurrent_holding: u64,
    /// Delete markers (they hold nothing).
    pub delete_markers: u64,
}

/// The result of a proof scan.
#[derive(Debug, Clone, Serialize)]
pub struct ProveReport {
    /// The roots scanned.
    pub roots: Vec<String>,
    /// The prefix length used for identifying values.
    pub prefix_len: usize,
    /// Subjects (requests) searched for.
    pub subjects: usize,
    /// Files read completely.
    pub files_read: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Files holding any subject's traces.
    pub files_holding: u64,
    /// Unreadable files with the reason.
    pub unreadable: Vec<(String, String)>,
    /// Per table (files outside any table's location are under `(other)`).
    pub tables: BTreeMap<String, TableCounts>,
    /// Every hit (noncurrent versions' too, named `location?versionId=V`).
    pub hits: Vec<HitView>,
    /// Object storage's noncurrent versions and delete markers (None on a local folder).
    pub versions: Option<VersionsReport>,
    /// Seconds.
    pub seconds: f64,
}

impl ProveReport {
    /// True when every file (and noncurrent version) was read and none holds a trace.
    pub fn is_clean(&self) -> bool {
        self.files_holding == 0
            && self.unreadable.is_empty()
            && self
                .versions
                .as_ref()
                .is_none_or(|v| v.noncurrent_holding == 0)
    }
}

/// The prefix length: one less than the smallest truncation length any table's string bounds
/// use (15 for the default truncate(16)). A table lethe can't load is an error.
pub async fn prefix_len(ws: &Workspace) -> Result<usize> {
    prefix_len_of(ws, false).await
}

/// [`prefix_len`] over the tables lethe can load (the others skipped), for a plan that says
/// what it couldn't read instead of stopping there.
pub async fn prefix_len_readable(ws: &Workspace) -> Result<usize> {
    prefix_len_of(ws, true).await
}

async fn prefix_len_of(ws: &Workspace, skip_unreadable: bool) -> Result<usize> {
    let mut n = lethe_iceberg::metrics::DEFAULT_TRUNCATE;
    for name in ws.warehouse.tables().await? {
        let t = match ws.warehouse.load(&name).await {
            Ok(t) => t,
            Err(lethe_iceberg::Error::Unsupported { .. }) if skip_unreadable => continue,
            Err(e) => return Err(e.into()),
        };
        let schema = t.metadata.current_schema();
        let cfg = MetricsConfig::from_properties(schema, t.metadata.properties())?;
        for (_, f) in primitive_leaves(schema) {
            if let MetricsMode::Truncate(k) = cfg.mode(f.id) {
                n = n.min(k);
            }
        }
    }
    Ok(n.saturating_sub(1).max(1))
}

fn traces_of(case: &CaseFile) -> SubjectTraces {
    SubjectTraces {
        label: case.request.clone(),
        ids: case
            .ids
            .iter()
            .map(|(col, vals)| IdTrace {
                // The scan matches IDs by a column's own name: a struct field's last part.
                column: col.rsplit('.').next().unwrap_or(col).to_string(),
                values: vals
                    .iter()
                    .map(|v| match v.parse::<i64>() {
                        Ok(i) => IdValue::Int(i),
                        Err(_) => IdValue::Text(v.clone()),
                    })
                    .collect(),
            })
            .collect(),
        values: case
            .values
            .iter()
            .map(|v| ValueTrace {
                kind: v.kind.clone(),
                value: v.value.clone(),
            })
            .collect(),
    }
}

/// What the scan adds up as file reports arrive.
struct Tally<'a> {
    cases: &'a [CaseFile],
    /// Table locations (canonical, with a trailing `/`), longest first.
    locations: Vec<(String, String)>,
    /// Locations of tables kept under a legal exception: there the subject's IDs are
    /// expected, text IDs searched as values included.
    values_only: Vec<String>,
    tables: BTreeMap<String, TableCounts>,
    hits: Vec<HitView>,
    unreadable: Vec<(String, String)>,
    files_holding: u64,
}

impl Tally<'_> {
    fn table_of(&self, location: &str) -> Option<String> {
        self.locations
            .iter()
            .find(|(_, loc)| location.starts_with(loc.as_str()))
            .map(|(n, _)| n.clone())
    }

    /// Adds one file's report; `location` is its canonical location (the table it is in is
    /// found by it), `version` marks a noncurrent version.
    fn add(&mut self, f: &lethe_scan::FileReport, location: &str, version: bool) -> bool {
        let table = self.table_of(location);
        let name = f.path.display().to_string();
        let c = self
            .tables
            .entry(table.clone().unwrap_or_else(|| "(other)".into()))
            .or_default();
        if f.is_unreadable() {
            c.unreadable += 1;
            if let lethe_scan::FileStatus::Unreadable { reason } = &f.status {
                self.unreadable.push((name, reason.clone()));
            }
            return false;
        }
        if !version {
            c.files_read += 1;
        }
        // In a table a legal exception keeps, the subject's IDs are expected: a text ID
        // found as a value there is not a trace.
        let exempt = self
            .values_only
            .iter()
            .any(|p| location.starts_with(p.as_str()));
        let expected = |h: &lethe_scan::Hit| {
            exempt
                && matches!(&h.trace, lethe_scan::TraceKind::Value { kind }
                    if crate::erasure::case::is_id_as_text(kind))
        };
        let holding = f.hits_omitted > 0 || f.hits.iter().any(|h| !expected(h));
        if holding {
            if version {
                c.versions_holding += 1;
            } else {
                c.files_holding += 1;
                self.files_holding += 1;
            }
        }
        for h in f.hits.iter().filter(|h| !expected(h)) {
            self.hits.push(HitView {
                request: self
                    .cases
                    .get(h.subject)
                    .map(|c| c.request.clone())
                    .unwrap_or_default(),
                file: name.clone(),
                table: table.clone(),
                place: format!("{:?}", h.place),
                trace: match &h.trace {
                    lethe_scan::TraceKind::Id { column } => format!("id {column}"),
                    lethe_scan::TraceKind::Value { kind } => format!("value {kind}"),
                },
                detail: h.detail.clone(),
                count: h.count,
            });
        }
        holding
    }
}

/// Scans the objects of `listing`: here ([`lethe_scan::scan_objects`]), or on `engine`'s tasks
/// (the listing collected first: an engine cuts it into tasks). Either way `on_file` gets one
/// report per object and the totals are the same.
async fn scan_listed<R, I>(
    engine: Option<&dyn lethe_scan::ScanEngine>,
    (subjects, prefix, traces, keys): (&[SubjectTraces], usize, &TraceSet, &ParquetKeys),
    listing: I,
    open: &(dyn Fn(&lethe_scan::ObjectEntry) -> std::result::Result<R, String> + Sync),
    on_file: &mut dyn FnMut(lethe_scan::FileReport),
    progress: &dyn Fn(lethe_scan::Progress),
) -> Result<ScanReport>
where
    R: parquet::file::reader::ChunkReader + 'static,
    I: Iterator<Item = std::result::Result<lethe_scan::ObjectEntry, String>> + Send,
{
    let Some(engine) = engine else {
        return Ok(tokio::task::block_in_place(|| {
            lethe_scan::scan_objects(traces, listing, open, keys, 0, on_file, progress)
        })?);
    };
    let started = std::time::Instant::now();
    let objects =
        tokio::task::block_in_place(|| listing.collect::<std::result::Result<Vec<_>, String>>())
            .map_err(lethe_scan::Error::Listing)?;
    let files_total = objects.len() as u64;
    let bytes_total: u64 = objects.iter().map(|o| o.bytes).sum();
    let reports = engine
        .scan_objects(subjects, prefix, objects, &|_| {})
        .await?;
    let mut report = ScanReport::default();
    for f in reports {
        report.count(&f);
        on_file(f);
    }
    progress(lethe_scan::Progress {
        files_done: files_total,
        files_total,
        bytes_done: bytes_total,
        bytes_total,
    });
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The noncurrent versions under `prefix` (a table's location, canonical, ending in `/`) that
/// hold a trace of `cases`, by canonical location and version id: what a version purge
/// deletes besides the versions of the objects the erasure removed
/// ([`lethe_iceberg::ops::sweep::PurgeScope::holding`]). Read here, as the proof scan reads
/// them; with `values_only` (a table an exception keeps) the subject's IDs are expected and
/// only identifying values count, as in the proof.
pub(crate) async fn versions_holding(
    ws: &Workspace,
    cases: &[CaseFile],
    prefix: &str,
    values_only: bool,
) -> Result<HashSet<(String, String)>> {
    if cases.is_empty() || cases.iter().any(|c| c.destroyed) {
        return Ok(HashSet::new());
    }
    let store = ws.warehouse.store.as_ref();
    let subjects: Vec<SubjectTraces> = cases.iter().map(traces_of).collect();
    let traces = TraceSet::new(&subjects, prefix_len(ws).await?)?;
    let listing = store.list_versions(prefix)?.filter_map(|v| match v {
        Err(e) => Some(Err(e.to_string())),
        Ok(v) if v.delete_marker || !v.may_be_noncurrent() => None,
        Ok(v) => Some(Ok(lethe_scan::ObjectEntry {
            name: format!("{}?versionId={}", v.location, v.version),
            relative: v
                .location
                .strip_prefix(prefix)
                .unwrap_or(&v.location)
                .to_string(),
            location: v.location,
            version: Some(v.version),
            bytes: v.size,
            values_only,
            delete_file: false,
        })),
    });
    let open = |e: &lethe_scan::ObjectEntry| {
        store
            .open_version(&e.location, e.version.as_deref().unwrap_or("null"))
            .map_err(|e| e.to_string())
    };
    let mut out = HashSet::new();
    let mut on_file = |f: lethe_scan::FileReport| {
        let expected = |h: &lethe_scan::Hit| {
            values_only
                && matches!(&h.trace, lethe_scan::TraceKind::Value { kind }
                    if crate::erasure::case::is_id_as_text(kind))
        };
        let holding = f.hits_omitted > 0 || f.hits.iter().any(|h| !expected(h));
        let name = f.path.display().to_string();
        if holding
            && let Some((location, version)) = name.rsplit_once("?versionId=")
            && let Ok(l) = store.normalize(location)
        {
            out.insert((l, version.to_string()));
        }
    };
    let keys = crate::keys::parquet_keys(&ws.config)?;
    tokio::task::block_in_place(|| {
        lethe_scan::scan_objects(&traces, listing, &open, &keys, 0, &mut on_file, &|_| {})
    })?;
    Ok(out)
}

/// Scans every file under the warehouse and the configured roots for the traces of `cases`.
///
/// A local warehouse is walked as folders; an object-storage warehouse is listed through the
/// store (streamed: memory doesn't grow with the number of objects), and on a versioned
/// bucket every noncurrent version is read too — a deleted object's bytes survive there.
///
/// With a scan engine (`ws.engines.scan`) the warehouse's objects are read by the engine's
/// tasks (object storage only: executors elsewhere share it, not this machine's folders); the
/// configured local roots are still read here. The report is the same.
pub async fn prove(
    ws: &Workspace,
    cases: &[CaseFile],
    progress: &(dyn Fn(&str) + Sync),
) -> Result<ProveReport> {
    if cases.iter().any(|c| c.destroyed) {
        return Err(Error::invalid(
            "a case file's values were destroyed after its attestation; the scan has nothing to search for",
        ));
    }
    let prefix = prefix_len(ws).await?;
    let subjects: Vec<SubjectTraces> = cases.iter().map(traces_of).collect();
    let traces = TraceSet::new(&subjects, prefix)?;
    let keys = crate::keys::parquet_keys(&ws.config)?;
    let wh = &ws.warehouse;
    let store = wh.store.as_ref();
    let mut locations: Vec<(String, String)> = Vec::new();
    let mut delete_files: HashSet<String> = HashSet::new();
    for name in wh.tables().await? {
        let t = wh.load(&name).await?;
        let loc = store.normalize(t.location())?;
        locations.push((name.to_string(), format!("{}/", loc.trim_end_matches('/'))));
        for f in wh.current_files(&t).await? {
            if !f.is_data() {
                delete_files.insert(store.normalize(f.entry.data_file.file_path())?);
            }
        }
    }
    // Longest location first, so a nested table's files are attributed to it.
    locations.sort_by_key(|(_, p)| std::cmp::Reverse(p.len()));
    let exempt: HashSet<&str> = cases
        .iter()
        .flat_map(|c| c.exempt_tables.iter().map(String::as_str))
        .collect();
    let values_only: Vec<String> = locations
        .iter()
        .filter(|(n, _)| exempt.contains(n.as_str()))
        .map(|(_, p)| p.clone())
        .collect();
    let mut tally = Tally {
        cases,
        values_only: values_only.clone(),
        locations,
        tables: BTreeMap::new(),
        hits: Vec::new(),
        unreadable: Vec::new(),
        files_holding: 0,
    };
    let mut roots: Vec<String> = Vec::new();
    let mut local_roots: Vec<PathBuf> = Vec::new();
    let (mut files_read, mut bytes_read, mut seconds) = (0u64, 0u64, 0f64);
    let mut versions = None;
    match ws.config.warehouse_location() {
        WarehouseLocation::Local(_) if ws.engines.scan.is_some() => {
            return Err(Error::invalid(
                "the scan engine reads the warehouse through object storage its executors share: this warehouse is a local folder (use --engine local)",
            ));
        }
        WarehouseLocation::Local(dir) => local_roots.push(dir),
        WarehouseLocation::Object(root) => {
            roots.push(root.clone());
            let root_prefix = format!("{}/", store.normalize(&root)?.trim_end_matches('/'));
            let entry = |location: String, version: Option<String>, size: u64| {
                let relative = location
                    .strip_prefix(&root_prefix)
                    .unwrap_or(&location)
                    .to_string();
                lethe_scan::ObjectEntry {
                    name: match &version {
                        Some(v) => format!("{location}?versionId={v}"),
                        None => location.clone(),
                    },
                    values_only: values_only.iter().any(|p| location.starts_with(p.as_str())),
                    delete_file: version.is_none() && delete_files.contains(&location),
                    location,
                    version,
                    relative,
                    bytes: size,
                }
            };
            let open = |e: &lethe_scan::ObjectEntry| match &e.version {
                Some(v) => store
                    .open_version(&e.location, v)
                    .map_err(|e| e.to_string()),
                None => store
                    .open_listed(&e.location, e.bytes)
                    .map_err(|e| e.to_string()),
            };
            let listing = store.list(&root_prefix)?.map(|f| {
                f.map(|f| entry(f.location, None, f.size))
                    .map_err(|e| e.to_string())
            });
            let engine = ws.engines.scan.as_deref();
            let report = scan_listed(
                engine,
                (&subjects, prefix, &traces, &keys),
                listing,
                &open,
                &mut |f| {
                    let loc = f.path.display().to_string();
                    tally.add(&f, &loc, false);
                },
                &|p| {
                    if p.files_done % 200 == 0 {
                        progress(&format!(
                            "scanned {} objects, {} MiB",
                            p.files_done,
                            p.bytes_done >> 20
                        ));
                    }
                },
            )
            .await?;
            files_read += report.files_read;
            bytes_read += report.bytes_read;
            seconds += report.seconds;
            // What a versioned bucket keeps: noncurrent versions are read like any object.
            let mut v = VersionsReport::default();
            let markers = std::sync::atomic::AtomicU64::new(0);
            let versioned = std::sync::atomic::AtomicBool::new(false);
            let listing = store
                .list_versions(&root_prefix)?
                .filter_map(|item| match item {
                    Err(e) => Some(Err(e.to_string())),
                    Ok(sv) => {
                        if sv.version != "null" {
                            versioned.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                        if sv.delete_marker {
                            markers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            None
                        } else if sv.is_current() {
                            // Read as an object already; a version whose listing doesn't say
                            // is read here (unknown is not current).
                            None
                        } else {
                            Some(Ok(entry(sv.location, Some(sv.version), sv.size)))
                        }
                    }
                });
            let mut read = 0u64;
            let mut holding = 0u64;
            let report = scan_listed(
                engine,
                (&subjects, prefix, &traces, &keys),
                listing,
                &open,
                &mut |f| {
                    let loc = f.path.display().to_string();
                    let loc = loc.split("?versionId=").next().unwrap_or(&loc).to_string();
                    if !f.is_unreadable() {
                        read += 1;
                    }
                    if tally.add(&f, &loc, true) {
                        holding += 1;
                    }
                },
                &|p| {
                    if p.files_done % 200 == 0 {
                        progress(&format!("scanned {} noncurrent versions", p.files_done));
                    }
                },
            )
            .await?;
            seconds += report.seconds;
            v.noncurrent_read = read;
            v.noncurrent_holding = holding;
            v.delete_markers = markers.into_inner();
            v.versioned = versioned.into_inner();
            versions = Some(v);
        }
    }
    for r in &ws.config.scan_roots {
        if r.exists() {
            local_roots.push(r.clone());
        }
    }
    if !local_roots.is_empty() {
        roots.extend(local_roots.iter().map(|r| r.display().to_string()));
        let local = lethe_iceberg::store::LocalStore::new();
        let to_path = |l: &String| local.local_path(l).ok();
        let options = ScanOptions {
            roots: local_roots.clone(),
            values_only: values_only.iter().filter_map(to_path).collect(),
            delete_files: delete_files.iter().filter_map(to_path).collect(),
            threads: 0,
            parquet_keys: keys.clone(),
            ..ScanOptions::default()
        };
        let report: ScanReport = tokio::task::block_in_place(|| {
            lethe_scan::scan(&traces, &options, &|p| {
                if p.files_done % 50 == 0 || p.files_done == p.files_total {
                    progress(&format!(
                        "scanned {}/{} files, {} MiB",
                        p.files_done,
                        p.files_total,
                        p.bytes_done >> 20
                    ));
                }
            })
        })?;
        for f in &report.files {
            let loc = local.location_of(&f.path);
            tally.add(f, &loc, false);
        }
        files_read += report.files_read;
        bytes_read += report.bytes_read;
        seconds += report.seconds;
    }
    Ok(ProveReport {
        roots,
        prefix_len: prefix,
        subjects: cases.len(),
        files_read,
        bytes_read,
        files_holding: tally.files_holding,
        unreadable: tally.unreadable,
        tables: tally.tables,
        hits: tally.hits,
        versions,
        seconds,
    })
}
