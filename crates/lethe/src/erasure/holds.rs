//! Legal holds applied to an erasure: the steps of a held table are marked HELD with the
//! hold's basis and are not carried out; the rest of the plan is. When the hold ends (a day
//! after its `until`, or once it is removed from `governance/holds.toml`), rerunning the
//! request releases the held steps and carries them out.
//!
//! A hold names requests by ID or by the controller's reference (from the request's record,
//! [`crate::requests`]). In a batch, a hold must name every request of the batch: a table held
//! for one request would otherwise be kept for the others too, so such a batch is refused.

use chrono::NaiveDate;

use crate::erasure::case::RequestSpec;
use crate::erasure::plan::{Action, Held, Plan};
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::requests::Requests;
use crate::workspace::Workspace;

/// The holds in force on `day` over `requests`, by table: (table, held). Errors when a hold
/// names a table the catalog doesn't have, or names only part of a batch.
pub fn holds_in_force(
    ws: &Workspace,
    gov: &Governance,
    requests: &[RequestSpec],
    day: NaiveDate,
    catalog_tables: &[String],
) -> Result<Vec<(String, Held)>> {
    let records = Requests::in_state(&ws.config.paths.state);
    let mut out: Vec<(String, Held)> = Vec::new();
    let mut per_request: Vec<Vec<String>> = Vec::new();
    for r in requests {
        let reference = records.find(&r.request)?.and_then(|x| x.reference);
        let mut names = Vec::new();
        for a in gov.holds.for_request(&r.request, reference.as_deref()) {
            for (i, t) in a.hold.tables.iter().enumerate() {
                if !catalog_tables.contains(t) {
                    return Err(gov.holds.error_at(
                        &format!("holds.\"{}\".tables", a.name),
                        format!("entry {}: `{t}` is not a table of the catalog", i + 1),
                    ));
                }
            }
            if !a.hold.in_force(day) {
                continue;
            }
            names.push(a.name.to_string());
            for t in &a.hold.tables {
                if out.iter().any(|(x, h)| x == t && h.hold == a.name) {
                    continue;
                }
                out.push((
                    t.clone(),
                    Held {
                        hold: a.name.to_string(),
                        basis: a.hold.basis.clone(),
                        decided_by: a.hold.decided_by.clone(),
                        until: a.hold.until.unwrap_or(day),
                        released_on: None,
                    },
                ));
            }
        }
        names.sort();
        per_request.push(names);
    }
    if per_request.windows(2).any(|w| w[0] != w[1]) {
        return Err(Error::invalid(
            "a legal hold names only some requests of this batch: erase the held requests apart from the others",
        ));
    }
    Ok(out)
}

/// Marks the plan's steps under a hold as HELD (a table under two holds shows the one that
/// ends last). Steps that change nothing (NO_ACTION, UNRESOLVED) are not marked.
pub fn mark(plan: &mut Plan, held: &[(String, Held)]) {
    for s in &mut plan.steps {
        if !matches!(
            s.action,
            Action::Delete | Action::Rewrite | Action::Recompute
        ) {
            continue;
        }
        s.held = held
            .iter()
            .filter(|(t, _)| *t == s.table)
            .map(|(_, h)| h.clone())
            .max_by_key(|h| h.until);
    }
}

/// The day holds are judged on: the one given, else today by the workspace's clock.
pub fn day_or_today(ws: &Workspace, day: Option<NaiveDate>) -> NaiveDate {
    day.unwrap_or_else(|| ws.clock.now().date_naive())
}

/// The partial refusal in words a recipient can read.
pub fn refusal_text(held: &[(&str, &Held)]) -> Option<String> {
    if held.is_empty() {
        return None;
    }
    let mut by_hold: Vec<(&Held, Vec<&str>)> = Vec::new();
    for (t, h) in held {
        match by_hold.iter_mut().find(|(x, _)| x.hold == h.hold) {
            Some((_, ts)) => ts.push(t),
            None => by_hold.push((h, vec![t])),
        }
    }
    let parts: Vec<String> = by_hold
        .iter()
        .map(|(h, ts)| {
            format!(
                "The records in {} are not erased: they are preserved under legal hold `{}` until {}, decided by the {}, on this basis: {}",
                ts.join(" and "),
                h.hold,
                h.until,
                h.decided_by,
                h.basis.trim().trim_end_matches('.')
            )
        })
        .collect();
    Some(format!(
        "This request is refused in part. {}. Everything else was erased. When the hold ends the held records are erased and this manifest is certified again.",
        parts.join("; ")
    ))
}
