//! Column-level lineage of one query, computed from its DataFusion logical plan, in
//! OpenLineage terms (DIRECT/INDIRECT × IDENTITY/TRANSFORMATION/AGGREGATION/JOIN/FILTER/…).
//!
//! What it guarantees:
//! - Every output column of the plan is listed, in the plan's output order, with all the
//!   base-table columns its value is derived from (DIRECT) and all those that decide which
//!   rows exist or which branch is taken (INDIRECT). Views, CTEs (also recursive ones),
//!   subquery aliases, unions and subqueries are resolved down to the tables actually read.
//! - Inputs are deduplicated and ordered deterministically: DIRECT first, then INDIRECT, each
//!   sorted by (table, column, subtype). The answer does not depend on the order in which
//!   the plan lists things, so an optimized plan gives the same answer as the unoptimized
//!   one for the usual rewrites (filter push-down into scans/joins, projection pruning,
//!   subquery decorrelation into semi/anti joins, DISTINCT into GROUP BY).
//! - A value computed by a user-defined function (anything that is not one of DataFusion's
//!   default functions of the same name and implementation) is opaque: the function is listed
//!   in [`ColumnLineage::opaque`] and every input that passed through it carries the
//!   description `opaque: udf <name>`.
//! - A plan node or expression kind it does not understand is an error naming it; lineage
//!   is never guessed.
//!
//! What it does not do:
//! - It over-approximates rather than under-approximates: INDIRECT inputs that affect rows
//!   (filters, join keys, group keys, sort keys, and everything inside subqueries used as
//!   filters) are reported for the whole dataset and on every output column, as OpenLineage
//!   producers commonly do, even if they affect only some rows (one union branch, the
//!   nullable side of an outer join).
//! - Rewrites that change the *role* of a column are not undone: a WHERE equality between two
//!   tables of a comma join is FILTER in the unoptimized plan and JOIN once the optimizer
//!   turns it into a join key; a correlated scalar subquery's correlation columns are FILTER
//!   unoptimized and JOIN once decorrelated; a lone `count(DISTINCT x)` rewritten into a
//!   two-level aggregate adds `x` as GROUP_BY. Prefer the unoptimized plan
//!   (`DataFrame::logical_plan()`) as the record of what the query says.
//! - LIMIT/OFFSET and repartitioning are not lineage (they depend on no column).

use std::fmt;

use datafusion::logical_expr::LogicalPlan;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::analyze::Analyzer;
use crate::deps::{Deps, Indirect, Reasons, merge_indirect};

/// Prefix of [`InputColumn::description`] for inputs whose effect cannot be resolved
/// (they went through a user-defined function). The lineage graph treats such inputs as
/// unresolved.
pub const OPAQUE_PREFIX: &str = "opaque:";

/// OpenLineage transformation type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LineageKind {
    /// The output value is derived from the input value.
    Direct,
    /// The input decides which rows exist or which value is chosen, but is not in the value.
    Indirect,
}

/// OpenLineage transformation subtype. The order of the variants is the sort order of
/// inputs; among DIRECT subtypes it is also their strength (a source that is both
/// IDENTITY and AGGREGATION of one output is reported as AGGREGATION).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Subtype {
    /// DIRECT: the output value is the input value unchanged (through aliases, projections,
    /// subquery aliases, unions, group keys passed through).
    Identity,
    /// DIRECT: computed from the input (functions, arithmetic, casts, CASE results). A cast
    /// that only changes the storage of the same logical type (`Utf8` to `Utf8View`, as the
    /// planner adds when inserting into a table) does not make an IDENTITY a TRANSFORMATION.
    Transformation,
    /// DIRECT: an aggregate of the input (count, sum, avg, min, max, … also DISTINCT ones,
    /// and aggregates used as window functions).
    Aggregation,
    /// INDIRECT: used in a join condition of an inner or outer join.
    Join,
    /// INDIRECT: used in WHERE/HAVING (also filters pushed into scans, semi/anti joins from
    /// IN/EXISTS subqueries, and the FILTER clause of an aggregate).
    Filter,
    /// INDIRECT: a grouping key (GROUP BY, DISTINCT, DISTINCT ON).
    GroupBy,
    /// INDIRECT: an ORDER BY key (of the query, or inside an ordered aggregate).
    Sort,
    /// INDIRECT: a window's PARTITION BY or ORDER BY key.
    Window,
    /// INDIRECT: a CASE condition, or an argument whose nullness selects the result
    /// (COALESCE/NVL/IFNULL/NVL2/NULLIF).
    Conditional,
}

impl LineageKind {
    /// The OpenLineage spelling (`DIRECT`, `INDIRECT`).
    pub fn as_str(self) -> &'static str {
        match self {
            LineageKind::Direct => "DIRECT",
            LineageKind::Indirect => "INDIRECT",
        }
    }
}

impl Subtype {
    /// The OpenLineage spelling (`IDENTITY`, `GROUP_BY`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Subtype::Identity => "IDENTITY",
            Subtype::Transformation => "TRANSFORMATION",
            Subtype::Aggregation => "AGGREGATION",
            Subtype::Join => "JOIN",
            Subtype::Filter => "FILTER",
            Subtype::GroupBy => "GROUP_BY",
            Subtype::Sort => "SORT",
            Subtype::Window => "WINDOW",
            Subtype::Conditional => "CONDITIONAL",
        }
    }
}

impl fmt::Display for LineageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Subtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One base-table column an output depends on, and how.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct InputColumn {
    /// The table as the query named it, without the catalog prefix (`crm.learners`).
    pub table: String,
    /// The column's name in that table.
    pub column: String,
    /// DIRECT or INDIRECT.
    pub kind: LineageKind,
    /// How the input is used.
    pub subtype: Subtype,
    /// `Some("opaque: udf <name>[, udf <name>…]")` when the input went through user-defined
    /// functions; `None` otherwise.
    pub description: Option<String>,
}

impl InputColumn {
    /// True when the input went through a function whose semantics are unknown.
    pub fn is_opaque(&self) -> bool {
        self.description
            .as_deref()
            .is_some_and(|d| d.starts_with(OPAQUE_PREFIX))
    }
}

/// One output column of the query and what it depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OutputColumn {
    /// The output column's name (the field name of the plan's output schema).
    pub name: String,
    /// DIRECT inputs first, then INDIRECT ones (its own, e.g. CASE conditions and window
    /// keys, and the dataset-wide ones); each group sorted by (table, column, subtype),
    /// without duplicates.
    pub inputs: Vec<InputColumn>,
}

impl OutputColumn {
    /// The DIRECT inputs.
    pub fn direct(&self) -> impl Iterator<Item = &InputColumn> {
        self.inputs.iter().filter(|i| i.kind == LineageKind::Direct)
    }

    /// The INDIRECT inputs.
    pub fn indirect(&self) -> impl Iterator<Item = &InputColumn> {
        self.inputs
            .iter()
            .filter(|i| i.kind == LineageKind::Indirect)
    }
}

/// Column-level lineage of one query.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ColumnLineage {
    /// Base tables read anywhere in the query (also in subqueries and filters), sorted.
    pub tables: Vec<String>,
    /// One entry per output column, in the plan's output order.
    pub outputs: Vec<OutputColumn>,
    /// INDIRECT inputs that affect every row (filters, joins, group keys, sort keys),
    /// sorted by (table, column, subtype). Each is also listed on every output column.
    pub dataset_indirect: Vec<InputColumn>,
    /// Why parts of the lineage are unresolved (`udf <name>`), sorted, without duplicates.
    pub opaque: Vec<String>,
}

impl ColumnLineage {
    /// The output column called `name`, if any (the first one, should names repeat).
    pub fn output(&self, name: &str) -> Option<&OutputColumn> {
        self.outputs.iter().find(|o| o.name == name)
    }

    /// True when no part of the lineage went through an opaque function.
    pub fn is_resolved(&self) -> bool {
        self.opaque.is_empty()
    }
}

/// Computes the column lineage of `plan`.
///
/// Give it the plan of a query (`ctx.sql(sql).await?.logical_plan()`, analyzed or not,
/// optimized or not). A plan whose root is `INSERT INTO … SELECT`, `CREATE TABLE … AS
/// SELECT` or `CREATE VIEW … AS SELECT` is analysed through to its query, whose output
/// columns are then the ones reported. Other statements (DDL, EXPLAIN, DELETE, …) and
/// extension nodes are an [`Error::UnsupportedPlan`](crate::Error::UnsupportedPlan).
pub fn column_lineage(plan: &LogicalPlan) -> Result<ColumnLineage> {
    let query = crate::analyze::query_of(plan)?;
    let mut analyzer = Analyzer::default();
    let node = analyzer.plan(query)?;
    let fields = query.schema().fields();
    if fields.len() != node.columns.len() {
        return Err(crate::Error::Internal(format!(
            "root plan has {} output columns but lineage for {}",
            fields.len(),
            node.columns.len()
        )));
    }
    let outputs = fields
        .iter()
        .zip(node.columns)
        .map(|(field, deps)| OutputColumn {
            name: field.name().clone(),
            inputs: output_inputs(deps, &node.dataset),
        })
        .collect();
    Ok(ColumnLineage {
        tables: analyzer.tables.into_iter().collect(),
        outputs,
        dataset_indirect: indirect_inputs(node.dataset),
        opaque: analyzer.opaque.into_iter().collect(),
    })
}

fn description(reasons: &Reasons) -> Option<String> {
    if reasons.is_empty() {
        None
    } else {
        let list: Vec<&str> = reasons.iter().map(String::as_str).collect();
        Some(format!("{OPAQUE_PREFIX} {}", list.join(", ")))
    }
}

fn indirect_inputs(indirect: Indirect) -> Vec<InputColumn> {
    indirect
        .into_iter()
        .map(|((source, subtype), reasons)| InputColumn {
            description: description(&reasons),
            table: source.table,
            column: source.column,
            kind: LineageKind::Indirect,
            subtype,
        })
        .collect()
}

fn output_inputs(deps: Deps, dataset: &Indirect) -> Vec<InputColumn> {
    let mut inputs: Vec<InputColumn> = deps
        .direct
        .into_iter()
        .map(|(source, tag)| InputColumn {
            description: description(&tag.opaque),
            table: source.table,
            column: source.column,
            kind: LineageKind::Direct,
            subtype: tag.subtype,
        })
        .collect();
    let mut indirect = deps.indirect;
    merge_indirect(&mut indirect, dataset.clone());
    inputs.extend(indirect_inputs(indirect));
    inputs
}
