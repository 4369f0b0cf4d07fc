//! An erasure's RECOMPUTE: a pipeline's target brought up to date after its inputs changed —
//! not at all when nothing it reads changed, for the changed keys only where that is provably
//! a full run's result, else by a full run.
//!
//! The incremental path holds when all of these do (each failing one is the full run's
//! reason, logged at info and recorded in the step):
//! 1. the target's current snapshot is this pipeline's own commit and recorded the same query
//!    over named snapshots of every table it reads ([`super::INPUTS_KEY`]), no restriction is
//!    in force, and those snapshots are still kept;
//! 2. the optimized plan is one [`lethe_sql::incremental`] covers, and one of its output
//!    columns `o` (a column of the target) bounds every scan of every changed table: each such
//!    scan has a column `t` whose values, on the rows it changed, are the only values of `o`
//!    a full run can produce differently (the argument is in that module);
//! 3. each changed table's difference is told by its data files
//!    ([`lethe_iceberg::ops::changes`]: copy-on-write, no delete files) and no changed row has
//!    a NULL `t`;
//! 4. (cost, not soundness) the changed keys are fewer than half the target's rows: a large
//!    batch that changes most groups runs in full, on the query engine if there is one.
//!
//! Then K = the distinct `t` values of the changed rows, the plan runs with `IN K` filters on
//! every scan bounded by `o` and on `o`, and ONE commit replaces the target rows with `o IN K`
//! by the rows it computed (copy-on-write: only the target's files holding such rows are
//! rewritten, the new rows go to a file of their own), recording the new input snapshots as a
//! full run does. The target keeps every other row: the last run built them from rows that
//! did not change. The query runs in this process (a query engine is used by full runs only).
//!
//! Not covered: a concurrent writer committing to the target between the check of condition 1
//! and the commit (the commit path's conflict retry plans the replacement again on the new
//! state) — lethe's erasure is the one writer of a pipeline's target.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use datafusion::common::ScalarValue;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::changes::{Changes, changed_rows};
use lethe_iceberg::ops::rewrite::{RowRewrite, rewrite_rows};
use lethe_iceberg::predicate::{Predicate, Value};
use lethe_iceberg::writer::WriteOptions;

use super::{
    INPUTS_KEY, Pipeline, PipelineRun, Recompute, RecomputeMode, Recomputed,
    apply_generated_properties, inputs_read, record_lineage, run_over, session_over, tables_named,
};
use crate::error::{Error, Result};
use crate::workspace::Workspace;

/// Brings `p`'s target up to date with its inputs (the module's rules): not at all when
/// nothing it reads changed since it built the target, incrementally where that is the same
/// as a full run, else by a full run. `extra` goes into the commit's summary.
pub async fn recompute(
    ws: &Workspace,
    p: &Pipeline,
    extra: BTreeMap<String, String>,
) -> Result<Recomputed> {
    let named = tables_named(&p.sql);
    let restrictions = crate::requests::scope::Restrictions::active(&ws.config.paths.state)?;
    let inputs = inputs_read(ws, p, named.as_ref(), &restrictions).await?;
    let attempt = match &inputs {
        None if !restrictions.is_empty() => {
            Attempt::Full("a restriction is in force (the run reads through its views)".into())
        }
        None => Attempt::Full("the tables the query reads can't be told".into()),
        Some(now) => last_run(ws, p, now).await?,
    };
    let why = match attempt {
        Attempt::Unchanged => {
            return Ok(Recomputed {
                run: None,
                how: Recompute {
                    mode: RecomputeMode::Unchanged,
                    key: None,
                    keys: 0,
                    reason: None,
                },
            });
        }
        Attempt::Full(why) => why,
        Attempt::Changed(changed) => {
            let now = inputs.clone().unwrap_or_default();
            match incremental(ws, p, &extra, named.as_ref(), &changed, &now).await? {
                Ok(done) => return Ok(done),
                Err(why) => why,
            }
        }
    };
    tracing::info!("pipeline {}: full run: {why}", p.name);
    let run = run_over(ws, p, extra, named, restrictions, inputs).await?;
    Ok(Recomputed {
        run: Some(run),
        how: Recompute {
            mode: RecomputeMode::Full,
            key: None,
            keys: 0,
            reason: Some(why),
        },
    })
}

enum Attempt {
    Unchanged,
    /// The tables that changed, with the snapshot the last run read.
    Changed(Vec<(String, i64)>),
    Full(String),
}

/// Parses an [`INPUTS_KEY`] record: the query's hash and each table's snapshot (None: empty).
fn parse_inputs(s: &str) -> Option<(String, BTreeMap<String, Option<i64>>)> {
    let mut parts = s.split(' ');
    let hash = parts.next()?.strip_prefix("sql=")?.to_string();
    let mut tables = BTreeMap::new();
    for p in parts {
        let (t, id) = p.rsplit_once('@')?;
        let id = if id == "none" {
            None
        } else {
            Some(id.parse().ok()?)
        };
        tables.insert(t.to_string(), id);
    }
    Some((hash, tables))
}

/// What the target's last run says, compared with what a run would read `now`.
async fn last_run(ws: &Workspace, p: &Pipeline, now: &str) -> Result<Attempt> {
    let full = |w: &str| Ok(Attempt::Full(w.to_string()));
    if !ws.warehouse.catalog.table_exists(&p.target).await? {
        return full("the target does not exist yet");
    }
    let target = ws.warehouse.load(&p.target).await?;
    let Some(s) = target.current_snapshot() else {
        return full("the target has no snapshot");
    };
    let props = &s.summary().additional_properties;
    if props.get("lethe-pipeline") != Some(&p.name) {
        return full("the target's current snapshot is not this pipeline's commit");
    }
    let Some(recorded) = props.get(INPUTS_KEY) else {
        return full("the target's last run recorded no input snapshots");
    };
    if recorded == now {
        return Ok(Attempt::Unchanged);
    }
    let (Some((h0, before)), Some((h1, after))) = (parse_inputs(recorded), parse_inputs(now))
    else {
        return full("the target's record of its inputs can't be read");
    };
    if h0 != h1 {
        return full("the query changed since the last run");
    }
    if before.keys().ne(after.keys()) {
        return full("the query reads other tables than at the last run");
    }
    let mut changed = Vec::new();
    for (t, was) in &before {
        let is = after[t];
        if *was == is {
            continue;
        }
        match was {
            Some(id) => changed.push((t.clone(), *id)),
            None => return full(&format!("{t} was empty at the last run")),
        }
    }
    Ok(Attempt::Changed(changed))
}

/// The incremental path: Ok(Err(reason)) when one of its conditions fails (nothing written).
async fn incremental(
    ws: &Workspace,
    p: &Pipeline,
    extra: &BTreeMap<String, String>,
    named: Option<&BTreeSet<String>>,
    changed: &[(String, i64)],
    now: &str,
) -> Result<std::result::Result<Recomputed, String>> {
    let fail = |m: String| Error::Pipeline {
        pipeline: p.name.clone(),
        message: m,
    };
    let none = crate::requests::scope::Restrictions::default();
    let ctx = session_over(ws, &none, named).await?;
    let df = ctx.sql(&p.sql).await.map_err(|e| fail(e.to_string()))?;
    let unoptimized = df.logical_plan().clone();
    let optimized = ctx
        .state()
        .optimize(&unoptimized)
        .map_err(|e| fail(e.to_string()))?;
    let keys = match lethe_sql::incremental::recompute_keys(&unoptimized, &optimized) {
        Ok(k) => k,
        Err(why) => return Ok(Err(why.0)),
    };
    let target = ws.warehouse.load(&p.target).await?;
    let columns = target.column_names();
    let bounds_all = |k: &lethe_sql::incremental::RecomputeKey| {
        changed
            .iter()
            .all(|(t, _)| k.scans_of(t).all(|s| !s.columns.is_empty()))
    };
    let Some(key) = keys
        .iter()
        .find(|k| columns.contains(&k.name) && bounds_all(k))
    else {
        let unbounded: Vec<&str> = changed
            .iter()
            .filter(|(t, _)| {
                !keys.iter().any(|k| {
                    columns.contains(&k.name) && k.scans_of(t).all(|s| !s.columns.is_empty())
                })
            })
            .map(|(t, _)| t.as_str())
            .collect();
        return Ok(Err(format!(
            "no output column bounds what a change of {} alters (a group key carried by its rows through join equalities, on the preserved side of outer joins)",
            if unbounded.is_empty() {
                "all the changed tables at once".to_string()
            } else {
                unbounded.join(", ")
            }
        )));
    };
    // K: the distinct key values of the changed rows, scan by scan.
    let mut seen: HashSet<ScalarValue> = HashSet::new();
    let mut k: Vec<ScalarValue> = Vec::new();
    for (t, from) in changed {
        let scans: Vec<&str> = key
            .scans_of(t)
            .filter_map(|s| s.columns.first().map(String::as_str))
            .collect();
        if scans.is_empty() {
            continue; // the optimized plan doesn't read it
        }
        // Only the columns the plan reads of the table: a change the query can't see alters
        // no output row, and the files' other columns need not be decoded to compare rows.
        let reads: Vec<String> = key
            .scans_of(t)
            .flat_map(|s| s.reads.iter().cloned())
            .collect();
        let table = ws.warehouse.load(&TableName::parse(t)?).await?;
        let rows = match changed_rows(&ws.warehouse, &table, *from, &reads).await? {
            Changes::Rows(r) => r,
            Changes::Unknown(why) => return Ok(Err(why)),
        };
        for col in scans {
            for b in &rows {
                let Some(a) = b.column_by_name(col) else {
                    return Ok(Err(format!("{t} has no column {col} any more")));
                };
                for i in 0..a.len() {
                    let v = ScalarValue::try_from_array(a, i).map_err(|e| fail(e.to_string()))?;
                    if v.is_null() {
                        return Ok(Err(format!(
                            "a changed row of {t} has no {col} (NULL): the rows it altered can't be told by {}",
                            key.name
                        )));
                    }
                    if seen.insert(v.clone()) {
                        k.push(v);
                    }
                }
            }
        }
    }
    // A cost decision, not a soundness one: when the changed rows carry keys for half the
    // target's rows or more (a large batch), the restricted query would read as much as a full
    // run and the commit rewrite the whole target; a full run (on the query engine, if there
    // is one) is no dearer.
    let target_rows: u64 = ws
        .warehouse
        .current_files(&target)
        .await?
        .iter()
        .map(|f| f.entry.data_file.record_count())
        .sum();
    if k.len() as u64 * 2 > target_rows {
        return Ok(Err(format!(
            "the changed rows carry {} key(s) of {} for the target's {target_rows} row(s): recomputing half of it or more costs a full run",
            k.len(),
            key.name
        )));
    }
    let mut values = Vec::with_capacity(k.len());
    for v in &k {
        match typed(v) {
            Some(x) => values.push(x),
            None => {
                return Ok(Err(format!(
                    "the key column {} is of type {}, which lethe's row predicates don't take",
                    key.name,
                    v.data_type()
                )));
            }
        }
    }
    let how = Recompute {
        mode: RecomputeMode::Incremental,
        key: Some(key.name.clone()),
        keys: k.len(),
        reason: None,
    };
    tracing::info!(
        "pipeline {}: incremental: {} changed table(s), the rows of {} key(s) of {} recomputed",
        p.name,
        changed.len(),
        k.len(),
        key.name
    );
    if k.is_empty() {
        // The changes cancel out (rows only moved between files): the target is up to date.
        return Ok(Ok(Recomputed { run: None, how }));
    }
    let plan = lethe_sql::incremental::restrict_to_keys(&optimized, key, &k)
        .map_err(|e| fail(format!("restricting the query to the changed keys: {e}")))?;
    let batches = ctx
        .execute_logical_plan(plan)
        .await
        .map_err(|e| fail(e.to_string()))?
        .collect()
        .await
        .map_err(|e| fail(e.to_string()))?;
    let lineage = lethe_sql::column_lineage(&unoptimized)
        .map_err(|e| fail(format!("column lineage: {e}")))?;
    apply_generated_properties(ws, &p.target).await?;
    let mut spec = RowRewrite::delete(Predicate::is_in(key.name.clone(), values))
        .with_rows(batches)
        .with_options(WriteOptions {
            max_rows_per_file: Some(50_000),
        });
    spec.summary = extra.clone();
    spec.summary
        .insert("lethe-pipeline".to_string(), p.name.clone());
    spec.summary.insert(INPUTS_KEY.to_string(), now.to_string());
    let r = rewrite_rows(&ws.warehouse, &p.target, &spec)
        .await
        .map_err(|e| fail(format!("writing {}: {e}", p.target)))?;
    let lineage_file = record_lineage(ws, p, &lineage).await?;
    Ok(Ok(Recomputed {
        run: Some(PipelineRun {
            pipeline: p.name.clone(),
            target: p.target.to_string(),
            rows: r.rows_inserted,
            snapshot_id: r.snapshot_id,
            lineage_file,
            engine: "local".to_string(),
        }),
        how,
    }))
}

/// A key value as a typed predicate value (None for types predicates don't take).
fn typed(v: &ScalarValue) -> Option<Value> {
    Some(match v {
        ScalarValue::Int8(Some(x)) => Value::Int(i64::from(*x)),
        ScalarValue::Int16(Some(x)) => Value::Int(i64::from(*x)),
        ScalarValue::Int32(Some(x)) => Value::Int(i64::from(*x)),
        ScalarValue::Int64(Some(x)) => Value::Int(*x),
        ScalarValue::UInt8(Some(x)) => Value::Int(i64::from(*x)),
        ScalarValue::UInt16(Some(x)) => Value::Int(i64::from(*x)),
        ScalarValue::UInt32(Some(x)) => Value::Int(i64::from(*x)),
        ScalarValue::Utf8(Some(x))
        | ScalarValue::LargeUtf8(Some(x))
        | ScalarValue::Utf8View(Some(x)) => Value::Str(x.clone()),
        ScalarValue::Boolean(Some(x)) => Value::Bool(*x),
        ScalarValue::Date32(Some(d)) => {
            Value::Date(chrono::NaiveDate::from_num_days_from_ce_opt(*d + 719_163)?)
        }
        ScalarValue::TimestampMicrosecond(Some(t), _) => {
            Value::Timestamp(chrono::DateTime::from_timestamp_micros(*t)?.naive_utc())
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inputs_record_parses_back() {
        let (h, t) = parse_inputs("sql=0123abcd a.b@12 c.d@none").unwrap();
        assert_eq!(h, "0123abcd");
        assert_eq!(t["a.b"], Some(12));
        assert_eq!(t["c.d"], None);
        assert!(parse_inputs("a.b@12").is_none());
    }

    #[test]
    fn key_values_keep_their_type() {
        assert_eq!(typed(&ScalarValue::Int32(Some(7))), Some(Value::Int(7)));
        assert_eq!(
            typed(&ScalarValue::Date32(Some(0))),
            Some(Value::Date(
                chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()
            ))
        );
        assert_eq!(typed(&ScalarValue::Float64(Some(1.0))), None);
    }
}
