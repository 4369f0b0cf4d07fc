//! Building a plan for a `--subject NAME=ID` from a workspace: the glue between the pure
//! planner ([`crate::plan`]) and the catalog, lineage folder and governance files.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Result;
use crate::governance::Governance;
use crate::governance::subjects::SubjectRef;
use crate::pipeline::Pipeline;
use crate::plan::{self, Inventory, Plan};
use crate::predicate::Value;
use crate::workspace::Workspace;

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

/// Names of the pipelines in the workspace.
pub fn pipeline_names(ws: &Workspace) -> Result<BTreeSet<String>> {
    Ok(Pipeline::load_all(&ws.config.paths.pipelines)?
        .into_iter()
        .map(|p| p.name)
        .collect())
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
        &pipeline_names(ws)?,
        draw,
    )?;
    let values = plan::resolve_values(&ws.warehouse, &gov, &p, std::slice::from_ref(&id)).await?;
    fill_values(
        &mut p,
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

/// Shows ID values in the steps; values of mapped identifiers (emails...) are counted only.
pub fn fill_values(p: &mut Plan, values: &BTreeMap<String, Vec<Value>>, mapped: &BTreeSet<String>) {
    for s in &mut p.steps {
        if let Some(l) = &s.label {
            let v = values.get(l).cloned().unwrap_or_default();
            s.values = if mapped.contains(l) {
                vec![format!(
                    "({} value(s) of {l}, resolved through the mapping table)",
                    v.len()
                )]
            } else {
                v.iter()
                    .map(|x| match x {
                        Value::Str(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect()
            };
        }
    }
}
