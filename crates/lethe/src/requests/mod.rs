//! Requests as a workflow: what a controller instructed, when it arrived, when it is due, and
//! where it stands.
//!
//! lethe acts as the processor: it takes the controller's instruction (`--instructed-by`,
//! `--reference`), carries it out and returns a manifest; it decides nothing. A request is
//! recorded in `state/requests/<id>.json` with its kind, the controller and their reference,
//! the day it was received and the day it is due (one month later, GDPR Art. 12(3); an
//! extension with a reason adds at most two more), its state and its history. The subject is
//! named only by the register's keyed hash; the ID itself is in the request's case file (mode
//! 0600), as for every erasure.
//!
//! Two kinds:
//! - **erasure**: received → in progress → pending verification (an erasure finished,
//!   awaiting its attestation) → certified, or partly refused (a legal hold kept part, in
//!   writing, with the basis), or failed (the erasure stopped with an error; rerunning it goes
//!   on). A partly refused request whose holds end is finished by `lethe erase --request` and
//!   certified again.
//! - **restriction**: never deletes. From the moment it is recorded it is *restricted*: the
//!   subject's rows are left out of `lethe query` (except for roles whose policy says
//!   `restricted = "show"`) and out of every pipeline's inputs ([`scope`]), until it is
//!   *lifted* — by `lethe request lift`, or by an erasure of the same subject, which ends it
//!   and says so.
//!
//! Every function here takes the day it is given; none reads the clock for a due date.
//! Changing a record is all-or-nothing: a refused change (an unknown request, an extension
//! past three months, a restriction lifted twice) writes nothing.

pub mod deadline;
pub mod scope;

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::erasure::case::{valid_request_id, write_all_atomic, write_atomic};
use crate::error::{Error, Result};

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Erase the subject everywhere (Art. 17).
    Erasure,
    /// Stop processing the subject's data while a dispute is resolved (Art. 18); never
    /// deletes.
    Restriction,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Erasure => "erasure",
            Kind::Restriction => "restriction",
        })
    }
}

impl std::str::FromStr for Kind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Kind> {
        match s {
            "erasure" => Ok(Kind::Erasure),
            "restriction" => Ok(Kind::Restriction),
            other => Err(Error::invalid(format!(
                "`{other}` is not a kind of request: erasure or restriction"
            ))),
        }
    }
}

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Recorded, nothing done yet.
    Received,
    /// Its erasure is running (or stopped and will be resumed).
    InProgress,
    /// Its erasure finished; awaiting verification (its attestation, stores awaiting a rebuild
    /// or their retention).
    PendingVerification,
    /// Attested COMPLETE.
    Certified,
    /// Attested with parts held under a legal hold: refused in part, with the basis.
    PartlyRefused,
    /// Its erasure stopped with an error.
    Failed,
    /// A restriction in force.
    Restricted,
    /// A restriction lifted (or ended by an erasure).
    Lifted,
}

impl State {
    /// Whether the request has been answered (so it can no longer be overdue).
    pub fn answered(self) -> bool {
        matches!(
            self,
            State::Certified | State::PartlyRefused | State::Restricted | State::Lifted
        )
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            State::Received => "received",
            State::InProgress => "in progress",
            State::PendingVerification => "pending verification",
            State::Certified => "certified",
            State::PartlyRefused => "partly refused",
            State::Failed => "failed",
            State::Restricted => "restricted",
            State::Lifted => "lifted",
        })
    }
}

/// An extension of the due date.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extension {
    /// Months added by this extension.
    pub months: u32,
    /// Why (the controller's words, as given to the subject).
    pub reason: String,
    /// The day it was recorded.
    pub recorded_on: NaiveDate,
    /// The due day before it.
    pub due_before: NaiveDate,
    /// The due day after it.
    pub due_after: NaiveDate,
    /// Recorded after the due day it extends (Art. 12(3) asks for the subject to be told
    /// within the first month).
    pub late: bool,
}

/// One certification of a request (an attestation that answered it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certification {
    /// When (RFC 3339).
    pub at: String,
    /// The verdict then: `COMPLETE` or `PARTLY_REFUSED`.
    pub verdict: String,
    /// Tables (and stores) held under a legal hold then.
    pub held: Vec<String>,
}

/// How a restriction ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lifted {
    /// The day.
    pub on: NaiveDate,
    /// By whom: `lethe request lift`, or the erasure request that ended it.
    pub by: String,
}

/// One change of state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// When (RFC 3339, or the day given).
    pub at: String,
    /// The state after it.
    pub state: State,
    /// What happened.
    pub note: String,
}

/// A request's record (`state/requests/<id>.json`). Holds no value of the person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The request ID (`erasure-0001`).
    pub id: String,
    /// Its kind.
    pub kind: Kind,
    /// The subject's kind (`learner`).
    pub subject: String,
    /// The register's keyed hash (HMAC-SHA256) of the subject's root identifier.
    pub subject_hash: String,
    /// The controller that instructed it (lethe acts as the processor), if given.
    pub controller: Option<String>,
    /// The controller's reference for it, if given.
    pub reference: Option<String>,
    /// The day it was received.
    pub received: NaiveDate,
    /// The day it is due (moved by extensions).
    pub due: NaiveDate,
    /// Extensions, in order.
    #[serde(default)]
    pub extensions: Vec<Extension>,
    /// Where it stands.
    pub state: State,
    /// A restriction's end.
    #[serde(default)]
    pub lifted: Option<Lifted>,
    /// An erasure: the restrictions of the same subject it ended.
    #[serde(default)]
    pub ended_restrictions: Vec<String>,
    /// Certifications, in order (a partly refused request finished later has two).
    #[serde(default)]
    pub certifications: Vec<Certification>,
    /// Every change of state.
    #[serde(default)]
    pub history: Vec<Event>,
}

impl Request {
    /// A new record in its first state (received, or restricted for a restriction).
    pub fn new(
        id: &str,
        kind: Kind,
        subject: &str,
        subject_hash: String,
        received: NaiveDate,
        controller: Option<String>,
        reference: Option<String>,
    ) -> Result<Request> {
        valid_request_id(id)?;
        let state = match kind {
            Kind::Erasure => State::Received,
            Kind::Restriction => State::Restricted,
        };
        Ok(Request {
            id: id.to_string(),
            kind,
            subject: subject.to_string(),
            subject_hash,
            controller: controller.filter(|c| !c.trim().is_empty()),
            reference: reference.filter(|r| !r.trim().is_empty()),
            received,
            due: deadline::due(received, 0)?,
            extensions: Vec::new(),
            state,
            lifted: None,
            ended_restrictions: Vec::new(),
            certifications: Vec::new(),
            history: vec![Event {
                at: received.to_string(),
                state,
                note: format!("{kind} request received"),
            }],
        })
    }

    /// Months of extension granted so far.
    pub fn extended_months(&self) -> u32 {
        self.extensions
            .iter()
            .fold(0u32, |sum, e| sum.saturating_add(e.months))
    }

    /// Days left on `day` (negative when overdue).
    pub fn days_left(&self, day: NaiveDate) -> i64 {
        deadline::days_left(self.due, day)
    }

    /// Overdue on `day`: not answered, and past its due day.
    pub fn overdue(&self, day: NaiveDate) -> bool {
        !self.state.answered() && day > self.due
    }

    /// Whether a restriction is in force.
    pub fn restricting(&self) -> bool {
        self.kind == Kind::Restriction && self.state == State::Restricted
    }

    /// Moves to `state`, noting why.
    pub fn transition(&mut self, state: State, at: String, note: impl Into<String>) {
        self.state = state;
        self.history.push(Event {
            at,
            state,
            note: note.into(),
        });
    }

    /// Extends the due date by `months` with a reason, recorded on `day`. Refuses an empty
    /// reason, zero months, and a total past [`deadline::MAX_EXTENSION_MONTHS`] (three months
    /// from receipt in all); changes nothing then.
    pub fn extend(&mut self, months: u32, reason: &str, day: NaiveDate) -> Result<()> {
        if reason.trim().is_empty() {
            return Err(Error::invalid(
                "an extension needs a reason (--reason): the subject must be told why",
            ));
        }
        if months == 0 {
            return Err(Error::invalid("an extension adds at least one month"));
        }
        // Checked: a huge `months` must not wrap past the cap.
        let total = self.extended_months().saturating_add(months);
        if total > deadline::MAX_EXTENSION_MONTHS {
            return Err(Error::invalid(format!(
                "request {} is already extended by {} month(s): at most {} more months in all (three months from receipt, GDPR Art. 12(3)); {} would make {total}",
                self.id,
                self.extended_months(),
                deadline::MAX_EXTENSION_MONTHS,
                months
            )));
        }
        if self.state.answered() {
            return Err(Error::invalid(format!(
                "request {} is {}: there is nothing left to extend",
                self.id, self.state
            )));
        }
        let due_after = deadline::due(self.received, total)?;
        self.extensions.push(Extension {
            months,
            reason: reason.trim().to_string(),
            recorded_on: day,
            due_before: self.due,
            due_after,
            late: day > self.due,
        });
        self.history.push(Event {
            at: day.to_string(),
            state: self.state,
            note: format!(
                "extended by {months} month(s): due {due_after} (was {})",
                self.due
            ),
        });
        self.due = due_after;
        Ok(())
    }

    /// Lifts a restriction on `day`, `by` whom. Refuses an erasure request and a restriction
    /// already lifted; changes nothing then.
    pub fn lift(&mut self, day: NaiveDate, by: &str) -> Result<()> {
        if self.kind != Kind::Restriction {
            return Err(Error::invalid(format!(
                "request {} is an erasure, not a restriction: there is nothing to lift",
                self.id
            )));
        }
        if let Some(l) = &self.lifted {
            return Err(Error::invalid(format!(
                "restriction {} was already lifted on {} (by {}): nothing changed",
                self.id, l.on, l.by
            )));
        }
        if day < self.received {
            return Err(Error::invalid(format!(
                "restriction {} was received on {}: it can't be lifted on {day}, before it began",
                self.id, self.received
            )));
        }
        self.lifted = Some(Lifted {
            on: day,
            by: by.to_string(),
        });
        self.transition(State::Lifted, day.to_string(), format!("lifted by {by}"));
        Ok(())
    }
}

/// The folder of request records.
#[derive(Debug, Clone)]
pub struct Requests {
    dir: PathBuf,
}

impl Requests {
    /// The records in a state folder (`state/requests/`).
    pub fn in_state(state: &Path) -> Requests {
        Requests {
            dir: state.join("requests"),
        }
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// The record of `id`, if there is one.
    pub fn find(&self, id: &str) -> Result<Option<Request>> {
        valid_request_id(id)?;
        let p = self.path(id);
        if !p.exists() {
            return Ok(None);
        }
        let text =
            std::fs::read_to_string(&p).map_err(|e| Error::io(p.display().to_string(), e))?;
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| Error::invalid(format!("{}: not a request record: {e}", p.display())))
    }

    /// The record of `id`; an unknown request is an error naming the known ones' folder.
    pub fn get(&self, id: &str) -> Result<Request> {
        self.find(id)?.ok_or_else(|| {
            Error::invalid(format!(
                "unknown request `{id}`: no record in {} (open it with `lethe request open`)",
                self.dir.display()
            ))
        })
    }

    /// Writes a record (atomically).
    pub fn save(&self, r: &Request) -> Result<()> {
        write_atomic(
            &self.path(&r.id),
            serde_json::to_string_pretty(r)?.as_bytes(),
            false,
        )
    }

    /// Writes records with one durable write for all of them (a batch's, issue 49).
    pub fn save_all(&self, records: &[Request]) -> Result<()> {
        let mut files = Vec::with_capacity(records.len());
        for r in records {
            files.push(crate::keys::NewFile {
                path: self.path(&r.id),
                private: false,
                bytes: serde_json::to_string_pretty(r)?.into_bytes(),
            });
        }
        write_all_atomic(&files)
    }

    /// Updates the records of `ids` that exist with `f`, all in one durable write (requests
    /// without a record, as older state folders have, are left out); returns the records
    /// written.
    pub fn update_all<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a str>,
        mut f: impl FnMut(&mut Request),
    ) -> Result<Vec<Request>> {
        let mut changed = Vec::new();
        for id in ids {
            if let Some(mut r) = self.find(id)? {
                f(&mut r);
                changed.push(r);
            }
        }
        self.save_all(&changed)?;
        Ok(changed)
    }

    /// Every record, by received day then ID.
    pub fn list(&self) -> Result<Vec<Request>> {
        let mut out = Vec::new();
        if !self.dir.exists() {
            return Ok(out);
        }
        for e in std::fs::read_dir(&self.dir)
            .map_err(|e| Error::io(self.dir.display().to_string(), e))?
        {
            let p = e
                .map_err(|e| Error::io(self.dir.display().to_string(), e))?
                .path();
            if p.extension().is_some_and(|x| x == "json")
                && let Some(stem) = p.file_stem().and_then(|s| s.to_str())
                && let Some(r) = self.find(stem)?
            {
                out.push(r);
            }
        }
        out.sort_by(|a, b| (a.received, &a.id).cmp(&(b.received, &b.id)));
        Ok(out)
    }

    /// Updates the record of `id` with `f`, if there is one (an erasure run without a record,
    /// as older state folders have, changes nothing here).
    pub fn update(&self, id: &str, f: impl FnOnce(&mut Request)) -> Result<Option<Request>> {
        let Some(mut r) = self.find(id)? else {
            return Ok(None);
        };
        f(&mut r);
        self.save(&r)?;
        Ok(Some(r))
    }
}

/// One row of `lethe request list`.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    /// The request.
    pub id: String,
    /// Its kind.
    pub kind: Kind,
    /// Where it stands.
    pub state: State,
    /// The controller, if any.
    pub controller: Option<String>,
    /// Received.
    pub received: NaiveDate,
    /// Due.
    pub due: NaiveDate,
    /// Days left on the day given (negative: overdue by that many days).
    pub days_left: i64,
    /// Overdue on the day given.
    pub overdue: bool,
}

/// Every request with its days left on `day`.
pub fn list(state: &Path, day: NaiveDate) -> Result<Vec<Listed>> {
    Ok(Requests::in_state(state)
        .list()?
        .into_iter()
        .map(|r| Listed {
            days_left: r.days_left(day),
            overdue: r.overdue(day),
            id: r.id,
            kind: r.kind,
            state: r.state,
            controller: r.controller,
            received: r.received,
            due: r.due,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governance::retention::parse_day;

    fn d(s: &str) -> NaiveDate {
        parse_day(s).unwrap()
    }

    fn req(kind: Kind) -> Request {
        Request::new(
            "r-1",
            kind,
            "learner",
            "ab".into(),
            d("2026-09-01"),
            None,
            None,
        )
        .unwrap()
    }

    #[test]
    fn overdue_after_a_month_unless_extended_with_a_reason() {
        let mut r = req(Kind::Erasure);
        assert_eq!(r.due, d("2026-10-01"));
        assert!(!r.overdue(d("2026-10-01")));
        assert!(r.overdue(d("2026-10-15")));
        assert!(r.extend(1, "  ", d("2026-09-20")).is_err());
        assert_eq!(r, {
            let mut x = req(Kind::Erasure);
            x.history = r.history.clone();
            x
        });
        r.extend(1, "the request covers eleven systems", d("2026-09-20"))
            .unwrap();
        assert_eq!(r.due, d("2026-11-01"));
        assert!(!r.overdue(d("2026-10-15")));
        assert!(!r.extensions[0].late);
    }

    #[test]
    fn extensions_stop_at_three_months_from_receipt() {
        let mut r = req(Kind::Erasure);
        r.extend(2, "complex", d("2026-09-02")).unwrap();
        let before = r.clone();
        let e = r
            .extend(1, "more", d("2026-09-03"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 2 more months"), "{e}");
        assert_eq!(r, before);
        assert_eq!(r.due, d("2026-12-01"));
    }

    /// Issue 44 (item 5): `--months 4294967295` wrapped past the cap (1 + u32::MAX = 0).
    #[test]
    fn a_huge_extension_does_not_wrap_past_the_cap() {
        let mut r = req(Kind::Erasure);
        r.extend(1, "complex", d("2026-09-02")).unwrap();
        let before = r.clone();
        let e = r
            .extend(u32::MAX, "forever", d("2026-09-03"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 2 more months"), "{e}");
        assert_eq!(r, before);
        let mut fresh = req(Kind::Erasure);
        assert!(fresh.extend(u32::MAX, "forever", d("2026-09-03")).is_err());
        assert_eq!(fresh.due, d("2026-10-01"));
    }

    #[test]
    fn a_restriction_lifts_once_and_an_erasure_never() {
        let mut r = req(Kind::Restriction);
        assert!(r.restricting());
        assert!(!r.overdue(d("2027-01-01")));
        r.lift(d("2026-09-10"), "lethe request lift").unwrap();
        assert_eq!(r.state, State::Lifted);
        let before = r.clone();
        let e = r.lift(d("2026-09-11"), "x").unwrap_err().to_string();
        assert!(e.contains("already lifted on 2026-09-10"), "{e}");
        assert_eq!(r, before);
        assert!(req(Kind::Erasure).lift(d("2026-09-10"), "x").is_err());
    }

    #[test]
    fn records_round_trip_and_unknown_requests_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let rs = Requests::in_state(dir.path());
        let e = rs.get("nope").unwrap_err().to_string();
        assert!(e.contains("unknown request `nope`"), "{e}");
        let r = req(Kind::Erasure);
        rs.save(&r).unwrap();
        assert_eq!(rs.get("r-1").unwrap(), r);
        assert_eq!(rs.list().unwrap().len(), 1);
        assert!(rs.find("../x").is_err());
    }
}
