//! Before anything changes: the plan for a batch, the values that select each step's rows
//! (attributed to the requests that own them), each request's case file, and the preflight
//! that refuses blocked or INCOMPLETE plans.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::RecordBatch;
use chrono::Utc;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::{bytes_to_rewrite, select_rows};
use lethe_iceberg::predicate::{Predicate, Value};
use lethe_iceberg::table::{LoadedTable, Warehouse};

use super::journal::{Journal, JournalStep, batch_id, save_journal};
use super::{EraseOptions, durable_step};
use crate::erasure::case::{CaseFile, RequestSpec, ValueTrace, write_case};
use crate::erasure::plan::{self, Action, Inventory, Plan, Step};
use crate::erasure::register::RegisterKey;
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::governance::identifiers::path_texts;
use crate::governance::subjects::{Subject, SubjectRef};
use crate::workspace::Workspace;

/// Values by label, each with the indexes of the requests that own it.
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

/// A selection of a table's rows: the table, the column, and the values' keys (sorted, each
/// once).
type Selection = (String, String, Vec<String>);

/// The rows preparing an erasure reads, each selection read once: every table is loaded once
/// and every `column IN values` selection of a table read once, however many of the
/// resolution's parts ask for it (the root table is read for its identifying values and for
/// its own step's row counts; a key label's table for the label and for its step). All reads
/// are of the tables' current snapshots before anything changes, so a second read of the
/// same selection could only return the same rows.
#[derive(Default)]
struct Reads {
    tables: HashMap<String, Arc<LoadedTable>>,
    rows: HashMap<Selection, Arc<Vec<RecordBatch>>>,
    /// Selections being read in the background ([`Reads::start`]), taken when first asked for.
    pending: HashMap<Selection, tokio::task::JoinHandle<Result<Vec<RecordBatch>>>>,
    /// Selections read from storage, per table.
    counts: BTreeMap<String, usize>,
}

impl Drop for Reads {
    /// Background reads nobody asked for (preparing failed, or their values turned out
    /// otherwise) stop with the preparation instead of running on.
    fn drop(&mut self) {
        for task in self.pending.values() {
            task.abort();
        }
    }
}

impl Reads {
    /// The table as loaded (once).
    async fn table(&mut self, wh: &Warehouse, table: &str) -> Result<Arc<LoadedTable>> {
        if let Some(t) = self.tables.get(table) {
            return Ok(t.clone());
        }
        let t = Arc::new(wh.load(&TableName::parse(table)?).await?);
        self.tables.insert(table.to_string(), t.clone());
        Ok(t)
    }

    /// The key of the selection `column IN values` of `table`.
    fn key(table: &str, column: &str, values: &[Value]) -> Selection {
        let mut set: Vec<String> = values.iter().map(key_of).collect();
        set.sort();
        set.dedup();
        (table.to_string(), column.to_string(), set)
    }

    /// Starts reading every selection (`table`, `column`, `values`) of `wants` not read or
    /// being read yet, each as a task of its own, and returns: the reads run in the background
    /// while the caller goes on (resolving the labels that need other tables' rows first), and
    /// [`Reads::select`] or [`Reads::prefetch`] take them when they ask for them. A selection
    /// started but never asked for (its values turned out otherwise) is still counted as read.
    async fn start(
        &mut self,
        wh: &Warehouse,
        wants: &[(String, String, Vec<Value>)],
    ) -> Result<()> {
        for (table, column, values) in wants {
            let key = Self::key(table, column, values);
            if values.is_empty() || self.rows.contains_key(&key) || self.pending.contains_key(&key)
            {
                continue;
            }
            let t = self.table(wh, table).await?;
            *self.counts.entry(key.0.clone()).or_default() += 1;
            let (wh, predicate) = (wh.clone(), Predicate::is_in(column.clone(), values.clone()));
            let task = tokio::spawn(async move { Ok(select_rows(&wh, &t, &predicate).await?) });
            self.pending.insert(key, task);
        }
        Ok(())
    }

    /// The rows of a selection started in the background, once read; None if it wasn't started.
    async fn take(&mut self, key: &Selection) -> Result<Option<Arc<Vec<RecordBatch>>>> {
        let Some(task) = self.pending.remove(key) else {
            return Ok(None);
        };
        let rows = task.await.map_err(|e| match e.try_into_panic() {
            Ok(p) => std::panic::resume_unwind(p),
            Err(e) => Error::Internal(format!("a read of the erasure ended: {e}")),
        })??;
        let rows = Arc::new(rows);
        self.rows.insert(key.clone(), rows.clone());
        Ok(Some(rows))
    }

    /// Reads every selection (`table`, `column`, `values`) of `wants` not read yet, each as a
    /// task of its own ([`Reads::start`]; the runtime's workers, one per core, run them): they
    /// are reads of the current snapshots, independent of one another, and decoding a table's
    /// matching files is CPU work one task would do on one core. [`Reads::select`] then finds
    /// them read.
    async fn prefetch(
        &mut self,
        wh: &Warehouse,
        wants: &[(String, String, Vec<Value>)],
    ) -> Result<()> {
        self.start(wh, wants).await?;
        for (table, column, values) in wants {
            self.take(&Self::key(table, column, values)).await?;
        }
        Ok(())
    }

    /// The bytes of the files a copy-on-write step selecting `column IN values` of `table`
    /// rewrites ([`bytes_to_rewrite`]: from what [`Reads::prefetch`] already read).
    async fn bytes_holding(
        &mut self,
        wh: &Warehouse,
        table: &str,
        column: &str,
        values: &[Value],
    ) -> Result<u64> {
        if values.is_empty() {
            return Ok(0);
        }
        let t = self.table(wh, table).await?;
        let predicate = Predicate::is_in(column.to_string(), values.to_vec());
        Ok(bytes_to_rewrite(wh, &t, &predicate).await?)
    }

    /// The live rows of `table` with `column IN values` (read once per distinct set).
    async fn select(
        &mut self,
        wh: &Warehouse,
        table: &str,
        column: &str,
        values: &[Value],
    ) -> Result<(Arc<LoadedTable>, Arc<Vec<RecordBatch>>)> {
        let t = self.table(wh, table).await?;
        let key = Self::key(table, column, values);
        if let Some(rows) = self.rows.get(&key) {
            return Ok((t, rows.clone()));
        }
        if let Some(rows) = self.take(&key).await? {
            return Ok((t, rows));
        }
        let rows = Arc::new(
            select_rows(
                wh,
                &t,
                &Predicate::is_in(column.to_string(), values.to_vec()),
            )
            .await?,
        );
        *self.counts.entry(table.to_string()).or_default() += 1;
        self.rows.insert(key, rows.clone());
        Ok((t, rows))
    }
}

/// Resolves every label's values with the requests they belong to.
async fn resolve_attributed(
    ws: &Workspace,
    reads: &mut Reads,
    gov: &Governance,
    subject: &Subject,
    p: &Plan,
    ids: &[Value],
) -> Result<Attributed> {
    let wh = &ws.warehouse;
    let (_, root_column) = subject.root()?;
    let mut out: Attributed = BTreeMap::new();
    let root = out.entry(root_column.clone()).or_default();
    for (i, id) in ids.iter().enumerate() {
        root.entry(key_of(id))
            .or_insert_with(|| (id.clone(), BTreeSet::new()))
            .1
            .insert(i);
    }
    let root_values: Vec<Value> = root.values().map(|(v, _)| v.clone()).collect();
    let mapped: Vec<_> = subject
        .mapped
        .iter()
        .map(|m| (m.via.clone(), root_column.clone(), root_values.clone()))
        .collect();
    // Each follow reads the root label's values, unless a mapped column adds to it.
    if subject.mapped.iter().all(|m| m.column != root_column) {
        reads.prefetch(wh, &mapped).await?;
    }
    for m in &subject.mapped {
        follow(
            wh,
            reads,
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
        crate::governance::identifiers::resolve_labels(wh, gov, &p.subject, &wanted, &sources)
            .await?
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
            follow(wh, reads, &mut out, table, col, src_label, key, label).await?;
            progressed = true;
        }
        if !progressed {
            break;
        }
    }
    Ok(out)
}

/// Follows one table: rows selected by `col IN values(src_label)`, attributing the values of
/// `target_col` to the requests that own the selecting value.
#[allow(clippy::too_many_arguments)]
async fn follow(
    wh: &Warehouse,
    reads: &mut Reads,
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
    let (_, rows) = reads.select(wh, table, col, &values).await?;
    for b in rows.iter() {
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

fn column_values_aligned(
    b: &arrow::array::RecordBatch,
    column: &str,
) -> Result<Vec<Option<Value>>> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::DataType;
    let c = crate::governance::identifiers::column_array(b, column)
        .ok_or_else(|| Error::invalid(format!("no column `{column}`")))?;
    let c = &c;
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

/// The outcome of planning an erasure.
pub(super) enum Planned {
    /// A dry run: the journal as it would be, nothing written.
    DryRun(Box<Journal>),
    /// The journal, written with the case files, and each step's cost ([`Prepared::costs`]).
    Journal(Box<Journal>, Vec<u64>),
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
    /// How many selections of each table's rows were read from storage while preparing
    /// (each distinct `column IN values` selection once, however often it is asked for).
    pub reads: BTreeMap<String, usize>,
    /// Per journal step, the bytes of the data files it rewrites as the tables are now (0 for
    /// steps that select no rows): what the erasure schedules its steps by.
    pub costs: Vec<u64>,
}

/// Plans, resolves values and collects every request's traces. Reads only; refuses nothing
/// (the erasure's refusals are in [`super::erase`]). Without a key, case files carry no hash.
pub async fn prepare(
    ws: &Workspace,
    gov: &Governance,
    requests: &[RequestSpec],
    key: Option<&RegisterKey>,
    progress: &dyn Fn(&str),
) -> Result<Prepared> {
    let subject_name = &requests[0].subject;
    if requests.iter().any(|r| &r.subject != subject_name) {
        return Err(Error::invalid(
            "a batch erases subjects of one kind; split the file by subject name",
        ));
    }
    let subject = gov.subjects.get(subject_name)?.clone();
    progress("planning");
    let mut reads = Reads::default();
    let (mut p, ids) = plan_requests(ws, &mut reads, gov, &subject, requests).await?;
    progress("resolving the subject's values");
    // The steps selected by the subjects' own IDs read in the background while the labels
    // found through other tables' rows are resolved: their values are the IDs already, unless
    // a mapped identifier adds to the root label (a started read whose values then differ is
    // not used).
    let (root_table, root_column) = subject.root()?;
    if subject.mapped.iter().all(|m| m.column != root_column) {
        let mut by_id: Vec<(String, String, Vec<Value>)> = p
            .steps
            .iter()
            .filter(|s| s.label.as_deref() == Some(root_column.as_str()))
            .filter_map(|s| Some((s.table.clone(), s.column.clone()?, ids.clone())))
            .collect();
        // First the tables whose rows name a key label (`table.column`): resolving waits for
        // them, the others only at the end.
        let keyed = |t: &str| {
            p.steps.iter().any(|s| {
                s.label
                    .as_deref()
                    .and_then(|l| l.rsplit_once('.'))
                    .is_some_and(|(lt, _)| lt == t)
            })
        };
        by_id.sort_by_key(|(t, ..)| !keyed(t));
        reads.start(&ws.warehouse, &by_id).await?;
    }
    let attributed = resolve_attributed(ws, &mut reads, gov, &subject, &p, &ids).await?;
    let flat: BTreeMap<String, Vec<Value>> = attributed
        .iter()
        .map(|(l, m)| (l.clone(), m.values().map(|(v, _)| v.clone()).collect()))
        .collect();
    p.fill_values(
        &flat,
        &subject.mapped.iter().map(|m| m.column.clone()).collect(),
    );
    // The root rows and every step's rows, read at once before they are looked at.
    let mut wants = vec![(root_table, root_column, ids.clone())];
    for s in &p.steps {
        if let (Some(col), Some(_)) = (&s.column, &s.label) {
            wants.push((s.table.clone(), col.clone(), step_values(s, &flat)));
        }
    }
    reads.prefetch(&ws.warehouse, &wants).await?;
    let mut cases = new_cases(&p, requests, key);
    trace_ids(&p, &attributed, &mut cases);
    trace_root_values(ws, &mut reads, &subject, &ids, &mut cases).await?;
    let steps = journal_steps(ws, &mut reads, &p, &flat, &attributed, &mut cases).await?;
    let mut costs = Vec::with_capacity(steps.len());
    for s in &steps {
        costs.push(match &s.column {
            Some(col) if matches!(s.action, Action::Delete | Action::Rewrite) => {
                reads
                    .bytes_holding(&ws.warehouse, &s.table, col, &s.values)
                    .await?
            }
            _ => 0,
        });
    }
    for c in &mut cases {
        c.values.sort();
        c.values.dedup();
        for cols in c.value_columns.values_mut() {
            cols.sort();
            cols.dedup();
        }
    }
    Ok(Prepared {
        plan: p,
        steps,
        cases,
        reads: std::mem::take(&mut reads.counts),
        costs,
    })
}

/// The plan for a batch of one subject kind, and the subjects' identifiers typed by the root
/// column. The lineage window starts at the batch's earliest first record: a superset of every
/// subject's edges.
async fn plan_requests(
    ws: &Workspace,
    reads: &mut Reads,
    gov: &Governance,
    subject: &Subject,
    requests: &[RequestSpec],
) -> Result<(Plan, Vec<Value>)> {
    let wh = &ws.warehouse;
    let inv = Inventory::load(wh).await?;
    // The tables as the inventory loaded them: nothing has changed since.
    reads
        .tables
        .extend(inv.loaded.iter().map(|(n, t)| (n.clone(), t.clone())));
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
    let since = match subject.first_seen {
        Some(_) => {
            let (root_table, root_column) = subject.root()?;
            let (t, rows) = reads.select(wh, &root_table, &root_column, &ids).await?;
            plan::first_seen_in(subject, &t, &ids, &rows)?
        }
        None => None,
    };
    let p = plan::plan(
        &inv,
        gov,
        &graph,
        &requests[0].subject,
        since,
        &crate::pipeline::names(ws)?,
    )?;
    Ok((p, ids))
}

/// An empty case file per request, with its register hash and the plan's exempt tables.
fn new_cases(p: &Plan, requests: &[RequestSpec], key: Option<&RegisterKey>) -> Vec<CaseFile> {
    requests
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
        .collect()
}

/// The ID traces: every value that selects a step's rows, in the case of each request that
/// owns it, by the step's column.
fn trace_ids(p: &Plan, attributed: &Attributed, cases: &mut [CaseFile]) {
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
}

/// The identifying values (subjects.toml `values`, nested paths too: every list element and
/// map value) of each subject's root rows; each case records the columns read.
async fn trace_root_values(
    ws: &Workspace,
    reads: &mut Reads,
    subject: &Subject,
    ids: &[Value],
    cases: &mut [CaseFile],
) -> Result<()> {
    let wh = &ws.warehouse;
    let (root_table, root_column) = subject.root()?;
    let (t, rows) = reads.select(wh, &root_table, &root_column, ids).await?;
    let schema = t.metadata.current_schema().clone();
    for c in cases.iter_mut() {
        c.value_columns
            .entry(root_table.clone())
            .or_default()
            .extend(subject.values.iter().cloned());
    }
    for b in rows.iter() {
        let owners = column_values_aligned(b, &root_column)?;
        for col in &subject.values {
            let vals = path_texts(b, &schema, col)
                .map_err(|e| Error::invalid(format!("{root_table}: {e}")))?;
            for (o, vs) in owners.iter().zip(vals) {
                let Some(i) = o.as_ref().and_then(|o| ids.iter().position(|x| x == o)) else {
                    continue;
                };
                for v in vs {
                    if !v.trim().is_empty() {
                        cases[i].values.push(ValueTrace {
                            kind: col.clone(),
                            value: v,
                        });
                    }
                }
            }
        }
    }
    Ok(())
}

/// The values that select step `s`'s rows.
fn step_values(s: &Step, flat: &BTreeMap<String, Vec<Value>>) -> Vec<Value> {
    s.label
        .as_ref()
        .and_then(|l| flat.get(l))
        .cloned()
        .unwrap_or_default()
}

/// The journal's steps with their resolved values; on the way, each request's rows per table
/// and the old values of the columns an exception's REWRITE erases.
async fn journal_steps(
    ws: &Workspace,
    reads: &mut Reads,
    p: &Plan,
    flat: &BTreeMap<String, Vec<Value>>,
    attributed: &Attributed,
    cases: &mut [CaseFile],
) -> Result<Vec<JournalStep>> {
    let mut steps = Vec::new();
    for s in &p.steps {
        let values = step_values(s, flat);
        if let (Some(col), Some(label)) = (&s.column, &s.label) {
            let att = attributed.get(label).cloned().unwrap_or_default();
            count_rows_and_erased(ws, reads, s, col, &values, &att, cases).await?;
        }
        steps.push(JournalStep {
            table: s.table.clone(),
            action: s.action,
            column: s.column.clone(),
            values: values.clone(),
            erase_columns: s.erase_columns.clone(),
            pipeline: s.pipeline.clone(),
            done: false,
            snapshot_id: None,
            rows: 0,
            selected_by: values.len(),
            started_at: None,
            finished_at: None,
            held: s.held.clone(),
            recompute: None,
        });
    }
    Ok(steps)
}

/// Reads the rows step `s` selects by `col IN values`: counts them per owning request and, for
/// a REWRITE, keeps the old values of its erased columns as traces.
async fn count_rows_and_erased(
    ws: &Workspace,
    reads: &mut Reads,
    s: &Step,
    col: &str,
    values: &[Value],
    att: &BTreeMap<String, (Value, BTreeSet<usize>)>,
    cases: &mut [CaseFile],
) -> Result<()> {
    if values.is_empty() {
        return Ok(());
    }
    let (t, rows) = reads.select(&ws.warehouse, &s.table, col, values).await?;
    let schema = t.metadata.current_schema().clone();
    if s.action == Action::Rewrite {
        for c in cases.iter_mut() {
            c.value_columns
                .entry(s.table.clone())
                .or_default()
                .extend(s.erase_columns.iter().cloned());
        }
    }
    for b in rows.iter() {
        let sel = column_values_aligned(b, col)?;
        let mut erased: Vec<(String, Vec<Vec<String>>)> = Vec::new();
        if s.action == Action::Rewrite {
            for ec in &s.erase_columns {
                let vals = path_texts(b, &schema, ec)
                    .map_err(|e| Error::invalid(format!("{}: {e}", s.table)))?;
                erased.push((ec.clone(), vals));
            }
        }
        for (row, v) in sel.iter().enumerate() {
            let Some(v) = v else { continue };
            for o in att.get(&key_of(v)).map(|x| x.1.clone()).unwrap_or_default() {
                *cases[o].rows.entry(s.table.clone()).or_default() += 1;
                for (ec, vals) in &erased {
                    for old in vals.get(row).into_iter().flatten() {
                        if old.trim().is_empty() {
                            continue;
                        }
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
    Ok(())
}

/// The received and due days of `requests` from their records (the earliest of each over a
/// batch); a request without a record is received on `day` and due a month later.
fn request_clock(
    ws: &Workspace,
    requests: &[RequestSpec],
    day: chrono::NaiveDate,
) -> Result<(chrono::NaiveDate, chrono::NaiveDate)> {
    let records = crate::requests::Requests::in_state(&ws.config.paths.state);
    let mut received: Option<chrono::NaiveDate> = None;
    let mut due: Option<chrono::NaiveDate> = None;
    for r in requests {
        let (rec, d) = match records.find(&r.request)? {
            Some(x) => (x.received, x.due),
            None => (day, crate::requests::deadline::due(day, 0)?),
        };
        received = Some(received.map_or(rec, |x| x.min(rec)));
        due = Some(due.map_or(d, |x| x.min(d)));
    }
    Ok((received.unwrap_or(day), due.unwrap_or(day)))
}

/// The preflight, then durable step 1: refuses blocked or (unless accepted) INCOMPLETE plans
/// before anything is written; writes the case files, then the journal.
pub(super) async fn plan_erasure(
    ws: &Workspace,
    gov: &Governance,
    requests: &[RequestSpec],
    opts: &EraseOptions,
    key: &RegisterKey,
    day: chrono::NaiveDate,
    progress: &dyn Fn(&str),
) -> Result<Planned> {
    let Prepared {
        plan: mut p,
        mut steps,
        cases,
        costs,
        ..
    } = prepare(ws, gov, requests, Some(key), progress).await?;
    // Legal holds in force on the day: their steps are HELD, the rest is carried out.
    let tables: Vec<String> = ws
        .warehouse
        .tables()
        .await?
        .iter()
        .map(|t| t.to_string())
        .collect();
    let held = crate::erasure::holds::holds_in_force(ws, gov, requests, day, &tables)?;
    crate::erasure::holds::mark(&mut p, &held.tables);
    for (js, ps) in steps.iter_mut().zip(&p.steps) {
        js.held = ps.held.clone();
    }
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
    let received = Utc::now();
    // The request's clock (its record: received, due after extensions); a batch answers by
    // its earliest due day.
    let (received_day, due) = request_clock(ws, requests, day)?;
    let mut store_plan = super::stores::plan_stores(ws, gov, &p, received_day, due).await?;
    super::stores::mark_held(&mut store_plan.steps, &held.stores, &held.tables);
    if !store_plan.blockers.is_empty() {
        let mut msg = String::from(
            "the erasure can't start: these stores would keep the subject past the request's deadline",
        );
        for (s, why) in &store_plan.blockers {
            msg.push_str(&format!("\n  store {s}: {why}"));
        }
        msg.push_str("\nnothing was changed; register a delete mechanism, a shorter retention or a basis in governance/stores.toml");
        return Err(Error::Refused(msg));
    }
    let min_age = match opts.min_age {
        Some(d) => d,
        None => gov.retention.min_file_age(),
    };
    let mut journal = Journal {
        batch: batch_id(requests),
        requests: requests.to_vec(),
        started_at: received.to_rfc3339(),
        plan: Some(p.for_journal()),
        case_hashes: BTreeMap::new(),
        registered: false,
        steps,
        cleanup: BTreeMap::new(),
        min_age_seconds: min_age.num_seconds(),
        stores: store_plan.steps,
        deadline: Some(due.to_string()),
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
    Ok(Planned::Journal(Box::new(journal), costs))
}
