//! Building a plan for a `--subject NAME=ID` from a workspace: the glue between the pure
//! planner ([`crate::erasure::plan`]) and the catalog, lineage folder and governance files.

use std::collections::BTreeMap;

use crate::erasure::plan::{self, Inventory, Plan};
use crate::error::Result;
use crate::governance::Governance;
use crate::governance::subjects::SubjectRef;
use crate::workspace::Workspace;
use lethe_iceberg::predicate::Value;

/// A plan with the subject's values resolved.
#[derive(Debug, Clone)]
pub struct Explained {
    /// The plan (step values filled in).
    pub plan: Plan,
    /// The subject's root identifier value.
    pub id: Value,
    /// Every label's values.
    pub values: BTreeMap<String, Vec<Value>>,
    /// The governance files used.
    pub governance: Governance,
}

/// Plans the erasure of one subject and resolves its values. Changes nothing.
pub async fn explain(ws: &Workspace, subject: &SubjectRef) -> Result<Explained> {
    explain_with(ws, subject, false).await
}

/// [`explain`], drawing the plan's lineage subgraph (DOT) when `draw` is set.
pub async fn explain_with(ws: &Workspace, subject: &SubjectRef, draw: bool) -> Result<Explained> {
    let gov = ws.governance()?;
    let def = gov.subjects.get(&subject.subject)?.clone();
    let inv = Inventory::load(&ws.warehouse).await?;
    let id = plan::parse_id(&def, subject, &inv)?;
    let graph = plan::load_lineage(&ws.config.paths.lineage, &inv)?;
    let since = plan::first_seen(&ws.warehouse, &def, std::slice::from_ref(&id)).await?;
    let mut p = plan::plan_drawn(
        &inv,
        &gov,
        &graph,
        &subject.subject,
        since,
        &crate::pipeline::names(ws)?,
        draw,
    )?;
    let values = plan::resolve_values(&ws.warehouse, &gov, &p, std::slice::from_ref(&id)).await?;
    p.fill_values(
        &values,
        &def.mapped.iter().map(|m| m.column.clone()).collect(),
    );
    Ok(Explained {
        plan: p,
        id,
        values,
        governance: gov,
    })
}
