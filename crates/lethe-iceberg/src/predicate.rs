//! Typed row predicates: what a delete, a tombstone or a retention rule selects.
//!
//! A predicate is data, never SQL text: values a user gives (subject IDs, dates) are typed
//! values compared by Arrow kernels, so nothing a user types can change what the statement
//! means. Predicates name columns of the table's current schema; they are bound to field ids
//! before use, so a renamed column is still found.
//!
//! Evaluation follows SQL's three-valued logic: a row is selected only where the predicate is
//! TRUE (a comparison with NULL selects nothing, and `NOT` of unknown stays unknown).

use std::collections::HashSet;
use std::fmt;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Date32Array, Float64Array, Int64Array, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use arrow::compute::kernels::{boolean, cmp};
use arrow::compute::{self, is_not_null, is_null};
use arrow::datatypes::DataType;
use chrono::{NaiveDate, NaiveDateTime};
use iceberg::expr::{Predicate as IcebergPredicate, Reference};
use iceberg::spec::{Datum, PrimitiveType, Schema, Type};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A typed value in a predicate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum Value {
    /// A whole number.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// Text.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// A calendar date.
    Date(NaiveDate),
    /// A timestamp (microsecond precision, no time zone; UTC for timestamptz columns).
    Timestamp(NaiveDateTime),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<>`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
}

/// A row predicate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Predicate {
    /// Every row.
    True,
    /// `column IN (values)`.
    In {
        /// The column.
        column: String,
        /// The values.
        values: Vec<Value>,
    },
    /// `column op value`.
    Cmp {
        /// The column.
        column: String,
        /// The operator.
        op: CmpOp,
        /// The value.
        value: Value,
    },
    /// `column` starts with one of `prefixes` (text columns; the prefixes are literal text, no
    /// pattern characters). Selects derived identifiers such as `a-<id>#<n>`.
    StartsWith {
        /// The column.
        column: String,
        /// The prefixes.
        prefixes: Vec<String>,
    },
    /// `column` ends with one of `suffixes` (text columns; literal text).
    EndsWith {
        /// The column.
        column: String,
        /// The suffixes.
        suffixes: Vec<String>,
    },
    /// `column IS NULL`.
    IsNull(String),
    /// `column IS NOT NULL`.
    NotNull(String),
    /// All of these.
    And(Vec<Predicate>),
    /// Any of these.
    Or(Vec<Predicate>),
    /// Not this.
    Not(Box<Predicate>),
}

impl Predicate {
    /// `column IN (values)`.
    pub fn is_in(column: impl Into<String>, values: Vec<Value>) -> Self {
        Predicate::In {
            column: column.into(),
            values,
        }
    }

    /// `column op value`.
    pub fn cmp(column: impl Into<String>, op: CmpOp, value: Value) -> Self {
        Predicate::Cmp {
            column: column.into(),
            op,
            value,
        }
    }

    /// `column = value`.
    pub fn eq(column: impl Into<String>, value: Value) -> Self {
        Self::cmp(column, CmpOp::Eq, value)
    }

    /// Both.
    pub fn and(self, other: Predicate) -> Self {
        match self {
            Predicate::True => other,
            Predicate::And(mut v) => {
                v.push(other);
                Predicate::And(v)
            }
            p => Predicate::And(vec![p, other]),
        }
    }

    /// Every column the predicate names.
    pub fn columns(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.walk_columns(&mut out);
        out.sort_unstable();
        out.dedup();
        out
    }

    fn walk_columns<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Predicate::True => {}
            Predicate::In { column, .. }
            | Predicate::Cmp { column, .. }
            | Predicate::StartsWith { column, .. }
            | Predicate::EndsWith { column, .. } => out.push(column),
            Predicate::IsNull(c) | Predicate::NotNull(c) => out.push(c),
            Predicate::And(ps) | Predicate::Or(ps) => ps.iter().for_each(|p| p.walk_columns(out)),
            Predicate::Not(p) => p.walk_columns(out),
        }
    }

    /// Checks that every column exists and every value fits its column's type.
    pub fn check(&self, schema: &Schema, table: &str) -> Result<()> {
        match self {
            Predicate::True => Ok(()),
            Predicate::In { column, values } => {
                let t = column_type(schema, column, table)?;
                values
                    .iter()
                    .try_for_each(|v| to_datum(v, &t, column).map(|_| ()))
            }
            Predicate::Cmp { column, value, .. } => {
                let t = column_type(schema, column, table)?;
                to_datum(value, &t, column).map(|_| ())
            }
            Predicate::StartsWith { column, .. } | Predicate::EndsWith { column, .. } => {
                match column_type(schema, column, table)? {
                    PrimitiveType::String => Ok(()),
                    t => Err(Error::invalid(format!(
                        "column `{table}.{column}` has type {t}; prefix and suffix matches need a string column"
                    ))),
                }
            }
            Predicate::IsNull(c) | Predicate::NotNull(c) => {
                column_type(schema, c, table).map(|_| ())
            }
            Predicate::And(ps) | Predicate::Or(ps) => {
                ps.iter().try_for_each(|p| p.check(schema, table))
            }
            Predicate::Not(p) => p.check(schema, table),
        }
    }

    /// The iceberg crate's predicate, for scan planning (partition and metrics pruning).
    pub fn to_iceberg(&self, schema: &Schema, table: &str) -> Result<IcebergPredicate> {
        Ok(match self {
            Predicate::True => IcebergPredicate::AlwaysTrue,
            Predicate::In { column, values } => {
                let t = column_type(schema, column, table)?;
                let datums = values
                    .iter()
                    .map(|v| to_datum(v, &t, column))
                    .collect::<Result<Vec<_>>>()?;
                if datums.is_empty() {
                    IcebergPredicate::AlwaysFalse
                } else {
                    Reference::new(column.clone()).is_in(datums)
                }
            }
            Predicate::Cmp { column, op, value } => {
                let t = column_type(schema, column, table)?;
                let d = to_datum(value, &t, column)?;
                let r = Reference::new(column.clone());
                match op {
                    CmpOp::Eq => r.equal_to(d),
                    CmpOp::NotEq => r.not_equal_to(d),
                    CmpOp::Lt => r.less_than(d),
                    CmpOp::LtEq => r.less_than_or_equal_to(d),
                    CmpOp::Gt => r.greater_than(d),
                    CmpOp::GtEq => r.greater_than_or_equal_to(d),
                }
            }
            // Scanned whole: pruning must stay conservative, and protected columns keep no bounds.
            Predicate::StartsWith { column, .. } | Predicate::EndsWith { column, .. } => {
                column_type(schema, column, table)?;
                IcebergPredicate::AlwaysTrue
            }
            Predicate::IsNull(c) => {
                column_type(schema, c, table)?;
                Reference::new(c.clone()).is_null()
            }
            Predicate::NotNull(c) => {
                column_type(schema, c, table)?;
                Reference::new(c.clone()).is_not_null()
            }
            Predicate::And(ps) => ps
                .iter()
                .map(|p| p.to_iceberg(schema, table))
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .reduce(|a, b| a.and(b))
                .unwrap_or(IcebergPredicate::AlwaysTrue),
            Predicate::Or(ps) => ps
                .iter()
                .map(|p| p.to_iceberg(schema, table))
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .reduce(|a, b| a.or(b))
                .unwrap_or(IcebergPredicate::AlwaysFalse),
            // Pruning must stay conservative: NOT of a three-valued predicate is scanned whole.
            Predicate::Not(_) => IcebergPredicate::AlwaysTrue,
        })
    }

    /// Rows of `batch` (in the table's current schema) where the predicate is TRUE.
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        let v = self.eval3(batch)?;
        // NULL (unknown) is not selected.
        if v.null_count() == 0 {
            return Ok(v);
        }
        Ok(v.iter().map(|x| Some(x.unwrap_or(false))).collect())
    }

    fn eval3(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        let n = batch.num_rows();
        Ok(match self {
            Predicate::True => BooleanArray::from(vec![true; n]),
            Predicate::In { column, values } => {
                let col = column_of(batch, column)?;
                in_list(&col, values, column)?
            }
            Predicate::Cmp { column, op, value } => {
                let col = column_of(batch, column)?;
                let scalar = scalar_for(value, col.data_type(), column)?;
                let s = arrow::array::Scalar::new(scalar);
                match op {
                    CmpOp::Eq => cmp::eq(&col, &s)?,
                    CmpOp::NotEq => cmp::neq(&col, &s)?,
                    CmpOp::Lt => cmp::lt(&col, &s)?,
                    CmpOp::LtEq => cmp::lt_eq(&col, &s)?,
                    CmpOp::Gt => cmp::gt(&col, &s)?,
                    CmpOp::GtEq => cmp::gt_eq(&col, &s)?,
                }
            }
            Predicate::StartsWith { column, prefixes } => {
                affix_match(&column_of(batch, column)?, prefixes, column, true)?
            }
            Predicate::EndsWith { column, suffixes } => {
                affix_match(&column_of(batch, column)?, suffixes, column, false)?
            }
            Predicate::IsNull(c) => is_null(&column_of(batch, c)?)?,
            Predicate::NotNull(c) => is_not_null(&column_of(batch, c)?)?,
            Predicate::And(ps) => {
                let mut acc = BooleanArray::from(vec![true; n]);
                for p in ps {
                    acc = boolean::and_kleene(&acc, &p.eval3(batch)?)?;
                }
                acc
            }
            Predicate::Or(ps) => {
                let mut acc = BooleanArray::from(vec![false; n]);
                for p in ps {
                    acc = boolean::or_kleene(&acc, &p.eval3(batch)?)?;
                }
                acc
            }
            Predicate::Not(p) => boolean::not(&p.eval3(batch)?)?,
        })
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => write!(f, "'{}'", s.replace('\'', "''")),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Date(d) => write!(f, "DATE '{d}'"),
            Value::Timestamp(t) => write!(f, "TIMESTAMP '{t}'"),
        }
    }
}

impl fmt::Display for Predicate {
    /// A readable rendering for people (reports, dry runs). Never executed as SQL.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Predicate::True => write!(f, "TRUE"),
            Predicate::In { column, values } => {
                if values.len() > 5 {
                    write!(f, "{column} IN ({} values)", values.len())
                } else {
                    let v: Vec<String> = values.iter().map(|v| v.to_string()).collect();
                    write!(f, "{column} IN ({})", v.join(", "))
                }
            }
            Predicate::Cmp { column, op, value } => {
                let o = match op {
                    CmpOp::Eq => "=",
                    CmpOp::NotEq => "<>",
                    CmpOp::Lt => "<",
                    CmpOp::LtEq => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::GtEq => ">=",
                };
                write!(f, "{column} {o} {value}")
            }
            Predicate::StartsWith { column, prefixes } => {
                write!(f, "{column} STARTS WITH {}", affix_list(prefixes))
            }
            Predicate::EndsWith { column, suffixes } => {
                write!(f, "{column} ENDS WITH {}", affix_list(suffixes))
            }
            Predicate::IsNull(c) => write!(f, "{c} IS NULL"),
            Predicate::NotNull(c) => write!(f, "{c} IS NOT NULL"),
            Predicate::And(ps) => {
                let v: Vec<String> = ps.iter().map(|p| format!("({p})")).collect();
                write!(f, "{}", v.join(" AND "))
            }
            Predicate::Or(ps) => {
                let v: Vec<String> = ps.iter().map(|p| format!("({p})")).collect();
                write!(f, "{}", v.join(" OR "))
            }
            Predicate::Not(p) => write!(f, "NOT ({p})"),
        }
    }
}

/// The type of a column of the current schema: a top-level column or a struct field by its
/// dotted path (`contact.email`). A field inside a list or a map has any number of values per
/// row and can't be compared.
pub fn column_type(schema: &Schema, column: &str, table: &str) -> Result<PrimitiveType> {
    let path = crate::nested::resolve(schema, column)
        .map_err(|e| Error::invalid(format!("table `{table}`: {e}")))?;
    if path.repeated {
        return Err(Error::invalid(format!(
            "column `{table}.{column}` is inside a list or a map; predicates compare fields with one value per row"
        )));
    }
    match path.field.field_type.as_ref() {
        Type::Primitive(p) => Ok(p.clone()),
        other => Err(Error::invalid(format!(
            "column `{table}.{column}` has type {}; predicates compare primitive columns only",
            crate::nested::type_name(other)
        ))),
    }
}

/// The datum of `value` in a column of type `t`; an error (naming the column, not the value)
/// when the value doesn't fit.
pub fn to_datum(value: &Value, t: &PrimitiveType, column: &str) -> Result<Datum> {
    let mismatch = || {
        Error::invalid(format!(
            "a {} value can't be compared with column `{column}` of type {t}",
            kind(value)
        ))
    };
    Ok(match (t, value) {
        (PrimitiveType::Int, Value::Int(i)) => {
            Datum::int(i32::try_from(*i).map_err(|_| mismatch())?)
        }
        (PrimitiveType::Long, Value::Int(i)) => Datum::long(*i),
        (PrimitiveType::Float, Value::Float(x)) => Datum::float(*x as f32),
        (PrimitiveType::Double, Value::Float(x)) => Datum::double(*x),
        (PrimitiveType::Double, Value::Int(i)) => Datum::double(*i as f64),
        (PrimitiveType::String, Value::Str(s)) => Datum::string(s),
        (PrimitiveType::Boolean, Value::Bool(b)) => Datum::bool(*b),
        (PrimitiveType::Date, Value::Date(d)) => Datum::date(
            (*d - NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch")).num_days() as i32,
        ),
        (PrimitiveType::Timestamp, Value::Timestamp(t)) => {
            Datum::timestamp_micros(t.and_utc().timestamp_micros())
        }
        (PrimitiveType::Timestamp, Value::Date(d)) => Datum::timestamp_micros(
            d.and_hms_opt(0, 0, 0)
                .expect("midnight")
                .and_utc()
                .timestamp_micros(),
        ),
        (PrimitiveType::Timestamptz, Value::Timestamp(t)) => {
            Datum::timestamptz_micros(t.and_utc().timestamp_micros())
        }
        (PrimitiveType::Timestamptz, Value::Date(d)) => Datum::timestamptz_micros(
            d.and_hms_opt(0, 0, 0)
                .expect("midnight")
                .and_utc()
                .timestamp_micros(),
        ),
        _ => return Err(mismatch()),
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "whole-number",
        Value::Float(_) => "decimal-number",
        Value::Str(_) => "text",
        Value::Bool(_) => "boolean",
        Value::Date(_) => "date",
        Value::Timestamp(_) => "timestamp",
    }
}

fn column_of(batch: &RecordBatch, column: &str) -> Result<ArrayRef> {
    batch
        .column_by_name(column)
        .cloned()
        .or_else(|| crate::nested::struct_field(batch, column))
        .ok_or_else(|| Error::invalid(format!("no column `{column}` in the rows read")))
}

/// A one-element array of `value`, cast to the column's type.
fn scalar_for(value: &Value, dt: &DataType, column: &str) -> Result<ArrayRef> {
    let raw: ArrayRef = match value {
        Value::Int(i) => std::sync::Arc::new(Int64Array::from(vec![*i])),
        Value::Float(x) => std::sync::Arc::new(Float64Array::from(vec![*x])),
        Value::Str(s) => std::sync::Arc::new(StringArray::from(vec![s.as_str()])),
        Value::Bool(b) => std::sync::Arc::new(BooleanArray::from(vec![*b])),
        Value::Date(d) => std::sync::Arc::new(Date32Array::from(vec![
            (*d - NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch")).num_days() as i32,
        ])),
        Value::Timestamp(t) => std::sync::Arc::new(TimestampMicrosecondArray::from(vec![
            t.and_utc().timestamp_micros(),
        ])),
    };
    let compatible = matches!(
        (value, dt),
        (
            Value::Int(_),
            DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::UInt64
                | DataType::Float32
                | DataType::Float64
                | DataType::Decimal128(_, _)
        ) | (
            Value::Float(_),
            DataType::Float32 | DataType::Float64 | DataType::Decimal128(_, _)
        ) | (
            Value::Str(_),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) | (Value::Bool(_), DataType::Boolean)
            | (
                Value::Date(_),
                DataType::Date32 | DataType::Date64 | DataType::Timestamp(_, _)
            )
            | (Value::Timestamp(_), DataType::Timestamp(_, _))
    );
    if !compatible {
        return Err(Error::invalid(format!(
            "a {} value can't be compared with column `{column}` of type {dt}",
            kind(value)
        )));
    }
    let cast = compute::cast(&raw, dt).map_err(|e| {
        Error::invalid(format!(
            "a {} value can't be compared with column `{column}`: {e}",
            kind(value)
        ))
    })?;
    if cast.null_count() > 0 {
        return Err(Error::invalid(format!(
            "a {} value is out of range for column `{column}` of type {dt}",
            kind(value)
        )));
    }
    Ok(cast)
}

fn affix_list(v: &[String]) -> String {
    if v.len() > 5 {
        format!("({} values)", v.len())
    } else {
        let shown: Vec<String> = v
            .iter()
            .map(|s| Value::Str(s.clone()).to_string())
            .collect();
        format!("({})", shown.join(", "))
    }
}

/// Rows of a text column that start (or end) with one of `affixes`: one hash lookup per
/// distinct affix length, so a batch of many subjects costs a few passes.
fn affix_match(
    col: &ArrayRef,
    affixes: &[String],
    column: &str,
    prefix: bool,
) -> Result<BooleanArray> {
    let col = match col.data_type() {
        DataType::Utf8 => col.clone(),
        DataType::LargeUtf8 | DataType::Utf8View => compute::cast(col, &DataType::Utf8)?,
        dt => {
            return Err(Error::invalid(format!(
                "column `{column}` has type {dt}; prefix and suffix matches need a text column"
            )));
        }
    };
    let mut by_len: std::collections::BTreeMap<usize, HashSet<&[u8]>> =
        std::collections::BTreeMap::new();
    for a in affixes {
        by_len.entry(a.len()).or_default().insert(a.as_bytes());
    }
    let s = col.as_string::<i32>();
    Ok(s.iter()
        .map(|v| {
            v.map(|v| {
                let b = v.as_bytes();
                by_len.iter().any(|(n, set)| {
                    *n <= b.len() && set.contains(if prefix { &b[..*n] } else { &b[b.len() - n..] })
                })
            })
        })
        .collect())
}

fn in_list(col: &ArrayRef, values: &[Value], column: &str) -> Result<BooleanArray> {
    let n = col.len();
    if values.is_empty() {
        return Ok(BooleanArray::from(vec![false; n]));
    }
    // Hash membership for the common ID types, so a batch of 1,000 subjects costs one pass.
    match col.data_type() {
        DataType::Int64 | DataType::Int32 => {
            let wanted: HashSet<i64> = values
                .iter()
                .map(|v| match v {
                    Value::Int(i) => Ok(*i),
                    other => Err(Error::invalid(format!(
                        "a {} value can't be compared with integer column `{column}`",
                        kind(other)
                    ))),
                })
                .collect::<Result<_>>()?;
            // A few values on a long column (one subject's IDs): vectorised comparisons, NULL
            // where the column is NULL as below (`or` is NULL where either side is).
            if col.data_type() == &DataType::Int64 && wanted.len() <= 8 {
                let mut acc: Option<BooleanArray> = None;
                for v in &wanted {
                    let s = arrow::array::Scalar::new(Int64Array::from(vec![*v]));
                    let eq = cmp::eq(col, &s)?;
                    acc = Some(match acc {
                        Some(a) => boolean::or(&a, &eq)?,
                        None => eq,
                    });
                }
                if let Some(a) = acc {
                    return Ok(a);
                }
            }
            let out: BooleanArray = if col.data_type() == &DataType::Int64 {
                col.as_primitive::<arrow::datatypes::Int64Type>()
                    .iter()
                    .map(|v| v.map(|x| wanted.contains(&x)))
                    .collect()
            } else {
                col.as_primitive::<arrow::datatypes::Int32Type>()
                    .iter()
                    .map(|v| v.map(|x| wanted.contains(&(x as i64))))
                    .collect()
            };
            Ok(out)
        }
        DataType::Utf8 | DataType::LargeUtf8 => {
            let wanted: HashSet<&str> = values
                .iter()
                .map(|v| match v {
                    Value::Str(s) => Ok(s.as_str()),
                    other => Err(Error::invalid(format!(
                        "a {} value can't be compared with text column `{column}`",
                        kind(other)
                    ))),
                })
                .collect::<Result<_>>()?;
            let out: BooleanArray = if col.data_type() == &DataType::Utf8 {
                col.as_string::<i32>()
                    .iter()
                    .map(|v| v.map(|x| wanted.contains(x)))
                    .collect()
            } else {
                col.as_string::<i64>()
                    .iter()
                    .map(|v| v.map(|x| wanted.contains(x)))
                    .collect()
            };
            Ok(out)
        }
        dt => {
            let mut acc = BooleanArray::from(vec![false; n]);
            for v in values {
                let s = arrow::array::Scalar::new(scalar_for(v, dt, column)?);
                acc = boolean::or_kleene(&acc, &cmp::eq(col, &s)?)?;
            }
            Ok(acc)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn batch() -> RecordBatch {
        RecordBatch::try_from_iter(vec![
            (
                "id",
                Arc::new(Int64Array::from(vec![Some(1), Some(2), None, Some(4)])) as ArrayRef,
            ),
            (
                "status",
                Arc::new(StringArray::from(vec![
                    Some("closed"),
                    Some("open"),
                    Some("closed"),
                    None,
                ])) as ArrayRef,
            ),
            (
                "day",
                Arc::new(Date32Array::from(vec![
                    Some(0),
                    Some(10),
                    Some(20),
                    Some(30),
                ])) as ArrayRef,
            ),
        ])
        .unwrap()
    }

    fn sel(p: &Predicate) -> Vec<bool> {
        p.evaluate(&batch())
            .unwrap()
            .iter()
            .map(|v| v.unwrap())
            .collect()
    }

    #[test]
    fn in_and_comparisons() {
        assert_eq!(
            sel(&Predicate::is_in("id", vec![Value::Int(2), Value::Int(4)])),
            vec![false, true, false, true]
        );
        let d = NaiveDate::from_ymd_opt(1970, 1, 15).unwrap();
        assert_eq!(
            sel(&Predicate::cmp("day", CmpOp::Lt, Value::Date(d))),
            vec![true, true, false, false]
        );
        assert_eq!(
            sel(
                &Predicate::eq("status", Value::Str("closed".into())).and(Predicate::cmp(
                    "day",
                    CmpOp::Lt,
                    Value::Date(d)
                ))
            ),
            vec![true, false, false, false]
        );
    }

    #[test]
    fn a_few_ids_and_many_select_alike_nulls_kept_unknown() {
        let col: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(3), Some(9)]));
        let few = in_list(&col, &[Value::Int(3), Value::Int(1)], "id").unwrap();
        let many: Vec<Value> = [3, 1].into_iter().chain(100..120).map(Value::Int).collect();
        let many = in_list(&col, &many, "id").unwrap();
        assert_eq!(few, many);
        assert_eq!(
            few.iter().collect::<Vec<_>>(),
            vec![Some(true), None, Some(true), Some(false)]
        );
        // NOT keeps the NULL row unknown either way.
        let p = Predicate::Not(Box::new(Predicate::is_in("id", vec![Value::Int(1)])));
        assert_eq!(sel(&p), vec![false, true, false, true]);
    }

    #[test]
    fn nulls_are_never_selected() {
        // NOT (id = 1): the NULL id row is unknown, so not selected.
        let p = Predicate::Not(Box::new(Predicate::eq("id", Value::Int(1))));
        assert_eq!(sel(&p), vec![false, true, false, true]);
        assert_eq!(
            sel(&Predicate::IsNull("status".into())),
            vec![false, false, false, true]
        );
        let p = Predicate::Or(vec![
            Predicate::eq("status", Value::Str("open".into())),
            Predicate::IsNull("id".into()),
        ]);
        assert_eq!(sel(&p), vec![false, true, true, false]);
    }

    #[test]
    fn wrong_types_are_errors_without_values() {
        let e = Predicate::eq("id", Value::Str("abc-secret".into()))
            .evaluate(&batch())
            .unwrap_err()
            .to_string();
        assert!(e.contains("`id`"), "{e}");
        assert!(
            !e.contains("abc-secret"),
            "values must not appear in errors: {e}"
        );
        assert!(
            Predicate::is_in("missing", vec![Value::Int(1)])
                .evaluate(&batch())
                .is_err()
        );
    }

    #[test]
    fn prefixes_and_suffixes_are_literal_text() {
        let p = Predicate::StartsWith {
            column: "status".into(),
            prefixes: vec!["clo".into(), "%".into()],
        };
        assert_eq!(sel(&p), vec![true, false, true, false]);
        let p = Predicate::EndsWith {
            column: "status".into(),
            suffixes: vec!["pen".into(), "closed".into()],
        };
        assert_eq!(sel(&p), vec![true, true, true, false]);
        // Not on whole numbers; an empty list selects nothing.
        let p = Predicate::StartsWith {
            column: "id".into(),
            prefixes: vec!["1".into()],
        };
        assert!(p.evaluate(&batch()).is_err());
        let p = Predicate::StartsWith {
            column: "status".into(),
            prefixes: vec![],
        };
        assert_eq!(sel(&p), vec![false, false, false, false]);
    }

    #[test]
    fn text_values_never_become_sql() {
        // A value full of SQL is only ever compared, never parsed.
        let p = Predicate::eq("status", Value::Str("closed' OR '1'='1".into()));
        assert_eq!(sel(&p), vec![false, false, false, false]);
    }
}
