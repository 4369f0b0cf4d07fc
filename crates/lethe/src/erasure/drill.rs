//! The erasure drill (`lethe drill`): the only way to know erasure still works when a new
//! table or store appears is to run it, every week, against a synthetic subject.
//!
//! One run: picks a synthetic subject in the reserved identifier range `subjects.toml`
//! declares (`[learner.drill] from = ..., to = ...`), writes one record of it into every
//! source table that carries the subject's identifier (a copy of the table's first row with
//! the identifier and the row key set to the synthetic ID and every personal, sensitive or
//! unclassified column set to a synthetic text or null, so no real person's value is copied)
//! and into every registered store of the subject's kind through the store's seeding hook
//! ([`crate::stores::Store::seed`]), runs every pipeline, then scans where the synthetic
//! subject's traces reached, plans, erases (the stores with it, in their order), verifies, and
//! checks the request's manifest: zero residual in every system. Then it removes what it
//! seeded and the erasure kept (a legal exception's REWRITE row, a tombstoned row, the drill's
//! own file or commit: [`crate::stores::Store::unseed`]) and its own records (request,
//! journal, case file, attestation, register entry) unless `--keep`.
//!
//! It fails, naming them, on: every registered store without a probe (`probe = "none"`, a
//! backup, a manual place: the drill can't show the subject is gone there); every store it
//! can't seed, or where the erasure found none of what it seeded, or that holds the synthetic
//! subject after the erasure; every catalog table no lineage accounts for and no declaration
//! names as a source (`lethe lineage unaccounted`: a table a job wrote without lineage); every
//! table the synthetic subject reached that no plan step covers; an erasure refused or
//! leaving traces (what remains, by table); every system whose time grew past the budget
//! (`step_budget_seconds`, default 300). It reports the time per system: seeding, the pipeline
//! that writes it, and its erasure step (the manifest's timings: a table's commit, a store's
//! deletes and probes).
//!
//! A store rebuilt from a source (`rebuilt_from`) is verified by lethe only after its next
//! rebuild; the drill counts it clean when its probe after the delete finds nothing, and notes
//! that it waits for the rebuild. A model (HAND_OFF) holds no records to seed: it is noted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, new_null_array};
use arrow::datatypes::DataType;
use chrono::{Duration, NaiveDate};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::predicate::{Predicate, Value};
use serde::Serialize;

use crate::erasure::case::RequestSpec;
use crate::erasure::erase::{EraseOptions, erase, prepare};
use crate::erasure::plan::{self, Action, Inventory};
use crate::erasure::register::{Register, RegisterKey, default_key_file};
use crate::error::{Error, Result};
use crate::governance::identifiers::identifier_columns;
use crate::governance::metadata::Classification;
use crate::stores::{Seeded, StoreKind};
use crate::workspace::Workspace;

/// Options of a drill.
#[derive(Debug, Clone, Default)]
pub struct DrillOptions {
    /// Keep the drill's records (request, journal, attestation, register entry) for review.
    pub keep: bool,
    /// The sweep's minimum file age (None: retention.toml's `[sweep]`).
    pub min_age: Option<Duration>,
    /// The day (holds, the request's received day); None: today.
    pub day: Option<NaiveDate>,
}

/// Time spent on one system.
#[derive(Debug, Clone, Serialize)]
pub struct SystemTime {
    /// The table (or pipeline target).
    pub system: String,
    /// Seconds seeding it.
    pub seed_seconds: f64,
    /// Seconds its pipeline ran.
    pub pipeline_seconds: f64,
    /// Seconds its erasure step took (the manifest's timing: a table's commit, a store's
    /// deletes and probes).
    pub erase_seconds: f64,
}

/// One store in the drill.
#[derive(Debug, Clone, Serialize)]
pub struct StoreDrill {
    /// The store's name in governance/stores.toml.
    pub store: String,
    /// Its kind.
    pub kind: String,
    /// Records its seeding hook wrote.
    pub seeded: u64,
    /// Records the erasure deleted there.
    pub deleted: u64,
    /// What its probe found after the erasure (None: not probed).
    pub residual: Option<u64>,
    /// Its state in the manifest.
    pub state: String,
    /// What the drill removed afterwards of what the erasure kept.
    pub removed_after: u64,
}

/// What a drill found.
#[derive(Debug, Clone, Serialize)]
pub struct DrillReport {
    /// The subject kind.
    pub subject: String,
    /// The synthetic ID used (in the reserved range).
    pub synthetic_id: i64,
    /// The drill's request ID.
    pub request: String,
    /// Rows seeded per table.
    pub seeded: BTreeMap<String, u64>,
    /// Tables the synthetic subject's traces reached before the erasure.
    pub reached: Vec<String>,
    /// Time per system.
    pub times: Vec<SystemTime>,
    /// The budget per system, in seconds.
    pub budget_seconds: f64,
    /// Stores outside the warehouse drilled.
    pub stores: Vec<StoreDrill>,
    /// What failed, each naming the table, store or step.
    pub failures: Vec<String>,
    /// What passed with a remark (a store waiting for its rebuild, a model handed off).
    pub notes: Vec<String>,
    /// The attestation's verdicts.
    pub verdict: Option<(String, String)>,
    /// Total seconds.
    pub seconds: f64,
}

impl DrillReport {
    /// Passed: nothing failed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Runs the drill for `subject`.
pub async fn drill(
    ws: &Workspace,
    subject_name: &str,
    opts: &DrillOptions,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<DrillReport> {
    let started = Instant::now();
    // Before anything is seeded: the erasure would refuse a future day after the seeding.
    crate::erasure::holds::judging_day(ws, opts.day)?;
    let gov = ws.governance()?;
    let subject = gov.subjects.get(subject_name)?.clone();
    let range = subject.drill.clone().ok_or_else(|| {
        gov.subjects.error_at(
            subject_name,
            format!(
                "subject `{subject_name}` has no reserved range for the drill: add [{subject_name}.drill] from = ..., to = ... (IDs no real subject will ever have)"
            ),
        )
    })?;
    let key = RegisterKey::load(default_key_file(ws).as_deref())?;
    let wh = &ws.warehouse;
    let inv = Inventory::load(wh).await?;
    let graph = plan::load_lineage(&ws.config.paths.lineage, &inv)?;
    let mut r = DrillReport {
        subject: subject_name.to_string(),
        synthetic_id: 0,
        request: String::new(),
        seeded: BTreeMap::new(),
        reached: Vec::new(),
        times: Vec::new(),
        budget_seconds: range.step_budget_seconds,
        stores: Vec::new(),
        failures: plan::unaccounted(&inv, &gov, &graph)
            .into_iter()
            .map(|t| {
                format!("{t}: no lineage accounts for this table and no declaration names it as a source (metadata.toml `source`): the drill can't say what it holds")
            })
            .collect(),
        notes: Vec::new(),
        verdict: None,
        seconds: 0.0,
    };
    // The registered stores of this subject: every one without a probe fails by name.
    let registry = crate::stores::registry::load(&gov.dir)?;
    let only = (gov.subjects.value.len() == 1)
        .then(|| gov.subjects.value.keys().next().cloned())
        .flatten();
    let mut drilled: Vec<(String, crate::stores::StoreConfig)> = Vec::new();
    for (name, c) in &registry.value.stores {
        if c.subject.clone().or_else(|| only.clone()).as_deref() != Some(subject_name) {
            continue;
        }
        if c.kind == StoreKind::Model {
            r.notes.push(format!(
                "store {name} (model): handed off to its owner, the {}, when the erasure reaches what it was trained on; nothing to seed",
                c.owner
            ));
        } else if !c.probed() {
            r.failures.push(format!(
                "store {name} ({}): has no probe (probe = \"none\"): the drill can't show the synthetic subject is gone from it",
                c.kind
            ));
        } else {
            drilled.push((name.clone(), c.clone()));
        }
    }
    let (root_table, root_column) = subject.root()?;
    // The first ID of the range no row of the root table has.
    let root = wh.load(&TableName::parse(&root_table)?).await?;
    let mut id = None;
    for candidate in range.from..=range.to {
        let rows = lethe_iceberg::ops::rewrite::select_rows(
            wh,
            &root,
            &Predicate::is_in(root_column.clone(), vec![Value::Int(candidate)]),
        )
        .await?;
        if rows.iter().all(|b| b.num_rows() == 0) {
            id = Some(candidate);
            break;
        }
    }
    let id = id.ok_or_else(|| {
        Error::invalid(format!(
            "every ID of the drill's range {}..={} is taken in {root_table}",
            range.from, range.to
        ))
    })?;
    let request = format!("drill-{id}");
    r.synthetic_id = id;
    r.request = request.clone();
    let targets: Vec<String> = crate::pipeline::Pipeline::load_all(&ws.config.paths.pipelines)?
        .iter()
        .map(|p| p.target.to_string())
        .collect();
    let mut times: BTreeMap<String, SystemTime> = BTreeMap::new();
    // 1. Seed every source table that carries the subject's identifier.
    for (table, info) in &inv.tables {
        if targets.contains(table) {
            continue;
        }
        let columns: Vec<String> = info.columns.iter().map(|(c, _)| c.clone()).collect();
        let ids = identifier_columns(&gov, subject_name, table, &columns);
        if ids.is_empty() {
            continue;
        }
        progress(&format!("seeding {table}"));
        let t0 = Instant::now();
        let name = TableName::parse(table)?;
        let t = wh.load(&name).await?;
        let Some(template) = first_row(ws, &t).await? else {
            continue;
        };
        let mut keys = gov
            .metadata
            .table(table)
            .map(|m| m.key.clone())
            .unwrap_or_default();
        keys.extend(info.identifier_fields.iter().cloned());
        let row = synthetic_row(&template, id, &ids, &keys, |c| {
            subject.values.contains(&c.to_string()) && *table == root_table
                || !matches!(
                    gov.metadata.classification(table, c),
                    Some(Classification::Internal | Classification::Public)
                )
        })?;
        lethe_iceberg::ops::rewrite::append(
            wh,
            &name,
            &[row],
            [("lethe-drill".to_string(), request.clone())].into(),
            lethe_iceberg::writer::WriteOptions {
                max_rows_per_file: Some(50_000),
            },
        )
        .await?;
        r.seeded.insert(table.clone(), 1u64);
        time_of(&mut times, table).seed_seconds = t0.elapsed().as_secs_f64();
    }
    // 2. Every pipeline.
    for p in crate::pipeline::Pipeline::load_all(&ws.config.paths.pipelines)? {
        progress(&format!("pipeline {} -> {}", p.name, p.target));
        let t0 = Instant::now();
        crate::pipeline::run(ws, &p).await?;
        let target = p.target.to_string();
        time_of(&mut times, &target).pipeline_seconds = t0.elapsed().as_secs_f64();
    }
    // 3. Where the synthetic subject reached, and what the plan covers.
    let spec = RequestSpec {
        request: request.clone(),
        subject: subject_name.to_string(),
        id: id.to_string(),
    };
    let prepared = prepare(ws, &gov, std::slice::from_ref(&spec), Some(&key), &|_| {}).await?;
    // 4. Every store with a probe, through its seeding hook: the subject as the erasure will
    //    ask the store about it (its identifier's values from the case).
    let mut seeded: BTreeMap<String, Seeded> = BTreeMap::new();
    for (name, c) in &drilled {
        progress(&format!("seeding store {name}"));
        let t0 = Instant::now();
        let subjects = crate::erasure::erase::stores::subjects_for(&gov, c, &prepared.cases)?;
        let outcome = match (
            crate::stores::open(&ws.config.root, name, c),
            subjects.first(),
        ) {
            (Ok(store), Some(subj)) if !subj.values.is_empty() => store.seed(subj, id).await,
            (Ok(_), _) => Err(crate::stores::error(
                name,
                "the synthetic subject has no value of the identifier this store holds",
            )),
            (Err(e), _) => Err(e),
        };
        match outcome {
            Ok(sd) => {
                r.seeded.insert(format!("store {name}"), sd.records);
                seeded.insert(name.clone(), sd);
            }
            Err(Error::Store { message, .. }) => r
                .failures
                .push(format!("store {name}: can't be seeded: {message}")),
            Err(e) => r
                .failures
                .push(format!("store {name}: can't be seeded: {e}")),
        }
        time_of(&mut times, name).seed_seconds = t0.elapsed().as_secs_f64();
    }
    let scan = crate::erasure::prove::prove(ws, &prepared.cases, &|_| {}).await?;
    r.reached = scan
        .tables
        .iter()
        .filter(|(t, c)| c.files_holding > 0 && t.as_str() != "(other)")
        .map(|(t, _)| t.clone())
        .collect();
    for t in &r.reached {
        let covered = prepared.plan.steps.iter().any(|s| {
            &s.table == t
                && matches!(
                    s.action,
                    Action::Delete | Action::Rewrite | Action::Recompute
                )
        });
        if !covered {
            r.failures.push(format!(
                "{t}: the synthetic subject reached this table, and no plan step covers it"
            ));
        }
    }
    // 5. Erase (the stores with the warehouse, in their order).
    let eopts = EraseOptions {
        dry_run: false,
        min_age: opts.min_age,
        accept_incomplete: false,
        key_file: None,
        day: opts.day,
    };
    let mut erased = erase(ws, std::slice::from_ref(&spec), &eopts, &|m| progress(m)).await;
    if let Err(Error::Refused(why)) = &erased {
        r.failures.push(format!("the erasure was refused: {why}"));
        let again = EraseOptions {
            accept_incomplete: true,
            ..eopts.clone()
        };
        erased = erase(ws, std::slice::from_ref(&spec), &again, &|m| progress(m)).await;
    }
    if let Err(e) = erased {
        r.failures.push(format!(
            "the erasure failed: {e}; the synthetic subject's records remain (request {request}: `lethe erase --resume {request}`, then `lethe drill` again)"
        ));
        r.times = times.into_values().collect();
        r.seconds = started.elapsed().as_secs_f64();
        return Ok(r);
    }
    // 6. Verify: zero residual in every system of the manifest.
    progress("verifying");
    let (att, _) = crate::erasure::attest::attest(ws, &request, true, &|_| {}).await?;
    let store_names: Vec<&str> = drilled.iter().map(|(n, _)| n.as_str()).collect();
    let about_store = |item: &str| {
        store_names
            .iter()
            .any(|n| item.starts_with(&format!("{n}:")) || item.starts_with(&format!("store {n}")))
    };
    for item in att.verdict.remaining.iter().filter(|i| !about_store(i)) {
        r.failures.push(format!("residual: {item}"));
    }
    for sys in &att.manifest.systems {
        if let Some(ms) = sys.duration_ms {
            time_of(&mut times, &sys.system).erase_seconds = ms as f64 / 1000.0;
        }
        let Some((name, _)) = drilled.iter().find(|(n, _)| *n == sys.system) else {
            continue;
        };
        let seeded_here = seeded.get(name).map_or(0, |s| s.records);
        let waits = sys.state.starts_with("pending rebuild");
        match sys.residual {
            Some(0) if sys.state == "verified" || waits => {
                if waits {
                    r.notes.push(format!(
                        "store {name}: probed clean after the delete; lethe verifies it after its next rebuild ({})",
                        sys.state
                    ));
                }
            }
            Some(n) => r.failures.push(format!(
                "store {name}: holds {n} record(s) of the synthetic subject after the erasure ({})",
                sys.state
            )),
            None => r.failures.push(format!(
                "store {name}: not probed after the erasure ({})",
                sys.state
            )),
        }
        if seeded_here > 0 && sys.records == 0 {
            r.failures.push(format!(
                "store {name}: the erasure found none of the {seeded_here} record(s) the drill seeded there"
            ));
        }
        r.stores.push(StoreDrill {
            store: name.clone(),
            kind: sys.kind.clone(),
            seeded: seeded_here,
            deleted: sys.records,
            residual: sys.residual,
            state: sys.state.clone(),
            removed_after: 0,
        });
    }
    r.verdict = Some((att.verdict.logical.clone(), att.verdict.physical.clone()));
    // 7. Remove what the erasure kept of the seeds: a legal exception's rows (REWRITE), a
    //    tombstoned row, the drill's own file or commit.
    let min_age = opts.min_age.unwrap_or_else(|| gov.retention.min_file_age());
    for s in &prepared.plan.steps {
        if s.action != Action::Rewrite || !r.seeded.contains_key(&s.table) {
            continue;
        }
        let Some(col) = &s.column else { continue };
        let name = TableName::parse(&s.table)?;
        let spec = lethe_iceberg::ops::rewrite::RowRewrite::delete(Predicate::is_in(
            col.clone(),
            vec![Value::Int(id)],
        ))
        .with_summary("lethe-drill", request.clone());
        lethe_iceberg::ops::rewrite::rewrite_rows(wh, &name, &spec).await?;
        lethe_iceberg::ops::expire::expire(
            wh,
            &name,
            lethe_iceberg::ops::expire::ExpireOptions {
                cutoff: lethe_iceberg::ops::expire::Cutoff::OlderThan(
                    chrono::Utc::now() + Duration::seconds(1),
                ),
                dry_run: false,
                keep_files: false,
            },
            ws.clock.as_ref(),
        )
        .await?;
        lethe_iceberg::ops::sweep::sweep(wh, &name, min_age, false, ws.clock.as_ref()).await?;
    }
    for (name, sd) in &seeded {
        let c = &registry.value.stores[name];
        match crate::stores::open(&ws.config.root, name, c)?
            .unseed(sd)
            .await
        {
            Ok(n) => {
                if let Some(x) = r.stores.iter_mut().find(|x| &x.store == name) {
                    x.removed_after = n;
                }
            }
            Err(Error::Store { message, .. }) => r.failures.push(format!(
                "store {name}: the drill's seeded records can't be removed: {message}"
            )),
            Err(e) => r.failures.push(format!(
                "store {name}: the drill's seeded records can't be removed: {e}"
            )),
        }
    }
    let budget = range.step_budget_seconds;
    for t in times.values() {
        let total = t.seed_seconds + t.pipeline_seconds + t.erase_seconds;
        if total > budget {
            r.failures.push(format!(
                "{}: took {total:.1}s, past the budget of {budget:.0}s",
                t.system
            ));
        }
    }
    // 8. The drill's own records go, unless kept for review.
    if !opts.keep {
        forget(ws, &request)?;
    }
    r.times = times.into_values().collect();
    r.seconds = started.elapsed().as_secs_f64();
    Ok(r)
}

/// The time entry of one system.
fn time_of<'a>(times: &'a mut BTreeMap<String, SystemTime>, t: &str) -> &'a mut SystemTime {
    times.entry(t.to_string()).or_insert_with(|| SystemTime {
        system: t.to_string(),
        seed_seconds: 0.0,
        pipeline_seconds: 0.0,
        erase_seconds: 0.0,
    })
}

/// The table's first row, read from its first data file (None for an empty table).
async fn first_row(
    ws: &Workspace,
    t: &lethe_iceberg::table::LoadedTable,
) -> Result<Option<RecordBatch>> {
    let schema = t.metadata.current_schema().clone();
    for f in ws.warehouse.current_files(t).await? {
        if !f.is_data() {
            continue;
        }
        for b in lethe_iceberg::read::read_data_file(
            ws.warehouse.store.as_ref(),
            f.entry.data_file.file_path(),
            &schema,
        )? {
            if b.num_rows() > 0 {
                return Ok(Some(b.slice(0, 1)));
            }
        }
    }
    Ok(None)
}

/// The synthetic row: `template` with identifier and key columns set to `id`, and the columns
/// `personal(c)` says hold a person's values set to a synthetic text (strings) or null.
fn synthetic_row(
    template: &RecordBatch,
    id: i64,
    ids: &[String],
    keys: &[String],
    personal: impl Fn(&str) -> bool,
) -> Result<RecordBatch> {
    let mut cols: Vec<ArrayRef> = Vec::new();
    for (i, f) in template.schema().fields().iter().enumerate() {
        let name = f.name();
        let c: ArrayRef = if ids.contains(name) || keys.contains(name) {
            let v: ArrayRef = match f.data_type() {
                DataType::Utf8 | DataType::LargeUtf8 => {
                    Arc::new(StringArray::from(vec![id.to_string()]))
                }
                _ => Arc::new(Int64Array::from(vec![id])),
            };
            arrow::compute::cast(&v, f.data_type())?
        } else if personal(name) {
            match f.data_type() {
                DataType::Utf8 => Arc::new(StringArray::from(vec![format!("drill {id} {name}")])),
                t if f.is_nullable() => new_null_array(t, 1),
                _ => template.column(i).clone(),
            }
        } else {
            template.column(i).clone()
        };
        cols.push(c);
    }
    Ok(RecordBatch::try_new(template.schema(), cols)?)
}

/// Removes the drill's records: its request record, journal, case file, attestation and
/// register entry (the synthetic subject is not a person).
fn forget(ws: &Workspace, request: &str) -> Result<()> {
    let state = &ws.config.paths.state;
    for p in [
        state.join("requests").join(format!("{request}.json")),
        crate::erasure::erase::journal_path(ws, request),
        crate::erasure::case::case_path(ws, request),
        state.join("attestations").join(format!("{request}.json")),
    ] {
        if p.exists() {
            std::fs::remove_file(&p).map_err(|e| Error::io(p.display().to_string(), e))?;
        }
    }
    Register::in_state(state).forget(request)?;
    Ok(())
}
