//! The erasure's journal (`state/erasures/<batch>.json`, readable only by its owner): the plan
//! as made, the resolved values that select the subjects' rows, and every durable step done,
//! so that a rerun after a failure resumes where the erasure stopped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use lethe_iceberg::predicate::{Predicate, Value};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::stores::StoreStep;
use crate::erasure::case::{RequestSpec, write_atomic};
use crate::erasure::plan::{Action, Plan};
use crate::error::{Error, Result};
use crate::workspace::Workspace;

/// A step as the journal records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JournalStep {
    /// The table.
    pub table: String,
    /// The action.
    pub action: Action,
    /// The selecting column.
    pub column: Option<String>,
    /// The values that select the rows (resolved before the first delete).
    pub values: Vec<Value>,
    /// Further columns that select rows, each with its values (the plan's
    /// [`crate::erasure::plan::Step::also`]): a row any of them (or `column`) selects is the
    /// subject's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<SelectBy>,
    /// REWRITE: columns nulled.
    pub erase_columns: Vec<String>,
    /// RECOMPUTE: the pipeline.
    pub pipeline: Option<String>,
    /// Done?
    pub done: bool,
    /// The snapshot committed, if any.
    pub snapshot_id: Option<i64>,
    /// Rows deleted or rewritten.
    pub rows: u64,
    /// How many values selected the rows (kept when the values are cleared at the end).
    #[serde(default)]
    pub selected_by: usize,
    /// When the step started (RFC 3339).
    #[serde(default)]
    pub started_at: Option<String>,
    /// When the step's commit landed (RFC 3339).
    #[serde(default)]
    pub finished_at: Option<String>,
    /// A legal hold keeping the step from running until it ends (the step stays not done,
    /// its values kept in this journal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<crate::erasure::plan::Held>,
    /// RECOMPUTE: how the pipeline's target was brought up to date (unchanged, incremental
    /// with its key column and how many keys, or a full run and why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recompute: Option<crate::pipeline::Recompute>,
    /// DELETE, REWRITE: the rows of the batch's subjects in the table's current snapshot
    /// before the erasure, as the logical check counted them ([`crate::erasure::logical`]:
    /// every file read whole, every addressing column matched); the step's own `rows` must
    /// agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_rows: Option<u64>,
    /// The rewrite of the table's kept history the step carries, when its table keeps
    /// history and retention.toml decides to rewrite it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<crate::erasure::plan::HistoryRewrite>,
    /// What the step's commit twinned: per kept snapshot, the original and its twin, the refs
    /// moved, rows before and after ([`lethe_iceberg::ops::twins`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub twins: Vec<lethe_iceberg::ops::twins::Twin>,
    /// DELETE, REWRITE: the names the step's runs gave their files, one per process that
    /// started it, recorded before it started writing: a run that never landed (the process
    /// was killed) left files nothing references, which the next run removes by that name
    /// ([`lethe_iceberg::ops::sweep::remove_run_files`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
}

/// A further column selecting a step's rows, with its values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelectBy {
    /// The column.
    pub column: String,
    /// Its values that select the subject's rows.
    pub values: Vec<Value>,
}

/// The predicate selecting the rows any of `selections` (column, values) selects: `column IN
/// values` for each, OR-ed; a selection without values selects nothing. None without any.
pub fn selection_predicate<'a>(
    selections: impl IntoIterator<Item = (&'a str, &'a [Value])>,
) -> Option<Predicate> {
    let mut first: Option<Predicate> = None;
    let mut any: Vec<Predicate> = Vec::new();
    for (c, v) in selections {
        let p = Predicate::is_in(c.to_string(), v.to_vec());
        if first.is_none() {
            first = Some(p.clone());
        }
        if !v.is_empty() {
            any.push(p);
        }
    }
    match any.len() {
        0 => first,
        1 => any.pop(),
        _ => Some(Predicate::Or(any)),
    }
}

/// Cleanup counts for one table.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TableCleanup {
    /// Phases done: history (manifest rewrite, expiry, trimmed log: one commit), sweep,
    /// purge-versions.
    pub phases: BTreeSet<String>,
    /// Snapshots expired.
    pub snapshots_expired: usize,
    /// Commits that left the table's manifests without `DELETED` entries: a manifest
    /// rewrite's replace snapshot, or a row step's commit that purged the history with it.
    pub manifests_rewritten: usize,
    /// Files removed (expiry and sweep).
    pub files_removed: usize,
    /// Unreferenced files left because they are younger than the minimum age.
    pub files_too_young: usize,
    /// Noncurrent versions deleted by version id (`[storage] purge_versions`).
    #[serde(default)]
    pub versions_purged: usize,
    /// With a grace (`[snapshots] grace_seconds`): snapshots from before the erasure, holding
    /// what it removed, kept for other writers' operations in flight; the history and sweep
    /// phases run again once the grace has passed (`lethe verify`, or a rerun).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace: Option<GracePending>,
}

/// Snapshots an erasure replaced, kept for a grace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GracePending {
    /// The snapshots committed before this instant (milliseconds since the epoch) are the
    /// ones to expire: those the erasure replaced (later ones hold nothing it removed).
    pub before_ms: i64,
    /// When the last of them leaves its grace (RFC 3339).
    pub until: String,
}

impl GracePending {
    /// Whether the grace has passed at `now`.
    pub fn passed(&self, now: chrono::DateTime<chrono::Utc>) -> bool {
        chrono::DateTime::parse_from_rfc3339(&self.until).map_or(true, |u| u <= now)
    }
}

impl TableCleanup {
    /// Adds the counts of `other` (a phase's, or another table's) to these; phases are not
    /// merged.
    pub fn absorb(&mut self, other: &TableCleanup) {
        self.snapshots_expired += other.snapshots_expired;
        self.manifests_rewritten += other.manifests_rewritten;
        self.files_removed += other.files_removed;
        self.files_too_young += other.files_too_young;
        self.versions_purged += other.versions_purged;
    }
}

/// The erasure's journal (`state/erasures/<batch>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    /// The batch id (the request ID for a single request).
    pub batch: String,
    /// The requests.
    pub requests: Vec<RequestSpec>,
    /// When it started.
    pub started_at: String,
    /// The plan as made.
    pub plan: Option<Plan>,
    /// SHA-256 of each request's case file as written.
    pub case_hashes: BTreeMap<String, String>,
    /// Register entries written.
    pub registered: bool,
    /// Steps.
    pub steps: Vec<JournalStep>,
    /// Cleanup per table.
    pub cleanup: BTreeMap<String, TableCleanup>,
    /// The sweep's minimum age used, in seconds.
    pub min_age_seconds: i64,
    /// How long the snapshots the erasure replaced are kept for other writers' operations in
    /// flight (`[snapshots] grace_seconds` when it was planned), in seconds.
    #[serde(default)]
    pub grace_seconds: i64,
    /// The stores outside the warehouse, in erasure order (see `stores.rs`).
    #[serde(default)]
    pub stores: Vec<StoreStep>,
    /// The day the requests must be answered by.
    #[serde(default)]
    pub deadline: Option<String>,
    /// The logical check after the cleanup: per planned table and kept snapshot, the rows
    /// that still address a subject ([`crate::erasure::logical`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical: Option<Vec<crate::erasure::logical::TableCount>>,
    /// When it finished.
    pub finished_at: Option<String>,
}

impl Journal {
    /// True when the warehouse part is finished and every store is settled: nothing is left to
    /// resume.
    pub fn is_finished(&self) -> bool {
        self.finished_at.is_some()
            && !self.stores.iter().any(|s| {
                matches!(
                    s.state,
                    super::stores::StoreState::Failed
                        | super::stores::StoreState::Reopened
                        | super::stores::StoreState::Blind
                )
            })
    }
}

impl JournalStep {
    /// Every (column, values) that selects the step's rows: `column` first, then `also`.
    pub fn selections(&self) -> Vec<(&str, &[Value])> {
        let mut out: Vec<(&str, &[Value])> = Vec::with_capacity(1 + self.also.len());
        if let Some(c) = &self.column {
            out.push((c.as_str(), self.values.as_slice()));
        }
        out.extend(
            self.also
                .iter()
                .map(|a| (a.column.as_str(), a.values.as_slice())),
        );
        out
    }

    /// The predicate selecting the step's rows ([`selection_predicate`]); None for a step
    /// without a selecting column.
    pub fn predicate(&self) -> Option<Predicate> {
        selection_predicate(self.selections())
    }

    /// The columns that select the rows, in words: `learner_id`, `anonymous_id or session_id`.
    pub fn columns_text(&self) -> String {
        self.selections()
            .iter()
            .map(|(c, _)| *c)
            .collect::<Vec<_>>()
            .join(" or ")
    }

    /// Clears the values that select the rows (the journal keeps counts once finished).
    pub fn clear_values(&mut self) {
        self.values.clear();
        for a in &mut self.also {
            a.values.clear();
        }
    }

    /// Held under a legal hold that has not been released: not carried out yet.
    pub fn is_held(&self) -> bool {
        !self.done && self.held.as_ref().is_some_and(|h| h.released_on.is_none())
    }
}

impl Plan {
    /// Deserialisation support: the DOT is not kept in journals.
    pub(super) fn for_journal(&self) -> Plan {
        let mut p = self.clone();
        p.dot.clear();
        p
    }
}

fn erasures_dir(ws: &Workspace) -> PathBuf {
    ws.config.paths.state.join("erasures")
}

/// The journal path of a batch.
pub fn journal_path(ws: &Workspace, batch: &str) -> PathBuf {
    erasures_dir(ws).join(format!("{batch}.json"))
}

/// Loads a journal, if there is one.
pub fn load_journal(ws: &Workspace, batch: &str) -> Result<Option<Journal>> {
    let p = journal_path(ws, batch);
    if !p.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&p).map_err(|e| Error::io(p.display().to_string(), e))?;
    Ok(Some(serde_json::from_str(&text).map_err(|e| {
        Error::invalid(format!("{}: the journal is damaged: {e}", p.display()))
    })?))
}

/// Every erasure's journal in the workspace, by batch.
pub fn journals(ws: &Workspace) -> Result<Vec<Journal>> {
    let dir = erasures_dir(ws);
    let mut out = Vec::new();
    if !dir.exists() {
        return Ok(out);
    }
    let mut names: Vec<String> = Vec::new();
    for e in std::fs::read_dir(&dir).map_err(|e| Error::io(dir.display().to_string(), e))? {
        let p = e
            .map_err(|e| Error::io(dir.display().to_string(), e))?
            .path();
        if p.extension().is_some_and(|x| x == "json")
            && let Some(stem) = p.file_stem().and_then(|s| s.to_str())
        {
            names.push(stem.to_string());
        }
    }
    names.sort();
    for n in names {
        if let Some(j) = load_journal(ws, &n)? {
            out.push(j);
        }
    }
    Ok(out)
}

/// Finds the journal of the batch a request belongs to.
pub fn find_request(ws: &Workspace, request: &str) -> Result<Option<Journal>> {
    if let Some(j) = load_journal(ws, request)? {
        return Ok(Some(j));
    }
    let dir = erasures_dir(ws);
    if !dir.exists() {
        return Ok(None);
    }
    for e in std::fs::read_dir(&dir).map_err(|e| Error::io(dir.display().to_string(), e))? {
        let p = e
            .map_err(|e| Error::io(dir.display().to_string(), e))?
            .path();
        if p.extension().is_some_and(|x| x == "json")
            && let Some(stem) = p.file_stem().and_then(|s| s.to_str())
            && let Some(j) = load_journal(ws, stem)?
            && j.requests.iter().any(|r| r.request == request)
        {
            return Ok(Some(j));
        }
    }
    Ok(None)
}

/// The journal holds the values that select the subject's rows until the erasure finishes,
/// so, like a case file, it is readable only by its owner.
pub(super) fn save_journal(ws: &Workspace, j: &Journal) -> Result<()> {
    write_atomic(
        &journal_path(ws, &j.batch),
        serde_json::to_string_pretty(j)?.as_bytes(),
        true,
    )
}

/// The batch id of a set of requests: the request ID for one, a hash of the IDs for many.
pub fn batch_id(requests: &[RequestSpec]) -> String {
    if requests.len() == 1 {
        return requests[0].request.clone();
    }
    let mut h = Sha256::new();
    for r in requests {
        h.update(r.request.as_bytes());
        h.update(b"\n");
    }
    format!("batch-{}", &hex::encode(h.finalize())[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_ors_its_columns_and_leaves_out_those_without_values() {
        let ids = [Value::Int(7)];
        let none: [Value; 0] = [];
        assert_eq!(selection_predicate([]), None);
        assert_eq!(
            selection_predicate([("a", &none[..])]),
            Some(Predicate::is_in("a", vec![])),
            "one column without values selects nothing, as before"
        );
        assert_eq!(
            selection_predicate([("a", &none[..]), ("b", &ids[..])]),
            Some(Predicate::is_in("b", ids.to_vec()))
        );
        assert_eq!(
            selection_predicate([("a", &ids[..]), ("b", &ids[..])]),
            Some(Predicate::Or(vec![
                Predicate::is_in("a", ids.to_vec()),
                Predicate::is_in("b", ids.to_vec())
            ]))
        );
    }
}
