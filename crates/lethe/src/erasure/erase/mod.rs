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
//!    columns, RECOMPUTE by bringing the pipeline's target up to date
//!    ([`crate::pipeline::recompute`]: not at all when nothing it reads changed, only the rows
//!    of the keys the changed rows carry where that is provably a full run's result, else a
//!    full run; the step records which and why) — each commit records only
//!    `erasure-request`, never a value of the person;
//! 4. cleanup per table: one commit that rewrites manifests holding DELETED entries, expires
//!    every snapshot older than the erasure's commits and empties the metadata log — carried
//!    by the step's own commit when the table's last step is a DELETE or REWRITE that nothing
//!    after it reads (the step is then recorded with the table's history phase) —; then the
//!    sweep of unreferenced files older than the minimum age (`cleanup.rs`). With `[snapshots]
//!    grace_seconds`, snapshots superseded less than the grace ago stay, with their files, for
//!    other writers' operations in flight: the erasure finishes with their expiry pending
//!    (journal, attestation) until `lethe verify` or a rerun after the grace.
//!
//! Steps 3 and 4 overlap where the tables allow (`schedule.rs`): steps on different tables run
//! at once, a RECOMPUTE starts when the steps on the tables it reads have landed, and a table's
//! first cleanup commit runs as soon as no step left to run reads or writes it (an incremental
//! RECOMPUTE compares against the snapshots it expires); a table's sweep follows its first
//! cleanup commit.
//!
//! Rerunning a request after a failure at any point resumes from the journal: values resolved
//! before the first delete are reused (resolving them again after the deletes would find
//! nothing), deletes that already landed match nothing and commit nothing, the register is not
//! written twice. Rerunning a finished request changes nothing and says so.
//!
//! Stores outside the warehouse (governance/stores.toml, see [`crate::stores`]) are part of the
//! same erasure, in the order their `depends_on` gives: the warehouse's sources (the
//! application database) are deleted and probed clean before step 3, every other store after
//! step 4; then every store is probed, a residual reopens it and deletes again, a store rebuilt
//! from a source stays pending until `lethe verify` probes it after its next rebuild
//! ([`stores`]). A store that fails (a vendor's 5xx after the retries) stops the erasure with
//! the request open: rerunning resumes at that store.
//!
//! Legal holds (`governance/holds.toml`, [`crate::erasure::holds`]) in force on the day the
//! erasure is given mark steps and stores HELD: they are not carried out, their values stay in
//! the journal and the case file, and the erasure finishes everything else. Rerunning the
//! request on a day the hold no longer holds releases and carries out the held steps (and
//! cleans up their tables) and deletes and probes the held stores.
//!
//! Every erasure has a request record ([`crate::requests`]): one opened with `lethe request
//! open`, or one opened here for a request that has none. The record moves to *in progress*,
//! then *pending verification* when the erasure finishes (*failed* when it stops with an
//! error), and an erasure of a restricted subject ends the restriction and says so in both
//! records.
//!
//! The durable steps are named functions here: [`prepare`] and the preflight
//! (`prepare.rs`), `register_requests`, the stores before the warehouse, `run_steps` (with
//! each table's first cleanup commit), the cleanup (`cleanup.rs`), the stores after it and
//! their verification (`stores.rs`), and `finish`; the journal and its files are in
//! `journal.rs`.
//!
//! A batch (`--subjects-file`) plans once for all its subjects (with the earliest lineage
//! window), rewrites each table once and cleans up once, with a register entry and counts per
//! request.

pub(crate) mod cleanup;
mod journal;
mod prepare;
mod schedule;
pub mod stores;

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{Duration, Utc};
use futures::future::BoxFuture;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::history::PurgeHistory;
use lethe_iceberg::ops::rewrite::{RowRewrite, rewrite_rows};
use lethe_iceberg::ops::twins::{TwinsSpec, rewrite_history};
use serde::Serialize;

pub use journal::{
    GracePending, Journal, JournalStep, SelectBy, TableCleanup, batch_id, find_request,
    journal_path, journals, load_journal, selection_predicate,
};
pub use prepare::{Prepared, prepare, prepare_drawn};
pub use stores::{StoreState, StoreStep, VerifyOutcome, verify_pending};

use crate::erasure::case::{RequestSpec, read_case, valid_request_id};
use crate::erasure::plan::Action;
use crate::erasure::register::{Entry, Register, RegisterKey, default_key_file};
use crate::error::{Error, Result};
use crate::pipeline::{Pipeline, Recompute, recompute};
use crate::workspace::Workspace;
use journal::save_journal;
use prepare::{Planned, plan_erasure};
use schedule::Touch;

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
    /// The day legal holds are judged on, and a new request's received day (None: today by
    /// the workspace's clock).
    pub day: Option<chrono::NaiveDate>,
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
    /// Seconds the erasure took in this process, from the call to the report (planning, the
    /// stores, the steps, the cleanup): the in-process time beside a whole process's.
    pub seconds: f64,
}

/// Runs (or resumes) an erasure of `requests`.
pub async fn erase(
    ws: &Workspace,
    requests: &[RequestSpec],
    opts: &EraseOptions,
    progress: &dyn Fn(&str),
) -> Result<EraseReport> {
    let started = std::time::Instant::now();
    let mut report = erase_timed(ws, requests, opts, progress).await?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// [`erase`] but for its `seconds`.
async fn erase_timed(
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
    let day = crate::erasure::holds::judging_day(ws, opts.day)?;
    let key_file = opts.key_file.clone().or_else(|| default_key_file(ws));
    let key = RegisterKey::load(key_file.as_deref())?;
    let gov = ws.governance()?;
    let existing = match earlier_run(ws, &batch, requests, &key)? {
        Earlier::Finished(j) => {
            let mut j = *j;
            if !opts.dry_run {
                run_pending_cleanup(ws, &mut j, progress).await?;
            }
            if opts.dry_run || release_holds(ws, &gov, &mut j, day).await? == 0 {
                return Ok(EraseReport {
                    journal: j,
                    already_complete: true,
                    dry_run: opts.dry_run,
                    seconds: 0.0,
                });
            }
            progress(&format!(
                "legal holds ended by {day}: finishing the held steps of {batch}"
            ));
            Some(j)
        }
        Earlier::Unfinished(j) => Some(*j),
        Earlier::None => None,
    };
    gov.subjects.get(&requests[0].subject)?;
    let opening = if opts.dry_run {
        Vec::new()
    } else {
        crate::erasure::intake::records_to_open(ws, requests, &key, day)?
    };
    let run = Run {
        gov: &gov,
        opts,
        key: &key,
        day,
        opening,
    };
    let result = erase_planned(ws, requests, existing, &run, progress).await;
    if !opts.dry_run {
        let records = crate::requests::Requests::in_state(&ws.config.paths.state);
        let at = crate::erasure::intake::now();
        match &result {
            Ok(r) if !r.dry_run => {
                let held = r.journal.steps.iter().filter(|s| s.is_held()).count()
                    + r.journal.stores.iter().filter(|s| s.is_held()).count();
                let note = if held > 0 {
                    format!("erasure finished; {held} part(s) held under a legal hold")
                } else {
                    "erasure finished".to_string()
                };
                let ids = r.journal.requests.iter().map(|q| q.request.as_str());
                records.update_all(ids, |rec| {
                    rec.transition(
                        crate::requests::State::PendingVerification,
                        at.clone(),
                        note.clone(),
                    );
                })?;
            }
            Ok(_) => {}
            Err(e) if load_journal(ws, &batch)?.is_some() => {
                let ids = requests.iter().map(|q| q.request.as_str());
                records.update_all(ids, |rec| {
                    rec.transition(
                        crate::requests::State::Failed,
                        at.clone(),
                        format!("the erasure stopped: {e}; rerun it to go on"),
                    );
                })?;
            }
            Err(_) => {}
        }
    }
    result
}

/// What an erasure run is given besides its requests.
struct Run<'a> {
    gov: &'a crate::governance::Governance,
    opts: &'a EraseOptions,
    key: &'a RegisterKey,
    /// The day holds are judged on (and new records are received on).
    day: chrono::NaiveDate,
    /// The records of requests that have none yet, written when the erasure starts.
    opening: Vec<crate::requests::Request>,
}

/// The erasure from its plan on: durable steps 1 to 4 and the finish.
async fn erase_planned(
    ws: &Workspace,
    requests: &[RequestSpec],
    existing: Option<Journal>,
    run: &Run<'_>,
    progress: &dyn Fn(&str),
) -> Result<EraseReport> {
    let Run {
        gov,
        opts,
        key,
        day,
        ..
    } = *run;
    let batch = batch_id(requests);

    // 1. Planned: the plan, the preflight, case files and the journal (a resumed journal
    // runs its steps in the plan's order: its costs are not known without reading again).
    let (mut journal, costs) = match existing {
        Some(j) => {
            progress(&format!("resuming erasure {batch}"));
            (j, Vec::new())
        }
        None => match plan_erasure(ws, gov, requests, opts, key, day, progress).await? {
            Planned::DryRun(j) => {
                return Ok(EraseReport {
                    journal: *j,
                    already_complete: false,
                    dry_run: true,
                    seconds: 0.0,
                });
            }
            Planned::Journal(j, costs) => (*j, costs),
        },
    };
    if opts.dry_run {
        return Ok(EraseReport {
            journal,
            already_complete: false,
            dry_run: true,
            seconds: 0.0,
        });
    }
    let tag = journal
        .requests
        .iter()
        .map(|r| r.request.clone())
        .collect::<Vec<_>>()
        .join(",");
    start_records(ws, &journal, &run.opening)?;
    // 2. Registered, before the first delete.
    register_requests(ws, &mut journal, key)?;
    // The warehouse's sources, deleted and probed clean before anything loaded from them.
    stores::delete_stores(ws, &mut journal, true, progress).await?;
    // 3. The plan's steps, in order.
    run_steps(ws, &mut journal, &costs, &tag, progress).await?;
    // 4. Cleanup of every table the erasure changed.
    cleanup::clean_up(ws, &mut journal, &tag, progress).await?;
    // The logical check: every snapshot the planned tables keep, read by another path.
    check_logically(ws, gov, &mut journal, progress).await?;
    // The stores built from the warehouse (and the others), then every store probed.
    stores::delete_stores(ws, &mut journal, false, progress).await?;
    stores::verify_stores(ws, &mut journal, progress).await?;
    end_restrictions(ws, &journal, key, day)?;
    finish(ws, &mut journal)?;
    Ok(EraseReport {
        journal,
        already_complete: false,
        dry_run: false,
        seconds: 0.0,
    })
}

/// Runs the cleanup phases a finished erasure still lacks (the version purge, turned on with
/// `[storage] purge_versions` after it finished). Returns whether anything ran.
pub async fn run_pending_cleanup(
    ws: &Workspace,
    journal: &mut Journal,
    progress: &dyn Fn(&str),
) -> Result<bool> {
    if !cleanup::pending_phases(ws, journal) {
        return Ok(false);
    }
    let tag = journal
        .requests
        .iter()
        .map(|r| r.request.clone())
        .collect::<Vec<_>>()
        .join(",");
    if cleanup::pending_purge(ws, journal) {
        progress(&format!(
            "erasure {}: purging noncurrent versions",
            journal.batch
        ));
        cleanup::clean_up(ws, journal, &tag, progress).await?;
    }
    let passed = cleanup::grace_passed(journal, ws.clock.now());
    if !passed.is_empty() {
        progress(&format!(
            "erasure {}: the grace of the snapshots it replaced has passed",
            journal.batch
        ));
        cleanup::finish_grace(ws, journal, &passed, &tag, progress).await?;
        check_logically(ws, &ws.governance()?, journal, progress).await?;
    }
    save_journal(ws, journal)?;
    Ok(true)
}

/// Tables whose snapshots from before the erasure are kept for the grace, with until when
/// (`[snapshots] grace_seconds`): the erasure is pending until then.
pub fn grace_pending(journal: &Journal) -> Vec<(String, String)> {
    journal
        .cleanup
        .iter()
        .filter_map(|(t, c)| c.grace.as_ref().map(|g| (t.clone(), g.until.clone())))
        .collect()
}

/// What an earlier run of the same batch left.
enum Earlier {
    /// Nothing: a new erasure.
    None,
    /// A journal to resume.
    Unfinished(Box<Journal>),
    /// A finished erasure of the same subjects: nothing to do.
    Finished(Box<Journal>),
}

/// Looks for an earlier run of `batch`, and refuses request IDs used for other subjects.
fn earlier_run(
    ws: &Workspace,
    batch: &str,
    requests: &[RequestSpec],
    key: &RegisterKey,
) -> Result<Earlier> {
    let Some(j) = load_journal(ws, batch)? else {
        // Every journal read once for the whole batch (one `find_request` per request read
        // them all again for each: a week's batch against a year of journals).
        let mut used: std::collections::HashMap<String, String> = std::collections::HashMap::new();
        for j in journals(ws)? {
            for r in &j.requests {
                used.entry(r.request.clone())
                    .or_insert_with(|| j.batch.clone());
            }
        }
        if let Some((r, b)) = requests
            .iter()
            .find_map(|r| used.get(&r.request).map(|b| (r, b)))
        {
            return Err(Error::invalid(format!(
                "request {} is already part of erasure {b}; use a new request ID",
                r.request
            )));
        }
        return Ok(Earlier::None);
    };
    let same = |a: &RequestSpec, b: &RequestSpec| a.request == b.request && a.subject == b.subject;
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
        // `--resume REQUEST` passes the journal's own requests (their IDs cleared at the end).
        let resumed = j.requests == requests;
        if !(matches && (hashed || resumed)) {
            return Err(Error::invalid(format!(
                "request {batch} was used for another subject; use a new request ID"
            )));
        }
        // A store that failed or was reopened after the warehouse part finished: resume it.
        if !j.is_finished() {
            return Ok(Earlier::Unfinished(Box::new(j)));
        }
        return Ok(Earlier::Finished(Box::new(j)));
    }
    if !matches || j.requests != requests {
        return Err(Error::invalid(format!(
            "request {batch} was started for other subjects; use a new request ID"
        )));
    }
    Ok(Earlier::Unfinished(Box::new(j)))
}

/// Durable step 2: a register entry per request (request ID + keyed hash), in one write.
fn register_requests(ws: &Workspace, journal: &mut Journal, key: &RegisterKey) -> Result<()> {
    if journal.registered {
        return Ok(());
    }
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
    save_journal(ws, journal)?;
    durable_step("registered");
    Ok(())
}

/// Every request's record enters "in progress", the records of requests that had none created
/// with it: one durable write for the batch.
fn start_records(
    ws: &Workspace,
    journal: &Journal,
    opening: &[crate::requests::Request],
) -> Result<()> {
    let records = crate::requests::Requests::in_state(&ws.config.paths.state);
    let mut fresh: std::collections::HashMap<&str, &crate::requests::Request> =
        opening.iter().map(|r| (r.id.as_str(), r)).collect();
    let at = crate::erasure::intake::now();
    let mut started = Vec::with_capacity(journal.requests.len());
    for q in &journal.requests {
        let rec = match fresh.remove(q.request.as_str()) {
            Some(r) => Some(r.clone()),
            None => records.find(&q.request)?,
        };
        if let Some(mut r) = rec {
            r.transition(
                crate::requests::State::InProgress,
                at.clone(),
                "erasure started",
            );
            started.push(r);
        }
    }
    records.save_all(&started)
}

/// Durable step 3 and the first two phases of step 4: every plan step not yet done, and the
/// history and sweep phases of the cleanup of every table the erasure changes, each recorded
/// when it lands.
///
/// The pieces run as their tables allow ([`schedule::run_ordered`], as many at once as the
/// machine has cores): a DELETE or REWRITE reads and writes its table (its values were
/// resolved before the first delete, so it reads nothing another step changes); a RECOMPUTE
/// reads its pipeline's inputs and writes its target (any table, when the inputs can't be
/// told: it then waits for every step before it and holds back every write after it); a
/// table's history phase — it expires the snapshots an incremental RECOMPUTE compares
/// against — waits for every step that reads or writes the table. So a RECOMPUTE starts when
/// the steps on its inputs have landed, beside the steps on other tables, and a table nothing
/// later reads is cleaned up while the others' steps still run; a table's sweep waits for its
/// history phase (and every other piece on the table), so the sweeps of tables done early run
/// beside the steps still running. A step that landed but was not recorded (a crash) matches
/// nothing when resumed and commits nothing; a history phase run again commits only what is
/// still to do, a sweep run again finds nothing left to remove.
///
/// Of the pieces free to start, the one heading the costliest chain starts first: a row step
/// costs [`step_cost`] of `costs[i]` (journal step `i`: the bytes of the files it rewrites),
/// a RECOMPUTE [`RECOMPUTE_READS`] times the sum of the pieces it waits for, a cleanup piece
/// nothing.
async fn run_steps(
    ws: &Workspace,
    journal: &mut Journal,
    costs: &[u64],
    tag: &str,
    progress: &dyn Fn(&str),
) -> Result<()> {
    enum Piece {
        Step(usize),
        History(String),
        Sweep(String),
    }
    enum Outcome {
        Step(Landed),
        History(TableCleanup),
        Sweep(TableCleanup),
    }
    let mut pieces = Vec::new();
    let mut touches = Vec::new();
    for (i, s) in journal.steps.iter().enumerate() {
        if s.done || s.is_held() {
            continue;
        }
        touches.push(match s.action {
            Action::Recompute => {
                let p = recompute_pipeline(ws, s)?;
                Touch::reading(p.tables_read(ws)?, &s.table)
            }
            Action::Delete | Action::Rewrite => Touch::table(&s.table),
            Action::NoAction | Action::Unresolved => Touch::nothing(),
        });
        pieces.push(Piece::Step(i));
    }
    // A row step that nothing after it reads or writes its table purges the table's history
    // in its own commit (one commit and metadata file per table instead of two); the others'
    // tables get a history piece of their own, run once nothing left reads them.
    let mut purging = std::collections::BTreeSet::new();
    for (k, piece) in pieces.iter().enumerate() {
        let Piece::Step(i) = piece else { continue };
        let s = &journal.steps[*i];
        // A rewrite of the table's kept history expires the originals in its own commit.
        let twins = s.history.is_some();
        if matches!(s.action, Action::Delete | Action::Rewrite)
            && row_change(s)?.is_some()
            && !cleanup::phase_done(journal, &s.table, "history")
            && (twins || !touches[k + 1..].iter().any(|t| t.touches(&s.table)))
        {
            purging.insert(*i);
        }
    }
    for t in cleanup::changed_tables(journal) {
        let purged = purging.iter().any(|i| journal.steps[*i].table == t);
        if !cleanup::phase_done(journal, &t, "history") && !purged {
            touches.push(Touch::table(&t));
            pieces.push(Piece::History(t));
        }
    }
    // Each changed table's sweep, once every piece that reads or writes the table has landed
    // (its history purged): the sweeps of tables done early run beside the steps still to run
    // instead of all after the last history commit.
    for t in cleanup::changed_tables(journal) {
        if !cleanup::phase_done(journal, &t, "sweep") {
            touches.push(Touch::table(&t));
            pieces.push(Piece::Sweep(t));
        }
    }
    let count = |f: fn(&Piece) -> bool| pieces.iter().filter(|p| f(p)).count();
    let n = count(|p| matches!(p, Piece::History(_)));
    let n_sweeps = count(|p| matches!(p, Piece::Sweep(_)));
    let min_age = Duration::seconds(journal.min_age_seconds);
    let grace = Duration::seconds(journal.grace_seconds.max(0));
    let locations = cleanup::SharedLocations::default();
    let inputs = std::sync::Arc::new(cleanup::Inputs::of(ws, journal)?);
    let waits = schedule::waits(&touches);
    let mut piece_costs: Vec<u64> = Vec::with_capacity(pieces.len());
    for (k, piece) in pieces.iter().enumerate() {
        piece_costs.push(match piece {
            Piece::Step(i) => match journal.steps[*i].action {
                Action::Recompute => recompute_cost(waits[k].iter().map(|&w| piece_costs[w])),
                Action::Delete | Action::Rewrite => step_cost(costs.get(*i).copied().unwrap_or(0)),
                Action::NoAction | Action::Unresolved => 0,
            },
            Piece::History(_) | Piece::Sweep(_) => 0,
        });
    }
    start_runs(
        ws,
        journal,
        &pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Step(i) => Some(*i),
                _ => None,
            })
            .collect::<Vec<_>>(),
        progress,
    )
    .await?;
    let steps = journal.steps.clone();
    let mut history_at = 0;
    let mut sweep_at = 0;
    // Sweeps are recorded without a save of their own (a sweep repeated after a crash finds
    // nothing left to remove; the counts then say what the repeat did), saved once after the
    // last piece.
    let ran = schedule::run_ordered(
        &touches,
        &piece_costs,
        schedule::cores(),
        |k| -> Result<BoxFuture<'static, Result<Outcome>>> {
            Ok(match &pieces[k] {
                Piece::Step(i) => {
                    let step = &steps[*i];
                    progress(&format!("{} {}", step.action, step.table));
                    let work = if step.action == Action::Recompute {
                        recompute_work(ws, step, tag)?
                    } else {
                        step_work(ws, step, tag, purging.contains(i).then_some(grace))?
                    };
                    Box::pin(async move { Ok(Outcome::Step(work.await?)) })
                }
                Piece::History(t) => {
                    history_at += 1;
                    progress(&format!("cleanup history {history_at}/{n} {t}"));
                    let work = cleanup::history_work(ws, t, tag, &inputs)?;
                    Box::pin(async move { Ok(Outcome::History(work.await?)) })
                }
                Piece::Sweep(t) => {
                    sweep_at += 1;
                    progress(&format!("cleanup sweep {sweep_at}/{n_sweeps} {t}"));
                    let work = cleanup::sweep_work(ws, t, tag, min_age, &locations, &inputs)?;
                    Box::pin(async move { Ok(Outcome::Sweep(work.await?)) })
                }
            })
        },
        |k, done| match (&pieces[k], done) {
            (Piece::Step(i), Outcome::Step(landed)) => {
                record_step(ws, journal, *i, landed, progress)
            }
            (Piece::History(t), Outcome::History(counts)) => {
                cleanup::record_phase(journal, t, "history", &counts);
                save_journal(ws, journal)?;
                durable_step(&format!("cleanup history {t}"));
                Ok(())
            }
            (Piece::Sweep(t), Outcome::Sweep(counts)) => {
                cleanup::record_phase(journal, t, "sweep", &counts);
                Ok(())
            }
            _ => Err(Error::Internal("an erasure piece landed as another".into())),
        },
    )
    .await;
    if n_sweeps > 0 {
        // The sweeps that landed are kept even when another piece failed.
        let saved = save_journal(ws, journal);
        ran?;
        saved?;
        durable_step("cleanup sweep");
        return Ok(());
    }
    ran
}

/// Before the row steps `pending` (journal indexes) run in this process: the files earlier runs
/// of each left — a process killed mid-step leaves files nothing references, a data file it
/// was writing 0 bytes — are removed by the names those runs recorded, and each step gets a
/// new run name, saved in the journal before it writes anything.
async fn start_runs(
    ws: &Workspace,
    journal: &mut Journal,
    pending: &[usize],
    progress: &dyn Fn(&str),
) -> Result<()> {
    let mut changed = false;
    for &i in pending {
        let s = &mut journal.steps[i];
        if !matches!(s.action, Action::Delete | Action::Rewrite) || row_change(s)?.is_none() {
            continue;
        }
        let name = TableName::parse(&s.table)?;
        for run in &s.runs {
            let left =
                lethe_iceberg::ops::sweep::remove_run_files(&ws.warehouse, &name, run).await?;
            if !left.is_empty() {
                progress(&format!(
                    "{} {}: removed {} file(s) an interrupted run left",
                    s.action,
                    s.table,
                    left.len()
                ));
            }
        }
        s.runs.push(uuid::Uuid::new_v4().to_string());
        changed = true;
    }
    if changed {
        save_journal(ws, journal)?;
    }
    Ok(())
}

/// What a row step's commit costs beside its rewrite, in bytes rewritten: loading the table,
/// writing a manifest, a manifest list and a metadata file, syncing them and committing to
/// the catalog, about 4.5 ms whatever the rows, the time a rewrite takes for ~160 KiB
/// (measured on the demo at scale 1, BENCHMARKS.md section 36). Counted by bytes alone, a
/// chain of small steps a RECOMPUTE waits for ranked below one large step although it took
/// longer, so the RECOMPUTE started after it and ended last.
const STEP_COMMIT_BYTES: u64 = 160 * 1024;

/// A row step's cost in the schedule: the bytes of the files it rewrites and its commit
/// ([`STEP_COMMIT_BYTES`]).
fn step_cost(rewritten_bytes: u64) -> u64 {
    rewritten_bytes.saturating_add(STEP_COMMIT_BYTES)
}

/// A RECOMPUTE's cost in the schedule, as a multiple of the bytes the steps it waits for
/// rewrite: it reads the files they removed and the files they added to find the rows that
/// changed, then its query reads the rows those bound again. Measured on the demo (section
/// 34 of BENCHMARKS.md): 2.5 to 2.6 times the time of those steps at scales 1 and 100. As the
/// sum alone, a RECOMPUTE longer than any step started after the long steps and ran alone at
/// the end.
const RECOMPUTE_READS: u64 = 3;

/// A RECOMPUTE's cost from the costs of the pieces it waits for ([`RECOMPUTE_READS`]).
fn recompute_cost(waited: impl Iterator<Item = u64>) -> u64 {
    waited
        .fold(0u64, u64::saturating_add)
        .saturating_mul(RECOMPUTE_READS)
}

/// Records step `i` as done with what it committed, and saves the journal.
fn record_step(
    ws: &Workspace,
    journal: &mut Journal,
    i: usize,
    landed: Landed,
    progress: &dyn Fn(&str),
) -> Result<()> {
    let s = &mut journal.steps[i];
    if let Some(h) = &landed.how {
        progress(&format!("{} {}: {h}", s.action, s.table));
    }
    let table = s.table.clone();
    s.recompute = landed.how;
    s.started_at = Some(landed.started_at);
    s.finished_at = Some(landed.finished_at);
    s.snapshot_id = landed.snapshot_id;
    if let Some(rows) = landed.rows {
        s.rows = rows;
    }
    if !landed.twins.is_empty() {
        s.twins = landed.twins;
    }
    s.done = true;
    if let Some(counts) = &landed.history {
        progress(&format!("cleanup history {table}: in the step's commit"));
        cleanup::record_phase(journal, &table, "history", counts);
    }
    save_journal(ws, journal)?;
    durable_step(&format!("step {table}"));
    Ok(())
}

/// What a carried-out step committed.
struct Landed {
    /// The snapshot committed, if any.
    snapshot_id: Option<i64>,
    /// The rows matched (None where the step matches no rows by itself).
    rows: Option<u64>,
    /// RECOMPUTE: how it ran.
    how: Option<Recompute>,
    /// When it started (RFC 3339): a step run beside others may wait for a core first.
    started_at: String,
    /// When its commit landed (RFC 3339).
    finished_at: String,
    /// The table's history phase, when the step's commit purged it.
    history: Option<TableCleanup>,
    /// The twins the step's commit wrote (a rewrite of kept history).
    twins: Vec<lethe_iceberg::ops::twins::Twin>,
}

/// The row change a DELETE or REWRITE step makes: DELETE as a row delete, REWRITE nulling the
/// exception's columns; None for a step that changes no rows by itself (a REWRITE without
/// columns to erase, NO_ACTION, UNRESOLVED).
fn row_change(step: &JournalStep) -> Result<Option<RowRewrite>> {
    let predicate = || {
        step.predicate()
            .ok_or_else(|| Error::Internal(format!("{} without a column", step.action)))
    };
    Ok(match step.action {
        Action::Delete => Some(RowRewrite::delete(predicate()?)),
        Action::Rewrite if !step.erase_columns.is_empty() => Some(RowRewrite::set_null(
            predicate()?,
            step.erase_columns.clone(),
        )),
        Action::Rewrite => {
            predicate()?;
            None
        }
        // run_steps carries a RECOMPUTE out as recompute_work, never as a row step.
        Action::Recompute => {
            return Err(Error::Internal(format!(
                "RECOMPUTE {} run as a row step",
                step.table
            )));
        }
        Action::NoAction | Action::Unresolved => None,
    })
}

/// A DELETE or REWRITE step as work that owns what it needs ([`row_change`]), on a warehouse
/// whose commits sync apart from the other tasks' ([`Warehouse::for_concurrent_work`]). With
/// `purge` (the grace), the step's commit also purges the table's history (the cleanup's
/// history phase: every older snapshot expired but those superseded less than the grace ago,
/// no `DELETED` entries, the metadata log emptied; see [`RowRewrite::with_history_purge`]).
///
/// [`Warehouse::for_concurrent_work`]: lethe_iceberg::table::Warehouse::for_concurrent_work
fn step_work(
    ws: &Workspace,
    step: &JournalStep,
    tag: &str,
    purge: Option<Duration>,
) -> Result<BoxFuture<'static, Result<Landed>>> {
    let name = TableName::parse(&step.table)?;
    let Some(spec) = row_change(step)? else {
        return Ok(Box::pin(async {
            let now = Utc::now().to_rfc3339();
            Ok(Landed {
                snapshot_id: None,
                rows: None,
                how: None,
                started_at: now.clone(),
                finished_at: now,
                history: None,
                twins: Vec::new(),
            })
        }));
    };
    if step.history.is_some() {
        return twins_work(ws, step, spec, tag);
    }
    let mut spec = spec
        .with_summary("erasure-request", tag.to_string())
        .with_engine(ws.engines.rewrite.clone());
    if let Some(run) = step.runs.last() {
        spec = spec.with_run(run.clone());
    }
    if let Some(grace) = purge {
        spec = spec.with_history_purge(PurgeHistory {
            cutoff: cleanup::history_cutoff(grace),
            clock: ws.clock.clone(),
        });
    }
    let wh = ws.warehouse.for_concurrent_work();
    Ok(Box::pin(async move {
        let started_at = Utc::now().to_rfc3339();
        let r = rewrite_rows(&wh, &name, &spec).await?;
        Ok(Landed {
            snapshot_id: r.snapshot_id,
            rows: Some(r.rows_matched),
            how: None,
            started_at,
            finished_at: Utc::now().to_rfc3339(),
            history: r.history.as_ref().map(cleanup::history_counts),
            twins: Vec::new(),
        })
    }))
}

/// A DELETE or REWRITE step on a table that keeps history retention.toml decides to rewrite:
/// one commit that writes a twin of every kept snapshot without the rows `spec` selects (or
/// with its columns nulled), moves every ref to its twin and expires the originals
/// ([`rewrite_history`]); it is the step's row change and its table's history phase.
fn twins_work(
    ws: &Workspace,
    step: &JournalStep,
    spec: RowRewrite,
    tag: &str,
) -> Result<BoxFuture<'static, Result<Landed>>> {
    let name = TableName::parse(&step.table)?;
    let mut summary = spec.summary.clone();
    summary.insert("erasure-request".into(), tag.to_string());
    let twins = TwinsSpec {
        predicate: spec.predicate,
        change: spec.change,
        summary,
        options: spec.options,
    };
    let wh = ws.warehouse.for_concurrent_work();
    Ok(Box::pin(async move {
        let started_at = Utc::now().to_rfc3339();
        let r = rewrite_history(&wh, &name, &twins).await?;
        Ok(Landed {
            snapshot_id: r.snapshot_id,
            rows: Some(r.rows_matched_on_main()),
            how: None,
            started_at,
            finished_at: Utc::now().to_rfc3339(),
            history: Some(TableCleanup {
                snapshots_expired: r.expired.len(),
                files_removed: r.files_deleted,
                manifests_rewritten: usize::from(r.snapshot_id.is_some()),
                ..Default::default()
            }),
            twins: r.twins,
        })
    }))
}

/// The pipeline a RECOMPUTE step brings up to date.
fn recompute_pipeline(ws: &Workspace, step: &JournalStep) -> Result<Pipeline> {
    let name = step
        .pipeline
        .as_deref()
        .ok_or_else(|| Error::Internal("RECOMPUTE without a pipeline".into()))?;
    Pipeline::find(&ws.config.paths.pipelines, name)
}

/// A RECOMPUTE step as work that owns what it needs: the pipeline's target brought up to date
/// ([`recompute`]: not rerun when nothing it reads changed, incrementally where provably the
/// same, else a full run), its commit synced apart from the other tasks'.
fn recompute_work(
    ws: &Workspace,
    step: &JournalStep,
    tag: &str,
) -> Result<BoxFuture<'static, Result<Landed>>> {
    let p = recompute_pipeline(ws, step)?;
    let mut extra = BTreeMap::new();
    extra.insert("erasure-request".to_string(), tag.to_string());
    let mut ws = ws.clone();
    ws.warehouse = ws.warehouse.for_concurrent_work();
    Ok(Box::pin(async move {
        let started_at = Utc::now().to_rfc3339();
        // A pipeline none of whose inputs changed (the subject had no rows in them, or a
        // resumed erasure reran it already) is not run again; one whose changed rows bound the
        // target rows they alter rebuilds those only.
        let done = recompute(&ws, &p, extra).await?;
        Ok(Landed {
            snapshot_id: done.run.and_then(|r| r.snapshot_id),
            rows: None,
            how: Some(done.how),
            started_at,
            finished_at: Utc::now().to_rfc3339(),
            history: None,
            twins: Vec::new(),
        })
    }))
}

/// After the cleanup: the logical check of every DELETE, REWRITE and RECOMPUTE table the
/// erasure carried out ([`crate::erasure::logical`], every snapshot each keeps), recorded in
/// the journal. It reports; the attestation judges (and checks again).
async fn check_logically(
    ws: &Workspace,
    gov: &crate::governance::Governance,
    journal: &mut Journal,
    progress: &dyn Fn(&str),
) -> Result<()> {
    use crate::erasure::logical::{Snapshots, check};
    progress("logical check: every snapshot the planned tables keep");
    let cases = journal
        .requests
        .iter()
        .map(|r| read_case(ws, &r.request))
        .collect::<Result<Vec<_>>>()?;
    let tables = crate::erasure::logical::carried_out(journal);
    let subject = &journal.requests[0].subject;
    journal.logical = Some(check(ws, gov, subject, &cases, &tables, Snapshots::Kept).await?);
    save_journal(ws, journal)
}

/// Finished: nothing will be resumed, so the journal keeps counts and ids of snapshots, not
/// the subjects' IDs nor the values that selected their rows (the case files keep those
/// until attested; the register keeps keyed hashes).
fn finish(ws: &Workspace, journal: &mut Journal) -> Result<()> {
    for r in &mut journal.requests {
        r.id.clear();
    }
    // Held steps keep their values until the hold ends and they are carried out.
    for s in journal.steps.iter_mut().filter(|s| !s.is_held()) {
        s.clear_values();
    }
    if let Some(p) = journal.plan.as_mut() {
        for s in &mut p.steps {
            s.values.clear();
            for a in &mut s.also {
                a.values.clear();
            }
        }
    }
    journal.finished_at = Some(Utc::now().to_rfc3339());
    save_journal(ws, journal)
}

/// Rerunning a finished erasure: releases the held steps and stores whose holds no longer hold
/// on `day` (past `until`, or removed from holds.toml). Returns how many it released.
async fn release_holds(
    ws: &Workspace,
    gov: &crate::governance::Governance,
    j: &mut Journal,
    day: chrono::NaiveDate,
) -> Result<usize> {
    if !j.steps.iter().any(JournalStep::is_held) && !j.stores.iter().any(StoreStep::is_held) {
        return Ok(0);
    }
    let tables: Vec<String> = ws
        .warehouse
        .tables()
        .await?
        .iter()
        .map(|t| t.to_string())
        .collect();
    let still = crate::erasure::holds::holds_in_force(ws, gov, &j.requests, day, &tables)?;
    let mut released = 0;
    for s in j.steps.iter_mut().filter(|s| s.is_held()) {
        if !still.tables.iter().any(|(t, _)| *t == s.table) {
            if let Some(h) = s.held.as_mut() {
                h.released_on = Some(day);
            }
            released += 1;
        }
    }
    for s in j.stores.iter_mut().filter(|s| s.is_held()) {
        let named = still.stores.iter().any(|(t, _)| *t == s.store);
        let through = s
            .rebuilt_from
            .as_ref()
            .is_some_and(|f| still.tables.iter().any(|(t, _)| t == f));
        if !named && !through {
            if let Some(h) = s.held.as_mut() {
                h.released_on = Some(day);
            }
            s.state = StoreState::Planned;
            released += 1;
        }
    }
    if released > 0 {
        if let Some(p) = j.plan.as_mut() {
            for ps in &mut p.steps {
                if let Some(js) = j.steps.iter().find(|x| x.table == ps.table) {
                    ps.held = js.held.clone();
                }
            }
        }
        j.finished_at = None;
        save_journal(ws, j)?;
    }
    Ok(released)
}

/// An erasure ends the restrictions of the same subjects: each restriction's record says
/// which erasure ended it, and the erasure's record lists them.
fn end_restrictions(
    ws: &Workspace,
    journal: &Journal,
    key: &RegisterKey,
    day: chrono::NaiveDate,
) -> Result<()> {
    let records = crate::requests::Requests::in_state(&ws.config.paths.state);
    // The restrictions in force, listed once: a batch of n requests read every record n times
    // (1,000 requests against 1,000–3,000 records took 20–80 s, the Ballista benchmark's
    // "unexplained" client time of issue 19).
    let mut in_force: std::collections::HashMap<(String, String), Vec<crate::requests::Request>> =
        std::collections::HashMap::new();
    for r in records.list()? {
        if r.restricting() {
            in_force
                .entry((r.subject.clone(), r.subject_hash.clone()))
                .or_default()
                .push(r);
        }
    }
    for q in &journal.requests {
        if q.id.is_empty() || in_force.is_empty() {
            continue;
        }
        let hash = key.hash(&q.subject, &q.id);
        let mut ended = Vec::new();
        // A restriction is lifted once (a second request of the batch for the same subject
        // finds it lifted, as before).
        for mut r in in_force
            .remove(&(q.subject.clone(), hash))
            .unwrap_or_default()
        {
            r.lift(day, &format!("erasure {}", q.request))?;
            records.save(&r)?;
            ended.push(r.id);
        }
        if !ended.is_empty() {
            records.update(&q.request, |rec| {
                rec.history.push(crate::requests::Event {
                    at: day.to_string(),
                    state: rec.state,
                    note: format!("ended restriction(s) {}", ended.join(", ")),
                });
                rec.ended_restrictions.extend(ended.iter().cloned());
            })?;
        }
    }
    Ok(())
}

/// The failpoint after every durable step (tests stop the erasure there).
fn durable_step(_what: &str) {
    fail::fail_point!("erase-durable-step");
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
