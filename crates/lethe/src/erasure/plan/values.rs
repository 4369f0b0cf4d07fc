//! Values read from the tables before anything is deleted: the subjects' first records (the
//! lineage window). The values of every label the plan selects rows by are resolved with the
//! requests that own them by the erasure's preparation
//! ([`crate::erasure::erase::prepare`]).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use iceberg::spec::PrimitiveType;
use lethe_iceberg::predicate::Value;

use crate::error::{Error, Result};
use crate::governance::identifiers::column_values;
use crate::governance::subjects::Subject;

/// The earliest first record of the subjects `ids`: the root rows' `first_seen` column, when
/// subjects.toml names one. None (every lineage edge applies) when it names none or when a
/// subject has no root row. `rows` are the live rows of the root table `t` with the root
/// column IN `ids`.
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
