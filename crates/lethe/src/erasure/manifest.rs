//! The manifest of one request: every system that held (or may hold) the subject, in the shape
//! a customer's compliance team acts on. lethe acts as the controller's processor: it takes
//! the instruction and returns this.
//!
//! It names the request and what it asked for — its kind, the controller that instructed it
//! and their reference, the day it was received and the day it is due (after any extension,
//! with the reason), its state and every certification — the subject by the register's keyed
//! hash (never the ID); then one entry per *system* — each warehouse table the plan changed and
//! each registered store — with the action, the mechanism, the records affected, when it
//! started, when it was verified, how long it took and the residual; then the residuals (stores
//! that can't be probed or deleted, with basis, expiry and control; places a store couldn't
//! change, such as a Git remote), and the hand-offs (models trained on tables the subject's
//! rows reached, named with their owner, never claimed as erased). A system a legal hold keeps
//! is HELD, with the hold's basis, and the partial refusal is stated in words a recipient can
//! read ([`crate::erasure::evidence`]).
//!
//! Its status is COMPLETE only when every system is verified; PARTLY_REFUSED when every system
//! but those a legal hold keeps is verified; OPEN while a store is pending (a rebuild, a
//! retention date) or failed (the request is resumable); INCOMPLETE when a residual can never
//! be verified by lethe. A restriction's manifest ([`restriction`]) is RESTRICTED or LIFTED and
//! lists what was suspended where, and every store, which lethe can't suspend. Built from the
//! journal, so `lethe erase` prints it as its summary and `lethe attest` includes it (with the
//! tables' fresh check).

use serde::{Deserialize, Serialize};

use crate::erasure::erase::{Journal, StoreState, StoreStep};
use crate::erasure::evidence::RequestEvidence;
use crate::erasure::plan::Held;
use crate::error::Result;
use crate::stores::StoreAction;
use crate::workspace::Workspace;

/// A place that still holds (or may hold) the subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Residual {
    /// What it is.
    pub place: String,
    /// Why it is kept / what it is (`technical_impossibility`, `legal_obligation`, `retention`).
    pub basis: String,
    /// When it ends.
    pub expires: String,
    /// What stops it bringing the subject back (`restore_replays_erasure_log`).
    pub control: String,
}

/// An artifact trained on the subject's rows, handed to its owner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandOff {
    /// The artifact (the store's name).
    pub artifact: String,
    /// The tables it was trained on that the subject's rows reached.
    pub trained_on: Vec<String>,
    /// Who it is handed to.
    pub owner: String,
}

/// One system of the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct System {
    /// The table (`ns.table`) or store name.
    pub system: String,
    /// `iceberg table` or the store's kind.
    pub kind: String,
    /// The action.
    pub action: String,
    /// How it was done.
    pub mechanism: String,
    /// Records affected for this request.
    pub records: u64,
    /// When it started (RFC 3339).
    pub started: Option<String>,
    /// When it was verified (RFC 3339), if it was.
    pub verified: Option<String>,
    /// Milliseconds spent.
    pub duration_ms: Option<u64>,
    /// Records still holding the subject at the last check (a table's rows that address the
    /// subject in any snapshot it keeps; a store's records); `None` when not checked.
    pub residual: Option<u64>,
    /// A table's erased-column values still present (REWRITE); never added to `residual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual_values: Option<u64>,
    /// Files under a table's location still holding the subject's traces; never added to
    /// `residual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual_files: Option<u64>,
    /// verified, deleted, pending rebuild, pending retention until DATE, failed: WHY, HELD
    /// under legal hold ..., suspended, not suspended: WHY, ...
    pub state: String,
    /// The legal hold that keeps (or kept, once `released_on` is set) this system.
    pub held: Option<Held>,
}

/// The manifest of one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The request ID.
    pub request: String,
    /// The subject's kind.
    pub subject_kind: String,
    /// The subject reference: the register's keyed hash (HMAC-SHA256), never the ID.
    pub subject_ref: String,
    /// The request: kind, controller, reference, received and due days, extensions, state,
    /// certifications, held parts and the partial refusal, a restriction's scope.
    #[serde(flatten)]
    pub workflow: RequestEvidence,
    /// When it was certified (a COMPLETE or PARTLY_REFUSED attestation).
    pub certified: Option<String>,
    /// COMPLETE, PARTLY_REFUSED, OPEN or INCOMPLETE; RESTRICTED or LIFTED for a restriction.
    pub status: String,
    /// Every system, in erasure order (sources first).
    pub systems: Vec<System>,
    /// What remains outside lethe's reach.
    pub residuals: Vec<Residual>,
    /// Models and artifacts handed to their owners.
    pub hand_offs: Vec<HandOff>,
}

/// A table's check, as the attestation made it: rows, values and files apart.
#[derive(Debug, Clone)]
pub struct TableCheck {
    /// The table.
    pub table: String,
    /// Rows that still address the subject, in any snapshot the table keeps (DELETE,
    /// RECOMPUTE; a REWRITE keeps its rows).
    pub rows: u64,
    /// Erased-column values still present (REWRITE).
    pub values: u64,
    /// Files under its location still holding the subject's traces.
    pub files: u64,
    /// When checked.
    pub at: String,
}

impl TableCheck {
    /// Nothing left.
    pub fn is_clean(&self) -> bool {
        self.rows == 0 && self.values == 0 && self.files == 0
    }

    /// What is left, in words: `1 row(s), 2 file(s)`.
    pub fn left(&self) -> String {
        let mut parts = Vec::new();
        for (n, what) in [
            (self.rows, "row(s)"),
            (self.values, "erased value(s)"),
            (self.files, "file(s)"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        parts.join(", ")
    }
}

fn millis_between(a: &Option<String>, b: &Option<String>) -> Option<u64> {
    let a = chrono::DateTime::parse_from_rfc3339(a.as_deref()?).ok()?;
    let b = chrono::DateTime::parse_from_rfc3339(b.as_deref()?).ok()?;
    u64::try_from((b - a).num_milliseconds()).ok()
}

/// A held system's state, in words: the hold, its end, its basis and who decided.
fn held_state(h: &Held) -> String {
    format!(
        "HELD under legal hold `{}` until {}: {} (decided by the {})",
        h.hold,
        h.until,
        h.basis.trim(),
        h.decided_by
    )
}

fn store_state(s: &StoreStep) -> String {
    match s.state {
        StoreState::Held => s.held.as_ref().map(held_state).unwrap_or_default(),
        StoreState::PendingRetention => format!(
            "pending retention until {}",
            s.expires_on.clone().unwrap_or_default()
        ),
        StoreState::PendingRebuild => format!(
            "pending rebuild from {} ({})",
            s.rebuilt_from.clone().unwrap_or_default(),
            s.schedule.clone().unwrap_or_default()
        ),
        StoreState::Failed | StoreState::Reopened | StoreState::Blind => {
            format!("{}: {}", s.state, s.error.clone().unwrap_or_default())
        }
        other => other.to_string(),
    }
}

/// The manifest of `request` from its erasure's journal, its case file and its record.
/// `tables`, when given, is the attestation's fresh check of each table.
pub fn of_request(
    ws: &Workspace,
    journal: &Journal,
    request: &str,
    tables: Option<&[TableCheck]>,
) -> Result<Manifest> {
    let case = crate::erasure::case::read_case(ws, request)?;
    let workflow = crate::erasure::evidence::for_erasure(ws, request, journal)?;
    Ok(build(
        journal, request, &case.hash, &case.rows, tables, workflow,
    ))
}

/// The manifest of `request` from its erasure's journal. `rows` is the request's rows per
/// table (from its case file); `tables`, when given, the attestation's fresh check of each
/// table; `subject_ref` the register hash; `workflow` the request's evidence (its record).
pub fn build(
    journal: &Journal,
    request: &str,
    subject_ref: &str,
    rows: &std::collections::BTreeMap<String, u64>,
    tables: Option<&[TableCheck]>,
    mut workflow: RequestEvidence,
) -> Manifest {
    let spec = journal.requests.iter().find(|r| r.request == request);
    let mut systems = Vec::new();
    let mut residuals = Vec::new();
    let mut hand_offs = Vec::new();
    let store_system = |s: &StoreStep| System {
        system: s.store.clone(),
        kind: s.kind.to_string(),
        action: s.action.to_string(),
        mechanism: s.mechanism.clone(),
        records: s.records.get(request).copied().unwrap_or(0),
        started: s.started_at.clone(),
        verified: s.verified_at.clone(),
        duration_ms: (s.deletes > 0 || s.probed_at.is_some()).then_some(s.duration_ms),
        residual: s
            .probed_at
            .as_ref()
            .map(|_| s.residual.get(request).copied().unwrap_or(0)),
        residual_values: None,
        residual_files: None,
        state: store_state(s),
        held: s.held.clone(),
    };
    for s in journal.stores.iter().filter(|s| s.before_warehouse) {
        systems.push(store_system(s));
    }
    for st in &journal.steps {
        if !matches!(
            st.action,
            crate::erasure::plan::Action::Delete
                | crate::erasure::plan::Action::Rewrite
                | crate::erasure::plan::Action::Recompute
        ) {
            continue;
        }
        let check = tables.and_then(|t| t.iter().find(|c| c.table == st.table));
        let cleaned = journal
            .cleanup
            .get(&st.table)
            .is_some_and(|c| c.phases.contains("sweep"));
        systems.push(System {
            system: st.table.clone(),
            kind: "iceberg table".into(),
            action: st.action.to_string(),
            mechanism: match st.action {
                crate::erasure::plan::Action::Delete => format!(
                    "copy-on-write row delete by {} value(s) of {}, then expiry, manifest rewrite and sweep",
                    st.selected_by,
                    st.columns_text()
                ),
                crate::erasure::plan::Action::Rewrite => format!(
                    "rows kept under a legal exception, {} nulled",
                    st.erase_columns.join(", ")
                ),
                _ => format!(
                    "rebuilt by pipeline {}{}",
                    st.pipeline.clone().unwrap_or_default(),
                    st.recompute
                        .as_ref()
                        .map(|h| format!(" ({h})"))
                        .unwrap_or_default()
                ),
            },
            records: rows.get(&st.table).copied().unwrap_or(0),
            started: st.started_at.clone(),
            verified: check.map(|c| c.at.clone()),
            duration_ms: millis_between(&st.started_at, &st.finished_at),
            residual: check.map(|c| c.rows),
            residual_values: check.map(|c| c.values),
            residual_files: check.map(|c| c.files),
            state: match (check, st.done, cleaned) {
                _ if st.is_held() => st.held.as_ref().map(held_state).unwrap_or_default(),
                (Some(c), _, _) if c.is_clean() => "verified".into(),
                (Some(c), _, _) => format!("holds the subject ({} left)", c.left()),
                (None, true, true) => "deleted and cleaned up; verified by the attestation".into(),
                (None, true, false) => "deleted; cleanup pending".into(),
                (None, false, _) => "planned".into(),
            },
            held: st.held.clone(),
        });
    }
    for s in journal.stores.iter().filter(|s| !s.before_warehouse) {
        match s.action {
            StoreAction::HandOff => hand_offs.push(HandOff {
                artifact: s.store.clone(),
                trained_on: s.trained_on.clone(),
                owner: s.owner.clone(),
            }),
            _ => systems.push(store_system(s)),
        }
    }
    for s in &journal.stores {
        if s.state == StoreState::Residual {
            residuals.push(Residual {
                place: format!("store {} ({})", s.store, s.kind),
                basis: s.basis.map(|b| b.to_string()).unwrap_or_default(),
                expires: s.expires.clone().unwrap_or_else(|| "not stated".into()),
                control: s.control.clone().unwrap_or_else(|| "none stated".into()),
            });
        }
        for u in &s.unreachable {
            residuals.push(Residual {
                place: u.clone(),
                basis: "technical_impossibility".into(),
                expires: "when its owner runs the command named".into(),
                control: format!("store {} reports it in every manifest", s.store),
            });
        }
    }
    let holding = |s: &System| s.held.as_ref().is_some_and(|h| h.released_on.is_none());
    let complete = systems.iter().all(|s| s.state == "verified") && residuals.is_empty();
    let partly = !complete
        && residuals.is_empty()
        && systems.iter().all(|s| s.state == "verified" || holding(s));
    let never = journal
        .stores
        .iter()
        .any(|s| s.state == StoreState::Residual)
        || journal.stores.iter().any(|s| !s.unreachable.is_empty());
    // A journal from before requests had records: its own start and deadline stand.
    if workflow.received.is_none() {
        workflow.received = chrono::DateTime::parse_from_rfc3339(&journal.started_at)
            .ok()
            .map(|d| d.date_naive());
    }
    if workflow.due.is_none() {
        workflow.due = journal.deadline.as_deref().and_then(|d| d.parse().ok());
    }
    Manifest {
        request: request.to_string(),
        subject_kind: spec.map(|s| s.subject.clone()).unwrap_or_default(),
        subject_ref: subject_ref.to_string(),
        workflow,
        certified: None,
        status: if complete {
            "COMPLETE".into()
        } else if never {
            "INCOMPLETE".into()
        } else if partly {
            "PARTLY_REFUSED".into()
        } else {
            "OPEN".into()
        },
        systems,
        residuals,
        hand_offs,
    }
}

/// A restriction's manifest: every place the subject's rows are suspended (the warehouse
/// tables, left out of queries and pipelines), the tables lethe can't restrict, and every
/// registered store of the subject's kind, none of which lethe can suspend (the store protocol
/// deletes and probes; it has no way to stop processing), each named with its owner. Nothing is
/// deleted, so no system has a residual.
pub fn restriction(
    r: &crate::requests::Request,
    scope: &crate::requests::scope::Scope,
    workflow: RequestEvidence,
) -> Manifest {
    let in_force = r.restricting();
    let lifted_on = r.lifted.as_ref().map(|l| l.on);
    let visible: Vec<String> = workflow
        .restriction
        .as_ref()
        .map(|e| e.visible_to_roles.clone())
        .unwrap_or_default();
    let state = |s: &str| {
        if in_force {
            s.to_string()
        } else {
            format!(
                "lifted on {}",
                lifted_on.map(|d| d.to_string()).unwrap_or_default()
            )
        }
    };
    let roles = if visible.is_empty() {
        String::new()
    } else {
        format!(" (but for the roles {})", visible.join(", "))
    };
    let mut systems = Vec::new();
    let system = |name: &str, kind: &str, action: &str, mechanism: String, records: u64| System {
        system: name.to_string(),
        kind: kind.to_string(),
        action: action.to_string(),
        mechanism,
        records,
        started: Some(r.received.to_string()),
        verified: None,
        duration_ms: None,
        residual: None,
        residual_values: None,
        residual_files: None,
        state: String::new(),
        held: None,
    };
    // A table selected by several columns is one system: a row any of them selects is out.
    let mut by_table: Vec<(&str, Vec<String>, u64)> = Vec::new();
    for t in &scope.tables {
        let by = format!("{} value(s) of {}", t.values.len(), t.column);
        match by_table.iter_mut().find(|(n, ..)| *n == t.table) {
            Some((_, cols, _)) => cols.push(by),
            None => by_table.push((&t.table, vec![by], t.rows)),
        }
    }
    for (table, by, rows) in by_table {
        let mut s = system(
            table,
            "iceberg table",
            "SUSPEND",
            format!(
                "rows selected by {} left out of every query{roles} and of every pipeline's inputs; kept, not deleted",
                by.join(" or ")
            ),
            rows,
        );
        s.state = state("suspended");
        systems.push(s);
    }
    for (t, p) in &scope.rebuilt {
        let mut s = system(
            t,
            "iceberg table",
            "SUSPEND",
            format!(
                "only shaped by the subject's rows: pipeline `{p}` leaves them out from its next run"
            ),
            0,
        );
        s.state = state("suspended from its next rebuild");
        systems.push(s);
    }
    for (t, why) in &scope.unresolved {
        let mut s = system(t, "iceberg table", "NONE", String::new(), 0);
        s.state = format!("not suspended: {why}");
        systems.push(s);
    }
    for st in &scope.stores {
        let mut s = system(&st.store, &st.kind, "NONE", String::new(), 0);
        s.state = format!(
            "not suspended: lethe can't suspend processing in a store (it can delete and probe only); its owner, the {}, must",
            st.owner
        );
        systems.push(s);
    }
    Manifest {
        request: r.id.clone(),
        subject_kind: r.subject.clone(),
        subject_ref: r.subject_hash.clone(),
        workflow,
        certified: None,
        status: if in_force {
            "RESTRICTED".into()
        } else {
            "LIFTED".into()
        },
        systems,
        residuals: Vec::new(),
        hand_offs: Vec::new(),
    }
}

impl Manifest {
    /// True when every system is verified and nothing remains outside lethe's reach.
    pub fn is_complete(&self) -> bool {
        self.status == "COMPLETE"
    }

    /// What keeps the manifest from COMPLETE, in words naming the systems (held ones but for
    /// `except_held`).
    pub fn open_items(&self, except_held: bool) -> Vec<String> {
        let mut v: Vec<String> = self
            .systems
            .iter()
            .filter(|s| s.state != "verified")
            .filter(|s| !(except_held && s.held.as_ref().is_some_and(|h| h.released_on.is_none())))
            .map(|s| format!("{}: {}", s.system, s.state))
            .collect();
        for r in &self.residuals {
            v.push(format!(
                "{}: a residual ({}; ends: {}; control: {})",
                r.place, r.basis, r.expires, r.control
            ));
        }
        v
    }
}
