//! The plan walk behind [`column_lineage`](crate::column_lineage).
//!
//! Each plan node is analysed bottom-up into a [`NodeLineage`]: one [`Deps`] per field of
//! the node's output schema (checked against the schema's width at every node) plus the
//! dataset-wide INDIRECT sources accumulated below it. Expressions are resolved against the
//! lineage of their node's input(s); correlated subqueries see the enclosing query's inputs
//! through a stack of outer frames. Base tables, views (expanded), and the work table of a
//! recursive CTE (solved as a fixed point) are the leaves.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::types::NativeType;
use datafusion::common::{Column, DFSchema, DFSchemaRef, JoinType, TableReference};
use datafusion::logical_expr::expr::{
    AggregateFunction, AggregateFunctionParams, ScalarFunction, WindowFunction,
    WindowFunctionParams,
};
use datafusion::logical_expr::{
    DdlStatement, Distinct, Expr, ExprSchemable, LogicalPlan, Subquery, WindowFunctionDefinition,
    WriteOp,
};

use crate::builtins::{is_builtin_aggregate, is_builtin_scalar, is_builtin_window};
use crate::deps::{Deps, Indirect, merge_indirect};
use crate::lineage::Subtype;
use crate::{Error, Result};

/// Maximum nesting of plan nodes and expressions together. Chains of binary operators
/// (`a OR b OR …`) are flattened and do not count against it.
pub(crate) const MAX_DEPTH: usize = 256;

/// Maximum rounds to solve a recursive CTE. Each round that does not converge adds at least
/// one dependency, so this is only reached by a bug.
const MAX_RECURSION_ROUNDS: usize = 100;

/// The query a statement runs: the input of INSERT/CTAS/CREATE VIEW, else the plan itself.
pub(crate) fn query_of(plan: &LogicalPlan) -> Result<&LogicalPlan> {
    Ok(match plan {
        LogicalPlan::Dml(dml) if matches!(dml.op, WriteOp::Insert(_) | WriteOp::Ctas) => {
            dml.input.as_ref()
        }
        LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(create)) => create.input.as_ref(),
        LogicalPlan::Ddl(DdlStatement::CreateView(create)) => create.input.as_ref(),
        other => other,
    })
}

/// Lineage of one plan node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeLineage {
    /// One entry per field of the node's output schema.
    pub(crate) columns: Vec<Deps>,
    /// INDIRECT sources affecting every row of the node's output.
    pub(crate) dataset: Indirect,
}

/// Lineage of one expression.
#[derive(Default)]
struct ExprLineage {
    /// What the expression's value depends on.
    deps: Deps,
    /// Dataset-wide INDIRECT sources of subqueries inside the expression.
    lifted: Indirect,
}

impl ExprLineage {
    fn absorb(&mut self, other: ExprLineage) {
        self.deps.merge(other.deps);
        merge_indirect(&mut self.lifted, other.lifted);
    }
}

/// An input an expression can refer to: its schema and the lineage of each of its fields.
#[derive(Clone, Copy)]
struct Frame<'a> {
    schema: &'a DFSchemaRef,
    columns: &'a [Deps],
}

/// A frame of an enclosing query, kept while one of its subqueries is analysed.
struct OuterFrame {
    schema: DFSchemaRef,
    columns: Vec<Deps>,
}

/// Walks a plan; collects the tables read and the opaque functions met on the way.
#[derive(Default)]
pub(crate) struct Analyzer {
    /// Base tables read, as the query named them without catalog.
    pub(crate) tables: BTreeSet<String>,
    /// Opaque reasons met (`udf <name>`).
    pub(crate) opaque: BTreeSet<String>,
    /// Inputs of enclosing queries, innermost last.
    outer: Vec<OuterFrame>,
    /// Lineage currently bound to the work table of each recursive CTE being solved.
    work_tables: HashMap<String, Vec<Deps>>,
    depth: usize,
}

/// The table name the query used, without its catalog (`crm.learners`).
fn table_name(reference: &TableReference) -> String {
    match reference {
        TableReference::Bare { table } => table.to_string(),
        TableReference::Partial { schema, table } | TableReference::Full { schema, table, .. } => {
            format!("{schema}.{table}")
        }
    }
}

/// Name of a plan node for error messages (never its expressions, which may hold values).
fn node_name(plan: &LogicalPlan) -> String {
    match plan {
        LogicalPlan::Projection(_) => "Projection".into(),
        LogicalPlan::Filter(_) => "Filter".into(),
        LogicalPlan::Window(_) => "Window".into(),
        LogicalPlan::Aggregate(_) => "Aggregate".into(),
        LogicalPlan::Sort(_) => "Sort".into(),
        LogicalPlan::Join(_) => "Join".into(),
        LogicalPlan::Repartition(_) => "Repartition".into(),
        LogicalPlan::Union(_) => "Union".into(),
        LogicalPlan::TableScan(_) => "TableScan".into(),
        LogicalPlan::EmptyRelation(_) => "EmptyRelation".into(),
        LogicalPlan::Subquery(_) => "Subquery".into(),
        LogicalPlan::SubqueryAlias(_) => "SubqueryAlias".into(),
        LogicalPlan::Limit(_) => "Limit".into(),
        LogicalPlan::Statement(s) => format!("Statement({})", s.name()),
        LogicalPlan::Values(_) => "Values".into(),
        LogicalPlan::Explain(_) => "Explain".into(),
        LogicalPlan::Analyze(_) => "Analyze".into(),
        LogicalPlan::Extension(e) => format!("Extension({})", e.node.name()),
        LogicalPlan::Distinct(_) => "Distinct".into(),
        LogicalPlan::Dml(d) => format!("Dml({})", d.op.name()),
        LogicalPlan::Ddl(d) => format!("Ddl({})", d.name()),
        LogicalPlan::Copy(_) => "Copy".into(),
        LogicalPlan::DescribeTable(_) => "DescribeTable".into(),
        LogicalPlan::Unnest(_) => "Unnest".into(),
        LogicalPlan::RecursiveQuery(_) => "RecursiveQuery".into(),
    }
}

fn internal(message: impl Into<String>) -> Error {
    Error::Internal(message.into())
}

/// The lineage of the fields of `schema` that `column` names. A qualified column names one
/// field; an unqualified one names every field of that name (a valid plan has one).
fn lookup(column: &Column, schema: &DFSchema, columns: &[Deps]) -> Result<Option<Deps>> {
    let indices: Vec<usize> = if column.relation.is_some() {
        schema.maybe_index_of_column(column).into_iter().collect()
    } else {
        schema
            .iter()
            .enumerate()
            .filter(|(_, (_, field))| field.name() == &column.name)
            .map(|(i, _)| i)
            .collect()
    };
    let mut found: Option<Deps> = None;
    for i in indices {
        let deps = columns
            .get(i)
            .ok_or_else(|| internal("schema and lineage widths differ"))?;
        found.get_or_insert_with(Deps::default).merge(deps.clone());
    }
    Ok(found)
}

/// A cast that only changes how a value is stored (`Utf8` to `Utf8View`, a dictionary to its
/// values, `Date32` to `Date64`: the same DataFusion logical type) leaves the value as it
/// was; any other cast transforms it. When the operand's type cannot be worked out, the
/// cast counts as a transformation.
fn cast_floor(operand: &Expr, target: &DataType, frames: &[Frame<'_>]) -> Option<Subtype> {
    let source = frames
        .iter()
        .find_map(|frame| operand.get_type(frame.schema.as_ref()).ok());
    match source {
        Some(source) if NativeType::from(&source) == NativeType::from(target) => None,
        _ => Some(Subtype::Transformation),
    }
}

impl Analyzer {
    fn descend(&mut self) -> Result<()> {
        if self.depth >= MAX_DEPTH {
            return Err(Error::TooDeep { limit: MAX_DEPTH });
        }
        self.depth += 1;
        Ok(())
    }

    /// Lineage of `plan`, one entry per field of its schema.
    pub(crate) fn plan(&mut self, plan: &LogicalPlan) -> Result<NodeLineage> {
        self.descend()?;
        let result = self.plan_node(plan);
        self.depth -= 1;
        let node = result?;
        let width = plan.schema().fields().len();
        if node.columns.len() != width {
            return Err(internal(format!(
                "{} has {width} output columns but lineage for {}",
                node_name(plan),
                node.columns.len()
            )));
        }
        Ok(node)
    }

    fn plan_node(&mut self, plan: &LogicalPlan) -> Result<NodeLineage> {
        match plan {
            LogicalPlan::Projection(projection) => {
                self.columns_over(&projection.input, &projection.expr, "Projection", false)
            }
            LogicalPlan::Filter(filter) => {
                let NodeLineage {
                    columns,
                    mut dataset,
                } = self.plan(&filter.input)?;
                let frames = [Frame {
                    schema: filter.input.schema(),
                    columns: &columns,
                }];
                let lineage = self.expr(&filter.predicate, &frames, "Filter")?;
                merge_indirect(&mut dataset, lineage.lifted);
                merge_indirect(&mut dataset, lineage.deps.into_indirect(Subtype::Filter));
                Ok(NodeLineage { columns, dataset })
            }
            LogicalPlan::Window(window) => {
                self.columns_over(&window.input, &window.window_expr, "Window", true)
            }
            LogicalPlan::Aggregate(aggregate) => {
                let NodeLineage {
                    columns,
                    mut dataset,
                } = self.plan(&aggregate.input)?;
                let frames = [Frame {
                    schema: aggregate.input.schema(),
                    columns: &columns,
                }];
                // The schema lists the (distinct) grouping expressions, then for grouping
                // sets an internal grouping id, then the aggregates.
                let (keys, grouping_set): (Vec<&Expr>, bool) = match aggregate.group_expr.as_slice()
                {
                    [Expr::GroupingSet(set)] => (set.distinct_expr(), true),
                    exprs => (exprs.iter().collect(), false),
                };
                let mut out = Vec::with_capacity(keys.len() + aggregate.aggr_expr.len() + 1);
                for key in keys {
                    let lineage = self.expr(key, &frames, "Aggregate")?;
                    merge_indirect(&mut dataset, lineage.lifted);
                    merge_indirect(
                        &mut dataset,
                        lineage.deps.clone().into_indirect(Subtype::GroupBy),
                    );
                    out.push(lineage.deps);
                }
                if grouping_set {
                    out.push(Deps::default());
                }
                for expr in &aggregate.aggr_expr {
                    let lineage = self.expr(expr, &frames, "Aggregate")?;
                    merge_indirect(&mut dataset, lineage.lifted);
                    out.push(lineage.deps);
                }
                Ok(NodeLineage {
                    columns: out,
                    dataset,
                })
            }
            LogicalPlan::Sort(sort) => {
                let NodeLineage {
                    columns,
                    mut dataset,
                } = self.plan(&sort.input)?;
                let frames = [Frame {
                    schema: sort.input.schema(),
                    columns: &columns,
                }];
                for key in &sort.expr {
                    let lineage = self.expr(&key.expr, &frames, "Sort")?;
                    merge_indirect(&mut dataset, lineage.lifted);
                    merge_indirect(&mut dataset, lineage.deps.into_indirect(Subtype::Sort));
                }
                Ok(NodeLineage { columns, dataset })
            }
            LogicalPlan::Join(join) => {
                let left = self.plan(&join.left)?;
                let right = self.plan(&join.right)?;
                // A semi/anti/mark join only decides which rows of one side survive: it is a
                // filter (this is what IN/EXISTS subqueries become once decorrelated).
                let role = match join.join_type {
                    JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full => {
                        Subtype::Join
                    }
                    JoinType::LeftSemi
                    | JoinType::LeftAnti
                    | JoinType::RightSemi
                    | JoinType::RightAnti
                    | JoinType::LeftMark
                    | JoinType::RightMark => Subtype::Filter,
                };
                let left_frame = Frame {
                    schema: join.left.schema(),
                    columns: &left.columns,
                };
                let right_frame = Frame {
                    schema: join.right.schema(),
                    columns: &right.columns,
                };
                let mut dataset = left.dataset.clone();
                merge_indirect(&mut dataset, right.dataset.clone());
                let mut condition = ExprLineage::default();
                for (l, r) in &join.on {
                    condition.absorb(self.expr(l, &[left_frame, right_frame], "Join")?);
                    condition.absorb(self.expr(r, &[right_frame, left_frame], "Join")?);
                }
                if let Some(filter) = &join.filter {
                    condition.absorb(self.expr(filter, &[left_frame, right_frame], "Join")?);
                }
                merge_indirect(&mut dataset, condition.lifted);
                merge_indirect(&mut dataset, condition.deps.into_indirect(role));
                let columns = match join.join_type {
                    JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full => {
                        let mut columns = left.columns;
                        columns.extend(right.columns);
                        columns
                    }
                    JoinType::LeftSemi | JoinType::LeftAnti => left.columns,
                    JoinType::RightSemi | JoinType::RightAnti => right.columns,
                    // The mark column only says whether a match exists; its sources are
                    // the join condition's, already recorded as FILTER.
                    JoinType::LeftMark => {
                        let mut columns = left.columns;
                        columns.push(Deps::default());
                        columns
                    }
                    JoinType::RightMark => {
                        let mut columns = right.columns;
                        columns.push(Deps::default());
                        columns
                    }
                };
                Ok(NodeLineage { columns, dataset })
            }
            LogicalPlan::Repartition(repartition) => self.plan(&repartition.input),
            LogicalPlan::Subquery(subquery) => self.plan(&subquery.subquery),
            LogicalPlan::SubqueryAlias(alias) => self.plan(&alias.input),
            LogicalPlan::Limit(limit) => self.plan(&limit.input),
            LogicalPlan::Union(union) => {
                let mut columns: Option<Vec<Deps>> = None;
                let mut dataset = Indirect::new();
                for input in &union.inputs {
                    let branch = self.plan(input)?;
                    merge_indirect(&mut dataset, branch.dataset);
                    columns = Some(match columns {
                        None => branch.columns,
                        Some(mut so_far) => {
                            if so_far.len() != branch.columns.len() {
                                return Err(internal("union inputs differ in width"));
                            }
                            for (mine, theirs) in so_far.iter_mut().zip(branch.columns) {
                                mine.merge(theirs);
                            }
                            so_far
                        }
                    });
                }
                Ok(NodeLineage {
                    columns: columns.unwrap_or_default(),
                    dataset,
                })
            }
            LogicalPlan::TableScan(scan) => {
                let mut dataset = Indirect::new();
                let source_schema = scan.source.schema();
                let work_table = match &scan.table_name {
                    TableReference::Bare { table } => self.work_tables.get(table.as_ref()),
                    _ => None,
                };
                // Lineage of every field of the source, before the scan's projection.
                let full: Vec<Deps> = if let Some(bound) = work_table {
                    bound.clone()
                } else if let Some(view) = scan.source.get_logical_plan() {
                    let view = self.plan(&view)?;
                    merge_indirect(&mut dataset, view.dataset);
                    view.columns
                } else {
                    let name = table_name(&scan.table_name);
                    let full = source_schema
                        .fields()
                        .iter()
                        .map(|field| Deps::identity(&name, field.name()))
                        .collect();
                    self.tables.insert(name);
                    full
                };
                if full.len() != source_schema.fields().len() {
                    return Err(internal(format!(
                        "source of {} has a different width than its lineage",
                        table_name(&scan.table_name)
                    )));
                }
                if !scan.filters.is_empty() {
                    let schema = DFSchema::try_from_qualified_schema(
                        scan.table_name.clone(),
                        &source_schema,
                    )
                    .map(Arc::new)
                    .map_err(|_| {
                        internal(format!(
                            "cannot qualify the schema of {}",
                            table_name(&scan.table_name)
                        ))
                    })?;
                    let frames = [Frame {
                        schema: &schema,
                        columns: &full,
                    }];
                    for filter in &scan.filters {
                        let lineage = self.expr(filter, &frames, "TableScan")?;
                        merge_indirect(&mut dataset, lineage.lifted);
                        merge_indirect(&mut dataset, lineage.deps.into_indirect(Subtype::Filter));
                    }
                }
                let columns = match &scan.projection {
                    None => full,
                    Some(indices) => indices
                        .iter()
                        .map(|&i| {
                            full.get(i).cloned().ok_or_else(|| {
                                internal(format!(
                                    "projection of {} is out of range",
                                    table_name(&scan.table_name)
                                ))
                            })
                        })
                        .collect::<Result<_>>()?,
                };
                Ok(NodeLineage { columns, dataset })
            }
            LogicalPlan::EmptyRelation(empty) => Ok(NodeLineage {
                columns: vec![Deps::default(); empty.schema.fields().len()],
                dataset: Indirect::new(),
            }),
            LogicalPlan::Values(values) => {
                let width = values.schema.fields().len();
                let mut columns = vec![Deps::default(); width];
                let mut dataset = Indirect::new();
                for row in &values.values {
                    if row.len() != width {
                        return Err(internal("VALUES row width differs from its schema"));
                    }
                    for (column, expr) in columns.iter_mut().zip(row) {
                        let lineage = self.expr(expr, &[], "Values")?;
                        merge_indirect(&mut dataset, lineage.lifted);
                        column.merge(lineage.deps);
                    }
                }
                Ok(NodeLineage { columns, dataset })
            }
            LogicalPlan::Distinct(Distinct::All(input)) => {
                // SELECT DISTINCT groups by every column (the optimizer rewrites it so).
                let NodeLineage {
                    columns,
                    mut dataset,
                } = self.plan(input)?;
                for column in &columns {
                    merge_indirect(&mut dataset, column.clone().into_indirect(Subtype::GroupBy));
                }
                Ok(NodeLineage { columns, dataset })
            }
            LogicalPlan::Distinct(Distinct::On(distinct)) => {
                // Mirrors the optimizer's rewrite: GROUP BY the ON keys, each selected value
                // is first_value(value ORDER BY the sort keys), and the result is sorted by
                // the leading sort keys (as many as there are ON keys).
                let NodeLineage {
                    columns,
                    mut dataset,
                } = self.plan(&distinct.input)?;
                let frames = [Frame {
                    schema: distinct.input.schema(),
                    columns: &columns,
                }];
                for key in &distinct.on_expr {
                    let lineage = self.expr(key, &frames, "DistinctOn")?;
                    merge_indirect(&mut dataset, lineage.lifted);
                    merge_indirect(&mut dataset, lineage.deps.into_indirect(Subtype::GroupBy));
                }
                let mut order = Indirect::new();
                for (i, key) in distinct.sort_expr.iter().flatten().enumerate() {
                    let lineage = self.expr(&key.expr, &frames, "DistinctOn")?;
                    merge_indirect(&mut dataset, lineage.lifted);
                    let sources = lineage.deps.into_indirect(Subtype::Sort);
                    if i < distinct.on_expr.len() {
                        merge_indirect(&mut dataset, sources.clone());
                    }
                    merge_indirect(&mut order, sources);
                }
                let mut out = Vec::with_capacity(distinct.select_expr.len());
                for expr in &distinct.select_expr {
                    let lineage = self.expr(expr, &frames, "DistinctOn")?;
                    merge_indirect(&mut dataset, lineage.lifted);
                    let mut deps = lineage.deps.at_least(Subtype::Aggregation);
                    merge_indirect(&mut deps.indirect, order.clone());
                    out.push(deps);
                }
                Ok(NodeLineage {
                    columns: out,
                    dataset,
                })
            }
            LogicalPlan::Unnest(unnest) => {
                let NodeLineage { columns, dataset } = self.plan(&unnest.input)?;
                let unnested: HashSet<usize> = unnest
                    .list_type_columns
                    .iter()
                    .map(|(i, _)| *i)
                    .chain(unnest.struct_type_columns.iter().copied())
                    .collect();
                let out = unnest
                    .dependency_indices
                    .iter()
                    .map(|&i| {
                        let deps = columns
                            .get(i)
                            .cloned()
                            .ok_or_else(|| internal("unnest dependency index out of range"))?;
                        Ok(if unnested.contains(&i) {
                            deps.at_least(Subtype::Transformation)
                        } else {
                            deps
                        })
                    })
                    .collect::<Result<_>>()?;
                Ok(NodeLineage {
                    columns: out,
                    dataset,
                })
            }
            LogicalPlan::RecursiveQuery(recursive) => {
                let base = self.plan(&recursive.static_term)?;
                let previous = self.work_tables.remove(&recursive.name);
                let solved = self.solve_recursion(&recursive.name, &recursive.recursive_term, base);
                match previous {
                    Some(bound) => self.work_tables.insert(recursive.name.clone(), bound),
                    None => self.work_tables.remove(&recursive.name),
                };
                solved
            }
            LogicalPlan::Extension(_)
            | LogicalPlan::Statement(_)
            | LogicalPlan::Explain(_)
            | LogicalPlan::Analyze(_)
            | LogicalPlan::Dml(_)
            | LogicalPlan::Ddl(_)
            | LogicalPlan::Copy(_)
            | LogicalPlan::DescribeTable(_) => Err(Error::UnsupportedPlan {
                node: node_name(plan),
            }),
        }
    }

    /// Least fixed point of `lineage = base ∪ recursive_term(work table = lineage)`.
    fn solve_recursion(
        &mut self,
        name: &str,
        recursive_term: &LogicalPlan,
        base: NodeLineage,
    ) -> Result<NodeLineage> {
        let mut current = base;
        for _ in 0..MAX_RECURSION_ROUNDS {
            self.work_tables
                .insert(name.to_owned(), current.columns.clone());
            let step = self.plan(recursive_term)?;
            if step.columns.len() != current.columns.len() {
                return Err(internal(
                    "recursive term width differs from the static term",
                ));
            }
            let mut next = current.clone();
            merge_indirect(&mut next.dataset, step.dataset);
            for (mine, theirs) in next.columns.iter_mut().zip(step.columns) {
                mine.merge(theirs);
            }
            if next == current {
                return Ok(current);
            }
            current = next;
        }
        Err(internal("recursive query lineage did not converge"))
    }

    /// Lineage of a subquery, with `frames` visible to it as outer references.
    fn subquery(&mut self, subquery: &Subquery, frames: &[Frame<'_>]) -> Result<NodeLineage> {
        let before = self.outer.len();
        self.outer.extend(frames.iter().map(|frame| OuterFrame {
            schema: Arc::clone(frame.schema),
            columns: frame.columns.to_vec(),
        }));
        let result = self.plan(&subquery.subquery);
        self.outer.truncate(before);
        result
    }

    fn resolve(&self, column: &Column, frames: &[Frame<'_>], node: &str) -> Result<Deps> {
        let mut found: Option<Deps> = None;
        for frame in frames {
            if let Some(deps) = lookup(column, frame.schema, frame.columns)? {
                found.get_or_insert_with(Deps::default).merge(deps);
                if column.relation.is_some() {
                    break;
                }
            }
        }
        found.ok_or_else(|| Error::UnresolvedColumn {
            column: column.flat_name(),
            node: node.to_owned(),
        })
    }

    /// An outer reference resolves in the innermost enclosing query that has the column.
    fn resolve_outer(&self, column: &Column, node: &str) -> Result<Deps> {
        for frame in self.outer.iter().rev() {
            if let Some(deps) = lookup(column, &frame.schema, &frame.columns)? {
                return Ok(deps);
            }
        }
        Err(Error::UnresolvedColumn {
            column: column.flat_name(),
            node: format!("{node} (outer reference)"),
        })
    }

    /// A node whose output columns are `exprs` over `input` (Projection), or `input`'s columns
    /// followed by `exprs` (Window, with `keep_input`).
    fn columns_over(
        &mut self,
        input: &LogicalPlan,
        exprs: &[Expr],
        node: &str,
        keep_input: bool,
    ) -> Result<NodeLineage> {
        let NodeLineage {
            columns,
            mut dataset,
        } = self.plan(input)?;
        let frames = [Frame {
            schema: input.schema(),
            columns: &columns,
        }];
        let mut out = if keep_input {
            columns.clone()
        } else {
            Vec::with_capacity(exprs.len())
        };
        for expr in exprs {
            let lineage = self.expr(expr, &frames, node)?;
            merge_indirect(&mut dataset, lineage.lifted);
            out.push(lineage.deps);
        }
        Ok(NodeLineage {
            columns: out,
            dataset,
        })
    }

    fn expr(&mut self, expr: &Expr, frames: &[Frame<'_>], node: &str) -> Result<ExprLineage> {
        self.descend()?;
        let result = self.expr_inner(expr, frames, node);
        self.depth -= 1;
        result
    }

    /// Union of the lineage of `exprs`, DIRECT subtypes raised to `floor` if given.
    fn combine<'e>(
        &mut self,
        exprs: impl IntoIterator<Item = &'e Expr>,
        floor: Option<Subtype>,
        frames: &[Frame<'_>],
        node: &str,
    ) -> Result<ExprLineage> {
        let mut out = ExprLineage::default();
        for expr in exprs {
            out.absorb(self.expr(expr, frames, node)?);
        }
        if let Some(floor) = floor {
            out.deps = out.deps.at_least(floor);
        }
        Ok(out)
    }

    fn expr_inner(&mut self, expr: &Expr, frames: &[Frame<'_>], node: &str) -> Result<ExprLineage> {
        let transformed = Some(Subtype::Transformation);
        match expr {
            Expr::Alias(alias) => self.expr(&alias.expr, frames, node),
            Expr::Column(column) => Ok(ExprLineage {
                deps: self.resolve(column, frames, node)?,
                lifted: Indirect::new(),
            }),
            Expr::OuterReferenceColumn(_, column) => Ok(ExprLineage {
                deps: self.resolve_outer(column, node)?,
                lifted: Indirect::new(),
            }),
            Expr::ScalarVariable(..) | Expr::Literal(..) | Expr::Placeholder(_) => {
                Ok(ExprLineage::default())
            }
            Expr::BinaryExpr(_) => {
                // Flatten operator chains iteratively: `a OR b OR …` can be thousands deep.
                let mut pending = vec![expr];
                let mut operands = Vec::new();
                while let Some(next) = pending.pop() {
                    if let Expr::BinaryExpr(binary) = next {
                        pending.push(&binary.right);
                        pending.push(&binary.left);
                    } else {
                        operands.push(next);
                    }
                }
                self.combine(operands, transformed, frames, node)
            }
            Expr::Like(like) | Expr::SimilarTo(like) => self.combine(
                [like.expr.as_ref(), like.pattern.as_ref()],
                transformed,
                frames,
                node,
            ),
            Expr::Not(inner)
            | Expr::IsNotNull(inner)
            | Expr::IsNull(inner)
            | Expr::IsTrue(inner)
            | Expr::IsFalse(inner)
            | Expr::IsUnknown(inner)
            | Expr::IsNotTrue(inner)
            | Expr::IsNotFalse(inner)
            | Expr::IsNotUnknown(inner)
            | Expr::Negative(inner) => self.combine([inner.as_ref()], transformed, frames, node),
            Expr::Between(between) => self.combine(
                [
                    between.expr.as_ref(),
                    between.low.as_ref(),
                    between.high.as_ref(),
                ],
                transformed,
                frames,
                node,
            ),
            Expr::Cast(cast) => {
                let floor = cast_floor(&cast.expr, &cast.data_type, frames);
                self.combine([cast.expr.as_ref()], floor, frames, node)
            }
            Expr::TryCast(cast) => {
                let floor = cast_floor(&cast.expr, &cast.data_type, frames);
                self.combine([cast.expr.as_ref()], floor, frames, node)
            }
            Expr::InList(in_list) => self.combine(
                std::iter::once(in_list.expr.as_ref()).chain(in_list.list.iter()),
                transformed,
                frames,
                node,
            ),
            Expr::Case(case) => {
                let mut value = ExprLineage::default();
                let mut conditions = ExprLineage::default();
                if let Some(operand) = &case.expr {
                    conditions.absorb(self.expr(operand, frames, node)?);
                }
                for (when, then) in &case.when_then_expr {
                    conditions.absorb(self.expr(when, frames, node)?);
                    value.absorb(self.expr(then, frames, node)?);
                }
                if let Some(otherwise) = &case.else_expr {
                    value.absorb(self.expr(otherwise, frames, node)?);
                }
                value.deps = value.deps.at_least(Subtype::Transformation);
                merge_indirect(&mut value.lifted, conditions.lifted);
                merge_indirect(
                    &mut value.deps.indirect,
                    conditions.deps.into_indirect(Subtype::Conditional),
                );
                Ok(value)
            }
            Expr::ScalarFunction(function) => self.scalar_function(function, frames, node),
            Expr::AggregateFunction(function) => self.aggregate_function(function, frames, node),
            Expr::WindowFunction(function) => self.window_function(function, frames, node),
            Expr::Exists(exists) => {
                // Only whether rows exist matters, not their values.
                let subquery = self.subquery(&exists.subquery, frames)?;
                Ok(ExprLineage {
                    deps: Deps::default(),
                    lifted: subquery.dataset,
                })
            }
            Expr::InSubquery(in_subquery) => {
                self.compare_with_subquery(&in_subquery.expr, &in_subquery.subquery, frames, node)
            }
            Expr::SetComparison(comparison) => {
                self.compare_with_subquery(&comparison.expr, &comparison.subquery, frames, node)
            }
            Expr::ScalarSubquery(subquery) => {
                let subquery = self.subquery(subquery, frames)?;
                let mut deps = Deps::default();
                for column in subquery.columns {
                    deps.merge(column);
                }
                Ok(ExprLineage {
                    deps,
                    lifted: subquery.dataset,
                })
            }
            Expr::GroupingSet(set) => self.combine(set.distinct_expr(), None, frames, node),
            Expr::Unnest(unnest) => self.combine([unnest.expr.as_ref()], transformed, frames, node),
            #[expect(deprecated)]
            Expr::Wildcard { .. } => Err(Error::UnsupportedExpr {
                kind: expr.variant_name().to_owned(),
            }),
        }
    }

    /// `x IN (subquery)`, `x > ANY (subquery)`: a boolean computed from `x` and the
    /// subquery's values; the subquery's own row conditions apply to the whole result.
    fn compare_with_subquery(
        &mut self,
        value: &Expr,
        subquery: &Subquery,
        frames: &[Frame<'_>],
        node: &str,
    ) -> Result<ExprLineage> {
        let mut out = self.expr(value, frames, node)?;
        let subquery = self.subquery(subquery, frames)?;
        for column in subquery.columns {
            out.deps.merge(column);
        }
        merge_indirect(&mut out.lifted, subquery.dataset);
        out.deps = out.deps.at_least(Subtype::Transformation);
        Ok(out)
    }

    fn mark_opaque(&mut self, deps: &mut Deps, name: &str) {
        let reason = format!("udf {name}");
        deps.mark_opaque(&reason);
        self.opaque.insert(reason);
    }

    fn scalar_function(
        &mut self,
        function: &ScalarFunction,
        frames: &[Frame<'_>],
        node: &str,
    ) -> Result<ExprLineage> {
        let builtin = is_builtin_scalar(&function.func);
        let name = function.name();
        // arrow_cast(x, 'Type') is a cast spelled as a function (the optimizer turns it
        // into one): judge it like a cast.
        if builtin
            && name == "arrow_cast"
            && let [operand, Expr::Literal(type_name, _)] = function.args.as_slice()
            && let Some(Ok(target)) = type_name.try_as_str().flatten().map(str::parse::<DataType>)
        {
            let floor = cast_floor(operand, &target, frames);
            return self.combine([operand], floor, frames, node);
        }
        let count = function.args.len();
        let mut value = ExprLineage::default();
        let mut selectors = Deps::default();
        for (i, arg) in function.args.iter().enumerate() {
            let lineage = self.expr(arg, frames, node)?;
            merge_indirect(&mut value.lifted, lineage.lifted);
            // (is part of the value, its nullness or equality selects the value)
            let (is_value, selects) = match (builtin, name) {
                (true, "coalesce" | "nvl" | "ifnull") => (true, i + 1 < count),
                (true, "nvl2") => (i > 0, i == 0),
                (true, "nullif") => (i == 0, true),
                _ => (true, false),
            };
            if selects {
                selectors.merge(lineage.deps.clone());
            }
            if is_value {
                value.deps.merge(lineage.deps);
            }
        }
        value.deps = value.deps.at_least(Subtype::Transformation);
        merge_indirect(
            &mut value.deps.indirect,
            selectors.into_indirect(Subtype::Conditional),
        );
        if !builtin {
            self.mark_opaque(&mut value.deps, name);
        }
        Ok(value)
    }

    fn aggregate_function(
        &mut self,
        function: &AggregateFunction,
        frames: &[Frame<'_>],
        node: &str,
    ) -> Result<ExprLineage> {
        let AggregateFunctionParams {
            args,
            filter,
            order_by,
            ..
        } = &function.params;
        let mut out = self.combine(args, Some(Subtype::Aggregation), frames, node)?;
        if let Some(filter) = filter {
            let lineage = self.expr(filter, frames, node)?;
            merge_indirect(&mut out.lifted, lineage.lifted);
            merge_indirect(
                &mut out.deps.indirect,
                lineage.deps.into_indirect(Subtype::Filter),
            );
        }
        for key in order_by {
            let lineage = self.expr(&key.expr, frames, node)?;
            merge_indirect(&mut out.lifted, lineage.lifted);
            merge_indirect(
                &mut out.deps.indirect,
                lineage.deps.into_indirect(Subtype::Sort),
            );
        }
        if !is_builtin_aggregate(&function.func) {
            self.mark_opaque(&mut out.deps, function.func.name());
        }
        Ok(out)
    }

    fn window_function(
        &mut self,
        function: &WindowFunction,
        frames: &[Frame<'_>],
        node: &str,
    ) -> Result<ExprLineage> {
        let WindowFunctionParams {
            args,
            partition_by,
            order_by,
            filter,
            ..
        } = &function.params;
        // An aggregate over a window aggregates its argument; a window function proper
        // (lag, first_value, …) picks or computes from other rows' values.
        let (floor, builtin, name) = match &function.fun {
            WindowFunctionDefinition::AggregateUDF(f) => {
                (Subtype::Aggregation, is_builtin_aggregate(f), f.name())
            }
            WindowFunctionDefinition::WindowUDF(f) => {
                (Subtype::Transformation, is_builtin_window(f), f.name())
            }
        };
        let mut out = self.combine(args, Some(floor), frames, node)?;
        let keys = partition_by
            .iter()
            .chain(order_by.iter().map(|key| &key.expr));
        let window = self.combine(keys, None, frames, node)?;
        merge_indirect(&mut out.lifted, window.lifted);
        merge_indirect(
            &mut out.deps.indirect,
            window.deps.into_indirect(Subtype::Window),
        );
        if let Some(filter) = filter {
            let lineage = self.expr(filter, frames, node)?;
            merge_indirect(&mut out.lifted, lineage.lifted);
            merge_indirect(
                &mut out.deps.indirect,
                lineage.deps.into_indirect(Subtype::Filter),
            );
        }
        if !builtin {
            self.mark_opaque(&mut out.deps, name);
        }
        Ok(out)
    }
}
