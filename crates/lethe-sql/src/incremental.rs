//! Which output rows of a query a change of its input rows can alter: the analysis behind an
//! incremental recompute (rebuild only the output rows whose key the changed rows carry).
//!
//! [`recompute_keys`] reads a query's DataFusion logical plan (the optimized one for the
//! structure, the unoptimized one as well for functions the optimizer folds away, such as
//! `now()`) and answers, for each output column `o` that is a plain pass-through of a base
//! column `g`: for each table scan of the plan, which of its columns `t` *bound* `o` — a
//! change of that scan's rows (rows removed, added or modified) alters only output rows whose
//! `o` is one of the changed rows' `t` values. [`restrict_to_keys`] builds the plan that
//! computes only the output rows with `o IN K`, with `t IN K` filters pushed on every scan
//! that has such a column.
//!
//! # The argument
//!
//! Let Δ(N) be the rows of plan node N's output that differ between the old and the new
//! inputs (symmetric multiset difference), and K the values the changed rows of scan S carry
//! in column t (NULL included, as a value). For each node the analysis computes KC(N): base
//! columns c such that **every row of Δ(N) has c not distinct from some value of K**, and
//! AE(N): pairs of base columns not distinct from each other on *every* output row of N. KC is
//! always closed under AE. By node:
//!
//! - the scan S itself: KC = {t} (by the definition of K); other scans don't change;
//! - Filter, Projection (a column passed through keeps its identity, anything computed is a
//!   new value), SubqueryAlias, Sort without a fetch, Repartition: Δ(N) ⊆ Δ(child), so KC is
//!   kept; a filter's `a = b` conjuncts hold (non-null) on every row it passes and join AE;
//! - inner join: every output row satisfies the ON equalities (`l = r`, or both NULL under
//!   null-equal joins), so they join AE(L) ∪ AE(R), and KC is the closure of the changed
//!   side's KC;
//! - left join with S in the preserved (left) side: a changed row is a changed left row,
//!   matched or padded, so KC(L) holds; right-side columns are NULL on padded rows and are
//!   not added (AE(N) = AE(L) ∪ AE(R): a padded row has both columns of a right pair NULL);
//! - left join with S on the null-supplying (right) side: a changed row is a match with a
//!   changed right row, or a left row whose set of matches changed — it matched a changed
//!   right row before or after — padded now or then. Either way its left ON column `l` equals
//!   the changed right row's `r`; so KC(N) is the closure of the left partners of KC(R) (and
//!   only those: right columns are NULL on padded rows). Right joins mirror this;
//! - Aggregate: a changed output row is a group one of whose input rows changed, and its
//!   group key columns carry that row's values: KC(N) = KC(input) ∩ group keys (AE kept
//!   between group keys). `DISTINCT` is the aggregate on every column.
//!
//! So the old and new outputs agree on every row whose `o` is not in K (`o`'s base column g
//! in KC(root)): the new output is the old one without the rows with `o IN K`, plus the new
//! rows with `o IN K`. Changes of several scans compose (apply them one after the other), so
//! K is the union over the changed scans of their own t values, each scan having its own t.
//! A filter `x IN K` on a scan U whose column x bounds `o` removes rows whose x is not in K
//! (or NULL): by the same argument it changes only output rows whose `o` is not in K, so the
//! restricted plan computes exactly the full plan's rows with `o IN K`. A NULL in K is left to
//! the caller (its rows' `o IS NULL` would have to be recomputed; lethe runs in full then).
//!
//! # What is refused
//!
//! [`NotIncremental`] with the reason, whenever the argument doesn't cover the plan: a node
//! other than the ones above (window functions, LIMIT/OFFSET or a fetch pushed into a sort or
//! scan, UNION, DISTINCT ON, VALUES, UNNEST, recursive queries, extensions), a full outer,
//! semi, anti or mark join, a subquery left in an expression, grouping sets, an aggregate whose
//! result depends on the order of its input rows (only count, sum, avg, min, max, median and
//! the boolean/bit aggregates are taken), and any function that is not immutable (`random()`,
//! `now()`: a recompute at another time would change rows the old result keeps). Sums and
//! averages of floating-point columns are the same up to the order of summation, as two full
//! runs are. The analysis never guesses: a join key that is not a plain column simply adds no
//! equality, which can only make fewer columns qualify.

use std::collections::{BTreeMap, BTreeSet};

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, JoinType, ScalarValue, TableReference};
use datafusion::logical_expr::expr::{AggregateFunction, Alias};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    BinaryExpr, Distinct, Expr, Filter, LogicalPlan, LogicalPlanBuilder, Operator, Volatility,
};

/// Why a query's output can't be recomputed for some keys only (names plan nodes, functions,
/// tables and columns, never a literal value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotIncremental(pub String);

/// One table scan of a plan and its columns that bound an output column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedScan {
    /// The table as the query named it (`learning.enrollments`).
    pub table: String,
    /// Its columns t such that a change of the scan's rows alters only output rows whose key is
    /// one of the changed rows' t values (empty: none does).
    pub columns: Vec<String>,
    /// Every column of the table the scan reads (its projection and the columns of filters
    /// pushed into it): a change of the table's rows the query can see is a change of these.
    pub reads: Vec<String>,
}

/// An output column whose values bound what changes of the inputs alter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecomputeKey {
    /// Its index in the query's output.
    pub output: usize,
    /// Its name in the query's output.
    pub name: String,
    /// Every table scan of the (optimized) plan, in plan order.
    pub scans: Vec<KeyedScan>,
}

impl RecomputeKey {
    /// The scans of `table` (a table may be scanned more than once).
    pub fn scans_of<'a>(&'a self, table: &'a str) -> impl Iterator<Item = &'a KeyedScan> {
        self.scans.iter().filter(move |s| s.table == table)
    }
}

/// A base column: (scan index in plan order, column name).
type ColId = (usize, String);

/// What the walk knows about one node's output.
struct Node {
    /// The base column each output field passes through unchanged, if any.
    fields: Vec<Option<ColId>>,
    /// Pairs of base columns not distinct from each other on every output row.
    ae: Vec<(ColId, ColId)>,
    /// Per (scan, column t): KC — base columns every changed output row has in K.
    kc: BTreeMap<ColId, BTreeSet<ColId>>,
}

fn refuse<T>(why: impl Into<String>) -> Result<T, NotIncremental> {
    Err(NotIncremental(why.into()))
}

/// Closes `set` under the pairs `ae`.
fn closure(mut set: BTreeSet<ColId>, ae: &[(ColId, ColId)]) -> BTreeSet<ColId> {
    loop {
        let before = set.len();
        for (a, b) in ae {
            if set.contains(a) && !set.contains(b) {
                set.insert(b.clone());
            } else if set.contains(b) && !set.contains(a) {
                set.insert(a.clone());
            }
        }
        if set.len() == before {
            return set;
        }
    }
}

fn table_name(r: &TableReference) -> String {
    match r {
        TableReference::Bare { table } => table.to_string(),
        TableReference::Partial { schema, table } | TableReference::Full { schema, table, .. } => {
            format!("{schema}.{table}")
        }
    }
}

/// The column an expression is, through aliases.
fn plain_column(e: &Expr) -> Option<&Column> {
    match e {
        Expr::Column(c) => Some(c),
        Expr::Alias(Alias { expr, .. }) => plain_column(expr),
        _ => None,
    }
}

/// The base column of `e` resolved in `schema` against `fields`.
fn resolve(e: &Expr, schema: &DFSchema, fields: &[Option<ColId>]) -> Option<ColId> {
    let c = plain_column(e)?;
    let i = schema.maybe_index_of_column(c)?;
    fields.get(i).cloned().flatten()
}

/// `a = b` conjuncts of `predicate` between plain columns, resolved.
fn equalities(
    predicate: &Expr,
    schema: &DFSchema,
    fields: &[Option<ColId>],
) -> Vec<(ColId, ColId)> {
    split_conjunction(predicate)
        .into_iter()
        .filter_map(|e| match e {
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Eq,
                right,
            }) => Some((
                resolve(left, schema, fields)?,
                resolve(right, schema, fields)?,
            )),
            _ => None,
        })
        .collect()
}

/// Aggregates whose result depends only on the multiset of their input rows.
const ORDER_INSENSITIVE: &[&str] = &[
    "count", "sum", "avg", "mean", "min", "max", "median", "bool_and", "bool_or", "bit_and",
    "bit_or", "bit_xor",
];

fn node_name(plan: &LogicalPlan) -> String {
    match plan {
        LogicalPlan::Window(_) => "a window function".into(),
        LogicalPlan::Limit(_) => "LIMIT/OFFSET".into(),
        LogicalPlan::Union(_) => "UNION".into(),
        LogicalPlan::Distinct(Distinct::On(_)) => "DISTINCT ON".into(),
        LogicalPlan::Values(_) => "VALUES".into(),
        LogicalPlan::EmptyRelation(_) => "an empty relation".into(),
        LogicalPlan::Unnest(_) => "UNNEST".into(),
        LogicalPlan::RecursiveQuery(_) => "a recursive query".into(),
        LogicalPlan::Subquery(_) => "a subquery".into(),
        LogicalPlan::Extension(e) => format!("the extension node {}", e.node.name()),
        other => format!("the plan node {}", other.display()),
    }
}

/// Refuses expressions the argument doesn't cover: subqueries, functions that are not
/// immutable.
fn check_expressions(plan: &LogicalPlan) -> Result<(), NotIncremental> {
    let mut why: Option<String> = None;
    plan.apply(|node| {
        for e in node.expressions() {
            e.apply(|x| {
                match x {
                    Expr::ScalarSubquery(_)
                    | Expr::InSubquery(_)
                    | Expr::Exists(_)
                    | Expr::SetComparison(_)
                    | Expr::OuterReferenceColumn(..) => {
                        why = Some("a subquery in an expression".into());
                    }
                    Expr::ScalarFunction(f)
                        if f.func.signature().volatility != Volatility::Immutable =>
                    {
                        why = Some(format!(
                            "{}() is {:?}: a recompute at another time could change rows the last run built",
                            f.func.name(),
                            f.func.signature().volatility
                        ));
                    }
                    Expr::AggregateFunction(AggregateFunction { func, .. })
                        if !ORDER_INSENSITIVE.contains(&func.name()) =>
                    {
                        why = Some(format!(
                            "the aggregate {}() is not known to depend only on the set of its input rows",
                            func.name()
                        ));
                    }
                    Expr::WindowFunction(_) => why = Some("a window function".into()),
                    Expr::GroupingSet(_) => {
                        why = Some("GROUPING SETS/ROLLUP/CUBE".into());
                    }
                    _ => {}
                }
                Ok(if why.is_some() {
                    TreeNodeRecursion::Stop
                } else {
                    TreeNodeRecursion::Continue
                })
            })?;
            if why.is_some() {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .map_err(|e| NotIncremental(format!("the plan could not be walked: {e}")))?;
    match why {
        Some(w) => refuse(w),
        None => Ok(()),
    }
}

#[derive(Default)]
struct Walk {
    /// The scans met, in plan order: (table, its output columns, every column it reads).
    scans: Vec<(String, Vec<String>, Vec<String>)>,
}

impl Walk {
    fn plan(&mut self, plan: &LogicalPlan, depth: usize) -> Result<Node, NotIncremental> {
        if depth > crate::analyze::MAX_DEPTH {
            return refuse("the plan nests too deep");
        }
        let d = depth + 1;
        match plan {
            LogicalPlan::TableScan(s) => {
                if s.fetch.is_some() {
                    return refuse(format!(
                        "a LIMIT pushed into the scan of {}",
                        table_name(&s.table_name)
                    ));
                }
                let i = self.scans.len();
                let cols: Vec<String> = s
                    .projected_schema
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect();
                let mut reads: BTreeSet<String> = cols.iter().cloned().collect();
                for f in &s.filters {
                    reads.extend(f.column_refs().into_iter().map(|c| c.name.clone()));
                }
                self.scans.push((
                    table_name(&s.table_name),
                    cols.clone(),
                    reads.into_iter().collect(),
                ));
                let fields: Vec<Option<ColId>> =
                    cols.iter().map(|c| Some((i, c.clone()))).collect();
                let kc = cols
                    .iter()
                    .map(|c| ((i, c.clone()), BTreeSet::from([(i, c.clone())])))
                    .collect();
                Ok(Node {
                    fields,
                    ae: Vec::new(),
                    kc,
                })
            }
            LogicalPlan::Projection(p) => {
                let child = self.plan(&p.input, d)?;
                let schema = p.input.schema();
                let fields = p
                    .expr
                    .iter()
                    .map(|e| resolve(e, schema, &child.fields))
                    .collect();
                Ok(Node { fields, ..child })
            }
            LogicalPlan::Filter(Filter {
                predicate, input, ..
            }) => {
                let mut child = self.plan(input, d)?;
                child
                    .ae
                    .extend(equalities(predicate, input.schema(), &child.fields));
                let ae = child.ae.clone();
                for set in child.kc.values_mut() {
                    *set = closure(std::mem::take(set), &ae);
                }
                Ok(child)
            }
            LogicalPlan::SubqueryAlias(a) => self.plan(&a.input, d),
            LogicalPlan::Repartition(r) => self.plan(&r.input, d),
            LogicalPlan::Sort(s) => {
                if s.fetch.is_some() {
                    return refuse("ORDER BY with LIMIT");
                }
                self.plan(&s.input, d)
            }
            LogicalPlan::Join(j) => {
                let preserved_left = match j.join_type {
                    JoinType::Inner => None,
                    JoinType::Left => Some(true),
                    JoinType::Right => Some(false),
                    JoinType::Full => return refuse("a full outer join"),
                    other => return refuse(format!("a {other} join (semi, anti or mark)")),
                };
                let l = self.plan(&j.left, d)?;
                let r = self.plan(&j.right, d)?;
                let mut cross: Vec<(ColId, ColId)> =
                    j.on.iter()
                        .filter_map(|(a, b)| {
                            Some((
                                resolve(a, j.left.schema(), &l.fields)?,
                                resolve(b, j.right.schema(), &r.fields)?,
                            ))
                        })
                        .collect();
                let mut fields = l.fields.clone();
                fields.extend(r.fields.iter().cloned());
                let left_scans: BTreeSet<usize> =
                    l.kc.keys().map(|(s, _)| *s).collect::<BTreeSet<_>>();
                let mut same_side = Vec::new();
                if let Some(f) = &j.filter {
                    for (a, b) in equalities(f, &j.schema, &fields) {
                        match (left_scans.contains(&a.0), left_scans.contains(&b.0)) {
                            (true, false) => cross.push((a, b)),
                            (false, true) => cross.push((b, a)),
                            _ => same_side.push((a, b)),
                        }
                    }
                }
                let mut ae = l.ae.clone();
                ae.extend(r.ae.iter().cloned());
                if preserved_left.is_none() {
                    ae.extend(cross.iter().cloned());
                    ae.extend(same_side);
                }
                let mut kc = BTreeMap::new();
                for (from_left, side) in [(true, &l), (false, &r)] {
                    for (k, set) in &side.kc {
                        let start = match preserved_left {
                            // Inner: every row satisfies the equalities.
                            None => set.clone(),
                            // The changed scan is on the preserved side.
                            Some(p) if p == from_left => set.clone(),
                            // On the null-supplying side: the preserved side's partners.
                            Some(_) => cross
                                .iter()
                                .filter_map(|(a, b)| {
                                    if from_left {
                                        set.contains(a).then(|| b.clone())
                                    } else {
                                        set.contains(b).then(|| a.clone())
                                    }
                                })
                                .collect(),
                        };
                        kc.insert(k.clone(), closure(start, &ae));
                    }
                }
                Ok(Node { fields, ae, kc })
            }
            LogicalPlan::Aggregate(a) => {
                let child = self.plan(&a.input, d)?;
                let schema = a.input.schema();
                let mut fields: Vec<Option<ColId>> = a
                    .group_expr
                    .iter()
                    .map(|e| resolve(e, schema, &child.fields))
                    .collect();
                let keys: BTreeSet<ColId> = fields.iter().flatten().cloned().collect();
                fields.extend(a.aggr_expr.iter().map(|_| None));
                if fields.len() != a.schema.fields().len() {
                    return refuse("an aggregate with grouping sets");
                }
                Ok(aggregate(child, fields, &keys))
            }
            LogicalPlan::Distinct(Distinct::All(input)) => {
                let child = self.plan(input, d)?;
                let fields = child.fields.clone();
                let keys: BTreeSet<ColId> = fields.iter().flatten().cloned().collect();
                Ok(aggregate(child, fields, &keys))
            }
            other => refuse(node_name(other)),
        }
    }
}

/// A grouping node over `child` whose group keys are `keys`.
fn aggregate(child: Node, fields: Vec<Option<ColId>>, keys: &BTreeSet<ColId>) -> Node {
    let ae = child
        .ae
        .into_iter()
        .filter(|(a, b)| keys.contains(a) && keys.contains(b))
        .collect();
    let kc = child
        .kc
        .into_iter()
        .map(|(k, set)| (k, set.intersection(keys).cloned().collect()))
        .collect();
    Node { fields, ae, kc }
}

/// The output columns of a query that bound what changes of its inputs alter, with, for each
/// table scan of `optimized`, the columns that bound each (see the module's argument).
/// `unoptimized` is the plan as planned from the SQL (`DataFrame::logical_plan()`), checked for
/// functions the optimizer folds into constants; `optimized` is the plan that runs (its
/// structure is what is analysed, and what [`restrict_to_keys`] rewrites).
pub fn recompute_keys(
    unoptimized: &LogicalPlan,
    optimized: &LogicalPlan,
) -> Result<Vec<RecomputeKey>, NotIncremental> {
    check_expressions(unoptimized)?;
    check_expressions(optimized)?;
    let mut walk = Walk::default();
    let root = walk.plan(optimized, 0)?;
    let names = optimized.schema().fields();
    if names.len() != root.fields.len() {
        return refuse("the plan's output and its analysis differ in width");
    }
    let mut out = Vec::new();
    for (o, (field, g)) in names.iter().zip(&root.fields).enumerate() {
        let Some(g) = g else { continue };
        let scans = walk
            .scans
            .iter()
            .enumerate()
            .map(|(i, (table, cols, reads))| KeyedScan {
                table: table.clone(),
                reads: reads.clone(),
                columns: cols
                    .iter()
                    .filter(|c| {
                        root.kc
                            .get(&(i, (*c).clone()))
                            .is_some_and(|set| set.contains(g))
                    })
                    .cloned()
                    .collect(),
            })
            .collect();
        out.push(RecomputeKey {
            output: o,
            name: field.name().clone(),
            scans,
        });
    }
    if out.is_empty() {
        return refuse("no output column is a base column passed through unchanged");
    }
    Ok(out)
}

/// `optimized` computing only its output rows whose column `key` is one of `values`: each scan
/// with a column bounding `key` filtered by `column IN values` (the first such column), and the
/// output filtered by `key IN values`. Values are cast to each column's type. The plan is the
/// optimized one [`recompute_keys`] analysed (scans are matched by their order in it).
pub fn restrict_to_keys(
    optimized: &LogicalPlan,
    key: &RecomputeKey,
    values: &[ScalarValue],
) -> datafusion::error::Result<LogicalPlan> {
    let in_list = |column: Column, dt: &datafusion::arrow::datatypes::DataType| {
        let list = values
            .iter()
            .map(|v| v.cast_to(dt).map(|v| Expr::Literal(v, None)))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        Ok::<_, datafusion::error::DataFusionError>(Expr::Column(column).in_list(list, false))
    };
    let mut next = 0usize;
    let filtered = optimized
        .clone()
        .transform_down(|node| {
            let LogicalPlan::TableScan(s) = &node else {
                return Ok(Transformed::no(node));
            };
            let i = next;
            next += 1;
            let Some(col) = key.scans.get(i).and_then(|k| k.columns.first()) else {
                return Ok(Transformed::new(node, false, TreeNodeRecursion::Jump));
            };
            let column = Column::new(Some(s.table_name.clone()), col.clone());
            let dt = s
                .projected_schema
                .field_with_qualified_name(&s.table_name, col)?
                .data_type()
                .clone();
            let predicate = in_list(column, &dt)?;
            let plan = LogicalPlanBuilder::from(node).filter(predicate)?.build()?;
            Ok(Transformed::new(plan, true, TreeNodeRecursion::Jump))
        })?
        .data;
    if next != key.scans.len() {
        return Err(datafusion::error::DataFusionError::Internal(format!(
            "the plan has {next} scans, its analysis {}",
            key.scans.len()
        )));
    }
    let (qualifier, field) = filtered.schema().qualified_field(key.output);
    let column = Column::new(qualifier.cloned(), field.name());
    let dt = field.data_type().clone();
    let predicate = in_list(column, &dt)?;
    LogicalPlanBuilder::from(filtered)
        .filter(predicate)?
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::prelude::SessionContext;
    use std::sync::Arc;

    async fn ctx() -> SessionContext {
        let ctx = SessionContext::new();
        for (name, cols) in [
            ("courses", &["course_id", "title"][..]),
            (
                "enrollments",
                &["enrollment_id", "learner_id", "course_id"][..],
            ),
            (
                "reviews",
                &["review_id", "learner_id", "course_id", "rating"][..],
            ),
        ] {
            let schema = Arc::new(Schema::new(
                cols.iter()
                    .map(|c| Field::new(*c, DataType::Int64, true))
                    .collect::<Vec<_>>(),
            ));
            let batch = RecordBatch::try_new(
                schema.clone(),
                cols.iter()
                    .map(|_| Arc::new(Int64Array::from(vec![1i64])) as _)
                    .collect(),
            )
            .unwrap();
            ctx.register_table(
                name,
                Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap()),
            )
            .unwrap();
        }
        ctx
    }

    async fn keys(sql: &str) -> Result<Vec<RecomputeKey>, NotIncremental> {
        let ctx = ctx().await;
        let df = ctx.sql(sql).await.unwrap();
        let plan = df.logical_plan().clone();
        let optimized = ctx.state().optimize(&plan).unwrap();
        recompute_keys(&plan, &optimized)
    }

    fn columns<'a>(k: &'a RecomputeKey, table: &'a str) -> Vec<&'a str> {
        k.scans_of(table)
            .flat_map(|s| s.columns.iter().map(String::as_str))
            .collect()
    }

    const DEMO: &str = "SELECT c.course_id, c.title, count(DISTINCT e.learner_id) AS learners, \
        count(e.enrollment_id) AS enrollments, avg(r.rating) AS avg_rating, count(r.review_id) AS reviews \
        FROM courses c LEFT JOIN enrollments e ON e.course_id = c.course_id \
        LEFT JOIN reviews r ON r.course_id = c.course_id AND r.learner_id = e.learner_id \
        GROUP BY c.course_id, c.title";

    #[tokio::test]
    async fn the_demo_query_is_bounded_by_its_course_on_every_table() {
        let ks = keys(DEMO).await.unwrap();
        let k = ks.iter().find(|k| k.name == "course_id").unwrap();
        assert_eq!(columns(k, "courses"), ["course_id"]);
        assert_eq!(columns(k, "enrollments"), ["course_id"]);
        assert_eq!(columns(k, "reviews"), ["course_id"]);
        assert!(
            ks.iter().all(|k| k.name != "learners"),
            "an aggregate is no key"
        );
    }

    #[tokio::test]
    async fn each_scan_says_every_column_it_reads_and_no_other() {
        let ks = keys(DEMO).await.unwrap();
        let k = ks.iter().find(|k| k.name == "course_id").unwrap();
        let reads = |t: &'static str| -> Vec<&str> {
            k.scans_of(t)
                .flat_map(|s| s.reads.iter().map(String::as_str))
                .collect()
        };
        assert_eq!(reads("courses"), ["course_id", "title"]);
        assert_eq!(
            reads("enrollments"),
            ["course_id", "enrollment_id", "learner_id"]
        );
        assert_eq!(
            reads("reviews"),
            ["course_id", "learner_id", "rating", "review_id"]
        );
        // A column only a filter reads is read too.
        let ks = keys(
            "SELECT e.course_id, count(*) AS n FROM enrollments e              WHERE e.learner_id > 3 GROUP BY e.course_id",
        )
        .await
        .unwrap();
        let k = ks.iter().find(|k| k.name == "course_id").unwrap();
        let reads: Vec<&str> = k
            .scans_of("enrollments")
            .flat_map(|s| s.reads.iter().map(String::as_str))
            .collect();
        assert_eq!(reads, ["course_id", "learner_id"]);
    }

    #[tokio::test]
    async fn a_key_from_the_null_supplying_side_bounds_nothing_there() {
        let ks = keys(
            "SELECT e.course_id, count(*) AS n FROM courses c \
             LEFT JOIN enrollments e ON e.course_id = c.course_id GROUP BY e.course_id",
        )
        .await
        .unwrap();
        let k = &ks[0];
        assert!(columns(k, "enrollments").is_empty(), "{k:?}");
        assert!(columns(k, "courses").is_empty(), "{k:?}");
    }

    #[tokio::test]
    async fn inner_joins_and_having_keep_the_key() {
        let ks = keys(
            "SELECT e.course_id, count(*) AS n FROM enrollments e \
             JOIN reviews r ON r.learner_id = e.learner_id AND r.course_id = e.course_id \
             GROUP BY e.course_id HAVING count(*) > 1",
        )
        .await
        .unwrap();
        let k = ks.iter().find(|k| k.name == "course_id").unwrap();
        assert_eq!(columns(k, "enrollments"), ["course_id"]);
        assert_eq!(columns(k, "reviews"), ["course_id"]);
        // Joined by learner only: a review change alters the course groups its learner is in.
        let ks = keys(
            "SELECT e.course_id, count(*) AS n FROM enrollments e \
             JOIN reviews r ON r.learner_id = e.learner_id GROUP BY e.course_id",
        )
        .await
        .unwrap();
        assert!(columns(&ks[0], "reviews").is_empty());
        assert_eq!(columns(&ks[0], "enrollments"), ["course_id"]);
    }

    #[tokio::test]
    async fn what_the_argument_does_not_cover_is_refused_with_its_reason() {
        for (sql, why) in [
            (
                "SELECT course_id, count(*) OVER (PARTITION BY course_id) AS n FROM enrollments",
                "window",
            ),
            (
                "SELECT course_id, count(*) AS n FROM enrollments GROUP BY course_id ORDER BY n LIMIT 3",
                "LIMIT",
            ),
            (
                "SELECT course_id FROM enrollments UNION SELECT course_id FROM reviews",
                "UNION",
            ),
            (
                "SELECT c.course_id FROM courses c FULL JOIN enrollments e ON e.course_id = c.course_id",
                "full outer join",
            ),
            (
                "SELECT course_id FROM courses c WHERE NOT EXISTS (SELECT 1 FROM enrollments e WHERE e.course_id = c.course_id)",
                "subquery",
            ),
            (
                "SELECT course_id, count(*) AS n FROM enrollments WHERE random() < 0.5 GROUP BY course_id",
                "random()",
            ),
            (
                "SELECT course_id, count(*) AS n FROM enrollments WHERE enrollment_id < extract(epoch from now()) GROUP BY course_id",
                "now()",
            ),
            (
                "SELECT course_id, array_agg(learner_id) AS l FROM enrollments GROUP BY course_id",
                "array_agg",
            ),
        ] {
            let e = keys(sql).await.expect_err(sql);
            assert!(e.0.contains(why), "{sql}: {e}");
        }
    }

    #[tokio::test]
    async fn the_restricted_plan_filters_every_bounded_scan_and_the_output() {
        let ctx = ctx().await;
        let df = ctx.sql(DEMO).await.unwrap();
        let plan = df.logical_plan().clone();
        let optimized = ctx.state().optimize(&plan).unwrap();
        let ks = recompute_keys(&plan, &optimized).unwrap();
        let k = ks.iter().find(|k| k.name == "course_id").unwrap();
        let restricted = restrict_to_keys(&optimized, k, &[ScalarValue::Int64(Some(1))]).unwrap();
        let text = restricted.display_indent().to_string();
        assert_eq!(text.matches("IN ([Int64(1)])").count(), 4, "{text}");
        let rows = ctx
            .execute_logical_plan(restricted)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
    }
}
