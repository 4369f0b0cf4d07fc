//! Building a plan for a `--subject NAME=ID` from a workspace: the glue between the pure
//! planner ([`crate::erasure::plan`]) and the catalog, lineage folder and governance files.

use crate::erasure::case::{CaseFile, RequestSpec};
use crate::erasure::erase::stores::plan_stores;
use crate::erasure::erase::{StoreState, StoreStep, prepare_drawn};
use crate::erasure::mentions::mentions_readable;
use crate::erasure::plan::{Plan, Verdict};
use crate::erasure::searched::{Changed, Searched, searched};
use crate::error::Result;
use crate::governance::Governance;
use crate::governance::subjects::SubjectRef;
use crate::workspace::Workspace;

/// A plan with the subject's values resolved, the stores it would reach, and what would keep
/// its attestation from COMPLETE.
#[derive(Debug, Clone)]
pub struct Explained {
    /// The plan (step values filled in).
    pub plan: Plan,
    /// What the proof would search for, and the personal columns of the tables the plan
    /// changes that would not be traces (see [`crate::erasure::searched`]).
    pub searched: Searched,
    /// The stores outside the warehouse the erasure would delete from or account for, in
    /// erasure order ([`crate::erasure::erase::stores`]).
    pub stores: Vec<StoreStep>,
    /// Stores that would stop the erasure before it starts, with why.
    pub store_blockers: Vec<(String, String)>,
    /// Per table whose kept history the erasure would rewrite (retention.toml `[snapshots]`):
    /// the kept snapshots that would get twins, their refs, rows, and the files rewritten.
    pub history: std::collections::BTreeMap<String, lethe_iceberg::ops::twins::TwinsReport>,
    /// What would keep the attestation from COMPLETE, in words: the plan's own verdict aside
    /// (UNRESOLVED tables, blocked tables), personal columns that are not traces, other
    /// people's rows that quote the subject (mentions to review), stores that can't be probed,
    /// stores whose probe can't see the subject, tables where the plan's selection and the
    /// logical check disagree.
    pub warnings: Vec<String>,
    /// The verdict the attestation can reach: COMPLETE only when the plan is COMPLETE and
    /// nothing above stands in the way.
    pub verdict: Verdict,
    /// The governance files used.
    pub governance: Governance,
}

/// Plans the erasure of one subject and resolves its values. Changes nothing.
pub async fn explain(ws: &Workspace, subject: &SubjectRef) -> Result<Explained> {
    explain_with(ws, subject, false).await
}

/// [`explain`], drawing the plan's lineage subgraph (DOT) when `draw` is set. The plan, its
/// values and the traces are what an erasure would prepare ([`prepare_drawn`]): the same
/// reads, nothing written; the stores are planned as for a request received today, and
/// probed without deleting to see whether each probe can see the subject.
pub async fn explain_with(ws: &Workspace, subject: &SubjectRef, draw: bool) -> Result<Explained> {
    let gov = ws.governance()?;
    let spec = RequestSpec {
        request: "explain".into(),
        subject: subject.subject.clone(),
        id: subject.id.clone(),
    };
    let prepared =
        prepare_drawn(ws, &gov, std::slice::from_ref(&spec), None, draw, &|_| {}).await?;
    let p = prepared.plan;
    let changed: Vec<Changed<'_>> = p
        .steps
        .iter()
        .map(|s| Changed {
            table: &s.table,
            action: s.action,
            column: s.column.as_deref(),
        })
        .collect();
    let case = prepared.cases.first().cloned().unwrap_or_default();
    let searched = searched(ws, &gov, &case, &changed).await?;
    let history = plan_history(ws, &prepared.steps).await?;
    let today = crate::erasure::holds::day_or_today(ws, None);
    let due = crate::requests::deadline::due(today, 0)?;
    let store_plan = plan_stores(ws, &gov, &p, today, due).await?;
    let mut warnings = searched.remaining();
    for s in &prepared.steps {
        let planned = case.rows.get(&s.table).copied().unwrap_or(0);
        if let Some(checked) = case.checked_rows.get(&s.table)
            && *checked != planned
        {
            warnings.push(format!(
                "{}: the plan selects {planned} row(s) of the subject, but {checked} row(s) address the subject by some column (the logical check): the attestation would be INCOMPLETE",
                s.table
            ));
        }
    }
    // Other people's rows that quote the subject: kept, and found by the proof scan, until a
    // reviewer decides on each (`lethe review decide`).
    let prefix = crate::erasure::prove::prefix_len_readable(ws).await?;
    let (found, unread) = mentions_readable(ws, std::slice::from_ref(&case), prefix).await?;
    for (t, why) in unread {
        warnings.push(format!(
            "{t} can't be read ({why}): it can't be searched for mentions of the subject, nor proven clean"
        ));
    }
    for (t, m) in found {
        warnings.push(format!(
            "{t}: {} row(s) of other people quote the subject ({}): they are kept, and the attestation is not COMPLETE until a reviewer decides each (`lethe review decide`)",
            m.rows,
            m.columns.join(", ")
        ));
    }
    warnings.extend(store_warnings(&store_plan.steps));
    warnings.extend(blind_stores(ws, &store_plan.steps, &case).await?);
    for (name, why) in &store_plan.blockers {
        warnings.push(format!("store {name}: {why}"));
    }
    let verdict = match p.verdict {
        Verdict::Complete if !warnings.is_empty() => Verdict::Incomplete,
        v => v,
    };
    Ok(Explained {
        plan: p,
        searched,
        stores: store_plan.steps,
        store_blockers: store_plan.blockers,
        history,
        warnings,
        verdict,
        governance: gov,
    })
}

/// The twins each history-rewriting step would write ([`lethe_iceberg::ops::twins::plan_twins`]):
/// reads the kept snapshots' candidate files, writes nothing.
async fn plan_history(
    ws: &Workspace,
    steps: &[crate::erasure::erase::JournalStep],
) -> Result<std::collections::BTreeMap<String, lethe_iceberg::ops::twins::TwinsReport>> {
    use lethe_iceberg::ops::rewrite::RowChange;
    let mut out = std::collections::BTreeMap::new();
    for s in steps.iter().filter(|s| s.history.is_some()) {
        let Some(predicate) = s.predicate() else {
            continue;
        };
        let change = match s.action {
            crate::erasure::plan::Action::Rewrite => RowChange::SetNull(s.erase_columns.clone()),
            _ => RowChange::Delete,
        };
        let spec = lethe_iceberg::ops::twins::TwinsSpec {
            predicate,
            change,
            summary: Default::default(),
            options: Default::default(),
        };
        let name = lethe_iceberg::catalog::TableName::parse(&s.table)?;
        out.insert(
            s.table.clone(),
            lethe_iceberg::ops::twins::plan_twins(&ws.warehouse, &name, &spec).await?,
        );
    }
    Ok(out)
}

/// Stores the attestation could never call verified: those that can't be probed or deleted
/// (residuals), in words.
fn store_warnings(stores: &[StoreStep]) -> Vec<String> {
    stores
        .iter()
        .filter(|s| s.state == StoreState::Residual || s.mechanism.contains("can't be probed"))
        .map(|s| {
            format!(
                "store {}: {} — a residual in every manifest, so the attestation is not COMPLETE",
                s.store,
                if s.state == StoreState::Residual {
                    s.mechanism.clone()
                } else {
                    "deleted but can't be probed".to_string()
                }
            )
        })
        .collect()
}

/// Stores whose probe, run now without deleting, can't see the subject where the store's own
/// data or its source say the subject is ([`crate::erasure::erase::stores::blind_reason`]).
async fn blind_stores(
    ws: &Workspace,
    stores: &[StoreStep],
    case: &CaseFile,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for s in stores.iter().filter(|s| s.state == StoreState::Planned) {
        match crate::erasure::erase::stores::blind_reason(ws, &s.store, std::slice::from_ref(case))
            .await
        {
            Ok(Some(why)) => out.push(format!("store {}: blind — {why}", s.store)),
            Ok(None) => {}
            // A store that can't be probed now (a vendor down) is not an error of the plan: the
            // erasure would stop there unless it can be probed by then.
            Err(e) => out.push(format!(
                "store {}: the probe without deleting failed ({e}); the erasure stops at this store unless it can be probed",
                s.store
            )),
        }
    }
    Ok(out)
}
