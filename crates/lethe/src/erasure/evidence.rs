//! What the attestation tells the recipient about the request itself: its kind, the
//! controller that instructed it and their reference, received / due / certified days, any
//! extension with its reason, the parts held under a legal hold with the basis (and the
//! partial refusal in words), and a restriction's scope. Stable JSON, documented in
//! `docs/attestation.schema.json`, so that a controller's system can read it.
//!
//! Built from the request's record ([`crate::requests`]), the erasure's journal (its held
//! steps) and a restriction's scope (tables, columns and counts — never its values).

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::erasure::erase::Journal;
use crate::erasure::plan::Held;
use crate::error::Result;
use crate::requests::{Certification, Extension, Kind, Request, Requests, State};
use crate::workspace::Workspace;

/// A part of the request held under a legal hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// A restriction's scope, for the recipient.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Rows or files deleted: always 0, a restriction never deletes. What was suspended where
    /// is the manifest's `systems`.
    pub deleted: u64,
}

/// The request as the attestation shows it (flattened into it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

/// The held parts of an erasure (held now or released since): tables, then stores.
pub fn held_parts(journal: &Journal) -> Vec<HeldPart> {
    let part = |system: String, action: String, h: &Held| HeldPart {
        system,
        action_when_released: action,
        hold: h.hold.clone(),
        basis: h.basis.clone(),
        decided_by: h.decided_by.clone(),
        until: h.until,
        released_on: h.released_on,
    };
    let tables = journal.steps.iter().filter_map(|s| {
        Some(part(
            s.table.clone(),
            s.action.to_string(),
            s.held.as_ref()?,
        ))
    });
    let stores = journal.stores.iter().filter_map(|s| {
        Some(part(
            s.store.clone(),
            s.action.to_string(),
            s.held.as_ref()?,
        ))
    });
    tables.chain(stores).collect()
}

/// The systems a legal hold keeps now, as a recipient reads them (tables by name, stores as
/// `the store NAME`).
pub fn held_now(journal: &Journal) -> Vec<(String, &Held)> {
    let tables = journal
        .steps
        .iter()
        .filter(|s| s.is_held())
        .filter_map(|s| Some((s.table.clone(), s.held.as_ref()?)));
    let stores = journal
        .stores
        .iter()
        .filter(|s| s.is_held())
        .filter_map(|s| Some((format!("the store {}", s.store), s.held.as_ref()?)));
    tables.chain(stores).collect()
}

/// The evidence of an erasure request: its record (when it has one) and its held parts.
pub fn for_erasure(ws: &Workspace, request: &str, journal: &Journal) -> Result<RequestEvidence> {
    let record = Requests::in_state(&ws.config.paths.state).find(request)?;
    let held = held_parts(journal);
    let now = held_now(journal);
    let still: Vec<(&str, &Held)> = now.iter().map(|(s, h)| (s.as_str(), *h)).collect();
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

/// A restriction's evidence: since when, whether lifted, who still sees the rows.
pub fn restriction(ws: &Workspace, r: &Request) -> Result<RestrictionEvidence> {
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
    Ok(RestrictionEvidence {
        since: r.received,
        lifted_on: r.lifted.as_ref().map(|l| l.on),
        lifted_by: r.lifted.as_ref().map(|l| l.by.clone()),
        in_force: r.restricting(),
        visible_to_roles,
        deleted: 0,
    })
}
