//! Row lineage (format v3): every row's `_row_id` and `_last_updated_sequence_number`.
//!
//! The spec assigns both by inheritance: a data file's `first_row_id` comes from its manifest
//! (see [`crate::table::Warehouse::manifest_entries`]), a row whose stored `_row_id` is null (or
//! absent) has `first_row_id + position`, and a row whose stored
//! `_last_updated_sequence_number` is null has its data file's data sequence number. A file
//! whose `first_row_id` is null (written before the table was upgraded to v3) has null row
//! ids.
//!
//! Guarantees:
//! - [`read_with_lineage`] reads a data file in the table's current schema with the two
//!   columns appended, computed as above; [`lineage_fields`] is their Arrow form (reserved field
//!   ids 2147483540 and 2147483539 in `PARQUET:field_id`).
//! - A copy-on-write rewrite writes both columns into the new file (see
//!   [`crate::writer::TableWriter::with_row_lineage`]), so a moved row keeps its row id; an
//!   unchanged row keeps its sequence number, a changed one gets null (the rewrite's sequence
//!   number is then inherited), as the spec's rules for moved rows say.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch};
use arrow::compute;
use arrow::datatypes::{DataType, Field, Int64Type, Schema as ArrowSchema, SchemaRef};
use iceberg::metadata_columns::{
    RESERVED_COL_NAME_LAST_UPDATED_SEQUENCE_NUMBER, RESERVED_COL_NAME_ROW_ID,
    RESERVED_FIELD_ID_LAST_UPDATED_SEQUENCE_NUMBER, RESERVED_FIELD_ID_ROW_ID,
};
use iceberg::spec::{FormatVersion, Schema, TableMetadata};

use crate::deletes::{column_by_id, data_sequence_number};
use crate::error::Result;
use crate::read::{project_batches, read_raw};
use crate::store::FileStore;
use crate::table::TrackedFile;

/// The `_row_id` column's name.
pub const ROW_ID: &str = RESERVED_COL_NAME_ROW_ID;
/// The `_last_updated_sequence_number` column's name.
pub const LAST_UPDATED_SEQUENCE_NUMBER: &str = RESERVED_COL_NAME_LAST_UPDATED_SEQUENCE_NUMBER;

/// Whether a table tracks row lineage (format v3).
pub fn has_row_lineage(metadata: &TableMetadata) -> bool {
    metadata.format_version() == FormatVersion::V3
}

fn with_id(name: &str, id: i32) -> Field {
    Field::new(name, DataType::Int64, true).with_metadata(
        [("PARQUET:field_id".to_string(), id.to_string())]
            .into_iter()
            .collect(),
    )
}

/// The two lineage columns as Arrow fields (nullable longs with their reserved field ids).
pub fn lineage_fields() -> [Field; 2] {
    [
        with_id(ROW_ID, RESERVED_FIELD_ID_ROW_ID),
        with_id(
            LAST_UPDATED_SEQUENCE_NUMBER,
            RESERVED_FIELD_ID_LAST_UPDATED_SEQUENCE_NUMBER,
        ),
    ]
}

/// `schema` with the lineage columns appended.
pub fn with_lineage_fields(schema: &ArrowSchema) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(lineage_fields());
    Arc::new(ArrowSchema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    ))
}

/// Reads data file `f` in `schema` (the table's current schema) with `_row_id` and
/// `_last_updated_sequence_number` appended, by the spec's inheritance rules.
pub fn read_with_lineage(
    store: &dyn FileStore,
    f: &TrackedFile,
    schema: &Schema,
) -> Result<Vec<RecordBatch>> {
    let df = &f.entry.data_file;
    let location = df.file_path();
    let (file_schema, raw) = read_raw(store, location)?;
    let projected = project_batches(&file_schema, &raw, schema, location, false)?;
    let stored_ids = column_by_id(&file_schema, RESERVED_FIELD_ID_ROW_ID);
    let stored_seqs = column_by_id(&file_schema, RESERVED_FIELD_ID_LAST_UPDATED_SEQUENCE_NUMBER);
    let first = df.first_row_id();
    let seq = data_sequence_number(f);
    let mut offset = 0i64;
    let mut out = Vec::with_capacity(projected.len());
    for (b, r) in projected.iter().zip(&raw) {
        let n = b.num_rows();
        let stored = |i: Option<usize>| -> Result<Option<ArrayRef>> {
            i.map(|i| compute::cast(r.column(i), &DataType::Int64))
                .transpose()
                .map_err(Into::into)
        };
        let ids_in = stored(stored_ids)?;
        let seqs_in = stored(stored_seqs)?;
        let ids: Int64Array = (0..n)
            .map(|i| match &ids_in {
                Some(a) if a.is_valid(i) => Some(a.as_primitive::<Int64Type>().value(i)),
                _ => first.map(|f| f + offset + i as i64),
            })
            .collect();
        let seqs: Int64Array = (0..n)
            .map(|i| match &seqs_in {
                Some(a) if a.is_valid(i) => Some(a.as_primitive::<Int64Type>().value(i)),
                _ => Some(seq),
            })
            .collect();
        let mut columns = b.columns().to_vec();
        columns.push(Arc::new(ids));
        columns.push(Arc::new(seqs));
        out.push(RecordBatch::try_new(
            with_lineage_fields(b.schema().as_ref()),
            columns,
        )?);
        offset += n as i64;
    }
    Ok(out)
}
