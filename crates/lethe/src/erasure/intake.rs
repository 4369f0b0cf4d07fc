//! Opening a request (`lethe request open`): the record ([`crate::requests`]) and the case
//! file, and for a restriction its scope.
//!
//! The record names the subject by the register's keyed hash only; the ID goes into the
//! request's case file (mode 0600), as every erasure's does. An erasure request's case file
//! holds just the root identifier until the erasure plans it; a restriction's holds the traces
//! the erasure's read-only preparation finds (so `lethe scan --request` works on it), and its
//! scope ([`crate::requests::scope`]) — where its rows are and which values select them — is
//! written before the record, so a restriction is never in force without its filters.
//!
//! Opening is all-or-nothing: an unknown subject, an ID of the wrong type, a request ID
//! already used (by a record or an erasure's journal) are refused before anything is written.

use std::collections::BTreeMap;

use chrono::{NaiveDate, Utc};

use crate::erasure::case::{CaseFile, RequestSpec, read_case, write_case};
use crate::erasure::erase::{find_request, prepare};
use crate::erasure::plan::{Action, Inventory, parse_id};
use crate::erasure::register::RegisterKey;
use crate::error::{Error, Result};
use crate::governance::subjects::SubjectRef;
use crate::requests::scope::{Scope, ScopedTable};
use crate::requests::{Kind, Request, Requests, State};
use crate::workspace::Workspace;

/// What `lethe request open` is given.
#[derive(Debug, Clone)]
pub struct OpenRequest {
    /// The request ID.
    pub id: String,
    /// Its kind.
    pub kind: Kind,
    /// The subject, `NAME=ID`.
    pub subject: SubjectRef,
    /// The day it was received.
    pub received: NaiveDate,
    /// The controller that instructed it.
    pub controller: Option<String>,
    /// The controller's reference.
    pub reference: Option<String>,
}

/// Opens a request: checks, then (restriction) the case file and scope, then the record.
pub async fn open(
    ws: &Workspace,
    o: &OpenRequest,
    key: &RegisterKey,
    progress: &dyn Fn(&str),
) -> Result<Request> {
    let records = Requests::in_state(&ws.config.paths.state);
    if let Some(r) = records.find(&o.id)? {
        return Err(Error::invalid(format!(
            "request {} is already open ({} {}, received {}); use a new request ID",
            o.id, r.kind, r.state, r.received
        )));
    }
    if find_request(ws, &o.id)?.is_some() {
        return Err(Error::invalid(format!(
            "request {} was already used by an erasure; use a new request ID",
            o.id
        )));
    }
    let gov = ws.governance()?;
    let subject = gov.subjects.get(&o.subject.subject)?;
    let inv = Inventory::load(&ws.warehouse).await?;
    parse_id(subject, &o.subject, &inv)?;
    let hash = key.hash(&o.subject.subject, &o.subject.id);
    let mut record = Request::new(
        &o.id,
        o.kind,
        &o.subject.subject,
        hash.clone(),
        o.received,
        o.controller.clone(),
        o.reference.clone(),
    )?;
    let spec = RequestSpec {
        request: o.id.clone(),
        subject: o.subject.subject.clone(),
        id: o.subject.id.clone(),
    };
    match o.kind {
        Kind::Erasure => {
            let (_, root) = subject.root()?;
            write_case(
                ws,
                &CaseFile {
                    request: o.id.clone(),
                    subject: o.subject.subject.clone(),
                    hash,
                    ids: BTreeMap::from([(root, vec![o.subject.id.clone()])]),
                    ..Default::default()
                },
            )?;
        }
        Kind::Restriction => {
            let prepared =
                prepare(ws, &gov, std::slice::from_ref(&spec), Some(key), progress).await?;
            let case = prepared
                .cases
                .into_iter()
                .next()
                .ok_or_else(|| Error::Internal("no case file prepared".into()))?;
            let mut scope = Scope {
                request: o.id.clone(),
                subject: o.subject.subject.clone(),
                ..Default::default()
            };
            for (s, js) in prepared.plan.steps.iter().zip(&prepared.steps) {
                match s.action {
                    Action::Delete | Action::Rewrite => {
                        // Every column that selects the rows: a row any of them selects is
                        // left out.
                        for (c, values) in js.selections() {
                            scope.tables.push(ScopedTable {
                                table: s.table.clone(),
                                column: c.to_string(),
                                values: values.to_vec(),
                                rows: case.rows.get(&s.table).copied().unwrap_or(0),
                            });
                        }
                    }
                    Action::Recompute => {
                        scope
                            .rebuilt
                            .insert(s.table.clone(), s.pipeline.clone().unwrap_or_default());
                    }
                    Action::Unresolved => {
                        scope
                            .unresolved
                            .insert(s.table.clone(), s.reason.clone().unwrap_or_default());
                    }
                    Action::NoAction => {}
                }
            }
            let registry = crate::stores::registry::load(&gov.dir)?;
            let only = (gov.subjects.value.len() == 1)
                .then(|| gov.subjects.value.keys().next().cloned())
                .flatten();
            for (name, c) in &registry.value.stores {
                let kind = c.subject.clone().or_else(|| only.clone());
                if kind.as_deref() == Some(o.subject.subject.as_str())
                    && c.kind != crate::stores::StoreKind::Model
                {
                    scope.stores.push(crate::requests::scope::ScopedStore {
                        store: name.clone(),
                        kind: c.kind.to_string(),
                        owner: c.owner.clone(),
                    });
                }
            }
            write_case(ws, &case)?;
            scope.save(&ws.config.paths.state)?;
            record.history.push(crate::requests::Event {
                at: o.received.to_string(),
                state: State::Restricted,
                note: format!(
                    "restricted: rows left out of queries and pipeline inputs in {} table(s); nothing deleted; {} store(s) lethe can't suspend",
                    scope.tables.len(),
                    scope.stores.len()
                ),
            });
        }
    }
    records.save(&record)?;
    Ok(record)
}

/// The erasure of an opened request: its spec from the record and the case file. Refuses a
/// restriction (it never deletes) and an unknown request.
pub fn spec_of(ws: &Workspace, request: &str) -> Result<RequestSpec> {
    let r = Requests::in_state(&ws.config.paths.state).get(request)?;
    if r.kind == Kind::Restriction {
        return Err(Error::invalid(format!(
            "request {request} is a restriction: it never deletes. To erase the subject, open an erasure request (it ends the restriction)"
        )));
    }
    let case = read_case(ws, request)?;
    let gov = ws.governance()?;
    let (_, root) = gov.subjects.get(&r.subject)?.root()?;
    let id = case
        .ids
        .get(&root)
        .and_then(|v| v.first())
        .cloned()
        .filter(|_| !case.destroyed);
    match id {
        Some(id) => Ok(RequestSpec {
            request: request.to_string(),
            subject: r.subject,
            id,
        }),
        None => match find_request(ws, request)? {
            // A finished erasure keeps no ID; rerunning it by request (held steps released)
            // uses its journal.
            Some(j) => j
                .requests
                .into_iter()
                .find(|x| x.request == request)
                .ok_or_else(|| Error::Internal("request not in its journal".into())),
            None => Err(Error::invalid(format!(
                "the case file of {request} holds no identifier; open the request again with --subject"
            ))),
        },
    }
}

/// Checks that an erasure about to run may use its requests' records and returns the records
/// it must create: one (received on `day`) for each request that has none, as `lethe erase
/// --subject` always did; a record of another subject or a restriction is refused. Nothing is
/// written here: the new records are written with the erasure's start (one durable write for
/// the batch, issue 49), so an erasure refused before it starts leaves no record.
pub fn records_to_open(
    ws: &Workspace,
    requests: &[RequestSpec],
    key: &RegisterKey,
    day: NaiveDate,
) -> Result<Vec<Request>> {
    let records = Requests::in_state(&ws.config.paths.state);
    let mut new = Vec::new();
    for r in requests {
        let hash = key.hash(&r.subject, &r.id);
        match records.find(&r.request)? {
            Some(rec) => {
                if rec.kind == Kind::Restriction {
                    return Err(Error::invalid(format!(
                        "request {} is a restriction: it never deletes; open an erasure request (it ends the restriction)",
                        r.request
                    )));
                }
                // A finished erasure's journal keeps no ID: the record's hash stands.
                if !r.id.is_empty() && rec.subject_hash != hash {
                    return Err(Error::invalid(format!(
                        "request {} was opened for another subject; use a new request ID",
                        r.request
                    )));
                }
            }
            None => {
                new.push(Request::new(
                    &r.request,
                    Kind::Erasure,
                    &r.subject,
                    hash,
                    day,
                    None,
                    None,
                )?);
            }
        }
    }
    Ok(new)
}

/// Now, as request histories record it.
pub(crate) fn now() -> String {
    Utc::now().to_rfc3339()
}
