//! Building a plan for a `--subject NAME=ID` from a workspace: the glue between the pure
//! planner ([`crate::erasure::plan`]) and the catalog, lineage folder and governance files.

use std::collections::BTreeMap;

use crate::erasure::case::CaseFile;
use crate::erasure::plan::{self, Action, Inventory, Plan};
use crate::erasure::searched::{Changed, Searched, searched};
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
    /// What the proof would search for, and the personal columns of the tables the plan
    /// changes that would not be traces (see [`crate::erasure::searched`]).
    pub searched: Searched,
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
    // The traces an erasure of this plan would note: IDs by the steps' columns, the root's
    // values and the erased columns of each REWRITE.
    let (root_table, _) = def.root()?;
    let mut preview = CaseFile {
        subject: subject.subject.clone(),
        ..Default::default()
    };
    preview.value_columns.insert(root_table, def.values.clone());
    for s in &p.steps {
        if let Some(c) = &s.column {
            preview.ids.entry(c.clone()).or_default();
        }
        if s.action == Action::Rewrite {
            preview
                .value_columns
                .entry(s.table.clone())
                .or_default()
                .extend(s.erase_columns.iter().cloned());
        }
    }
    let changed: Vec<Changed<'_>> = p
        .steps
        .iter()
        .map(|s| Changed {
            table: &s.table,
            action: s.action,
            column: s.column.as_deref(),
        })
        .collect();
    let searched = searched(ws, &gov, &preview, &changed).await?;
    Ok(Explained {
        plan: p,
        id,
        values,
        searched,
        governance: gov,
    })
}
