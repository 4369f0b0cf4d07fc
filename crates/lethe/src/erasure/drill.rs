//! The erasure drill (`lethe drill`): the only way to know erasure still works when a new
//! table or store appears is to run it, every week, against a synthetic subject.
//!
//! One run: picks a synthetic subject in the reserved identifier range `subjects.toml`
//! declares (`[learner.drill] from = ..., to = ...`), writes one record of it into every
//! source table that carries the subject's identifier (a copy of the table's first row with
//! the identifier and the row key set to the synthetic ID and every personal, sensitive or
//! unclassified column set to a synthetic text or null, so no real person's value is copied),
//! runs every pipeline, then scans where the synthetic subject's traces reached, plans,
//! erases, verifies (the attestation must be COMPLETE: zero residual everywhere) and removes
//! its own records (request, journal, case file, attestation, register entry) unless `--keep`.
//!
//! It fails, naming them, on: every catalog table no lineage accounts for and no declaration
//! names as a source (`lethe lineage unaccounted`: a table a job wrote without lineage); every
//! table the synthetic subject reached that no plan step covers; an erasure refused or not
//! COMPLETE (what remains, by table); every system whose time grew past the budget
//! (`step_budget_seconds`, default 300). It reports the time per system.
//!
//! Not yet: stores outside the warehouse (the store registry and its seeding hooks arrive
//! with `governance/stores.toml`); today the drill covers the warehouse tables.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
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
    /// Seconds its erasure step and cleanup took.
    pub erase_seconds: f64,
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
    /// Stores outside the warehouse drilled (none yet: see the module docs).
    pub stores: Vec<String>,
    /// What failed, each naming the table or step.
    pub failures: Vec<String>,
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
    let mut failures: Vec<String> = plan::unaccounted(&inv, &gov, &graph)
        .into_iter()
        .map(|t| {
            format!("{t}: no lineage accounts for this table and no declaration names it as a source (metadata.toml `source`): the drill can't say what it holds")
        })
        .collect();
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
    let targets: Vec<String> = crate::pipeline::Pipeline::load_all(&ws.config.paths.pipelines)?
        .iter()
        .map(|p| p.target.to_string())
        .collect();
    let mut times: BTreeMap<String, SystemTime> = BTreeMap::new();
    // 1. Seed every source table that carries the subject's identifier.
    let mut seeded = BTreeMap::new();
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
        seeded.insert(table.clone(), 1u64);
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
    let scan = crate::erasure::prove::prove(ws, &prepared.cases, &|_| {}).await?;
    let reached: Vec<String> = scan
        .tables
        .iter()
        .filter(|(t, c)| c.files_holding > 0 && t.as_str() != "(other)")
        .map(|(t, _)| t.clone())
        .collect();
    for t in &reached {
        let covered = prepared.plan.steps.iter().any(|s| {
            &s.table == t
                && matches!(
                    s.action,
                    Action::Delete | Action::Rewrite | Action::Recompute
                )
        });
        if !covered {
            failures.push(format!(
                "{t}: the synthetic subject reached this table, and no plan step covers it"
            ));
        }
    }
    // 4. Erase, timing each system by the erasure's progress.
    let last: Arc<Mutex<(Option<String>, Instant)>> = Arc::new(Mutex::new((None, Instant::now())));
    let erase_times: Arc<Mutex<BTreeMap<String, f64>>> = Arc::default();
    let on_progress = |m: &str| {
        progress(m);
        let table = m
            .strip_prefix("cleanup ")
            .and_then(|r| r.split(':').next())
            .or_else(|| m.split_once(' ').map(|(_, t)| t))
            .filter(|t| inv.tables.contains_key(*t))
            .map(str::to_string);
        if let (Ok(mut l), Ok(mut et)) = (last.lock(), erase_times.lock()) {
            if let Some(prev) = &l.0 {
                *et.entry(prev.clone()).or_default() += l.1.elapsed().as_secs_f64();
            }
            *l = (table, Instant::now());
        }
    };
    let eopts = EraseOptions {
        dry_run: false,
        min_age: opts.min_age,
        accept_incomplete: false,
        key_file: None,
        day: opts.day,
    };
    let mut erased = erase(ws, std::slice::from_ref(&spec), &eopts, &on_progress).await;
    if let Err(Error::Refused(why)) = &erased {
        failures.push(format!("the erasure was refused: {why}"));
        let again = EraseOptions {
            accept_incomplete: true,
            ..eopts.clone()
        };
        erased = erase(ws, std::slice::from_ref(&spec), &again, &on_progress).await;
    }
    on_progress("done");
    if let Err(e) = erased {
        failures.push(format!(
            "the erasure failed: {e}; the synthetic subject's rows remain (request {request})"
        ));
        return Ok(report(
            subject_name,
            id,
            request,
            seeded,
            reached,
            times,
            range.step_budget_seconds,
            failures,
            None,
            started,
        ));
    }
    if let Ok(et) = erase_times.lock() {
        for (t, s) in et.iter() {
            time_of(&mut times, t).erase_seconds = *s;
        }
    }
    // 5. Verify: zero residual everywhere.
    let (att, _) = crate::erasure::attest::attest(ws, &request, true, &|_| {}).await?;
    if !att.is_complete() {
        for r in &att.verdict.remaining {
            failures.push(format!("residual: {r}"));
        }
        if att.verdict.remaining.is_empty() {
            failures.push(format!(
                "the attestation is not COMPLETE (logical {}, physical {})",
                att.verdict.logical, att.verdict.physical
            ));
        }
    }
    // The synthetic rows a legal exception keeps (REWRITE) are not a person's: remove them too.
    let min_age = opts.min_age.unwrap_or_else(|| gov.retention.min_file_age());
    for s in &prepared.plan.steps {
        if s.action != Action::Rewrite || !seeded.contains_key(&s.table) {
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
    let budget = range.step_budget_seconds;
    for t in times.values() {
        let total = t.seed_seconds + t.pipeline_seconds + t.erase_seconds;
        if total > budget {
            failures.push(format!(
                "{}: took {total:.1}s, past the budget of {budget:.0}s",
                t.system
            ));
        }
    }
    // 6. The drill's own records go, unless kept for review.
    if !opts.keep {
        forget(ws, &request)?;
    }
    Ok(report(
        subject_name,
        id,
        request,
        seeded,
        reached,
        times,
        budget,
        failures,
        Some((att.verdict.logical.clone(), att.verdict.physical.clone())),
        started,
    ))
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

#[allow(clippy::too_many_arguments)]
fn report(
    subject: &str,
    id: i64,
    request: String,
    seeded: BTreeMap<String, u64>,
    reached: Vec<String>,
    times: BTreeMap<String, SystemTime>,
    budget: f64,
    failures: Vec<String>,
    verdict: Option<(String, String)>,
    started: Instant,
) -> DrillReport {
    DrillReport {
        subject: subject.to_string(),
        synthetic_id: id,
        request,
        seeded,
        reached,
        times: times.into_values().collect(),
        budget_seconds: budget,
        stores: Vec::new(),
        failures,
        verdict,
        seconds: started.elapsed().as_secs_f64(),
    }
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
