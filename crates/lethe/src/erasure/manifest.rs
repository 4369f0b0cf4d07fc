//! The manifest of one request: every system that held (or may hold) the subject, in the shape
//! a customer's compliance team acts on.
//!
//! It names the request, the subject by the register's keyed hash (never the ID), when the
//! request was received, its deadline and when it was certified; then one entry per *system* —
//! each warehouse table the plan changed and each registered store — with the action, the
//! mechanism, the records affected, when it started, when it was verified, how long it took
//! and the residual; then the residuals (stores that can't be probed or deleted, with basis,
//! expiry and control; places a store couldn't change, such as a Git remote), and the
//! hand-offs (models trained on tables the subject's rows reached, named with their owner,
//! never claimed as erased).
//!
//! Its status is COMPLETE only when every system is verified; OPEN while a store is pending
//! (a rebuild, a retention date) or failed (the request is resumable); INCOMPLETE when a
//! residual can never be verified by lethe. Built from the journal, so `lethe erase` prints it
//! as its summary and `lethe attest` includes it (with the tables' fresh check).

use serde::{Deserialize, Serialize};

use crate::erasure::erase::{Journal, StoreState, StoreStep};
use crate::stores::StoreAction;

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
    /// Records (or files) still holding the subject at the last check; `None` when not checked.
    pub residual: Option<u64>,
    /// verified, deleted, pending rebuild, pending retention until DATE, failed: WHY, ...
    pub state: String,
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
    /// When the request was received (the erasure started).
    pub received: String,
    /// The day it must be answered by.
    pub deadline: Option<String>,
    /// When it was certified (a COMPLETE attestation).
    pub certified: Option<String>,
    /// COMPLETE, OPEN or INCOMPLETE.
    pub status: String,
    /// Every system, in erasure order (sources first).
    pub systems: Vec<System>,
    /// What remains outside lethe's reach.
    pub residuals: Vec<Residual>,
    /// Models and artifacts handed to their owners.
    pub hand_offs: Vec<HandOff>,
}

/// A table's check, as the attestation made it.
#[derive(Debug, Clone)]
pub struct TableCheck {
    /// The table.
    pub table: String,
    /// Rows of the subject left (DELETE) or erased values left (REWRITE) plus files holding
    /// traces.
    pub residual: u64,
    /// When checked.
    pub at: String,
}

fn millis_between(a: &Option<String>, b: &Option<String>) -> Option<u64> {
    let a = chrono::DateTime::parse_from_rfc3339(a.as_deref()?).ok()?;
    let b = chrono::DateTime::parse_from_rfc3339(b.as_deref()?).ok()?;
    u64::try_from((b - a).num_milliseconds()).ok()
}

fn store_state(s: &StoreStep) -> String {
    match s.state {
        StoreState::PendingRetention => format!(
            "pending retention until {}",
            s.expires_on.clone().unwrap_or_default()
        ),
        StoreState::PendingRebuild => format!(
            "pending rebuild from {} ({})",
            s.rebuilt_from.clone().unwrap_or_default(),
            s.schedule.clone().unwrap_or_default()
        ),
        StoreState::Failed | StoreState::Reopened => {
            format!("{}: {}", s.state, s.error.clone().unwrap_or_default())
        }
        other => other.to_string(),
    }
}

/// The manifest of `request` from its erasure's journal. `rows` is the request's rows per
/// table (from its case file); `tables`, when given, the attestation's fresh check of each
/// table; `subject_ref` the register hash.
pub fn build(
    journal: &Journal,
    request: &str,
    subject_ref: &str,
    rows: &std::collections::BTreeMap<String, u64>,
    tables: Option<&[TableCheck]>,
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
        state: store_state(s),
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
                    st.column.clone().unwrap_or_default()
                ),
                crate::erasure::plan::Action::Rewrite => format!(
                    "rows kept under a legal exception, {} nulled",
                    st.erase_columns.join(", ")
                ),
                _ => format!(
                    "rebuilt by pipeline {}",
                    st.pipeline.clone().unwrap_or_default()
                ),
            },
            records: rows.get(&st.table).copied().unwrap_or(0),
            started: st.started_at.clone(),
            verified: check.map(|c| c.at.clone()),
            duration_ms: millis_between(&st.started_at, &st.finished_at),
            residual: check.map(|c| c.residual),
            state: match (check, st.done, cleaned) {
                (Some(c), _, _) if c.residual == 0 => "verified".into(),
                (Some(c), _, _) => format!("holds the subject ({} left)", c.residual),
                (None, true, true) => "deleted and cleaned up; verified by the attestation".into(),
                (None, true, false) => "deleted; cleanup pending".into(),
                (None, false, _) => "planned".into(),
            },
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
    let complete = systems.iter().all(|s| s.state == "verified") && residuals.is_empty();
    let never = journal
        .stores
        .iter()
        .any(|s| s.state == StoreState::Residual)
        || journal.stores.iter().any(|s| !s.unreachable.is_empty());
    Manifest {
        request: request.to_string(),
        subject_kind: spec.map(|s| s.subject.clone()).unwrap_or_default(),
        subject_ref: subject_ref.to_string(),
        received: journal.started_at.clone(),
        deadline: journal.deadline.clone(),
        certified: None,
        status: if complete {
            "COMPLETE".into()
        } else if never {
            "INCOMPLETE".into()
        } else {
            "OPEN".into()
        },
        systems,
        residuals,
        hand_offs,
    }
}

impl Manifest {
    /// True when every system is verified and nothing remains outside lethe's reach.
    pub fn is_complete(&self) -> bool {
        self.status == "COMPLETE"
    }

    /// What keeps the manifest from COMPLETE, in words naming the systems.
    pub fn open_items(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .systems
            .iter()
            .filter(|s| s.state != "verified")
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
