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
//! can't be read can't be proven clean. Reports name files, places and kinds of traces, never a
//! value.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use lethe_scan::{IdTrace, IdValue, ScanOptions, ScanReport, SubjectTraces, TraceSet, ValueTrace};
use serde::Serialize;

use crate::erasure::case::CaseFile;
use crate::error::{Error, Result};
use crate::workspace::Workspace;
use lethe_iceberg::metrics::{MetricsConfig, MetricsMode, primitive_leaves};

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
    /// Every hit.
    pub hits: Vec<HitView>,
    /// Seconds.
    pub seconds: f64,
}

impl ProveReport {
    /// True when every file was read and none holds a trace.
    pub fn is_clean(&self) -> bool {
        self.files_holding == 0 && self.unreadable.is_empty()
    }
}

/// The prefix length: one less than the smallest truncation length any table's string bounds
/// use (15 for the default truncate(16)).
pub async fn prefix_len(ws: &Workspace) -> Result<usize> {
    let mut n = lethe_iceberg::metrics::DEFAULT_TRUNCATE;
    for name in ws.warehouse.tables().await? {
        let t = ws.warehouse.load(&name).await?;
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

/// Scans every file under the warehouse and the configured roots for the traces of `cases`.
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
    let wh = &ws.warehouse;
    let mut locations: Vec<(String, PathBuf)> = Vec::new();
    let mut delete_files: HashSet<PathBuf> = HashSet::new();
    for name in wh.tables().await? {
        let t = wh.load(&name).await?;
        let p = wh.store.local_path(t.location())?;
        locations.push((name.to_string(), p));
        for f in wh.current_files(&t).await? {
            if !f.is_data() {
                delete_files.insert(wh.store.local_path(f.entry.data_file.file_path())?);
            }
        }
    }
    // Longest location first, so a nested table's files are attributed to it.
    locations.sort_by_key(|(_, p)| std::cmp::Reverse(p.as_os_str().len()));
    let exempt: HashSet<&str> = cases
        .iter()
        .flat_map(|c| c.exempt_tables.iter().map(String::as_str))
        .collect();
    let values_only: Vec<PathBuf> = locations
        .iter()
        .filter(|(n, _)| exempt.contains(n.as_str()))
        .map(|(_, p)| p.clone())
        .collect();
    let mut roots = vec![ws.config.warehouse_dir()];
    for r in &ws.config.scan_roots {
        if r.exists() {
            roots.push(r.clone());
        }
    }
    let options = ScanOptions {
        roots: roots.clone(),
        values_only,
        delete_files,
        threads: 0,
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
    let table_of = |path: &std::path::Path| -> Option<String> {
        locations
            .iter()
            .find(|(_, loc)| path.starts_with(loc))
            .map(|(n, _)| n.clone())
    };
    let mut tables: BTreeMap<String, TableCounts> = BTreeMap::new();
    let mut hits = Vec::new();
    let mut unreadable = Vec::new();
    for f in &report.files {
        let table = table_of(&f.path);
        let c = tables
            .entry(table.clone().unwrap_or_else(|| "(other)".into()))
            .or_default();
        if f.is_unreadable() {
            c.unreadable += 1;
            if let lethe_scan::FileStatus::Unreadable { reason } = &f.status {
                unreadable.push((f.path.display().to_string(), reason.clone()));
            }
            continue;
        }
        c.files_read += 1;
        if f.holds_traces() {
            c.files_holding += 1;
        }
        for h in &f.hits {
            hits.push(HitView {
                request: cases
                    .get(h.subject)
                    .map(|c| c.request.clone())
                    .unwrap_or_default(),
                file: f.path.display().to_string(),
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
    }
    Ok(ProveReport {
        roots: roots.iter().map(|r| r.display().to_string()).collect(),
        prefix_len: prefix,
        subjects: cases.len(),
        files_read: report.files_read,
        bytes_read: report.bytes_read,
        files_holding: report.files_holding,
        unreadable,
        tables,
        hits,
        seconds: report.seconds,
    })
}
