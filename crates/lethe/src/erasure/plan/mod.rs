//! EXPLAIN ERASURE: one subject's erasure planned from the catalog, the governance files and
//! temporal column lineage.
//!
//! The plan is decided by columns and lineage, not rows: a table with the subject's identifier
//! column is in the plan whether or not it holds the subject today. Each table gets exactly one
//! action:
//! - `REWRITE` when `retention.toml` records a legal exception for it (keep the rows, null the
//!   exception's `erase_columns`);
//! - `NO_ACTION` when `subjects.toml` declares it free of the subject's data (with the
//!   justification);
//! - `UNRESOLVED` when lineage reaches it through a job without column lineage, an opaque step
//!   (UDF, external path), an unknown producer, or it lives outside the catalog — or when
//!   the table uses features lethe can't change correctly yet (delete files it can't rewrite,
//!   column types the iceberg crate can't represent such as `variant`; see
//!   [`lethe_iceberg::deletes::unsupported_features`]);
//! - `DELETE` where a column holds the subject's values: a declared identifier column (by name,
//!   or classified in `metadata.toml` as identifying the subject), a mapped identifier, or a
//!   DIRECT/IDENTITY copy of one of those or of the key of a row the subject owns;
//! - `RECOMPUTE` for a table the subject's rows reach only through other edges: its pipeline
//!   is rerun after the sources are erased.
//!
//! Any UNRESOLVED step makes the plan INCOMPLETE. The preflight lists, for every table the
//! plan changes, the table settings that would keep the subject after the erasure
//! (`gc.enabled=false`, `history.expire.min-snapshots-to-keep > 1`, branches or tags); an
//! erasure refuses to start while any table is blocked. Steps are ordered sources first.
//!
//! [`plan`] is pure (no I/O) so it can be benchmarked on generated inventories; the
//! erasure's preparation ([`crate::erasure::erase::prepare`]) reads the tables to resolve
//! each step's values before anything is deleted.
//!
//! The planner's stages, each in its own file: the catalog as the planner sees it
//! (`inventory.rs`), the seed columns (`seeds.rs`), the lineage walk and one step per reached
//! table (`step.rs`), coverage, blockers and the verdict (`coverage.rs`), and the values read
//! from the tables (`values.rs`).

mod coverage;
mod inventory;
mod seeds;
mod step;
mod values;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use lethe_iceberg::predicate::Value;
use lethe_lineage::{LineageGraph, Window, walk};
use serde::{Deserialize, Serialize};

pub use inventory::{Inventory, TableInfo, load_lineage, parse_id, unaccounted};
pub use values::first_seen_in;

use crate::error::Result;
use crate::governance::Governance;

/// What the plan does to a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Action {
    /// Delete the subject's rows.
    Delete,
    /// Keep the rows under a legal exception, null the exception's columns.
    Rewrite,
    /// Rerun the table's pipeline after its sources are erased.
    Recompute,
    /// Declared free of the subject's data.
    NoAction,
    /// Lineage can't say where the subject's data is.
    Unresolved,
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Action::Delete => "DELETE",
            Action::Rewrite => "REWRITE",
            Action::Recompute => "RECOMPUTE",
            Action::NoAction => "NO_ACTION",
            Action::Unresolved => "UNRESOLVED",
        })
    }
}

/// One step of the plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Step {
    /// The table.
    pub table: String,
    /// The action.
    pub action: Action,
    /// The column that selects the subject's rows (DELETE, REWRITE).
    pub column: Option<String>,
    /// The value set that column holds: the root identifier's name, a mapped identifier, or
    /// `table.key` for the keys of rows the subject owns.
    pub label: Option<String>,
    /// The values, once resolved (ID values; other identifiers are counted, not shown).
    pub values: Vec<String>,
    /// Every other column that addresses the subject in this table (DELETE, REWRITE): a
    /// mapped or derived identifier, a lineage copy of one, the key of rows the subject owns.
    /// The step's rows are those `column` or any of these selects (OR-ed), each by its own
    /// label's values, so a row whose `column` is null is still found by another.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<Selector>,
    /// REWRITE: the columns set to null.
    pub erase_columns: Vec<String>,
    /// How the table came into the plan: the lineage edge, or the declaration.
    pub via: String,
    /// The evidence file of the lineage edge, when there is one.
    pub evidence: Option<String>,
    /// The reason (REWRITE: the exception's reason; NO_ACTION: the justification; UNRESOLVED:
    /// what lineage can't resolve; RECOMPUTE: the pipeline).
    pub reason: Option<String>,
    /// RECOMPUTE: the pipeline to rerun.
    pub pipeline: Option<String>,
    /// Settings that would keep the subject after the erasure.
    pub blockers: Vec<String>,
    /// The table keeps history (refs, retained snapshots) and retention.toml decides to
    /// rewrite it: a twin without the subject for every kept snapshot, refs moved to them
    /// (see [`lethe_iceberg::ops::twins`]). What it keeps, and the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryRewrite>,
    /// A legal hold that keeps this step from running (set for a request, never by the
    /// pure planner): the step is HELD, its action waits until the hold ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
}

/// A further column that selects a step's rows ([`Step::also`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selector {
    /// The column.
    pub column: String,
    /// The value set it holds (as [`Step::label`]).
    pub label: String,
    /// How it came to address the subject: the lineage edge, or the declaration.
    pub via: String,
    /// The evidence file of the lineage edge, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The values, once resolved (as [`Step::values`]).
    #[serde(default)]
    pub values: Vec<String>,
}

impl Step {
    /// Every (column, label) that selects the step's rows: `column` first, then `also`.
    pub fn selectors(&self) -> Vec<(&str, &str)> {
        let mut out = Vec::with_capacity(1 + self.also.len());
        if let (Some(c), Some(l)) = (&self.column, &self.label) {
            out.push((c.as_str(), l.as_str()));
        }
        out.extend(
            self.also
                .iter()
                .map(|a| (a.column.as_str(), a.label.as_str())),
        );
        out
    }
}

/// A step's rewrite of the history its table keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRewrite {
    /// What keeps the history (a tag, a branch, `min-snapshots-to-keep`), in words.
    pub keeps: Vec<String>,
    /// The decision (retention.toml `[snapshots]`).
    pub decision: crate::governance::retention::HistoryDecision,
}

/// A legal hold on a step (`governance/holds.toml`), as the evidence states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// The hold's name.
    pub hold: String,
    /// Its basis, in the legal team's words.
    pub basis: String,
    /// The role that decided it.
    pub decided_by: String,
    /// Its last day.
    pub until: chrono::NaiveDate,
    /// The day the erasure found it ended and carried the step out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_on: Option<chrono::NaiveDate>,
}

/// How much of the plan was resolved.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Coverage {
    /// Tables in the plan.
    pub discovered: usize,
    /// DELETE and RECOMPUTE steps.
    pub resolved: usize,
    /// REWRITE and NO_ACTION steps (decided by people, recorded in governance files).
    pub exempt: usize,
    /// UNRESOLVED steps.
    pub unresolved: usize,
    /// (resolved + exempt) / discovered, in percent; allowed to be low.
    pub percent: f64,
}

/// The plan's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    /// Every table is accounted for and none is blocked.
    Complete,
    /// Some table is UNRESOLVED.
    Incomplete,
    /// Every table is accounted for, but table settings would keep the subject.
    Blocked,
}

/// A subject's erasure plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// The subject's name (`learner`).
    pub subject: String,
    /// The window start: lineage edges that ended before it are not used.
    pub lineage_since: Option<DateTime<Utc>>,
    /// The steps, sources first.
    pub steps: Vec<Step>,
    /// Coverage.
    pub coverage: Coverage,
    /// Verdict.
    pub verdict: Verdict,
    /// Tables whose settings block the erasure, with the reasons.
    pub blocked: BTreeMap<String, Vec<String>>,
    /// The lineage subgraph the plan used, for Graphviz.
    #[serde(skip)]
    pub dot: String,
}

/// Plans one subject's erasure. Pure: values are resolved later by
/// [`crate::erasure::erase::prepare`].
pub fn plan(
    inv: &Inventory,
    gov: &Governance,
    graph: &LineageGraph,
    subject_name: &str,
    since: Option<DateTime<Utc>>,
    pipelines: &BTreeSet<String>,
) -> Result<Plan> {
    plan_drawn(inv, gov, graph, subject_name, since, pipelines, false)
}

/// [`plan`], with the walked lineage subgraph drawn as DOT in `Plan::dot` when `draw` is set
/// (it can be large: every reached dataset and edge).
pub fn plan_drawn(
    inv: &Inventory,
    gov: &Governance,
    graph: &LineageGraph,
    subject_name: &str,
    since: Option<DateTime<Utc>>,
    pipelines: &BTreeSet<String>,
    draw: bool,
) -> Result<Plan> {
    let subject = gov.subjects.get(subject_name)?;
    // Every column the governance files name exists (nested paths resolved by field id).
    crate::governance::paths::check(gov, &inv.schemas())?;
    let (root_table, root_column) = subject.root()?;
    if !inv.has_column(&root_table, &root_column) {
        return Err(gov.subjects.error_at(
            &format!("{subject_name}.identifiers"),
            format!("{root_table}.{root_column} is not a column of a catalog table"),
        ));
    }
    let seeded = seeds::seed(inv, gov, subject_name, subject, &root_column)?;
    let start = since.unwrap_or(DateTime::<Utc>::MIN_UTC);
    let w = walk(graph, start, &seeded.seeds, |ds: &str| {
        row_key(inv, gov, ds)
    });
    let planner = step::Planner {
        inv,
        gov,
        graph,
        subject,
        root_column: &root_column,
        window: Window::since(start),
        pipelines,
        seeded: &seeded,
    };
    let steps = planner.steps(&w);
    let coverage = coverage::coverage(&steps);
    let blocked = coverage::blocked(&steps);
    let verdict = coverage::verdict(&coverage, &blocked);
    Ok(Plan {
        subject: subject_name.to_string(),
        lineage_since: since,
        steps,
        coverage,
        verdict,
        blocked,
        dot: if draw { w.to_dot() } else { String::new() },
    })
}

/// A dataset's row key, for following the keys of rows the subject owns: metadata.toml's
/// `key`, else the table's Iceberg identifier fields.
fn row_key(inv: &Inventory, gov: &Governance, ds: &str) -> Vec<String> {
    let declared = gov
        .metadata
        .table(ds)
        .map(|t| t.key.clone())
        .unwrap_or_default();
    if !declared.is_empty() {
        return declared;
    }
    inv.tables
        .get(ds)
        .map(|t| t.identifier_fields.clone())
        .unwrap_or_default()
}

impl Plan {
    /// Shows ID values in the steps; values of mapped identifiers (emails...) are counted only.
    pub fn fill_values(
        &mut self,
        values: &BTreeMap<String, Vec<Value>>,
        mapped: &BTreeSet<String>,
    ) {
        let shown = |l: &str| -> Vec<String> {
            let v = values.get(l).cloned().unwrap_or_default();
            if mapped.contains(l) {
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
            }
        };
        for s in &mut self.steps {
            if let Some(l) = &s.label {
                s.values = shown(l);
            }
            for a in &mut s.also {
                a.values = shown(&a.label);
            }
        }
    }
}
