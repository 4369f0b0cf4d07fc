//! A restriction's scope: where the subject's rows are, and the filters that leave them out.
//!
//! When a restriction is recorded, the erasure planner's read-only preparation (the plan and
//! the values that select the subject's rows, [`crate::erasure::erase::prepare`]) gives, for
//! every table the plan would DELETE or REWRITE in, the column and values that select the
//! subject's rows. That scope is written to `state/cases/<request>.scope.json` (mode 0600: it
//! holds the subject's IDs, like the case file) and read back by:
//! - the enforced query path ([`crate::access::query`]), which puts
//!   `lethe_unrestricted(column)` (true for NULL and for every value but the subject's) under
//!   every view of a scoped table, for every role whose policy doesn't say
//!   `restricted = "show"`;
//! - the pipelines ([`crate::pipeline`]), whose inputs are the same filtered views (their
//!   column lineage is taken from the unfiltered query, so lineage doesn't change);
//! - loaders filtered by the register ([`hold_restricted`]): rows of restricted subjects are
//!   held apart, never dropped silently, never deleted.
//!
//! Tables the subject's rows only shaped (RECOMPUTE: aggregates) can't be filtered row by row:
//! the scope lists them as left out at their next rebuild, since their pipeline's inputs leave
//! the subject out. Tables the plan can't resolve are listed too, as not restricted.
//!
//! Stores outside the warehouse (`governance/stores.toml`) are listed too, each as not
//! suspended: the store protocol deletes and probes, and has no way to stop processing in a
//! store, so the restriction's manifest names every store of the subject's kind with its owner,
//! who must suspend processing there.
//!
//! The values are held inside the filter's function object ([`UnrestrictedUdf`]), never as
//! literals in a plan: `EXPLAIN`, `EXPLAIN VERBOSE` and `EXPLAIN ANALYZE` of any query, the
//! plans DataFusion logs at debug level, and the `Debug` output of [`Restrictions`] show the
//! function's name and the column, never a restricted subject's value (a principal could
//! otherwise read who is restricted, which also defeats the pseudonym mask). The function is
//! not registered in any session, so SQL can't call it on values of its choosing.
//!
//! What the scope does not follow: rows of a kind the subject owned that arrive after the
//! restriction and carry only a row key (not the subject's identifier). Rows reaching derived
//! tables go through pipelines, whose inputs already leave the subject out.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility, col,
};
use datafusion::physical_expr::PhysicalExpr;
use lethe_iceberg::predicate::Value;
use serde::{Deserialize, Serialize};

use crate::erasure::case::write_atomic;
use crate::erasure::register::RegisterKey;
use crate::error::{Error, Result};
use crate::governance::identifiers::id_strings;
use crate::requests::Requests;

/// One table where the subject's rows are left out by a column's values. Its `Debug` output
/// counts the values, never shows them.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopedTable {
    /// The table.
    pub table: String,
    /// The column that selects the subject's rows.
    pub column: String,
    /// The values that select them (the subject's IDs, or keys of rows they own).
    pub values: Vec<Value>,
    /// The subject's rows in the table when the restriction was recorded.
    pub rows: u64,
}

impl std::fmt::Debug for ScopedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedTable")
            .field("table", &self.table)
            .field("column", &self.column)
            .field("values", &format_args!("<{} redacted>", self.values.len()))
            .field("rows", &self.rows)
            .finish()
    }
}

/// A restriction's scope file (`state/cases/<request>.scope.json`, mode 0600).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scope {
    /// The restriction request.
    pub request: String,
    /// The subject's kind.
    pub subject: String,
    /// Tables filtered row by row.
    pub tables: Vec<ScopedTable>,
    /// Tables the subject's rows only shaped, with the pipeline that rebuilds them without
    /// the subject.
    pub rebuilt: BTreeMap<String, String>,
    /// Tables the plan can't resolve, with the reason: not restricted.
    pub unresolved: BTreeMap<String, String>,
    /// Registered stores of the subject's kind: not suspended (lethe can't suspend a store).
    #[serde(default)]
    pub stores: Vec<ScopedStore>,
}

/// A registered store a restriction reaches but can't suspend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopedStore {
    /// The store's name in governance/stores.toml.
    pub store: String,
    /// Its kind.
    pub kind: String,
    /// Its owner (a role), who must suspend processing there.
    pub owner: String,
}

impl Scope {
    /// The file of a request's scope.
    pub fn path(state: &Path, request: &str) -> PathBuf {
        state.join("cases").join(format!("{request}.scope.json"))
    }

    /// Writes the scope (mode 0600).
    pub fn save(&self, state: &Path) -> Result<()> {
        write_atomic(
            &Scope::path(state, &self.request),
            serde_json::to_string_pretty(self)?.as_bytes(),
            true,
        )
    }

    /// Reads a request's scope.
    pub fn load(state: &Path, request: &str) -> Result<Scope> {
        let p = Scope::path(state, request);
        let text =
            std::fs::read_to_string(&p).map_err(|e| Error::io(p.display().to_string(), e))?;
        serde_json::from_str(&text)
            .map_err(|e| Error::invalid(format!("{}: not a restriction scope: {e}", p.display())))
    }

    /// The same scope without values (for evidence: tables, columns and counts only).
    pub fn without_values(&self) -> Scope {
        let mut s = self.clone();
        for t in &mut s.tables {
            t.values.clear();
        }
        s
    }
}

/// The restrictions in force, by table. Its `Debug` output names tables, columns and
/// requests, never a value.
#[derive(Clone, Default)]
pub struct Restrictions {
    /// Per table: (request, column, values).
    by_table: BTreeMap<String, Vec<(String, String, Vec<Value>)>>,
    /// The requests in force.
    requests: Vec<String>,
}

impl std::fmt::Debug for Restrictions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tables: BTreeMap<&str, Vec<(&str, &str)>> = self
            .by_table
            .iter()
            .map(|(t, v)| {
                (
                    t.as_str(),
                    v.iter().map(|(r, c, _)| (r.as_str(), c.as_str())).collect(),
                )
            })
            .collect();
        f.debug_struct("Restrictions")
            .field("tables", &tables)
            .field("requests", &self.requests)
            .finish()
    }
}

impl Restrictions {
    /// Every restriction in force in a state folder. A restriction whose scope file is
    /// missing is an error: queries must not run as if it weren't there.
    pub fn active(state: &Path) -> Result<Restrictions> {
        let mut out = Restrictions::default();
        for r in Requests::in_state(state).list()? {
            if !r.restricting() {
                continue;
            }
            let scope = Scope::load(state, &r.id).map_err(|e| {
                Error::Refused(format!(
                    "restriction {} is in force but its scope can't be read ({e}); nothing runs until it can",
                    r.id
                ))
            })?;
            for t in scope.tables {
                if t.values.is_empty() {
                    continue;
                }
                out.by_table
                    .entry(t.table)
                    .or_default()
                    .push((r.id.clone(), t.column, t.values));
            }
            out.requests.push(r.id);
        }
        Ok(out)
    }

    /// No restriction in force.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// The restriction requests in force.
    pub fn requests(&self) -> &[String] {
        &self.requests
    }

    /// The filter that keeps every row of `table` but the restricted subjects' (`None`
    /// when no restriction reaches the table), and the requests it applies: one
    /// `lethe_unrestricted(column)` per column, the values inside the function.
    pub fn filter(&self, table: &str) -> Option<(Expr, Vec<String>)> {
        let entries = self.by_table.get(table)?;
        let mut by_column: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
        let mut requests = BTreeSet::new();
        for (r, c, vals) in entries {
            by_column.entry(c.as_str()).or_default().extend(vals.iter());
            requests.insert(r.clone());
        }
        let mut e: Option<Expr> = None;
        for (c, vals) in by_column {
            let udf = Arc::new(ScalarUDF::new_from_impl(UnrestrictedUdf::new(
                vals.into_iter().map(scalar).collect(),
            )));
            let keep = Expr::ScalarFunction(ScalarFunction::new_udf(
                udf,
                vec![col(datafusion::common::Column::new_unqualified(c))],
            ));
            e = Some(match e {
                Some(x) => x.and(keep),
                None => keep,
            });
        }
        e.map(|e| (e, requests.into_iter().collect()))
    }
}

fn scalar(v: &Value) -> ScalarValue {
    match v {
        Value::Int(i) => ScalarValue::Int64(Some(*i)),
        Value::Float(f) => ScalarValue::Float64(Some(*f)),
        Value::Str(s) => ScalarValue::Utf8(Some(s.clone())),
        Value::Bool(b) => ScalarValue::Boolean(Some(*b)),
        Value::Date(d) => ScalarValue::Utf8(Some(d.to_string())),
        Value::Timestamp(t) => ScalarValue::Utf8(Some(t.to_string())),
    }
}

/// The name of the restriction filter's function, as plans show it.
pub const UNRESTRICTED_FN: &str = "lethe_unrestricted";

/// `lethe_unrestricted(column)`: true for a NULL and for every value but the restricted
/// ones, which the function holds (never literals in a plan). A value is compared in the
/// column's type (cast to it; a value that can't be cast matches nothing), as `NOT IN` with
/// DataFusion's own hashed list would. `Debug` shows nothing of the values.
pub struct UnrestrictedUdf {
    values: Vec<ScalarValue>,
    /// Tells instances apart for DataFusion's expression equality without the values.
    instance: u64,
    signature: Signature,
    /// The hashed `NOT IN` list per column type, built on first use.
    lists: Mutex<HashMap<DataType, Arc<dyn PhysicalExpr>>>,
}

impl UnrestrictedUdf {
    /// The function over `values`.
    pub fn new(values: Vec<ScalarValue>) -> UnrestrictedUdf {
        UnrestrictedUdf {
            values,
            instance: rand::random(),
            signature: Signature::any(1, Volatility::Immutable),
            lists: Mutex::new(HashMap::new()),
        }
    }

    /// `column NOT IN (values)` for a column of type `t`, evaluated on a one-column batch.
    fn list_for(&self, t: &DataType) -> datafusion::error::Result<Arc<dyn PhysicalExpr>> {
        let mut lists = self
            .lists
            .lock()
            .map_err(|_| datafusion::error::DataFusionError::Internal("lock poisoned".into()))?;
        if let Some(e) = lists.get(t) {
            return Ok(e.clone());
        }
        let schema = Schema::new(vec![Field::new("v", t.clone(), true)]);
        let list: Vec<Arc<dyn PhysicalExpr>> = self
            .values
            .iter()
            .filter_map(|v| v.cast_to(t).ok())
            .filter(|v| !v.is_null())
            .map(|v| {
                Arc::new(datafusion::physical_expr::expressions::Literal::new(v))
                    as Arc<dyn PhysicalExpr>
            })
            .collect();
        let column: Arc<dyn PhysicalExpr> =
            Arc::new(datafusion::physical_expr::expressions::Column::new("v", 0));
        let e = if list.is_empty() {
            Arc::new(datafusion::physical_expr::expressions::Literal::new(
                ScalarValue::Boolean(Some(true)),
            )) as Arc<dyn PhysicalExpr>
        } else {
            datafusion::physical_expr::expressions::in_list(column, list, &true, &schema)?
        };
        lists.insert(t.clone(), e.clone());
        Ok(e)
    }

    /// Which rows of `a` to keep.
    fn keep(&self, a: &ArrayRef) -> datafusion::error::Result<BooleanArray> {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "v",
            a.data_type().clone(),
            true,
        )]));
        let batch = RecordBatch::try_new(schema, vec![a.clone()])?;
        let out = self
            .list_for(a.data_type())?
            .evaluate(&batch)?
            .into_array(a.len())?;
        let out = out.as_any().downcast_ref::<BooleanArray>().ok_or_else(|| {
            datafusion::error::DataFusionError::Internal("NOT IN gave no booleans".into())
        })?;
        // NULL NOT IN (...) is NULL: a row without a value is kept.
        Ok(out.iter().map(|v| Some(v.unwrap_or(true))).collect())
    }
}

impl std::fmt::Debug for UnrestrictedUdf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UnrestrictedUdf(<values redacted>)")
    }
}

impl PartialEq for UnrestrictedUdf {
    fn eq(&self, other: &Self) -> bool {
        self.instance == other.instance
    }
}
impl Eq for UnrestrictedUdf {}
impl Hash for UnrestrictedUdf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        UNRESTRICTED_FN.hash(state);
        self.instance.hash(state);
    }
}

impl ScalarUDFImpl for UnrestrictedUdf {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        UNRESTRICTED_FN
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let [arg] = args.args.as_slice() else {
            return datafusion::common::exec_err!("{UNRESTRICTED_FN} takes one argument");
        };
        match arg {
            ColumnarValue::Array(a) => Ok(ColumnarValue::Array(Arc::new(self.keep(a)?))),
            ColumnarValue::Scalar(s) => {
                let out = self.keep(&s.to_array_of_size(1)?)?;
                Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
            }
        }
    }
}

/// Register hashes of restricted subjects of one kind (for loaders).
pub fn restricted_hashes(state: &Path, subject: &str) -> Result<BTreeSet<String>> {
    Ok(Requests::in_state(state)
        .list()?
        .into_iter()
        .filter(|r| r.restricting() && r.subject == subject)
        .map(|r| r.subject_hash)
        .collect())
}

/// Splits batches before a load: rows whose `column` hashes to a restricted subject are held
/// apart (returned second), the rest returned first. Nothing is dropped: the caller keeps the
/// held rows (a held file, or the rows the table already has) until the restriction is lifted.
pub fn hold_restricted(
    batches: &[RecordBatch],
    key: &RegisterKey,
    hashes: &BTreeSet<String>,
    subject: &str,
    column: &str,
) -> Result<(Vec<RecordBatch>, Vec<RecordBatch>)> {
    let mut kept = Vec::new();
    let mut held = Vec::new();
    for b in batches {
        let listed: BooleanArray = id_strings(b, column)?
            .into_iter()
            .map(|v| Some(v.is_some_and(|v| hashes.contains(&key.hash(subject, &v)))))
            .collect();
        if listed.true_count() > 0 {
            held.push(arrow::compute::filter_record_batch(b, &listed)?);
        }
        kept.push(arrow::compute::filter_record_batch(
            b,
            &arrow::compute::not(&listed)?,
        )?);
    }
    Ok((kept, held))
}

/// Rows in a set of batches.
pub fn rows(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|b| b.num_rows() as u64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn held_rows_are_split_apart_not_dropped() {
        let key = RegisterKey::from_bytes(b"0123456789abcdef-secret".to_vec()).unwrap();
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("learner_id", arrow::datatypes::DataType::Int64, true),
        ]));
        let b = RecordBatch::try_new(
            schema,
            vec![Arc::new(arrow::array::Int64Array::from(vec![
                Some(1),
                Some(3590),
                None,
            ]))],
        )
        .unwrap();
        let hashes: BTreeSet<String> = [key.hash("learner", "3590")].into();
        let (kept, held) = hold_restricted(&[b], &key, &hashes, "learner", "learner_id").unwrap();
        assert_eq!((rows(&kept), rows(&held)), (2, 1));
    }

    #[test]
    fn the_filter_keeps_nulls_and_other_subjects() {
        let mut r = Restrictions::default();
        r.by_table.insert(
            "crm.learners".into(),
            vec![("r1".into(), "learner_id".into(), vec![Value::Int(3590)])],
        );
        r.requests.push("r1".into());
        let (e, reqs) = r.filter("crm.learners").unwrap();
        assert_eq!(reqs, vec!["r1".to_string()]);
        let shown = format!("{e} {e:?} {r:?}");
        assert!(shown.contains("lethe_unrestricted(learner_id)"), "{shown}");
        assert!(!shown.contains("3590"), "{shown}");
        assert!(r.filter("learning.events").is_none());
    }

    /// The rows `lethe_unrestricted` keeps of a one-column table, through DataFusion.
    async fn kept(values: Vec<Value>, column: ArrayRef) -> Vec<Option<String>> {
        let mut r = Restrictions::default();
        r.by_table
            .insert("t".into(), vec![("r1".into(), "id".into(), values)]);
        let (keep, _) = r.filter("t").unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new(
            "id",
            column.data_type().clone(),
            true,
        )]));
        let batch = RecordBatch::try_new(schema.clone(), vec![column]).unwrap();
        let ctx = datafusion::prelude::SessionContext::new();
        let df = ctx.read_batch(batch).unwrap().filter(keep).unwrap();
        let plan = format!(
            "{:?}",
            df.clone().explain(true, false).unwrap().collect().await
        );
        assert!(!plan.contains("3590"), "{plan}");
        let mut out = Vec::new();
        for b in df.collect().await.unwrap() {
            let text = arrow::compute::cast(b.column(0), &DataType::Utf8).unwrap();
            let s = text
                .as_any()
                .downcast_ref::<arrow::array::StringArray>()
                .unwrap();
            out.extend(s.iter().map(|v| v.map(str::to_string)));
        }
        out
    }

    #[tokio::test]
    async fn unrestricted_keeps_nulls_and_others_and_compares_in_the_columns_type() {
        let ints: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![
            Some(1),
            Some(3590),
            None,
        ]));
        let texts: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![
            Some("1"),
            Some("3590"),
            None,
        ]));
        let want = vec![Some("1".to_string()), None];
        assert_eq!(kept(vec![Value::Int(3590)], ints.clone()).await, want);
        assert_eq!(
            kept(vec![Value::Str("3590".into())], ints.clone()).await,
            want
        );
        assert_eq!(kept(vec![Value::Int(3590)], texts.clone()).await, want);
        // A value that can't be the column's type matches nothing.
        assert_eq!(kept(vec![Value::Str("x3590".into())], ints).await.len(), 3);
        let dates: ArrayRef = Arc::new(arrow::array::Date32Array::from(vec![Some(0), Some(1)]));
        assert_eq!(
            kept(
                vec![Value::Date(
                    chrono::NaiveDate::from_ymd_opt(1970, 1, 2).unwrap()
                )],
                dates
            )
            .await,
            vec![Some("1970-01-01".to_string())]
        );
    }
}
