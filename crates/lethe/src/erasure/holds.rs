//! Legal holds applied to an erasure: the steps of a held table, and the stores a hold names,
//! are marked HELD with the hold's basis and are not carried out; the rest of the plan is.
//! When the hold ends (a day after its `until`, or once it is removed from
//! `governance/holds.toml`), rerunning the request releases the held steps and stores and
//! carries them out (a held store is deleted and probed then, like any other).
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

/// The holds in force over a request: per table and per store, the hold that keeps it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InForce {
    /// (table, hold).
    pub tables: Vec<(String, Held)>,
    /// (store, hold): stores of `governance/stores.toml`.
    pub stores: Vec<(String, Held)>,
}

/// The holds in force on `day` over `requests`, by table and by store. Errors when a hold
/// names a table the catalog doesn't have or a store `governance/stores.toml` doesn't
/// register, or names only part of a batch.
pub fn holds_in_force(
    ws: &Workspace,
    gov: &Governance,
    requests: &[RequestSpec],
    day: NaiveDate,
    catalog_tables: &[String],
) -> Result<InForce> {
    let records = Requests::in_state(&ws.config.paths.state);
    let registry = crate::stores::registry::load(&gov.dir)?;
    let mut out = InForce::default();
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
            for (i, st) in a.hold.stores.iter().enumerate() {
                if !registry.value.stores.contains_key(st) {
                    return Err(gov.holds.error_at(
                        &format!("holds.\"{}\".stores", a.name),
                        format!(
                            "entry {}: `{st}` is not a store of {}",
                            i + 1,
                            registry.path.display()
                        ),
                    ));
                }
            }
            if !a.hold.in_force(day) {
                continue;
            }
            names.push(a.name.to_string());
            let held = Held {
                hold: a.name.to_string(),
                basis: a.hold.basis.clone(),
                decided_by: a.hold.decided_by.clone(),
                until: a.hold.until.unwrap_or(day),
                released_on: None,
            };
            for (list, systems) in [
                (&mut out.tables, &a.hold.tables),
                (&mut out.stores, &a.hold.stores),
            ] {
                for x in systems {
                    if !list.iter().any(|(y, h)| y == x && h.hold == a.name) {
                        list.push((x.clone(), held.clone()));
                    }
                }
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

/// The hold that keeps `system` (a table or a store) in `held`: the one that ends last.
pub fn keeping<'a>(held: &'a [(String, Held)], system: &str) -> Option<&'a Held> {
    held.iter()
        .filter(|(t, _)| t == system)
        .map(|(_, h)| h)
        .max_by_key(|h| h.until)
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
        s.held = keeping(held, &s.table).cloned();
    }
}

/// The day holds are judged on: the one given, else today by the workspace's clock.
pub fn day_or_today(ws: &Workspace, day: Option<NaiveDate>) -> NaiveDate {
    day.unwrap_or_else(|| ws.clock.now().date_naive())
}

/// The day an erasure judges holds on ([`day_or_today`]), refusing a day after today by the
/// workspace's clock (UTC): a hold is judged ended once the day is past its `until`, so a
/// future day (`--day 2099-01-01`) would erase what a hold still preserves. A past day is
/// allowed: it can only find more holds in force, never fewer.
pub fn judging_day(ws: &Workspace, day: Option<NaiveDate>) -> Result<NaiveDate> {
    let today = ws.clock.now().date_naive();
    match day {
        Some(d) if d > today => Err(Error::invalid(format!(
            "--day {d} is after today ({today}, UTC): legal holds are judged on a day that has come, never a future one; nothing was changed"
        ))),
        Some(d) => Ok(d),
        None => Ok(today),
    }
}

/// What legal holds keep in `table`: the selection (column IN values) of every held step of
/// every erasure. A loader that replaces the table's contents (a nightly reload from a source
/// the erasure cleared) must keep these rows as the table has them, or the reload would
/// destroy what the hold preserves. `None` when no hold keeps rows there.
pub fn held_rows(
    ws: &Workspace,
    table: &str,
) -> Result<Option<lethe_iceberg::predicate::Predicate>> {
    use lethe_iceberg::predicate::Predicate;
    let mut any = Vec::new();
    for j in crate::erasure::erase::journals(ws)? {
        for s in j.steps.iter().filter(|s| s.is_held() && s.table == table) {
            if s.selections().iter().any(|(_, v)| !v.is_empty())
                && let Some(p) = s.predicate()
            {
                any.push(p);
            }
        }
    }
    Ok(match any.len() {
        0 => None,
        1 => Some(any.remove(0)),
        _ => Some(Predicate::Or(any)),
    })
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
