//! Reading data files (Parquet, or ORC through [`crate::orc`]) in a table's current schema.
//!
//! Columns are matched by Iceberg field id (`PARQUET:field_id`), so a column renamed since the
//! file was written is read under its new name, a column added since reads as null, and a
//! dropped one is ignored — inside structs, lists and maps too
//! ([`crate::nested::project_array`]). Files without field ids (imported from Hive, say) fall
//! back to matching by name. Types are cast to the current type (promotion: int to long, float
//! to double, wider decimals). A column added with an `initial-default` (format v3) reads as
//! that value in files written before it was added, as the spec's default-value rules say (a
//! struct default is read as null: nested defaults are not filled in).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Decimal128Array, FixedSizeBinaryArray, Float32Array,
    Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, UInt32Array, new_null_array,
};
use arrow::compute;
use arrow::datatypes::{DataType, Field, SchemaRef as ArrowSchemaRef};
use arrow::record_batch::RecordBatchReader;
use iceberg::spec::{Literal, PrimitiveLiteral, Schema};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{Error, Result};
use crate::store::FileStore;
use crate::writer;

const FIELD_ID_KEY: &str = "PARQUET:field_id";

fn field_id(f: &Field) -> Option<i32> {
    f.metadata().get(FIELD_ID_KEY).and_then(|v| v.parse().ok())
}

/// Reads a Parquet data file as batches in `schema` (the table's current schema, or some of
/// its top-level fields as a schema of their own): only the file's columns that `schema`'s
/// fields match are decompressed and decoded.
///
/// Rows come in file order, so the n-th row read is at position n (what position deletes
/// name). A required column the file lacks is an error.
pub fn read_data_file(
    store: &dyn FileStore,
    location: &str,
    schema: &Schema,
) -> Result<Vec<RecordBatch>> {
    let target = writer::arrow_schema(schema)?;
    let (file_schema, batches) = read_stored(store, location, |file| {
        let mut roots: Vec<usize> = map_columns(file, schema, &target)
            .into_iter()
            .flatten()
            .collect();
        roots.sort_unstable();
        roots.dedup();
        roots
    })?;
    project_batches(&file_schema, &batches, schema, location, false)
}

/// Reads a whole Parquet file as stored: its own Arrow schema (field ids in the fields'
/// `PARQUET:field_id` metadata) and its batches in file order.
pub fn read_raw(
    store: &dyn FileStore,
    location: &str,
) -> Result<(ArrowSchemaRef, Vec<RecordBatch>)> {
    read_stored(store, location, |file| (0..file.fields().len()).collect())
}

/// The most rows a batch read from Parquet holds.
const MAX_BATCH_ROWS: usize = 65_536;

/// The batch size for a Parquet read of `rows` rows in all: [`MAX_BATCH_ROWS`], or fewer when
/// fewer are read. The reader sizes its buffers (values, offsets, levels) by the batch size
/// before it knows how many rows come, so a read of a small file, or of a few selected rows,
/// at the full size allocated — and, on fresh memory, faulted in — several times what it read.
/// The batches are the same either way.
pub(crate) fn batch_rows(rows: u64) -> usize {
    usize::try_from(rows).map_or(MAX_BATCH_ROWS, |r| r.clamp(1, MAX_BATCH_ROWS))
}

/// Reads the top-level columns `roots` picks (by their index in the file's Arrow schema) of a
/// Parquet file: the schema of what was read, and its batches in file order. An ORC file
/// (by its magic) is read whole ([`crate::orc`]).
fn read_stored(
    store: &dyn FileStore,
    location: &str,
    roots: impl FnOnce(&ArrowSchemaRef) -> Vec<usize>,
) -> Result<(ArrowSchemaRef, Vec<RecordBatch>)> {
    let reader = store.open(location)?;
    let builder = match ParquetRecordBatchReaderBuilder::try_new(reader) {
        Ok(builder) => builder,
        // Looked at only when the file is not Parquet: no extra read on the common path.
        Err(_) if crate::orc::is_orc_file(store, location)? => {
            return crate::orc::read_file(store, location, MAX_BATCH_ROWS);
        }
        Err(e) => {
            return Err(Error::invalid(format!(
                "{location} can't be read as Parquet: {e}"
            )));
        }
    };
    let picked = roots(builder.schema());
    let all = picked.len() == builder.schema().fields().len();
    let builder = if all {
        builder
    } else {
        let mask = ProjectionMask::roots(builder.parquet_schema(), picked);
        builder.with_projection(mask)
    };
    let rows = builder.metadata().file_metadata().num_rows().max(0) as u64;
    let reader = builder.with_batch_size(batch_rows(rows)).build()?;
    let file_schema = reader.schema();
    let mut out = Vec::new();
    for batch in reader {
        out.push(batch?);
    }
    Ok((file_schema, out))
}

/// Projects batches read by [`read_raw`] into `schema` by field id (by name when the file has
/// no field ids). With `relaxed`, columns the file lacks read as null even when `schema` says
/// they are required (a delete file holds only some columns of its table).
pub fn project_batches(
    file_schema: &ArrowSchemaRef,
    batches: &[RecordBatch],
    schema: &Schema,
    location: &str,
    relaxed: bool,
) -> Result<Vec<RecordBatch>> {
    let target = writer::arrow_schema(schema)?;
    let mapping = map_columns(file_schema, schema, &target);
    batches
        .iter()
        .map(|b| project(b, &mapping, schema, &target, location, relaxed))
        .collect()
}

/// The Iceberg field id an Arrow field read from Parquet carries, if any.
pub fn field_id_of(f: &Field) -> Option<i32> {
    field_id(f)
}

/// For each target column, the index of the file column that holds it.
fn map_columns(
    file: &ArrowSchemaRef,
    schema: &Schema,
    target: &ArrowSchemaRef,
) -> Vec<Option<usize>> {
    let by_id: HashMap<i32, usize> = file
        .fields()
        .iter()
        .enumerate()
        .filter_map(|(i, f)| field_id(f).map(|id| (id, i)))
        .collect();
    let any_ids = !by_id.is_empty();
    schema
        .as_struct()
        .fields()
        .iter()
        .zip(target.fields())
        .map(|(f, tf)| {
            if any_ids {
                by_id.get(&f.id).copied()
            } else {
                file.index_of(tf.name()).ok()
            }
        })
        .collect()
}

fn project(
    batch: &RecordBatch,
    mapping: &[Option<usize>],
    schema: &Schema,
    target: &ArrowSchemaRef,
    location: &str,
    relaxed: bool,
) -> Result<RecordBatch> {
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(mapping.len());
    for ((m, tf), f) in mapping
        .iter()
        .zip(target.fields())
        .zip(schema.as_struct().fields())
    {
        let col = match m {
            Some(i) => {
                let c = batch.column(*i);
                if c.data_type() == tf.data_type() {
                    c.clone()
                } else {
                    crate::nested::project_array(c, tf).map_err(|e| {
                        Error::invalid(format!(
                            "{location}: column `{}` (field id {}) can't be read as {}: {e}",
                            tf.name(),
                            f.id,
                            f.field_type
                        ))
                    })?
                }
            }
            None => match &f.initial_default {
                Some(d @ Literal::Primitive(_)) => {
                    default_array(d, tf.data_type(), batch.num_rows()).map_err(|e| {
                        Error::invalid(format!(
                            "{location}: the initial-default of column `{}` (field id {}) can't be read as {}: {e}",
                            tf.name(),
                            f.id,
                            f.field_type
                        ))
                    })?
                }
                _ => {
                    if f.required && f.initial_default.is_none() && !relaxed {
                        return Err(Error::invalid(format!(
                            "{location}: required column `{}` (field id {}) is missing from the file",
                            tf.name(),
                            f.id
                        )));
                    }
                    new_null_array(tf.data_type(), batch.num_rows())
                }
            },
        };
        cols.push(col);
    }
    let opts = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    // Nullability of the target may be stricter than a file column that merely has no nulls.
    let loose = std::sync::Arc::new(arrow::datatypes::Schema::new_with_metadata(
        target
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
        target.metadata().clone(),
    ));
    let b = RecordBatch::try_new_with_options(loose, cols.clone(), &opts)?;
    // Back to the exact target schema when the data allows it.
    Ok(RecordBatch::try_new_with_options(target.clone(), cols, &opts).unwrap_or(b))
}

/// `n` copies of a default value (`initial-default` or `write-default`) as an Arrow array of
/// `data_type`. Only primitive defaults are supported (the spec's struct default `{}` fills
/// nested fields, which lethe reads as null).
pub fn default_array(
    default: &Literal,
    data_type: &DataType,
    n: usize,
) -> std::result::Result<ArrayRef, String> {
    let Literal::Primitive(p) = default else {
        return Err("only primitive defaults are supported".into());
    };
    let one: ArrayRef = match (p, data_type) {
        (PrimitiveLiteral::Boolean(v), _) => Arc::new(BooleanArray::from(vec![*v])),
        (PrimitiveLiteral::Int(v), _) => Arc::new(Int32Array::from(vec![*v])),
        (PrimitiveLiteral::Long(v), _) => Arc::new(Int64Array::from(vec![*v])),
        (PrimitiveLiteral::Float(v), _) => Arc::new(Float32Array::from(vec![v.0])),
        (PrimitiveLiteral::Double(v), _) => Arc::new(Float64Array::from(vec![v.0])),
        (PrimitiveLiteral::String(v), _) => Arc::new(StringArray::from(vec![v.as_str()])),
        (PrimitiveLiteral::Binary(v), DataType::FixedSizeBinary(w)) => Arc::new(
            FixedSizeBinaryArray::try_from_iter(std::iter::once(v.as_slice()))
                .map_err(|e| format!("fixed({w}): {e}"))?,
        ),
        (PrimitiveLiteral::Binary(v), _) => Arc::new(BinaryArray::from(vec![v.as_slice()])),
        (PrimitiveLiteral::Int128(v), DataType::Decimal128(p, s)) => Arc::new(
            Decimal128Array::from(vec![*v])
                .with_precision_and_scale(*p, *s)
                .map_err(|e| e.to_string())?,
        ),
        (PrimitiveLiteral::UInt128(v), DataType::FixedSizeBinary(16)) => Arc::new(
            FixedSizeBinaryArray::try_from_iter(std::iter::once(v.to_be_bytes()))
                .map_err(|e| e.to_string())?,
        ),
        (other, t) => return Err(format!("a {other:?} default for a {t} column")),
    };
    let one = if one.data_type() == data_type {
        one
    } else {
        // Unsafe cast: a default that doesn't fit the column is an error, not a null.
        let strict = compute::CastOptions {
            safe: false,
            ..Default::default()
        };
        compute::cast_with_options(&one, data_type, &strict).map_err(|e| e.to_string())?
    };
    compute::take(&one, &UInt32Array::from(vec![0u32; n]), None).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Date32Type, TimeUnit, TimestampNanosecondType};

    use super::*;

    #[test]
    fn a_read_is_batched_by_the_rows_it_holds() {
        assert_eq!(batch_rows(0), 1, "a batch size is never 0");
        assert_eq!(batch_rows(1_300), 1_300);
        assert_eq!(batch_rows(u64::MAX), MAX_BATCH_ROWS);
        let schema = Schema::builder()
            .with_fields(vec![
                iceberg::spec::NestedField::required(
                    1,
                    "id",
                    iceberg::spec::Type::Primitive(iceberg::spec::PrimitiveType::Long),
                )
                .into(),
            ])
            .build()
            .unwrap();
        let target = writer::arrow_schema(&schema).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::LocalStore::new();
        for rows in [0i64, 1_300, 70_000] {
            let path = dir.path().join(format!("{rows}.parquet"));
            let file = std::fs::File::create(&path).unwrap();
            let mut w = parquet::arrow::ArrowWriter::try_new(file, target.clone(), None).unwrap();
            if rows > 0 {
                let ids = arrow::array::Int64Array::from_iter_values(0..rows);
                w.write(&RecordBatch::try_new(target.clone(), vec![Arc::new(ids)]).unwrap())
                    .unwrap();
            }
            w.close().unwrap();
            let batches = read_data_file(&store, path.to_str().unwrap(), &schema).unwrap();
            let sizes: Vec<usize> = batches.iter().map(RecordBatch::num_rows).collect();
            let expected: Vec<usize> = match rows {
                0 => vec![],
                1_300 => vec![1_300],
                _ => vec![MAX_BATCH_ROWS, 70_000 - MAX_BATCH_ROWS],
            };
            assert_eq!(sizes, expected, "{rows} rows");
            let back: Vec<i64> = batches
                .iter()
                .flat_map(|b| {
                    b.column(0)
                        .as_primitive::<arrow::datatypes::Int64Type>()
                        .values()
                        .to_vec()
                })
                .collect();
            assert_eq!(back, (0..rows).collect::<Vec<_>>());
        }
    }

    #[test]
    fn defaults_fill_columns_of_their_type() {
        let a = default_array(&Literal::string("web"), &DataType::Utf8, 3).unwrap();
        assert_eq!(a.len(), 3);
        assert!((0..3).all(|i| a.as_string::<i32>().value(i) == "web"));
        let d = default_array(&Literal::date(20_000), &DataType::Date32, 2).unwrap();
        assert_eq!(d.as_primitive::<Date32Type>().value(1), 20_000);
        let ts = DataType::Timestamp(TimeUnit::Nanosecond, None);
        let t = default_array(&Literal::timestamp(7), &ts, 1).unwrap();
        assert_eq!(t.as_primitive::<TimestampNanosecondType>().value(0), 7);
        let dec = default_array(&Literal::decimal(1234), &DataType::Decimal128(9, 2), 1).unwrap();
        assert_eq!(dec.data_type(), &DataType::Decimal128(9, 2));
        assert!(default_array(&Literal::string("x"), &DataType::Int32, 1).is_err());
    }
}
