//! What the attestation tells the recipient about the request itself: its kind, the
//! controller that instructed it and their reference, received / due / certified days, any
//! extension with its reason, the parts held under a legal hold with the basis (and the
//! partial refusal in words), and a restriction's scope. Stable JSON, documented in
//! `docs/attestation.schema.json`, so that a controller's system can read it.
//!
//! Built from the request's record ([`crate::requests`]), the erasure's journal (its held
//! steps) and a restriction's scope (tables, columns and counts — never its values).

use chrono::NaiveDate;
use serde::Serialize;

use crate::erasure::erase::Journal;
use crate::erasure::plan::Held;
use crate::error::Result;
use crate::requests::scope::Scope;
use crate::requests::{Certification, Extension, Kind, Request, Requests, State};
use crate::workspace::Workspace;

/// A part of the request held under a legal hold.
#[derive(Debug, Clone, Serialize)]
pub struct HeldPart {
    /// The table (or store) kept.
    pub system: String,
    /// What the erasure would do there once the hold ends.
    pub action_when_released: String,
    /// The hold's name.
    pub hold: String,
    /// The basis, in the legal team's words.
    pub basis: String,
    /// The role that decided it.
    pub decided_by: String,
    /// The hold's last day.
    pub until: NaiveDate,
    /// The day the hold was found ended and the part erased (None: still held).
    pub released_on: Option<NaiveDate>,
}

/// One table of a restriction's scope.
#[derive(Debug, Clone, Serialize)]
pub struct SuspendedTable {
    /// The table.
    pub table: String,
    /// How the subject's rows are suspended there.
    pub how: String,
    /// The column that selects them (row filters), if any.
    pub column: Option<String>,
    /// The subject's rows there when the restriction was recorded (row filters).
    pub rows: Option<u64>,
}

/// A restriction's scope, for the recipient.
#[derive(Debug, Clone, Serialize)]
pub struct RestrictionEvidence {
    /// Recorded (the day received).
    pub since: NaiveDate,
    /// Lifted (or ended by an erasure), if so.
    pub lifted_on: Option<NaiveDate>,
    /// Who lifted it.
    pub lifted_by: Option<String>,
    /// Whether it is in force.
    pub in_force: bool,
    /// The roles that still see the rows (the policy's `restricted = "show"`).
    pub visible_to_roles: Vec<String>,
    /// What was suspended where.
    pub suspended: Vec<SuspendedTable>,
    /// Tables lethe can't restrict (lineage can't say where the rows are), with the reason.
    pub not_restricted: Vec<SuspendedTable>,
    /// Rows or files deleted: always 0, a restriction never deletes.
    pub deleted: u64,
}

/// The request as the attestation shows it (flattened into it).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RequestEvidence {
    /// `erasure` or `restriction`.
    pub kind: Option<Kind>,
    /// The controller that instructed it (lethe acts as processor), if given.
    pub controller: Option<String>,
    /// The controller's reference, if given.
    pub reference: Option<String>,
    /// The day it was received.
    pub received: Option<NaiveDate>,
    /// The day it is due (after extensions).
    pub due: Option<NaiveDate>,
    /// Extensions with their reasons.
    pub extensions: Vec<Extension>,
    /// Where it stands after this attestation.
    pub state: Option<State>,
    /// Every certification, this one included (a request finished after its holds ended has
    /// two: the partial one and the final one).
    pub certifications: Vec<Certification>,
    /// Parts held under a legal hold, with the basis.
    pub held: Vec<HeldPart>,
    /// The partial refusal, in words a recipient can read (None when nothing is held).
    pub refusal: Option<String>,
    /// Restrictions of the same subject this erasure ended.
    pub ended_restrictions: Vec<String>,
    /// A restriction's scope.
    pub restriction: Option<RestrictionEvidence>,
}

/// The held parts of an erasure (held now or released since).
pub fn held_parts(journal: &Journal) -> Vec<HeldPart> {
    journal
        .steps
        .iter()
        .filter_map(|s| s.held.as_ref().map(|h| (s, h)))
        .map(|(s, h): (_, &Held)| HeldPart {
            system: s.table.clone(),
            action_when_released: s.action.to_string(),
            hold: h.hold.clone(),
            basis: h.basis.clone(),
            decided_by: h.decided_by.clone(),
            until: h.until,
            released_on: h.released_on,
        })
        .collect()
}

/// The evidence of an erasure request: its record (when it has one) and its held parts.
pub fn for_erasure(ws: &Workspace, request: &str, journal: &Journal) -> Result<RequestEvidence> {
    let record = Requests::in_state(&ws.config.paths.state).find(request)?;
    let held = held_parts(journal);
    let still: Vec<(&str, &Held)> = journal
        .steps
        .iter()
        .filter(|s| s.is_held())
        .filter_map(|s| s.held.as_ref().map(|h| (s.table.as_str(), h)))
        .collect();
    let mut e = from_record(record.as_ref());
    e.refusal = crate::erasure::holds::refusal_text(&still);
    e.held = held;
    Ok(e)
}

/// The fields every request's evidence takes from its record.
pub fn from_record(record: Option<&Request>) -> RequestEvidence {
    match record {
        Some(r) => RequestEvidence {
            kind: Some(r.kind),
            controller: r.controller.clone(),
            reference: r.reference.clone(),
            received: Some(r.received),
            due: Some(r.due),
            extensions: r.extensions.clone(),
            state: Some(r.state),
            certifications: r.certifications.clone(),
            ended_restrictions: r.ended_restrictions.clone(),
            ..Default::default()
        },
        None => RequestEvidence::default(),
    }
}

/// A restriction's scope in words: what was suspended where.
pub fn restriction(ws: &Workspace, r: &Request) -> Result<RestrictionEvidence> {
    let scope = Scope::load(&ws.config.paths.state, &r.id)?.without_values();
    let visible_to_roles = match crate::access::policy::Policy::load(&ws.config.paths.governance) {
        Ok(p) => p
            .doc()
            .roles
            .iter()
            .filter(|(_, role)| role.restricted == crate::access::policy::Restricted::Show)
            .map(|(n, _)| n.clone())
            .collect(),
        Err(_) => Vec::new(),
    };
    let mut suspended: Vec<SuspendedTable> = scope
        .tables
        .iter()
        .map(|t| SuspendedTable {
            table: t.table.clone(),
            how: "rows left out of every query (but for the roles named) and of every pipeline's inputs; kept, not deleted".into(),
            column: Some(t.column.clone()),
            rows: Some(t.rows),
        })
        .collect();
    for (t, p) in &scope.rebuilt {
        suspended.push(SuspendedTable {
            table: t.clone(),
            how: format!(
                "only shaped by the subject's rows: pipeline `{p}` leaves them out from its next run"
            ),
            column: None,
            rows: None,
        });
    }
    let not_restricted = scope
        .unresolved
        .iter()
        .map(|(t, why)| SuspendedTable {
            table: t.clone(),
            how: format!("not restricted: {why}"),
            column: None,
            rows: None,
        })
        .collect();
    Ok(RestrictionEvidence {
        since: r.received,
        lifted_on: r.lifted.as_ref().map(|l| l.on),
        lifted_by: r.lifted.as_ref().map(|l| l.by.clone()),
        in_force: r.restricting(),
        visible_to_roles,
        suspended,
        not_restricted,
        deleted: 0,
    })
}
