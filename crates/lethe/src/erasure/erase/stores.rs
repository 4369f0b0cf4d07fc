//! The stores outside the warehouse in an erasure: planned with the tables, deleted in order
//! (sources before the warehouse's steps, derived stores after), then probed until verified.
//!
//! Planning gives each registered store of the subject's kind one action:
//! - DELETE / TOMBSTONE / REWRITE_HISTORY / REWRITE / REQUEST: the store's connector deletes;
//! - EXPIRE: no delete mechanism, but a retention that removes the subject by the request's
//!   deadline: pending retention until that day, probed by `lethe verify` after it;
//! - HAND_OFF: a model trained on a table the subject's rows reached, named with its owner;
//! - RESIDUAL: can't be deleted or probed, with a basis: no verdict over it is COMPLETE.
//!
//! A store with no delete mechanism whose retention ends after the deadline (or never) and
//! no basis is a *blocker*: the erasure refuses before changing anything, naming it.
//!
//! The blind check: before a probed store's first delete, its probe is compared with what two
//! other paths say it must find — the store's own data read by the field's text form
//! ([`st::Store::sight`]), and for a store rebuilt from a warehouse table the subject's rows
//! that table held before the erasure (the case file). A probe that finds nothing for a subject
//! where either says records exist can't see the subject (an ID bound as text against
//! integers, a `subject_field` naming the wrong column): the store is BLIND, never verified,
//! and the erasure stops naming it, resumable once its config is fixed (`probe_before`).
//!
//! The verify loop: after the deletes, every store is probed; a residual reopens the store and
//! deletes again (at most [`MAX_DELETES`] deletes), then fails by name. A store rebuilt from a
//! source stays *pending rebuild* until a rebuild that ran after the delete has been probed
//! clean (`lethe verify --request`). Every state change is saved in the journal before the next
//! store is touched, so a failure (a vendor's 5xx, a timeout) leaves the request open and
//! resumable.

use std::collections::BTreeMap;
use std::time::Instant;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use super::journal::{Journal, save_journal};
use crate::erasure::case::{CaseFile, read_case};
use crate::erasure::plan::{Action, Plan};
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::stores::registry::{self, Order, Registry};
use crate::stores::{self as st, Basis, StoreAction, StoreConfig, StoreKind, StoreSubject};
use crate::workspace::Workspace;

/// Deletes of one store before a residual is a named failure.
pub const MAX_DELETES: u32 = 3;

/// Where a store is in an erasure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreState {
    /// Not yet deleted.
    Planned,
    /// Deleted, not yet probed.
    Deleted,
    /// Deleted; verified only after its next rebuild from its source is probed clean.
    PendingRebuild,
    /// Left to its retention, which removes the subject on `expires_on`.
    PendingRetention,
    /// Probed clean.
    Verified,
    /// The delete or the probe failed, or a residual stayed after the deletes: the request is
    /// open (see `error`).
    Failed,
    /// A probe after a rebuild found the subject again: its source still holds the subject.
    Reopened,
    /// Handed to its owner (a model): never claimed as erased.
    HandedOff,
    /// Can't be deleted or probed: a residual with a basis.
    Residual,
    /// Kept under a legal hold (`governance/holds.toml`): not deleted until the hold ends and
    /// the request is run again.
    Held,
    /// Its probe found nothing before the first delete where another path says the subject has
    /// records (the blind check, `probe_before`): it can't see the subject, so neither its
    /// deletes nor its probes are evidence. The request is open (see `error`): fix the store's
    /// configuration and rerun the erasure, which checks it again.
    Blind,
}

impl StoreState {
    /// True when nothing more will happen to the store without a rebuild, a date or a person
    /// (a blind store is never settled: its configuration must be fixed and the erasure rerun).
    pub fn settled(self) -> bool {
        matches!(
            self,
            StoreState::Verified | StoreState::HandedOff | StoreState::Residual
        )
    }
}

impl std::fmt::Display for StoreState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoreState::Planned => "planned",
            StoreState::Deleted => "deleted",
            StoreState::PendingRebuild => "pending rebuild",
            StoreState::PendingRetention => "pending retention",
            StoreState::Verified => "verified",
            StoreState::Failed => "failed",
            StoreState::Reopened => "reopened",
            StoreState::HandedOff => "handed off",
            StoreState::Residual => "residual",
            StoreState::Held => "held",
            StoreState::Blind => "blind",
        })
    }
}

/// One store in an erasure's journal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoreStep {
    /// The store's name in governance/stores.toml.
    pub store: String,
    /// Its kind.
    pub kind: StoreKind,
    /// Its owner (a role).
    pub owner: String,
    /// True for the warehouse's sources, deleted before its steps.
    pub before_warehouse: bool,
    /// The planned action (the connector's actual one once deleted).
    pub action: StoreAction,
    /// How it was (or will be) done.
    pub mechanism: String,
    /// Where it is.
    pub state: StoreState,
    /// Records affected, per request.
    pub records: BTreeMap<String, u64>,
    /// The last probe's residual, per request.
    pub residual: BTreeMap<String, u64>,
    /// What the probe found before the first delete, per request (the blind check's count;
    /// empty when the store was not probed before deleting).
    #[serde(default)]
    pub probed_before: BTreeMap<String, u64>,
    /// Deletes run so far.
    pub deletes: u32,
    /// When its first delete started.
    pub started_at: Option<String>,
    /// When its last delete finished.
    pub deleted_at: Option<String>,
    /// When it was last probed.
    pub probed_at: Option<String>,
    /// When it was verified.
    pub verified_at: Option<String>,
    /// Time spent deleting and probing, in milliseconds.
    pub duration_ms: u64,
    /// EXPIRE: the day the store's retention removes the subject.
    pub expires_on: Option<String>,
    /// Rebuilt stores: the source and the schedule.
    pub rebuilt_from: Option<String>,
    /// The rebuild's schedule, in words.
    pub schedule: Option<String>,
    /// Residuals: why the subject may remain, when it ends, what controls it.
    pub basis: Option<Basis>,
    /// When a residual ends.
    pub expires: Option<String>,
    /// What stops a residual bringing the subject back.
    pub control: Option<String>,
    /// HAND_OFF: the tables the artifact was trained on that the subject's rows reached.
    pub trained_on: Vec<String>,
    /// Places the store couldn't change (a Git remote and the force-push it needs).
    pub unreachable: Vec<String>,
    /// The last failure, naming the store (never a value of the person).
    pub error: Option<String>,
    /// The legal hold that keeps (or kept) the store: held while `released_on` is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<crate::erasure::plan::Held>,
}

impl StoreStep {
    fn new(name: &str, c: &StoreConfig, before: bool, action: StoreAction) -> StoreStep {
        StoreStep {
            store: name.to_string(),
            kind: c.kind,
            owner: c.owner.clone(),
            before_warehouse: before,
            action,
            mechanism: String::new(),
            state: StoreState::Planned,
            records: BTreeMap::new(),
            residual: BTreeMap::new(),
            probed_before: BTreeMap::new(),
            deletes: 0,
            started_at: None,
            deleted_at: None,
            probed_at: None,
            verified_at: None,
            duration_ms: 0,
            expires_on: None,
            rebuilt_from: c.rebuilt_from.clone(),
            schedule: c.schedule.clone(),
            basis: c.basis,
            expires: c.expires.clone(),
            control: c.control.clone(),
            trained_on: Vec::new(),
            unreachable: Vec::new(),
            error: None,
            held: None,
        }
    }

    /// Held under a legal hold that has not been released: not deleted yet.
    pub fn is_held(&self) -> bool {
        self.state == StoreState::Held
            && self.held.as_ref().is_some_and(|h| h.released_on.is_none())
    }

    /// The total residual over requests, when probed.
    pub fn residual_total(&self) -> Option<u64> {
        self.probed_at
            .as_ref()
            .map(|_| self.residual.values().sum())
    }
}

/// What the store plan of an erasure is.
#[derive(Debug, Clone, Default)]
pub struct StorePlan {
    /// The stores, in erasure order.
    pub steps: Vec<StoreStep>,
    /// Stores that block the erasure, with the reason.
    pub blockers: Vec<(String, String)>,
}

/// The default verb of a kind.
fn kind_action(kind: StoreKind) -> StoreAction {
    match kind {
        StoreKind::Git => StoreAction::RewriteHistory,
        StoreKind::Files => StoreAction::Rewrite,
        StoreKind::Http => StoreAction::Request,
        _ => StoreAction::Delete,
    }
}

/// Plans the registered stores for an erasure of `subject` received on `received` and due
/// on `deadline` (the request's due day: [`crate::requests`]).
pub async fn plan_stores(
    ws: &Workspace,
    gov: &Governance,
    plan: &Plan,
    received: NaiveDate,
    deadline: NaiveDate,
) -> Result<StorePlan> {
    let reg = registry::load(&gov.dir)?;
    if reg.value.stores.is_empty() {
        return Ok(StorePlan::default());
    }
    let tables: std::collections::BTreeSet<String> = ws
        .warehouse
        .tables()
        .await?
        .into_iter()
        .map(|t| t.to_string())
        .collect();
    registry::check_tables(&reg, &tables)?;
    let only_subject = (gov.subjects.value.len() == 1)
        .then(|| gov.subjects.value.keys().next().cloned())
        .flatten();
    let deadline = Some(deadline);
    let reached: std::collections::BTreeSet<&str> = plan
        .steps
        .iter()
        .filter(|s| {
            matches!(
                s.action,
                Action::Delete | Action::Rewrite | Action::Recompute
            )
        })
        .map(|s| s.table.as_str())
        .collect();
    let Order { before, after } = registry::order(&reg.value);
    let mut out = StorePlan::default();
    for (name, is_before) in before
        .iter()
        .map(|n| (n, true))
        .chain(after.iter().map(|n| (n, false)))
    {
        let c = &reg.value.stores[name];
        let subject = c.subject.clone().or_else(|| only_subject.clone());
        if subject.as_deref() != Some(plan.subject.as_str()) {
            continue;
        }
        if c.kind == StoreKind::Model {
            let hit: Vec<String> = c
                .trained_on
                .iter()
                .filter(|t| reached.contains(t.as_str()))
                .cloned()
                .collect();
            if hit.is_empty() {
                continue;
            }
            let mut s = StoreStep::new(name, c, is_before, StoreAction::HandOff);
            s.state = StoreState::HandedOff;
            s.mechanism = format!("handed to {} (trained on {})", c.owner, hit.join(", "));
            s.trained_on = hit;
            out.steps.push(s);
            continue;
        }
        if c.deletable() {
            let mut s = StoreStep::new(name, c, is_before, kind_action(c.kind));
            if !c.probed() {
                s.mechanism = "deleted; can't be probed".into();
            }
            out.steps.push(s);
            continue;
        }
        // No delete mechanism: a residual with a basis, EXPIRE, or a blocker.
        if let Some(b) = c.basis {
            let mut s = StoreStep::new(name, c, is_before, StoreAction::Residual);
            s.state = StoreState::Residual;
            s.mechanism = format!("residual: {b}");
            out.steps.push(s);
            continue;
        }
        let ends = c.retention_period().and_then(|p| p.after(received));
        match (ends, deadline) {
            (Some(end), Some(dl)) if end <= dl => {
                let mut s = StoreStep::new(name, c, is_before, StoreAction::Expire);
                s.state = StoreState::PendingRetention;
                s.expires_on = Some(end.to_string());
                s.mechanism = format!(
                    "retention ({}) removes the subject by {end}",
                    c.retention.clone().unwrap_or_default()
                );
                out.steps.push(s);
            }
            (Some(end), Some(dl)) => out.blockers.push((
                name.clone(),
                format!(
                    "no delete mechanism, and its retention ({}) ends on {end}, after the request's deadline {dl}",
                    c.retention.clone().unwrap_or_default()
                ),
            )),
            _ => out.blockers.push((
                name.clone(),
                "no delete mechanism and no retention: the subject would stay there".into(),
            )),
        }
    }
    Ok(out)
}

/// Marks the stores a legal hold names as HELD (the hold that ends last shows). A store rebuilt
/// from a held table (`rebuilt_from`) is held with it: its next rebuild would bring the held
/// records back, so deleting there can't be verified until the hold ends; its basis says so.
/// Only stores lethe deletes are held: one left to its retention (EXPIRE), a residual or a
/// hand-off is not changed by lethe either way.
pub(super) fn mark_held(
    steps: &mut [StoreStep],
    stores: &[(String, crate::erasure::plan::Held)],
    tables: &[(String, crate::erasure::plan::Held)],
) {
    for s in steps {
        if s.state != StoreState::Planned {
            continue;
        }
        let named = crate::erasure::holds::keeping(stores, &s.store).cloned();
        let through = s.rebuilt_from.as_deref().and_then(|t| {
            crate::erasure::holds::keeping(tables, t).map(|h| crate::erasure::plan::Held {
                basis: format!(
                    "rebuilt from {t}, which this hold keeps (its next rebuild brings the held records back); {}",
                    h.basis.trim()
                ),
                ..h.clone()
            })
        });
        let held = match (named, through) {
            (Some(a), Some(b)) => Some(if b.until > a.until { b } else { a }),
            (a, b) => a.or(b),
        };
        if let Some(h) = held {
            s.mechanism = format!("held under legal hold `{}` until {}", h.hold, h.until);
            s.held = Some(h);
            s.state = StoreState::Held;
        }
    }
}

/// The subjects as store `c` is asked about them: the values of its identifier from each
/// request's case file.
pub(crate) fn subjects_for(
    gov: &Governance,
    c: &StoreConfig,
    cases: &[CaseFile],
) -> Result<Vec<StoreSubject>> {
    let mut out = Vec::new();
    for case in cases {
        let identifier = match &c.identifier {
            Some(i) => i.clone(),
            None => gov.subjects.get(&case.subject)?.root()?.1,
        };
        let mut values: Vec<String> = case.ids.get(&identifier).cloned().unwrap_or_default();
        if values.is_empty() {
            values = case
                .values
                .iter()
                .filter(|v| v.kind == identifier)
                .map(|v| v.value.clone())
                .collect();
        }
        out.push(StoreSubject {
            request: case.request.clone(),
            values,
            traces: case.values.iter().map(|v| v.value.clone()).collect(),
        });
    }
    Ok(out)
}

/// Everything a store operation needs, loaded once.
pub(crate) struct Ctx {
    gov: Governance,
    reg: Registry,
    cases: Vec<CaseFile>,
}

impl Ctx {
    pub(crate) fn load(ws: &Workspace, journal: &Journal) -> Result<Ctx> {
        let gov = ws.governance()?;
        let reg = registry::load(&gov.dir)?;
        let mut cases = Vec::new();
        for r in &journal.requests {
            let c = read_case(ws, &r.request)?;
            if c.destroyed {
                return Err(Error::invalid(format!(
                    "the case file of {} was destroyed; its stores can't be deleted or probed again",
                    r.request
                )));
            }
            cases.push(c);
        }
        Ok(Ctx { gov, reg, cases })
    }

    fn store(&self, ws: &Workspace, name: &str) -> Result<(Box<dyn st::Store>, &StoreConfig)> {
        let c = self.reg.value.stores.get(name).ok_or_else(|| {
            Error::invalid(format!(
                "store `{name}` is in the erasure's journal but no longer in {}",
                self.reg.path.display()
            ))
        })?;
        Ok((st::open(&ws.config.root, name, c)?, c))
    }
}

fn now() -> String {
    Utc::now().to_rfc3339()
}

fn by_request(subjects: &[StoreSubject], counts: &[u64]) -> BTreeMap<String, u64> {
    subjects
        .iter()
        .zip(counts)
        .map(|(s, n)| (s.request.clone(), *n))
        .collect()
}

/// One delete of step `i`, recorded.
async fn delete_once(
    ws: &Workspace,
    ctx: &Ctx,
    journal: &mut Journal,
    i: usize,
    progress: &dyn Fn(&str),
) -> Result<()> {
    let name = journal.stores[i].store.clone();
    progress(&format!("store {name}: delete"));
    let (store, c) = ctx.store(ws, &name)?;
    let subjects = subjects_for(&ctx.gov, c, &ctx.cases)?;
    let t = Instant::now();
    if journal.stores[i].started_at.is_none() {
        journal.stores[i].started_at = Some(now());
    }
    let r = store.delete(&subjects).await;
    let s = &mut journal.stores[i];
    s.duration_ms += t.elapsed().as_millis() as u64;
    match r {
        Ok(d) => {
            s.deletes += 1;
            s.action = d.action;
            s.mechanism = d.mechanism;
            for (req, n) in by_request(&subjects, &d.records) {
                *s.records.entry(req).or_default() += n;
            }
            for u in d.unreachable {
                if !s.unreachable.contains(&u) {
                    s.unreachable.push(u);
                }
            }
            s.deleted_at = Some(now());
            s.state = StoreState::Deleted;
            s.error = None;
            save_journal(ws, journal)?;
            super::durable_step(&format!("store {name} deleted"));
            Ok(())
        }
        Err(e) => {
            s.state = StoreState::Failed;
            s.error = Some(e.to_string());
            save_journal(ws, journal)?;
            Err(e)
        }
    }
}

/// One probe of step `i`: the residual per request, recorded.
async fn probe_once(
    ws: &Workspace,
    ctx: &Ctx,
    journal: &mut Journal,
    i: usize,
    progress: &dyn Fn(&str),
) -> Result<u64> {
    let name = journal.stores[i].store.clone();
    progress(&format!("store {name}: probe"));
    let (store, c) = ctx.store(ws, &name)?;
    let subjects = subjects_for(&ctx.gov, c, &ctx.cases)?;
    let t = Instant::now();
    let r = store.probe(&subjects).await;
    let s = &mut journal.stores[i];
    s.duration_ms += t.elapsed().as_millis() as u64;
    match r {
        Ok(counts) => {
            s.residual = by_request(&subjects, &counts);
            s.probed_at = Some(now());
            save_journal(ws, journal)?;
            Ok(counts.iter().sum())
        }
        Err(e) => {
            s.state = StoreState::Failed;
            s.error = Some(e.to_string());
            save_journal(ws, journal)?;
            Err(e)
        }
    }
}

/// What a store's probe saw before its first delete, and whether it can see the subject.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BeforeDelete {
    /// The probe's count per subject, in the order asked.
    pub probed: Vec<u64>,
    /// Why the store is blind — for some subject the probe found nothing where another path
    /// says records exist — in counts, store and table names (never a value); `None` when the
    /// probe saw what the other paths saw, or there is no other path.
    pub blind: Option<String>,
}

/// The blind check: probes `store` for `subjects` (the subjects as [`subjects_for`] builds them
/// from `cases`) and compares each subject's count with two paths that don't go through the
/// probe:
/// - the store's own data read by the field's text form, with no typed parameter
///   ([`st::Store::sight`]), when the store has such a path;
/// - for a store rebuilt from a warehouse table (`rebuilt_from`), the rows of the subject that
///   table held before the erasure (the case file's `rows`): if it held rows, the store must
///   find records — unless `source_rebuilt` says the store was rebuilt after the erasure's
///   delete in that table landed (then finding nothing is right).
///
/// A probe that finds 0 for a subject where either path says records exist makes the store
/// blind. Changes nothing, so it can also run as a dry probe (`lethe explain`). It does not
/// catch a probe that finds some records but not all, nor a store whose other paths can't see
/// either (no `sight`, not rebuilt from a table); and an index that lags its source (the
/// subject's rows loaded after its last rebuild) is reported blind until it is rebuilt.
pub(crate) async fn probe_before(
    store: &dyn st::Store,
    c: &StoreConfig,
    subjects: &[StoreSubject],
    cases: &[CaseFile],
    source_rebuilt: bool,
) -> Result<BeforeDelete> {
    let probed = store.probe(subjects).await?;
    let sight = store.sight(subjects).await?;
    let mut why = Vec::new();
    for (i, s) in subjects.iter().enumerate() {
        if probed.get(i).copied().unwrap_or(0) > 0 {
            continue;
        }
        let mut seen = Vec::new();
        if let Some(n) = sight.as_ref().and_then(|v| v.get(i)).filter(|n| **n > 0) {
            seen.push(format!("reading its subject field as text finds {n}"));
        }
        if let Some(t) = c.rebuilt_from.as_deref().filter(|_| !source_rebuilt) {
            let rows = cases
                .iter()
                .find(|k| k.request == s.request)
                .and_then(|k| k.rows.get(t))
                .copied()
                .unwrap_or(0);
            if rows > 0 {
                seen.push(format!(
                    "{t}, which it is rebuilt from, held {rows} row(s) of the subject before the erasure"
                ));
            }
        }
        if seen.is_empty() {
            continue;
        }
        let asked = if s.values.is_empty() {
            " (asked with no value: the case file holds none of the identifier it holds)"
        } else {
            ""
        };
        why.push(format!(
            "its probe finds 0 record(s) of the subject of {}{asked}, but {}",
            s.request,
            seen.join(", and ")
        ));
    }
    let blind = (!why.is_empty()).then(|| {
        format!(
            "{}: the probe can't see the subject, so its deletes and probes prove nothing; check the store's subject_field (and the field's type) in governance/stores.toml, or rebuild it if it lags its source, then rerun the erasure",
            why.join("; ")
        )
    });
    Ok(BeforeDelete { probed, blind })
}

/// True when `store` (rebuilt from warehouse table `table`) was rebuilt after every step of
/// the erasure on that table landed: its source no longer held the subject when it was built.
async fn rebuilt_after_source(
    journal: &Journal,
    table: &str,
    store: &dyn st::Store,
) -> Result<bool> {
    let mut landed: Option<DateTime<Utc>> = None;
    for step in journal.steps.iter().filter(|s| s.table == table) {
        let at = step
            .finished_at
            .as_deref()
            .and_then(|d| DateTime::parse_from_rfc3339(d).ok())
            .map(|d| d.with_timezone(&Utc));
        match at {
            Some(at) if step.done => landed = Some(landed.map_or(at, |l| l.max(at))),
            _ => return Ok(false),
        }
    }
    let Some(landed) = landed else {
        return Ok(false);
    };
    Ok(store.last_rebuild().await?.is_some_and(|b| b > landed))
}

/// The blind check of step `i` before its first delete ([`probe_before`]), recorded: the
/// probe's counts in `probed_before`; a blind store is marked BLIND with the reason, the
/// journal saved, and the erasure stopped with an error naming the store.
async fn check_before(
    ws: &Workspace,
    ctx: &Ctx,
    journal: &mut Journal,
    i: usize,
    progress: &dyn Fn(&str),
) -> Result<()> {
    let name = journal.stores[i].store.clone();
    let (store, c) = ctx.store(ws, &name)?;
    if !c.probed() {
        return Ok(());
    }
    progress(&format!("store {name}: probe before the delete"));
    let subjects = subjects_for(&ctx.gov, c, &ctx.cases)?;
    let t = Instant::now();
    let r = async {
        let rebuilt = match c.rebuilt_from.as_deref() {
            Some(table) => rebuilt_after_source(journal, table, store.as_ref()).await?,
            None => false,
        };
        probe_before(store.as_ref(), c, &subjects, &ctx.cases, rebuilt).await
    }
    .await;
    let s = &mut journal.stores[i];
    s.duration_ms += t.elapsed().as_millis() as u64;
    match r {
        Ok(seen) => {
            s.probed_before = by_request(&subjects, &seen.probed);
            if let Some(why) = seen.blind {
                tracing::warn!(store = %name, "blind: its probe can't see the subject");
                s.state = StoreState::Blind;
                s.error = Some(why.clone());
                save_journal(ws, journal)?;
                return Err(st::error(&name, format!("blind: {why}")));
            }
            save_journal(ws, journal)?;
            Ok(())
        }
        Err(e) => {
            s.state = StoreState::Failed;
            s.error = Some(e.to_string());
            save_journal(ws, journal)?;
            Err(e)
        }
    }
}

/// Deletes every store of one side of the warehouse not yet deleted (failed, reopened and
/// blind ones again), in order; before a store's first delete, the blind check
/// (`check_before`). Stops at the first failure: the journal names it.
pub(super) async fn delete_stores(
    ws: &Workspace,
    journal: &mut Journal,
    before_warehouse: bool,
    progress: &dyn Fn(&str),
) -> Result<()> {
    if !journal
        .stores
        .iter()
        .any(|s| s.before_warehouse == before_warehouse)
    {
        return Ok(());
    }
    let ctx = Ctx::load(ws, journal)?;
    for i in 0..journal.stores.len() {
        let s = &journal.stores[i];
        if s.before_warehouse != before_warehouse
            || !matches!(
                s.state,
                StoreState::Planned | StoreState::Failed | StoreState::Reopened | StoreState::Blind
            )
            || matches!(
                s.action,
                StoreAction::Expire | StoreAction::HandOff | StoreAction::Residual
            )
        {
            continue;
        }
        // Its first delete in this erasure (a blind store never got to one).
        let first = s.started_at.is_none();
        if s.state == StoreState::Failed && s.deletes >= MAX_DELETES {
            journal.stores[i].deletes = 0;
        }
        if first {
            check_before(ws, &ctx, journal, i, progress).await?;
        }
        delete_once(ws, &ctx, journal, i, progress).await?;
        if before_warehouse {
            // A source is verified before anything is loaded from it is touched.
            verify_one(ws, &ctx, journal, i, progress, None).await?;
        }
    }
    Ok(())
}

/// Probes every deleted store (after the warehouse's steps): a residual deletes again, up to
/// [`MAX_DELETES`] deletes, then fails by name. Rebuilt stores become pending rebuild.
pub(super) async fn verify_stores(
    ws: &Workspace,
    journal: &mut Journal,
    progress: &dyn Fn(&str),
) -> Result<()> {
    if journal.stores.is_empty() {
        return Ok(());
    }
    let ctx = Ctx::load(ws, journal)?;
    for i in 0..journal.stores.len() {
        if journal.stores[i].state == StoreState::Deleted {
            verify_one(ws, &ctx, journal, i, progress, None).await?;
        }
    }
    Ok(())
}

/// Probes deleted store `i`: clean → verified (or pending rebuild); a residual → deletes again
/// while deletes < MAX_DELETES, then a named failure. `rebuilt` is the time of a rebuild seen
/// after the delete, when called from `lethe verify`.
async fn verify_one(
    ws: &Workspace,
    ctx: &Ctx,
    journal: &mut Journal,
    i: usize,
    progress: &dyn Fn(&str),
    rebuilt: Option<DateTime<Utc>>,
) -> Result<()> {
    let (_, c) = ctx.store(ws, &journal.stores[i].store)?;
    if !c.probed() {
        let s = &mut journal.stores[i];
        s.state = StoreState::Residual;
        save_journal(ws, journal)?;
        return Ok(());
    }
    let rebuilt_store = c.rebuilt_from.is_some();
    loop {
        let residual = probe_once(ws, ctx, journal, i, progress).await?;
        let s = &mut journal.stores[i];
        if residual == 0 {
            if rebuilt_store && rebuilt.is_none() {
                s.state = StoreState::PendingRebuild;
            } else {
                s.state = StoreState::Verified;
                s.verified_at = Some(now());
            }
            save_journal(ws, journal)?;
            return Ok(());
        }
        if rebuilt.is_some() {
            s.state = StoreState::Reopened;
            s.error = Some(format!(
                "the rebuild from {} brought back {residual} record(s) of the subject: its source still holds the subject",
                s.rebuilt_from.clone().unwrap_or_default()
            ));
            let e = st::error(&s.store, s.error.clone().unwrap_or_default());
            save_journal(ws, journal)?;
            return Err(e);
        }
        if s.deletes >= MAX_DELETES {
            s.state = StoreState::Failed;
            s.error = Some(format!(
                "still holds {residual} record(s) of the subject after {} delete(s)",
                s.deletes
            ));
            let e = st::error(&s.store, s.error.clone().unwrap_or_default());
            save_journal(ws, journal)?;
            return Err(e);
        }
        tracing::info!(store = %s.store, residual, "a residual after the delete: reopened, deleting again");
        delete_once(ws, ctx, journal, i, progress).await?;
    }
}

/// What `lethe verify` found for one store.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyOutcome {
    /// The store.
    pub store: String,
    /// Its state before.
    pub was: StoreState,
    /// Its state now.
    pub now: StoreState,
    /// In words.
    pub detail: String,
}

/// `lethe verify`: re-probes the stores an erasure left pending — rebuilt stores whose rebuild
/// ran after the delete, EXPIRE stores whose day has come (`today`), deleted stores not yet
/// verified. Returns what changed; the journal is saved.
pub async fn verify_pending(
    ws: &Workspace,
    journal: &mut Journal,
    today: NaiveDate,
    progress: &dyn Fn(&str),
) -> Result<Vec<VerifyOutcome>> {
    let ctx = Ctx::load(ws, journal)?;
    let mut out = Vec::new();
    for i in 0..journal.stores.len() {
        let was = journal.stores[i].state;
        let name = journal.stores[i].store.clone();
        let detail = match was {
            StoreState::PendingRebuild => {
                let (store, _) = ctx.store(ws, &name)?;
                let deleted = journal.stores[i]
                    .deleted_at
                    .as_deref()
                    .and_then(|d| DateTime::parse_from_rfc3339(d).ok())
                    .map(|d| d.with_timezone(&Utc));
                match (store.last_rebuild().await?, deleted) {
                    (Some(built), Some(del)) if built > del => {
                        match verify_one(ws, &ctx, journal, i, progress, Some(built)).await {
                            Ok(()) => format!("rebuilt at {built} and probed clean"),
                            Err(Error::Store { message, .. }) => message,
                            Err(e) => return Err(e),
                        }
                    }
                    _ => format!(
                        "waiting for its next rebuild from {} ({})",
                        journal.stores[i].rebuilt_from.clone().unwrap_or_default(),
                        journal.stores[i].schedule.clone().unwrap_or_default()
                    ),
                }
            }
            StoreState::PendingRetention => {
                let due = journal.stores[i]
                    .expires_on
                    .as_deref()
                    .and_then(|d| d.parse::<NaiveDate>().ok());
                match due {
                    Some(d) if today >= d => {
                        let residual = probe_once(ws, &ctx, journal, i, progress).await?;
                        let s = &mut journal.stores[i];
                        if residual == 0 {
                            s.state = StoreState::Verified;
                            s.verified_at = Some(now());
                            format!("its retention ended on {d}; probed clean")
                        } else {
                            s.state = StoreState::Failed;
                            s.error = Some(format!(
                                "its retention ended on {d} but it still holds {residual} record(s) of the subject"
                            ));
                            s.error.clone().unwrap_or_default()
                        }
                    }
                    Some(d) => format!("pending retention until {d}"),
                    None => "pending retention (no date)".into(),
                }
            }
            StoreState::Deleted => match verify_one(ws, &ctx, journal, i, progress, None).await {
                Ok(()) => "probed".into(),
                Err(Error::Store { message, .. }) => message,
                Err(e) => return Err(e),
            },
            _ => continue,
        };
        save_journal(ws, journal)?;
        out.push(VerifyOutcome {
            store: name,
            was,
            now: journal.stores[i].state,
            detail,
        });
    }
    Ok(out)
}

/// True when every store of the journal is settled (verified, handed off, or a residual).
pub fn all_settled(journal: &Journal) -> bool {
    journal.stores.iter().all(|s| s.state.settled())
}

/// The blind check as a dry probe, for `lethe explain`: store `name` of the registry, probed
/// for the subjects of `cases` without deleting ([`probe_before`], the store's source taken
/// as not rebuilt since). `Some(why)` when its probe can't see the subject; `None` when it
/// can, or when it isn't a store lethe deletes from and probes.
pub async fn blind_reason(
    ws: &Workspace,
    name: &str,
    cases: &[CaseFile],
) -> Result<Option<String>> {
    let gov = ws.governance()?;
    let reg = registry::load(&gov.dir)?;
    let Some(c) = reg.value.stores.get(name) else {
        return Ok(None);
    };
    if !c.deletable() || !c.probed() {
        return Ok(None);
    }
    let store = st::open(&ws.config.root, name, c)?;
    let subjects = subjects_for(&gov, c, cases)?;
    Ok(probe_before(store.as_ref(), c, &subjects, cases, false)
        .await?
        .blind)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use async_trait::async_trait;

    use super::*;
    use crate::stores::{Deleted, Store};

    /// An FTS5 index whose documents hold the IDs as integers: two of 1113, one of 42 whose
    /// `other` field holds 1113.
    fn index_db(dir: &Path) -> PathBuf {
        let db = dir.join("index.db");
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(
            "CREATE VIRTUAL TABLE docs USING fts5(uid UNINDEXED, other UNINDEXED, body);
             CREATE TABLE builds (built_at TEXT NOT NULL);
             INSERT INTO docs VALUES (1113, 5, 'a'), (1113, 5, 'b'), (42, 1113, 'c');",
        )
        .unwrap();
        db
    }

    fn index(dir: &Path, field: &str) -> (Box<dyn Store>, StoreConfig) {
        std::fs::write(
            dir.join("stores.toml"),
            format!(
                "[stores.search]\nkind = \"index\"\nowner = \"ops\"\nengine = \"sqlite\"\npath = \"index.db\"\ntable = \"docs\"\nbuilds_table = \"builds\"\nsubject_field = \"{field}\"\nrebuilt_from = \"app.messages\"\nschedule = \"nightly\"\n"
            ),
        )
        .unwrap();
        let c = registry::load(dir).unwrap().value.stores["search"].clone();
        (st::open(dir, "search", &c).unwrap(), c)
    }

    fn subject() -> Vec<StoreSubject> {
        vec![StoreSubject {
            request: "r-1".into(),
            values: vec!["1113".into()],
            traces: Vec::new(),
        }]
    }

    fn case(rows: u64) -> Vec<CaseFile> {
        vec![CaseFile {
            request: "r-1".into(),
            rows: [("app.messages".to_string(), rows)].into(),
            ..Default::default()
        }]
    }

    /// The index connector's probe as it was before issue 43, on the same real SQLite file:
    /// the ID bound as text only, which no integer in an FTS5 column equals. Its sight is the
    /// real connector's.
    struct TextBound {
        db: PathBuf,
        real: Box<dyn Store>,
    }

    #[async_trait]
    impl Store for TextBound {
        fn name(&self) -> &str {
            "search"
        }
        async fn delete(&self, _: &[StoreSubject]) -> Result<Deleted> {
            Err(st::error("search", "not deleted in this test"))
        }
        async fn probe(&self, subjects: &[StoreSubject]) -> Result<Vec<u64>> {
            let c = rusqlite::Connection::open(&self.db).unwrap();
            Ok(subjects
                .iter()
                .map(|s| {
                    c.query_row(
                        "SELECT count(*) FROM docs WHERE uid IN (?1)",
                        [s.values[0].clone()],
                        |r| r.get::<_, i64>(0),
                    )
                    .unwrap() as u64
                })
                .collect())
        }
        async fn sight(&self, subjects: &[StoreSubject]) -> Result<Option<Vec<u64>>> {
            self.real.sight(subjects).await
        }
    }

    #[tokio::test]
    async fn a_probe_that_sees_what_the_other_paths_see_is_not_blind() {
        let dir = tempfile::tempdir().unwrap();
        index_db(dir.path());
        let (store, c) = index(dir.path(), "uid");
        let b = probe_before(store.as_ref(), &c, &subject(), &case(2), false)
            .await
            .unwrap();
        assert_eq!(
            b,
            BeforeDelete {
                probed: vec![2],
                blind: None
            }
        );
        // A subject the source never held, found nowhere: nothing to see.
        let b = probe_before(store.as_ref(), &c, &subject(), &case(0), false)
            .await
            .unwrap();
        assert_eq!(b.blind, None);
    }

    #[tokio::test]
    async fn a_probe_bound_as_text_against_integers_is_blind_by_its_sight() {
        let dir = tempfile::tempdir().unwrap();
        let db = index_db(dir.path());
        let (real, c) = index(dir.path(), "uid");
        let old = TextBound { db, real };
        // Even with nothing known of the source (rebuilt since): the text path sees 2.
        let b = probe_before(&old, &c, &subject(), &case(0), true)
            .await
            .unwrap();
        assert_eq!(b.probed, vec![0]);
        let why = b.blind.expect("blind");
        assert!(
            why.contains("its probe finds 0 record(s) of the subject of r-1")
                && why.contains("reading its subject field as text finds 2"),
            "{why}"
        );
        assert!(!why.contains("1113"), "never a value: {why}");
    }

    #[tokio::test]
    async fn a_probe_on_the_wrong_field_is_blind_by_its_source_until_rebuilt_from_it() {
        let dir = tempfile::tempdir().unwrap();
        index_db(dir.path());
        let (store, c) = index(dir.path(), "body");
        let b = probe_before(store.as_ref(), &c, &subject(), &case(2), false)
            .await
            .unwrap();
        let why = b.blind.expect("blind");
        assert!(
            why.contains("app.messages, which it is rebuilt from, held 2 row(s) of the subject")
                && !why.contains("as text"),
            "{why}"
        );
        assert!(!why.contains("1113"), "never a value: {why}");
        // Rebuilt after the erasure's delete in its source: finding nothing is right.
        let b = probe_before(store.as_ref(), &c, &subject(), &case(2), true)
            .await
            .unwrap();
        assert_eq!(b.blind, None);
        // The check catches a probe that finds nothing, not one that finds other records: a
        // field holding the value in another sense sees 1 and is not called blind.
        let (store, c) = index(dir.path(), "other");
        let b = probe_before(store.as_ref(), &c, &subject(), &case(2), false)
            .await
            .unwrap();
        assert_eq!(
            b,
            BeforeDelete {
                probed: vec![1],
                blind: None
            }
        );
    }
}
