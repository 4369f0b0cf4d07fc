//! ERASE: carry out a plan, then expire, rewrite manifests and sweep until no file of the
//! plan's tables holds the subject — journaled, resumable, and for many subjects in one pass.
//!
//! Order of durable steps (each recorded in the journal before the next starts):
//! 1. **planned**: the plan is made and the preflight passed (an erasure with any blocked table
//!    refuses before changing anything, naming every blocked table); the subject's traces —
//!    the IDs of every row the plan deletes, by column, and the identifying values — are noted
//!    in a case file per request (mode 0600) before anything is deleted;
//! 2. **registered**: a register entry per request (request ID + keyed hash), before the first
//!    delete, so a later failure can't lose the record;
//! 3. one entry per plan step: DELETE as a row delete, REWRITE nulling the exception's
//!    columns, RECOMPUTE by rerunning the pipeline — each commit records only
//!    `erasure-request`, never a value of the person;
//! 4. cleanup per table: expire every snapshot older than the erasure's commits, rewrite
//!    manifests holding DELETED entries and expire the intermediate snapshot, empty the
//!    metadata log, and sweep unreferenced files older than the minimum age.
//!
//! Rerunning a request after a failure at any point resumes from the journal: values resolved
//! before the first delete are reused (resolving them again after the deletes would find
//! nothing), deletes that already landed match nothing and commit nothing, the register is not
//! written twice. Rerunning a finished request changes nothing and says so.
//!
//! A batch (`--subjects-file`) plans once for all its subjects (with the earliest lineage
//! window), rewrites each table once and cleans up once, with a register entry and counts per
//! request.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use chrono::{Duration, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::catalog::TableName;
use crate::error::{Error, Result};
use crate::explain::pipeline_names;
use crate::governance::Governance;
use crate::governance::subjects::{Subject, SubjectRef};
use crate::ops::expire::{Cutoff, ExpireOptions, expire};
use crate::ops::manifests::rewrite_manifests;
use crate::ops::rewrite::{RowRewrite, rewrite_rows, select_rows};
use crate::ops::sweep::sweep;
use crate::pipeline::{Pipeline, run_with};
use crate::plan::{self, Action, Inventory, Plan, column_values};
use crate::predicate::{Predicate, Value};
use crate::register::{Entry, Register, RegisterKey};
use crate::workspace::Workspace;

/// One request of an erasure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestSpec {
    /// The request ID (`erasure-0001`).
    pub request: String,
    /// The subject's name.
    pub subject: String,
    /// The subject's root identifier as typed.
    pub id: String,
}

/// Options of an erasure.
#[derive(Debug, Clone)]
pub struct EraseOptions {
    /// Plan and report only: nothing is written (no case file, register entry or commit).
    pub dry_run: bool,
    /// The sweep's minimum file age (None: retention.toml's `[sweep]`).
    pub min_age: Option<Duration>,
    /// Go ahead although some tables are UNRESOLVED (the attestation will say INCOMPLETE).
    pub accept_incomplete: bool,
    /// Where the register key file is, if not in the environment.
    pub key_file: Option<PathBuf>,
}

/// A trace kept in a case file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ValueTrace {
    /// What it is (the column it came from).
    pub kind: String,
    /// The value.
    pub value: String,
}

/// The case file of one request: personal data, readable only by the erasure (mode 0600).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaseFile {
    /// The request.
    pub request: String,
    /// The subject's name.
    pub subject: String,
    /// The register hash of the subject's root identifier.
    pub hash: String,
    /// ID values by column name (exact-match traces).
    pub ids: BTreeMap<String, Vec<String>>,
    /// Identifying values (prefix traces), including the old values of erased columns.
    pub values: Vec<ValueTrace>,
    /// Tables kept under an exception (there the IDs are expected).
    pub exempt_tables: Vec<String>,
    /// Rows of the subject per table before the erasure.
    pub rows: BTreeMap<String, u64>,
    /// Whether the values above were destroyed (after a COMPLETE attestation).
    #[serde(default)]
    pub destroyed: bool,
}

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
}

/// Cleanup counts for one table.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TableCleanup {
    /// Phases done: expire, manifests, expire-again, trim-log, sweep.
    pub phases: BTreeSet<String>,
    /// Snapshots expired.
    pub snapshots_expired: usize,
    /// Manifest-rewrite snapshots committed.
    pub manifests_rewritten: usize,
    /// Files removed (expiry and sweep).
    pub files_removed: usize,
    /// Unreferenced files left because they are younger than the minimum age.
    pub files_too_young: usize,
}

/// The erasure's journal (state/erasures/<batch>.json).
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
    /// When it finished.
    pub finished_at: Option<String>,
}

/// What an erasure did.
#[derive(Debug, Clone, Serialize)]
pub struct EraseReport {
    /// The journal at the end.
    pub journal: Journal,
    /// True when the request was already complete and nothing was done.
    pub already_complete: bool,
    /// True for a dry run.
    pub dry_run: bool,
}

impl Plan {
    /// Deserialisation support: the DOT is not kept in journals.
    fn for_journal(&self) -> Plan {
        let mut p = self.clone();
        p.dot.clear();
        p
    }
}

fn erasures_dir(ws: &Workspace) -> PathBuf {
    ws.config.paths.state.join("erasures")
}

fn cases_dir(ws: &Workspace) -> PathBuf {
    ws.config.paths.state.join("cases")
}

/// The journal path of a batch.
pub fn journal_path(ws: &Workspace, batch: &str) -> PathBuf {
    erasures_dir(ws).join(format!("{batch}.json"))
}

/// The case file path of a request.
pub fn case_path(ws: &Workspace, request: &str) -> PathBuf {
    cases_dir(ws).join(format!("{request}.case.json"))
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

fn write_atomic(path: &Path, bytes: &[u8], private: bool) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::Internal("no parent".into()))?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    let tmp = path.with_extension("tmp");
    {
        use std::io::Write;
        let mut opts = if private {
            crate::keys::private_options()
        } else {
            std::fs::OpenOptions::new()
        };
        let mut f = opts
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| Error::io(tmp.display().to_string(), e))?;
        f.write_all(bytes)
            .map_err(|e| Error::io(tmp.display().to_string(), e))?;
        f.sync_all()
            .map_err(|e| Error::io(tmp.display().to_string(), e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path.display().to_string(), e))?;
    Ok(())
}

/// The journal holds the values that select the subject's rows until the erasure finishes,
/// so, like a case file, it is readable only by its owner.
fn save_journal(ws: &Workspace, j: &Journal) -> Result<()> {
    write_atomic(
        &journal_path(ws, &j.batch),
        serde_json::to_string_pretty(j)?.as_bytes(),
        true,
    )
}

/// Writes a case file (mode 0600) and returns its SHA-256.
pub fn write_case(ws: &Workspace, case: &CaseFile) -> Result<String> {
    let bytes = serde_json::to_vec_pretty(case)?;
    write_atomic(&case_path(ws, &case.request), &bytes, true)?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// Reads a request's case file.
pub fn read_case(ws: &Workspace, request: &str) -> Result<CaseFile> {
    let p = case_path(ws, request);
    let text = std::fs::read_to_string(&p).map_err(|e| Error::io(p.display().to_string(), e))?;
    serde_json::from_str(&text)
        .map_err(|e| Error::invalid(format!("{}: not a case file: {e}", p.display())))
}

/// Parses a subjects file: one `REQUEST NAME=ID` per line (blank lines and `#` comments
/// ignored). A malformed line is an error naming the line; nobody is erased.
pub fn parse_subjects_file(path: &Path) -> Result<Vec<RequestSpec>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    let mut out: Vec<RequestSpec> = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let bad = |m: &str| Error::Config {
            file: path.to_path_buf(),
            line: i + 1,
            key: "(line)".into(),
            message: format!("{m}; write `REQUEST NAME=ID`, e.g. `erasure-0001 learner=3590`"),
        };
        let parts: Vec<&str> = l
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|s| !s.is_empty())
            .collect();
        if parts.len() != 2 {
            return Err(bad("expected two fields"));
        }
        valid_request_id(parts[0])
            .map_err(|_| bad("the request ID may hold letters, digits, '-', '_' and '.' only"))?;
        let s = SubjectRef::parse(parts[1]).map_err(|_| bad("the subject is not NAME=ID"))?;
        if !seen.insert(parts[0].to_string()) {
            return Err(bad("this request ID appears twice"));
        }
        out.push(RequestSpec {
            request: parts[0].to_string(),
            subject: s.subject,
            id: s.id,
        });
    }
    if out.is_empty() {
        return Err(Error::invalid(format!(
            "{} names no subject",
            path.display()
        )));
    }
    Ok(out)
}

/// Checks a request ID: it becomes a file name and a snapshot summary value.
pub fn valid_request_id(id: &str) -> Result<()> {
    if id.is_empty()
        || id.len() > 100
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        || id.starts_with('.')
    {
        return Err(Error::invalid(format!(
            "`{id}` is not a request ID: use letters, digits, '-', '_' and '.' (e.g. erasure-0001)"
        )));
    }
    Ok(())
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

type Attributed = BTreeMap<String, BTreeMap<String, (Value, BTreeSet<usize>)>>;

fn key_of(v: &Value) -> String {
    match v {
        Value::Str(s) => format!("s:{s}"),
        other => format!("v:{other}"),
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Resolves every label's values with the requests they belong to.
async fn resolve_attributed(
    ws: &Workspace,
    gov: &Governance,
    subject: &Subject,
    p: &Plan,
    ids: &[Value],
) -> Result<Attributed> {
    let wh = &ws.warehouse;
    let (root_table, root_column) = subject.root()?;
    let mut out: Attributed = BTreeMap::new();
    let root = out.entry(root_column.clone()).or_default();
    for (i, id) in ids.iter().enumerate() {
        root.entry(key_of(id))
            .or_insert_with(|| (id.clone(), BTreeSet::new()))
            .1
            .insert(i);
    }
    let _ = root_table;
    // Follows one table: rows selected by `col IN values(src_label)`, attributing `target`.
    async fn follow(
        wh: &crate::table::Warehouse,
        out: &mut Attributed,
        table: &str,
        col: &str,
        src_label: &str,
        target_col: &str,
        target_label: &str,
    ) -> Result<()> {
        let src = out.get(src_label).cloned().unwrap_or_default();
        let values: Vec<Value> = src.values().map(|(v, _)| v.clone()).collect();
        if values.is_empty() {
            out.entry(target_label.to_string()).or_default();
            return Ok(());
        }
        let t = wh.load(&TableName::parse(table)?).await?;
        let rows = select_rows(wh, &t, &Predicate::is_in(col.to_string(), values)).await?;
        for b in &rows {
            let sel = column_values_aligned(b, col)?;
            let tgt = column_values_aligned(b, target_col)?;
            for (s, t) in sel.into_iter().zip(tgt) {
                let (Some(s), Some(t)) = (s, t) else { continue };
                let owners = src
                    .get(&key_of(&s))
                    .map(|x| x.1.clone())
                    .unwrap_or_default();
                let e = out
                    .entry(target_label.to_string())
                    .or_default()
                    .entry(key_of(&t))
                    .or_insert_with(|| (t.clone(), BTreeSet::new()));
                e.1.extend(owners);
            }
        }
        out.entry(target_label.to_string()).or_default();
        Ok(())
    }
    for m in &subject.mapped {
        follow(
            wh,
            &mut out,
            &m.via,
            &root_column,
            &root_column,
            &m.column,
            &m.column,
        )
        .await?;
    }
    let labels: BTreeSet<String> = p.steps.iter().filter_map(|s| s.label.clone()).collect();
    // Derived identifiers: the values their pattern selects, owned by whoever owns the value
    // they embed.
    let sources: BTreeMap<String, Vec<Value>> = out
        .iter()
        .map(|(l, m)| (l.clone(), m.values().map(|(v, _)| v.clone()).collect()))
        .collect();
    let wanted: std::collections::HashSet<String> = labels.iter().cloned().collect();
    for (label, (from, pairs)) in
        crate::discover::derived::resolve_labels(wh, gov, &p.subject, &wanted, &sources).await?
    {
        let mut m: BTreeMap<String, (Value, BTreeSet<usize>)> = BTreeMap::new();
        for (v, src) in pairs {
            let owners = out
                .get(&from)
                .and_then(|x| x.get(&key_of(&src)).map(|o| o.1.clone()))
                .unwrap_or_default();
            m.entry(key_of(&v))
                .or_insert_with(|| (v.clone(), BTreeSet::new()))
                .1
                .extend(owners);
        }
        out.insert(label, m);
    }
    // Key labels can depend on each other (a key of a table found by another key): resolve
    // until nothing changes, in plan order.
    for _ in 0..labels.len() + 1 {
        let mut progressed = false;
        for label in &labels {
            if out.contains_key(label) {
                continue;
            }
            let Some((table, key)) = label.rsplit_once('.') else {
                continue;
            };
            let Some(source) = p.steps.iter().find(|s| s.table == table) else {
                continue;
            };
            let (Some(col), Some(src_label)) = (&source.column, &source.label) else {
                continue;
            };
            if !out.contains_key(src_label) {
                continue;
            }
            follow(wh, &mut out, table, col, src_label, key, label).await?;
            progressed = true;
        }
        if !progressed {
            break;
        }
    }
    Ok(out)
}

fn column_values_aligned(
    b: &arrow::array::RecordBatch,
    column: &str,
) -> Result<Vec<Option<Value>>> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::DataType;
    let c = b
        .column_by_name(column)
        .ok_or_else(|| Error::invalid(format!("no column `{column}`")))?;
    Ok(match c.data_type() {
        DataType::Int64 | DataType::Int32 => {
            let c = arrow::compute::cast(c, &DataType::Int64)?;
            c.as_primitive::<arrow::datatypes::Int64Type>()
                .iter()
                .map(|v| v.map(Value::Int))
                .collect()
        }
        _ => {
            let c = arrow::compute::cast(c, &DataType::Utf8)?;
            let s = c.as_string::<i32>();
            (0..s.len())
                .map(|i| s.is_valid(i).then(|| Value::Str(s.value(i).to_string())))
                .collect()
        }
    })
}

/// Runs (or resumes) an erasure of `requests`.
pub async fn erase(
    ws: &Workspace,
    requests: &[RequestSpec],
    opts: &EraseOptions,
    progress: &dyn Fn(&str),
) -> Result<EraseReport> {
    if requests.is_empty() {
        return Err(Error::invalid("no subject to erase"));
    }
    for r in requests {
        valid_request_id(&r.request)?;
    }
    let batch = batch_id(requests);
    let key_file = opts.key_file.clone().or_else(|| default_key_file(ws));
    let key = RegisterKey::load(key_file.as_deref())?;
    let existing = load_journal(ws, &batch)?;
    if let Some(j) = &existing {
        let same =
            |a: &RequestSpec, b: &RequestSpec| a.request == b.request && a.subject == b.subject;
        let matches = j.requests.len() == requests.len()
            && j.requests.iter().zip(requests).all(|(a, b)| same(a, b));
        if j.finished_at.is_some() {
            // A finished journal no longer holds the subjects' IDs: the register's keyed
            // hashes say whether this is the same erasure.
            let register = Register::in_state(&ws.config.paths.state).entries()?;
            let hashed = requests.iter().all(|r| {
                register
                    .iter()
                    .any(|e| e.request == r.request && e.hash == key.hash(&r.subject, &r.id))
            });
            if !(matches && hashed) {
                return Err(Error::invalid(format!(
                    "request {batch} was used for another subject; use a new request ID"
                )));
            }
            return Ok(EraseReport {
                journal: j.clone(),
                already_complete: true,
                dry_run: opts.dry_run,
            });
        }
        if !matches || j.requests != requests {
            return Err(Error::invalid(format!(
                "request {batch} was started for other subjects; use a new request ID"
            )));
        }
    } else {
        for r in requests {
            if let Some(j) = find_request(ws, &r.request)? {
                return Err(Error::invalid(format!(
                    "request {} is already part of erasure {}; use a new request ID",
                    r.request, j.batch
                )));
            }
        }
    }
    let gov = ws.governance()?;
    gov.subjects.get(&requests[0].subject)?;

    let mut journal = match existing {
        Some(j) => {
            progress(&format!("resuming erasure {batch}"));
            j
        }
        None => {
            let planned = plan_erasure(ws, &gov, requests, opts, &key, progress).await?;
            match planned {
                Planned::DryRun(j) => {
                    return Ok(EraseReport {
                        journal: *j,
                        already_complete: false,
                        dry_run: true,
                    });
                }
                Planned::Journal(j) => *j,
            }
        }
    };
    if opts.dry_run {
        return Ok(EraseReport {
            journal,
            already_complete: false,
            dry_run: true,
        });
    }

    // 2. Register entries, before the first delete.
    if !journal.registered {
        let register = Register::in_state(&ws.config.paths.state);
        let at = Utc::now().to_rfc3339();
        register.record_all(
            journal
                .requests
                .iter()
                .map(|r| Entry {
                    request: r.request.clone(),
                    subject: r.subject.clone(),
                    hash: key.hash(&r.subject, &r.id),
                    at: at.clone(),
                })
                .collect(),
        )?;
        journal.registered = true;
        save_journal(ws, &journal)?;
        durable_step("registered");
    }

    // 3. The plan's steps, in order.
    let request_ids: Vec<String> = journal.requests.iter().map(|r| r.request.clone()).collect();
    let tag = request_ids.join(",");
    let pipelines_dir = ws.config.paths.pipelines.clone();
    for i in 0..journal.steps.len() {
        if journal.steps[i].done {
            continue;
        }
        let step = journal.steps[i].clone();
        let name = TableName::parse(&step.table)?;
        progress(&format!("{} {}", step.action, step.table));
        match step.action {
            Action::Delete => {
                let col = step
                    .column
                    .clone()
                    .ok_or_else(|| Error::Internal("DELETE without a column".into()))?;
                let spec = RowRewrite::delete(Predicate::is_in(col, step.values.clone()))
                    .with_summary("erasure-request", tag.clone());
                let r = rewrite_rows(&ws.warehouse, &name, &spec).await?;
                journal.steps[i].snapshot_id = r.snapshot_id;
                journal.steps[i].rows = r.rows_matched;
            }
            Action::Rewrite => {
                let col = step
                    .column
                    .clone()
                    .ok_or_else(|| Error::Internal("REWRITE without a column".into()))?;
                if !step.erase_columns.is_empty() {
                    let spec = RowRewrite::set_null(
                        Predicate::is_in(col, step.values.clone()),
                        step.erase_columns.clone(),
                    )
                    .with_summary("erasure-request", tag.clone());
                    let r = rewrite_rows(&ws.warehouse, &name, &spec).await?;
                    journal.steps[i].snapshot_id = r.snapshot_id;
                    journal.steps[i].rows = r.rows_matched;
                }
            }
            Action::Recompute => {
                let pname = step
                    .pipeline
                    .clone()
                    .ok_or_else(|| Error::Internal("RECOMPUTE without a pipeline".into()))?;
                let p = Pipeline::find(&pipelines_dir, &pname)?;
                let mut extra = BTreeMap::new();
                extra.insert("erasure-request".to_string(), tag.clone());
                let run = run_with(ws, &p, extra).await?;
                journal.steps[i].snapshot_id = run.snapshot_id;
            }
            Action::NoAction | Action::Unresolved => {}
        }
        journal.steps[i].done = true;
        save_journal(ws, &journal)?;
        durable_step(&format!("step {}", step.table));
    }

    // 4. Cleanup of every table the erasure changed.
    let min_age = Duration::seconds(journal.min_age_seconds);
    let tables: Vec<String> = journal
        .steps
        .iter()
        .filter(|s| {
            matches!(
                s.action,
                Action::Delete | Action::Rewrite | Action::Recompute
            )
        })
        .map(|s| s.table.clone())
        .collect();
    for table in tables {
        let name = TableName::parse(&table)?;
        let mut c = journal.cleanup.get(&table).cloned().unwrap_or_default();
        let summary: BTreeMap<String, String> =
            [("erasure-request".to_string(), tag.clone())].into();
        for phase in ["expire", "manifests", "expire-again", "trim-log", "sweep"] {
            if c.phases.contains(phase) {
                continue;
            }
            progress(&format!("cleanup {table}: {phase}"));
            match phase {
                "expire" | "expire-again" => {
                    let r = expire(
                        &ws.warehouse,
                        &name,
                        ExpireOptions {
                            cutoff: Cutoff::OlderThan(Utc::now() + Duration::seconds(1)),
                            dry_run: false,
                            keep_files: false,
                        },
                        ws.clock.as_ref(),
                    )
                    .await?;
                    c.snapshots_expired += r.expired.len();
                    c.files_removed += r.files_deleted;
                }
                "manifests" => {
                    let r = rewrite_manifests(&ws.warehouse, &name, summary.clone(), false).await?;
                    if r.snapshot_id.is_some() {
                        c.manifests_rewritten += 1;
                    }
                }
                "trim-log" => {
                    crate::commit::commit(
                        &ws.warehouse,
                        &name,
                        &mut crate::commit::TrimMetadataLog,
                    )
                    .await?;
                }
                _ => {
                    let r = sweep(&ws.warehouse, &name, min_age, false, ws.clock.as_ref()).await?;
                    c.files_removed += r.removed;
                    c.files_too_young = r.too_young;
                }
            }
            c.phases.insert(phase.to_string());
            journal.cleanup.insert(table.clone(), c.clone());
            save_journal(ws, &journal)?;
            durable_step(&format!("cleanup {table} {phase}"));
        }
    }
    // Finished: nothing will be resumed, so the journal keeps counts and ids of snapshots, not
    // the subjects' IDs nor the values that selected their rows (the case files keep those
    // until attested; the register keeps keyed hashes).
    for r in &mut journal.requests {
        r.id.clear();
    }
    for s in &mut journal.steps {
        s.values.clear();
    }
    if let Some(p) = journal.plan.as_mut() {
        for s in &mut p.steps {
            s.values.clear();
        }
    }
    journal.finished_at = Some(Utc::now().to_rfc3339());
    save_journal(ws, &journal)?;
    Ok(EraseReport {
        journal,
        already_complete: false,
        dry_run: false,
    })
}

/// The failpoint after every durable step (tests stop the erasure there).
fn durable_step(_what: &str) {
    fail::fail_point!("erase-durable-step");
}

/// The register key file named in the state folder, when it exists.
pub fn default_key_file(ws: &Workspace) -> Option<PathBuf> {
    let p = ws.config.paths.state.join("register.key");
    p.exists().then_some(p)
}

enum Planned {
    DryRun(Box<Journal>),
    Journal(Box<Journal>),
}

/// What an erasure knows before it changes anything.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The plan (values filled in).
    pub plan: Plan,
    /// The journal's steps (values resolved).
    pub steps: Vec<JournalStep>,
    /// A case file per request (not yet written).
    pub cases: Vec<CaseFile>,
}

/// Plans, resolves values and collects every request's traces. Reads only; refuses nothing
/// (the erasure's refusals are in [`erase`]). Without a key, case files carry no hash.
pub async fn prepare(
    ws: &Workspace,
    gov: &Governance,
    requests: &[RequestSpec],
    key: Option<&RegisterKey>,
    progress: &dyn Fn(&str),
) -> Result<Prepared> {
    let wh = &ws.warehouse;
    let subject_name = &requests[0].subject;
    if requests.iter().any(|r| &r.subject != subject_name) {
        return Err(Error::invalid(
            "a batch erases subjects of one kind; split the file by subject name",
        ));
    }
    let subject = gov.subjects.get(subject_name)?.clone();
    let subject = &subject;
    progress("planning");
    let inv = Inventory::load(wh).await?;
    let mut ids = Vec::with_capacity(requests.len());
    for r in requests {
        ids.push(plan::parse_id(
            subject,
            &SubjectRef {
                subject: r.subject.clone(),
                id: r.id.clone(),
            },
            &inv,
        )?);
    }
    let graph = plan::load_lineage(&ws.config.paths.lineage, &inv)?;
    let mut since: Option<chrono::DateTime<Utc>> = None;
    if subject.first_seen.is_some() {
        // The earliest first record of the batch: a superset of every subject's edges.
        since = plan::first_seen(wh, subject, &ids).await?;
    }
    let mut p = plan::plan(&inv, gov, &graph, subject_name, since, &pipeline_names(ws)?)?;
    progress("resolving the subject's values");
    let attributed = resolve_attributed(ws, gov, subject, &p, &ids).await?;
    let flat: BTreeMap<String, Vec<Value>> = attributed
        .iter()
        .map(|(l, m)| (l.clone(), m.values().map(|(v, _)| v.clone()).collect()))
        .collect();
    crate::explain::fill_values(
        &mut p,
        &flat,
        &subject.mapped.iter().map(|m| m.column.clone()).collect(),
    );

    // Traces per request.
    let mut cases: Vec<CaseFile> = requests
        .iter()
        .map(|r| CaseFile {
            request: r.request.clone(),
            subject: r.subject.clone(),
            hash: key.map(|k| k.hash(&r.subject, &r.id)).unwrap_or_default(),
            exempt_tables: p
                .steps
                .iter()
                .filter(|s| s.action == Action::Rewrite)
                .map(|s| s.table.clone())
                .collect(),
            ..Default::default()
        })
        .collect();
    for s in &p.steps {
        let (Some(col), Some(label)) = (&s.column, &s.label) else {
            continue;
        };
        if let Some(vals) = attributed.get(label) {
            for (v, owners) in vals.values() {
                for o in owners {
                    let ids = cases[*o].ids.entry(col.clone()).or_default();
                    let t = text_of(v);
                    if !ids.contains(&t) {
                        ids.push(t);
                    }
                }
            }
        }
    }
    // Identifying values from the root table, and the old values of columns an exception
    // erases; rows per table per request.
    let (root_table, root_column) = subject.root()?;
    let root_vals: Vec<Value> = ids.clone();
    let t = wh.load(&TableName::parse(&root_table)?).await?;
    let rows = select_rows(wh, &t, &Predicate::is_in(root_column.clone(), root_vals)).await?;
    for b in &rows {
        let owners = column_values_aligned(b, &root_column)?;
        for col in &subject.values {
            let vals = column_values_aligned(b, col)?;
            for (o, v) in owners.iter().zip(vals) {
                if let (Some(o), Some(Value::Str(v))) = (o, v)
                    && let Some(i) = ids.iter().position(|x| x == o)
                    && !v.trim().is_empty()
                {
                    cases[i].values.push(ValueTrace {
                        kind: col.clone(),
                        value: v,
                    });
                }
            }
        }
    }
    let mut steps = Vec::new();
    for s in &p.steps {
        let values: Vec<Value> = s
            .label
            .as_ref()
            .and_then(|l| flat.get(l))
            .cloned()
            .unwrap_or_default();
        if let (Some(col), Some(label)) = (&s.column, &s.label) {
            let t = wh.load(&TableName::parse(&s.table)?).await?;
            let rows = if values.is_empty() {
                Vec::new()
            } else {
                select_rows(wh, &t, &Predicate::is_in(col.clone(), values.clone())).await?
            };
            let att = attributed.get(label).cloned().unwrap_or_default();
            for b in &rows {
                let sel = column_values_aligned(b, col)?;
                let mut erased: Vec<(String, Vec<Option<Value>>)> = Vec::new();
                if s.action == Action::Rewrite {
                    for ec in &s.erase_columns {
                        erased.push((ec.clone(), column_values_aligned(b, ec)?));
                    }
                }
                for (row, v) in sel.iter().enumerate() {
                    let Some(v) = v else { continue };
                    for o in att.get(&key_of(v)).map(|x| x.1.clone()).unwrap_or_default() {
                        *cases[o].rows.entry(s.table.clone()).or_default() += 1;
                        for (ec, vals) in &erased {
                            if let Some(Some(Value::Str(old))) = vals.get(row)
                                && !old.trim().is_empty()
                            {
                                let tr = ValueTrace {
                                    kind: format!("{}.{ec} (erased)", s.table),
                                    value: old.clone(),
                                };
                                if !cases[o].values.contains(&tr) {
                                    cases[o].values.push(tr);
                                }
                            }
                        }
                    }
                }
            }
        }
        steps.push(JournalStep {
            table: s.table.clone(),
            action: s.action,
            column: s.column.clone(),
            values,
            erase_columns: s.erase_columns.clone(),
            pipeline: s.pipeline.clone(),
            done: false,
            snapshot_id: None,
            rows: 0,
        });
    }
    for c in &mut cases {
        c.values.sort();
        c.values.dedup();
    }
    Ok(Prepared {
        plan: p,
        steps,
        cases,
    })
}

async fn plan_erasure(
    ws: &Workspace,
    gov: &Governance,
    requests: &[RequestSpec],
    opts: &EraseOptions,
    key: &RegisterKey,
    progress: &dyn Fn(&str),
) -> Result<Planned> {
    let Prepared {
        plan: p,
        steps,
        cases,
    } = prepare(ws, gov, requests, Some(key), progress).await?;
    if !p.blocked.is_empty() {
        let mut msg = String::from(
            "the erasure can't start: these tables' own settings would keep the subject after it",
        );
        for (t, why) in &p.blocked {
            for w in why {
                msg.push_str(&format!("\n  {t}: {w}"));
            }
        }
        msg.push_str("\nnothing was changed; decide with the tables' owners, then run again");
        return Err(Error::Refused(msg));
    }
    if p.coverage.unresolved > 0 && !opts.accept_incomplete {
        let list: Vec<String> = p
            .steps
            .iter()
            .filter(|s| s.action == Action::Unresolved)
            .map(|s| format!("\n  {}: {}", s.table, s.reason.clone().unwrap_or_default()))
            .collect();
        return Err(Error::Refused(format!(
            "the plan is INCOMPLETE: lineage can't resolve {} table(s):{}\nnothing was changed; fix the lineage, or pass --accept-incomplete to erase what can be erased (the attestation will say INCOMPLETE)",
            list.len(),
            list.concat()
        )));
    }
    let min_age = match opts.min_age {
        Some(d) => d,
        None => gov.retention.min_file_age(),
    };
    let mut journal = Journal {
        batch: batch_id(requests),
        requests: requests.to_vec(),
        started_at: Utc::now().to_rfc3339(),
        plan: Some(p.for_journal()),
        case_hashes: BTreeMap::new(),
        registered: false,
        steps,
        cleanup: BTreeMap::new(),
        min_age_seconds: min_age.num_seconds(),
        finished_at: None,
    };
    if opts.dry_run {
        return Ok(Planned::DryRun(Box::new(journal)));
    }
    // 1. Case files, then the journal: nothing is deleted before both are on disk.
    for c in &cases {
        let h = write_case(ws, c)?;
        journal.case_hashes.insert(c.request.clone(), h);
    }
    save_journal(ws, &journal)?;
    durable_step("planned");
    Ok(Planned::Journal(Box::new(journal)))
}

/// Rows per table per request from the case files of a journal.
pub fn rows_by_request(
    ws: &Workspace,
    j: &Journal,
) -> Result<BTreeMap<String, BTreeMap<String, u64>>> {
    let mut out = BTreeMap::new();
    for r in &j.requests {
        out.insert(r.request.clone(), read_case(ws, &r.request)?.rows);
    }
    Ok(out)
}

/// Keeps column_values reachable for callers resolving values outside an erasure.
pub fn values_of(batches: &[arrow::array::RecordBatch], column: &str) -> Result<Vec<Value>> {
    column_values(batches, column)
}
