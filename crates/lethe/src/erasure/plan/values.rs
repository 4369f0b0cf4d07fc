//! Values read from the tables before anything is deleted: the subjects' first records (the
//! lineage window) and the values of every label the plan selects rows by.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use chrono::{DateTime, Utc};
use iceberg::spec::PrimitiveType;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::select_rows;
use lethe_iceberg::predicate::{Predicate, Value};
use lethe_iceberg::table::Warehouse;

use super::Plan;
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::governance::identifiers::{column_values, resolve_labels};
use crate::governance::subjects::Subject;

/// The earliest first record of the subjects `ids`: the root rows' `first_seen` column, when
/// subjects.toml names one. None (every lineage edge applies) when it names none or when a
/// subject has no root row. One read of the root table, however many subjects.
pub async fn first_seen(
    wh: &Warehouse,
    subject: &Subject,
    ids: &[Value],
) -> Result<Option<DateTime<Utc>>> {
    if subject.first_seen.is_none() {
        return Ok(None);
    }
    let (table, root) = subject.root()?;
    let t = wh.load(&TableName::parse(&table)?).await?;
    let rows = select_rows(wh, &t, &Predicate::is_in(root.clone(), ids.to_vec())).await?;
    first_seen_in(subject, &t, ids, &rows)
}

/// [`first_seen`] from the root rows already read: `rows` are the live rows of the root table
/// `t` with the root column IN `ids`.
pub fn first_seen_in(
    subject: &Subject,
    t: &lethe_iceberg::table::LoadedTable,
    ids: &[Value],
    rows: &[arrow::array::RecordBatch],
) -> Result<Option<DateTime<Utc>>> {
    let Some(col) = &subject.first_seen else {
        return Ok(None);
    };
    let (table, root) = subject.root()?;
    let ty = lethe_iceberg::predicate::column_type(t.metadata.current_schema(), col, &table)?;
    if !matches!(
        ty,
        PrimitiveType::Date | PrimitiveType::Timestamp | PrimitiveType::Timestamptz
    ) {
        return Err(Error::invalid(format!(
            "first_seen column {table}.{col} is {ty}, not a date or timestamp"
        )));
    }
    let found: BTreeSet<String> = rows
        .iter()
        .map(|b| column_values(std::slice::from_ref(b), &root))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .map(|v| v.to_string())
        .collect();
    if ids.iter().any(|id| !found.contains(&id.to_string())) {
        return Ok(None);
    }
    let mut min: Option<DateTime<Utc>> = None;
    for b in rows {
        let c = b
            .column_by_name(col)
            .ok_or_else(|| Error::Internal(format!("no column {col}")))?;
        let c = arrow::compute::cast(
            c,
            &arrow::datatypes::DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None),
        )?;
        let ts = c
            .as_any()
            .downcast_ref::<arrow::array::TimestampMicrosecondArray>()
            .ok_or_else(|| Error::Internal("cast".into()))?;
        for v in ts.iter().flatten() {
            let t = DateTime::<Utc>::from_timestamp_micros(v);
            if let Some(t) = t {
                min = Some(min.map_or(t, |m: DateTime<Utc>| m.min(t)));
            }
        }
    }
    Ok(min)
}

/// The values of every label the plan uses, read from the tables (before anything is deleted):
/// the root identifier, mapped identifiers through their mapping table, and the keys of rows
/// the subject owns.
pub async fn resolve_values(
    wh: &Warehouse,
    gov: &Governance,
    plan: &Plan,
    subject_ids: &[Value],
) -> Result<BTreeMap<String, Vec<Value>>> {
    let subject = gov.subjects.get(&plan.subject)?;
    let (_, root_column) = subject.root()?;
    let mut values: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    values.insert(root_column.clone(), subject_ids.to_vec());
    for m in &subject.mapped {
        let t = wh.load(&TableName::parse(&m.via)?).await?;
        let rows = select_rows(
            wh,
            &t,
            &Predicate::is_in(root_column.clone(), subject_ids.to_vec()),
        )
        .await?;
        values.insert(m.column.clone(), column_values(&rows, &m.column)?);
    }
    let labels: BTreeSet<String> = plan.steps.iter().filter_map(|s| s.label.clone()).collect();
    // Derived identifiers: the values their pattern selects.
    let wanted: HashSet<String> = labels.iter().cloned().collect();
    for (label, (_, pairs)) in resolve_labels(wh, gov, &plan.subject, &wanted, &values).await? {
        values.insert(label, pairs.into_iter().map(|(v, _)| v).collect());
    }
    // Keys of owned rows: `table.key` labels, resolved from the table's labelled column.
    for label in labels {
        if values.contains_key(&label) {
            continue;
        }
        let Some((table, key)) = label.rsplit_once('.') else {
            continue;
        };
        let Some(source) = plan.steps.iter().find(|s| s.table == table) else {
            return Err(Error::Internal(format!(
                "label {label} names a table outside the plan"
            )));
        };
        let (Some(col), Some(src_label)) = (&source.column, &source.label) else {
            return Err(Error::Internal(format!(
                "label {label}: {table} has no selecting column"
            )));
        };
        let src_values = values.get(src_label).cloned().unwrap_or_default();
        let t = wh.load(&TableName::parse(table)?).await?;
        let rows = select_rows(wh, &t, &Predicate::is_in(col.clone(), src_values)).await?;
        values.insert(label.clone(), column_values(&rows, key)?);
    }
    Ok(values)
}
