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

use super::journal::{Journal, JournalStep, SelectBy, batch_id, save_journal, selection_predicate};
use super::{EraseOptions, durable_step};
use crate::erasure::case::{CaseFile, RequestSpec, ValueTrace, write_cases};
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

/// A selection of a table's rows: the table, and each selecting column with its values' keys
/// (sorted, each once).
type Selection = (String, Vec<(String, Vec<String>)>);

/// The columns that select rows, each with its values: a row any of them selects is selected.
type Sels = Vec<(String, Vec<Value>)>;

/// The predicate of a selection ([`selection_predicate`]).
fn predicate_of(sels: &Sels) -> Predicate {
    selection_predicate(sels.iter().map(|(c, v)| (c.as_str(), v.as_slice())))
        .unwrap_or(Predicate::Or(Vec::new()))
}

/// The rows preparing an erasure reads, each selection read once: every table is loaded once
/// and every selection (`column IN values`, OR-ed over its columns) of a table read once,
/// however many of the
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

    /// The key of the selection `sels` of `table`.
    fn key(table: &str, sels: &Sels) -> Selection {
        let cols = sels
            .iter()
            .map(|(c, values)| {
                let mut set: Vec<String> = values.iter().map(key_of).collect();
                set.sort();
                set.dedup();
                (c.clone(), set)
            })
            .collect();
        (table.to_string(), cols)
    }

    /// Starts reading every selection (`table`, selecting columns) of `wants` not read or
    /// being read yet, each as a task of its own, and returns: the reads run in the background
    /// while the caller goes on (resolving the labels that need other tables' rows first), and
    /// [`Reads::select`] or [`Reads::prefetch`] take them when they ask for them. A selection
    /// started but never asked for (its values turned out otherwise) is still counted as read.
    async fn start(&mut self, wh: &Warehouse, wants: &[(String, Sels)]) -> Result<()> {
        for (table, sels) in wants {
            let key = Self::key(table, sels);
            if sels.iter().all(|(_, v)| v.is_empty())
                || self.rows.contains_key(&key)
                || self.pending.contains_key(&key)
            {
                continue;
            }
            let t = self.table(wh, table).await?;
            *self.counts.entry(key.0.clone()).or_default() += 1;
            let (wh, predicate) = (wh.clone(), predicate_of(sels));
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

    /// Reads every selection (`table`, selecting columns) of `wants` not read yet, each as a
    /// task of its own ([`Reads::start`]; the runtime's workers, one per core, run them): they
    /// are reads of the current snapshots, independent of one another, and decoding a table's
    /// matching files is CPU work one task would do on one core. [`Reads::select`] then finds
    /// them read.
    async fn prefetch(&mut self, wh: &Warehouse, wants: &[(String, Sels)]) -> Result<()> {
        self.start(wh, wants).await?;
        for (table, sels) in wants {
            self.take(&Self::key(table, sels)).await?;
        }
        Ok(())
    }

    /// The bytes of the files a copy-on-write step selecting `sels` of `table` rewrites
    /// ([`bytes_to_rewrite`]: from what [`Reads::prefetch`] already read).
    async fn bytes_holding(&mut self, wh: &Warehouse, table: &str, sels: &Sels) -> Result<u64> {
        if sels.iter().all(|(_, v)| v.is_empty()) {
            return Ok(0);
        }
        let t = self.table(wh, table).await?;
        Ok(bytes_to_rewrite(wh, &t, &predicate_of(sels)).await?)
    }

    /// The live rows of `table` that `sels` selects (read once per distinct selection).
    async fn select(
        &mut self,
        wh: &Warehouse,
        table: &str,
        sels: &Sels,
    ) -> Result<(Arc<LoadedTable>, Arc<Vec<RecordBatch>>)> {
        let t = self.table(wh, table).await?;
        let key = Self::key(table, sels);
        if let Some(rows) = self.rows.get(&key) {
            return Ok((t, rows.clone()));
        }
        if let Some(rows) = self.take(&key).await? {
            return Ok((t, rows));
        }
        let rows = Arc::new(select_rows(wh, &t, &predicate_of(sels)).await?);
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
    let mapped: Vec<(String, Sels)> = subject
        .mapped
        .iter()
        .map(|m| {
            (
                m.via.clone(),
                vec![(root_column.clone(), root_values.clone())],
            )
        })
        .collect();
    // Each follow reads the root label's values, unless a mapped column adds to it.
    if subject.mapped.iter().all(|m| m.column != root_column) {
        reads.prefetch(wh, &mapped).await?;
    }
    for m in &subject.mapped {
        let by = [(root_column.clone(), root_column.clone())];
        follow(wh, reads, &mut out, &m.via, &by, &m.column, &m.column).await?;
    }
    let labels: BTreeSet<String> = p
        .steps
        .iter()
        .flat_map(|s| s.selectors().into_iter().map(|(_, l)| l.to_string()))
        .collect();
    // Derived identifiers: the values their pattern selects (or their transform makes), owned
    // by whoever owns the value they embed.
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
    resolve_keys(wh, reads, p, &labels, &mut out).await?;
    Ok(out)
}

/// Key labels (`table.key`: the keys of rows the subject owns in `table`), read from the rows
/// the table's step selects. They can depend on each other (a key of a table found by
/// another key): resolved in plan order until nothing changes, each once every label its
/// table is selected by is known; a label left waiting on a circle of keys is then resolved
/// from the labels known.
async fn resolve_keys(
    wh: &Warehouse,
    reads: &mut Reads,
    p: &Plan,
    labels: &BTreeSet<String>,
    out: &mut Attributed,
) -> Result<()> {
    // Strict passes while they progress; when none does, one pass that takes the labels
    // known (each pass resolves at least one label or ends).
    let mut partial = false;
    loop {
        let mut progressed = false;
        for label in labels {
            if out.contains_key(label) {
                continue;
            }
            let Some((table, key)) = label.rsplit_once('.') else {
                continue;
            };
            let Some(source) = p.steps.iter().find(|s| s.table == table) else {
                continue;
            };
            let by: Vec<(String, String)> = source
                .selectors()
                .into_iter()
                .filter(|(_, l)| l != label)
                .map(|(c, l)| (c.to_string(), l.to_string()))
                .collect();
            let known = by.iter().filter(|(_, l)| out.contains_key(l)).count();
            if known == 0 || (known < by.len() && !partial) {
                continue;
            }
            let by: Vec<(String, String)> = by
                .into_iter()
                .filter(|(_, l)| out.contains_key(l))
                .collect();
            follow(wh, reads, out, table, &by, key, label).await?;
            progressed = true;
        }
        match (progressed, partial) {
            (true, _) => partial = false,
            (false, false) => partial = true,
            (false, true) => break,
        }
    }
    Ok(())
}

/// Follows one table: rows selected by any `(column, label)` of `by` (`column IN
/// values(label)`), attributing the values of `target_col` to the requests that own a
/// selecting value of the row.
async fn follow(
    wh: &Warehouse,
    reads: &mut Reads,
    out: &mut Attributed,
    table: &str,
    by: &[(String, String)],
    target_col: &str,
    target_label: &str,
) -> Result<()> {
    let srcs: Vec<BTreeMap<String, (Value, BTreeSet<usize>)>> = by
        .iter()
        .map(|(_, l)| out.get(l).cloned().unwrap_or_default())
        .collect();
    let sels: Sels = by
        .iter()
        .zip(&srcs)
        .map(|((c, _), src)| (c.clone(), src.values().map(|(v, _)| v.clone()).collect()))
        .collect();
    if sels
        .iter()
        .all(|(_, v): &(String, Vec<Value>)| v.is_empty())
    {
        out.entry(target_label.to_string()).or_default();
        return Ok(());
    }
    let (_, rows) = reads.select(wh, table, &sels).await?;
    for b in rows.iter() {
        let tgt = column_values_aligned(b, target_col)?;
        let mut owners: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); b.num_rows()];
        for ((c, _), src) in by.iter().zip(&srcs) {
            for (row, v) in column_values_aligned(b, c)?.into_iter().enumerate() {
                if let Some(o) = v.and_then(|v| src.get(&key_of(&v))) {
                    owners[row].extend(o.1.iter().copied());
                }
            }
        }
        for (t, o) in tgt.into_iter().zip(owners) {
            let Some(t) = t else { continue };
            let e = out
                .entry(target_label.to_string())
                .or_default()
                .entry(key_of(&t))
                .or_insert_with(|| (t.clone(), BTreeSet::new()));
            e.1.extend(o);
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
    prepare_drawn(ws, gov, requests, key, false, progress).await
}

/// [`prepare`], with the plan's lineage subgraph drawn as DOT (`Plan::dot`) when `draw` is set.
pub async fn prepare_drawn(
    ws: &Workspace,
    gov: &Governance,
    requests: &[RequestSpec],
    key: Option<&RegisterKey>,
    draw: bool,
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
    let (mut p, ids) = plan_requests(ws, &mut reads, gov, &subject, requests, draw).await?;
    progress("resolving the subject's values");
    // The steps selected by the subjects' own IDs read in the background while the labels
    // found through other tables' rows are resolved: their values are the IDs already, unless
    // a mapped identifier adds to the root label (a started read whose values then differ is
    // not used).
    let (root_table, root_column) = subject.root()?;
    if subject.mapped.iter().all(|m| m.column != root_column) {
        let mut by_id: Vec<(String, Sels)> = p
            .steps
            .iter()
            .filter(|s| {
                let sel = s.selectors();
                !sel.is_empty() && sel.iter().all(|(_, l)| *l == root_column)
            })
            .map(|s| {
                let sels = s
                    .selectors()
                    .into_iter()
                    .map(|(c, _)| (c.to_string(), ids.clone()))
                    .collect();
                (s.table.clone(), sels)
            })
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
    let mut wants = vec![(root_table, vec![(root_column, ids.clone())])];
    for s in &p.steps {
        let sels = step_selection(s, &flat);
        if !sels.is_empty() {
            wants.push((s.table.clone(), sels));
        }
    }
    reads.prefetch(&ws.warehouse, &wants).await?;
    let mut cases = new_cases(&p, requests, key);
    trace_ids(&p, &attributed, &mut cases);
    trace_root_values(ws, &mut reads, &subject, &ids, &mut cases).await?;
    let mut steps = journal_steps(ws, &mut reads, &p, &flat, &attributed, &mut cases).await?;
    progress("counting the subjects' rows by another reader (the logical check)");
    count_independently(ws, gov, &subject_name.clone(), &mut steps, &mut cases).await?;
    let mut costs = Vec::with_capacity(steps.len());
    for s in &steps {
        let sels: Sels = s
            .selections()
            .into_iter()
            .map(|(c, v)| (c.to_string(), v.to_vec()))
            .collect();
        costs.push(match s.action {
            Action::Delete | Action::Rewrite if !sels.is_empty() => {
                reads.bytes_holding(&ws.warehouse, &s.table, &sels).await?
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
    draw: bool,
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
            let (t, rows) = reads
                .select(wh, &root_table, &vec![(root_column, ids.clone())])
                .await?;
            plan::first_seen_in(subject, &t, &ids, &rows)?
        }
        None => None,
    };
    let p = plan::plan_drawn(
        &inv,
        gov,
        &graph,
        &requests[0].subject,
        since,
        &crate::pipeline::names(ws)?,
        draw,
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
/// owns it, by each column that selects them (and, per table, as the columns that address
/// the subject there, for the logical check). A text ID long and distinctive enough (see
/// [`crate::erasure::case::id_as_text`]) is also a value trace: a copy of it under another
/// column's name, or inside text, is found too.
fn trace_ids(p: &Plan, attributed: &Attributed, cases: &mut [CaseFile]) {
    for s in &p.steps {
        for (col, label) in s.selectors() {
            let Some(vals) = attributed.get(label) else {
                continue;
            };
            for (v, owners) in vals.values() {
                let t = text_of(v);
                for o in owners {
                    let c = &mut cases[*o];
                    let ids = c.ids.entry(col.to_string()).or_default();
                    if !ids.contains(&t) {
                        ids.push(t.clone());
                    }
                    let here = c
                        .addressing
                        .entry(s.table.clone())
                        .or_default()
                        .entry(col.to_string())
                        .or_default();
                    if !here.contains(&t) {
                        here.push(t.clone());
                    }
                    if let Value::Str(text) = v
                        && let Some(tr) = crate::erasure::case::id_as_text(col, text)
                        && !c.values.contains(&tr)
                    {
                        c.values.push(tr);
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
    let (t, rows) = reads
        .select(wh, &root_table, &vec![(root_column.clone(), ids.to_vec())])
        .await?;
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

/// The values of a label.
fn label_values(label: &str, flat: &BTreeMap<String, Vec<Value>>) -> Vec<Value> {
    flat.get(label).cloned().unwrap_or_default()
}

/// The columns that select step `s`'s rows, each with its values.
fn step_selection(s: &Step, flat: &BTreeMap<String, Vec<Value>>) -> Sels {
    s.selectors()
        .into_iter()
        .map(|(c, l)| (c.to_string(), label_values(l, flat)))
        .collect()
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
        let sels = step_selection(s, flat);
        if !sels.is_empty() {
            let atts: Vec<BTreeMap<String, (Value, BTreeSet<usize>)>> = s
                .selectors()
                .into_iter()
                .map(|(_, l)| attributed.get(l).cloned().unwrap_or_default())
                .collect();
            count_rows_and_erased(ws, reads, s, &sels, &atts, cases).await?;
        }
        let values = s
            .label
            .as_deref()
            .map(|l| label_values(l, flat))
            .unwrap_or_default();
        let also: Vec<SelectBy> = s
            .also
            .iter()
            .map(|a| SelectBy {
                column: a.column.clone(),
                values: label_values(&a.label, flat),
            })
            .collect();
        let selected_by = values.len() + also.iter().map(|a| a.values.len()).sum::<usize>();
        steps.push(JournalStep {
            table: s.table.clone(),
            action: s.action,
            column: s.column.clone(),
            values,
            also,
            erase_columns: s.erase_columns.clone(),
            pipeline: s.pipeline.clone(),
            done: false,
            snapshot_id: None,
            rows: 0,
            selected_by,
            started_at: None,
            finished_at: None,
            held: s.held.clone(),
            recompute: None,
            checked_rows: None,
            history: s.history.clone(),
            twins: Vec::new(),
            runs: Vec::new(),
        });
    }
    Ok(steps)
}

/// Reads the rows step `s` selects (`sels`, each column's values owned as `atts` says):
/// counts them per owning request (a row once, whichever columns select it) and, for a
/// REWRITE, keeps the old values of its erased columns as traces.
async fn count_rows_and_erased(
    ws: &Workspace,
    reads: &mut Reads,
    s: &Step,
    sels: &Sels,
    atts: &[BTreeMap<String, (Value, BTreeSet<usize>)>],
    cases: &mut [CaseFile],
) -> Result<()> {
    if sels.iter().all(|(_, v)| v.is_empty()) {
        return Ok(());
    }
    let (t, rows) = reads.select(&ws.warehouse, &s.table, sels).await?;
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
        let mut owners: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); b.num_rows()];
        for ((col, _), att) in sels.iter().zip(atts) {
            for (row, v) in column_values_aligned(b, col)?.into_iter().enumerate() {
                if let Some(o) = v.and_then(|v| att.get(&key_of(&v))) {
                    owners[row].extend(o.1.iter().copied());
                }
            }
        }
        let mut erased: Vec<(String, Vec<Vec<String>>)> = Vec::new();
        if s.action == Action::Rewrite {
            for ec in &s.erase_columns {
                let vals = path_texts(b, &schema, ec)
                    .map_err(|e| Error::invalid(format!("{}: {e}", s.table)))?;
                erased.push((ec.clone(), vals));
            }
        }
        for (row, row_owners) in owners.iter().enumerate() {
            for &o in row_owners {
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

/// The logical check before anything changes ([`crate::erasure::logical`]): the rows of each
/// DELETE and REWRITE table's current snapshot that address a subject, counted by reading
/// every file whole and matching every addressing column, recorded beside the plan's own
/// counts (the step's `checked_rows`, each case's `checked_rows`), which must agree.
async fn count_independently(
    ws: &Workspace,
    gov: &Governance,
    subject: &str,
    steps: &mut [JournalStep],
    cases: &mut [CaseFile],
) -> Result<()> {
    use crate::erasure::logical::{Checked, Snapshots, check};
    let tables: Vec<Checked> = steps
        .iter()
        .filter(|s| matches!(s.action, Action::Delete | Action::Rewrite))
        .map(|s| Checked {
            table: s.table.clone(),
            erase_columns: Vec::new(),
        })
        .collect();
    for t in check(ws, gov, subject, cases, &tables, Snapshots::Current).await? {
        let current = t.current().cloned().unwrap_or_default();
        if let Some(s) = steps.iter_mut().find(|s| s.table == t.table) {
            s.checked_rows = Some(current.rows);
        }
        for c in cases.iter_mut() {
            let n = current.by_request.get(&c.request).copied().unwrap_or(0);
            if n > 0 || c.rows.contains_key(&t.table) {
                c.checked_rows.insert(t.table.clone(), n);
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
            "the erasure can't start: these tables' own settings would keep the subject after it, or lethe may not change them",
        );
        for (t, why) in &p.blocked {
            for w in why {
                msg.push_str(&format!("\n  {t}: {w}"));
            }
        }
        msg.push_str("\nnothing was changed; decide with the tables' owners, then run again — or keep their history readable without the subject: `history = \"rewrite\"` with a `reason` in governance/retention.toml's [snapshots] (for every table) or [snapshots.tables.\"ns.table\"] (a twin of every kept snapshot without the subject, refs moved to them)");
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
        grace_seconds: gov.retention.grace().num_seconds(),
        stores: store_plan.steps,
        deadline: Some(due.to_string()),
        logical: None,
        finished_at: None,
    };
    if opts.dry_run {
        return Ok(Planned::DryRun(Box::new(journal)));
    }
    // 1. Case files, then the journal: nothing is deleted before both are on disk.
    // One durable write for a batch's case files, not one per request.
    for (c, h) in cases.iter().zip(write_cases(ws, &cases)?) {
        journal.case_hashes.insert(c.request.clone(), h);
    }
    save_journal(ws, &journal)?;
    durable_step("planned");
    Ok(Planned::Journal(Box::new(journal), costs))
}
