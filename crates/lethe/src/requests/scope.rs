//! A restriction's scope: where the subject's rows are, and the filters that leave them out.
//!
//! When a restriction is recorded, the erasure planner's read-only preparation (the plan and
//! the values that select the subject's rows, [`crate::erasure::erase::prepare`]) gives, for
//! every table the plan would DELETE or REWRITE in, the column and values that select the
//! subject's rows. That scope is written to `state/cases/<request>.scope.json` (mode 0600: it
//! holds the subject's IDs, like the case file) and read back by:
//! - the enforced query path ([`crate::access::query`]), which puts `column IS NULL OR column
//!   NOT IN (values)` under every view of a scoped table, for every role whose policy doesn't
//!   say `restricted = "show"`;
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
//! What the scope does not follow: rows of a kind the subject owned that arrive after the
//! restriction and carry only a row key (not the subject's identifier). Rows reaching derived
//! tables go through pipelines, whose inputs already leave the subject out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use arrow::array::{BooleanArray, RecordBatch};
use datafusion::logical_expr::{Expr, col, lit};
use lethe_iceberg::predicate::Value;
use serde::{Deserialize, Serialize};

use crate::erasure::case::write_atomic;
use crate::erasure::register::RegisterKey;
use crate::error::{Error, Result};
use crate::governance::identifiers::id_strings;
use crate::requests::Requests;

/// One table where the subject's rows are left out by a column's values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// The restrictions in force, by table.
#[derive(Debug, Clone, Default)]
pub struct Restrictions {
    /// Per table: (request, column, values).
    by_table: BTreeMap<String, Vec<(String, String, Vec<Value>)>>,
    /// The requests in force.
    requests: Vec<String>,
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
    /// when no restriction reaches the table), and the requests it applies.
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
            let list: Vec<Expr> = vals.into_iter().map(literal).collect();
            let keep = col(datafusion::common::Column::new_unqualified(c))
                .is_null()
                .or(col(datafusion::common::Column::new_unqualified(c)).in_list(list, true));
            e = Some(match e {
                Some(x) => x.and(keep),
                None => keep,
            });
        }
        e.map(|e| (e, requests.into_iter().collect()))
    }
}

fn literal(v: &Value) -> Expr {
    match v {
        Value::Int(i) => lit(*i),
        Value::Float(f) => lit(*f),
        Value::Str(s) => lit(s.clone()),
        Value::Bool(b) => lit(*b),
        Value::Date(d) => lit(d.to_string()),
        Value::Timestamp(t) => lit(t.to_string()),
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
        let shown = e.to_string();
        assert!(
            shown.contains("IS NULL") && shown.contains("NOT IN"),
            "{shown}"
        );
        assert!(r.filter("learning.events").is_none());
    }
}
