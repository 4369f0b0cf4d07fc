//! Reading ORC data files: what Spark, Hive or Trino write for an Iceberg table with
//! `write.format.default=orc`. Read with `orc-rust` into Arrow, with each field's Iceberg
//! field id taken from its ORC type's `iceberg.id` attribute (as Iceberg Java's ORC writer
//! stores it, and its reader matches columns) and put where [`crate::read`] looks for it
//! (`PARQUET:field_id`), so renamed, added and dropped columns are read as for Parquet.
//! Timestamps are read at microsecond precision (Iceberg's).
//!
//! lethe writes no ORC: a copy-on-write change rewrites an ORC data file as a Parquet data file
//! (see [`crate::writer`]). Iceberg records the format per data file, so a table may hold both
//! and every reader (Spark, PyIceberg, Trino) reads each file in its own format; ORC written
//! without the `iceberg.id` attributes would be read by Iceberg Java by name mapping only, and
//! orc-rust's writer writes none.
//!
//! Does not: project columns before decoding (the whole file is read), or guard orc-rust
//! against a crafted footer (a data file of the table is trusted as the proof scan's inputs
//! are not; see lethe-scan's ORC check).

use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;

use arrow::array::{ArrayData, RecordBatch, RecordBatchReader, make_array};
use arrow::datatypes::{DataType, Field, Fields, Schema as ArrowSchema, SchemaRef};
use arrow::error::ArrowError;
use bytes::Bytes;
use orc_rust::proto::{Footer, PostScript, Type};
use orc_rust::{ArrowReaderBuilder, TimestampPrecision};
use parquet::file::reader::{ChunkReader, Length};
use prost::Message;

use crate::error::{Error, Result};
use crate::store::FileStore;

/// The attribute Iceberg Java's ORC writer stores a field id in.
const ICEBERG_ID: &str = "iceberg.id";
/// Where [`crate::read`] looks for a field id.
const FIELD_ID_KEY: &str = "PARQUET:field_id";

/// True when the file at `location` starts with ORC's magic.
pub(crate) fn is_orc_file(store: &dyn FileStore, location: &str) -> Result<bool> {
    let reader = store.open(location)?;
    let head = reader.get_bytes(0, reader.len().min(3) as usize)?;
    Ok(head.starts_with(b"ORC"))
}

/// Reads the ORC file at `location` (whole, into memory): its Arrow schema (field ids in the
/// fields' metadata) and its batches in file order.
pub(crate) fn read_file(
    store: &dyn FileStore,
    location: &str,
    batch_rows: usize,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let reader = store.open(location)?;
    let bytes = reader.get_bytes(0, usize::try_from(reader.len()).unwrap_or(usize::MAX))?;
    let bad =
        |e: &dyn std::fmt::Display| Error::invalid(format!("{location} can't be read as ORC: {e}"));
    let outcome = std::panic::catch_unwind(|| -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let builder = ArrowReaderBuilder::try_new(bytes.clone())
            .map_err(|e| bad(&e))?
            .with_timestamp_precision(TimestampPrecision::Microsecond)
            .with_batch_size(batch_rows);
        let types =
            footer_types(&bytes, builder.file_metadata().compression()).map_err(|e| bad(&e))?;
        let reader = builder.build();
        let schema = with_field_ids(&reader.schema(), &types);
        let mut out = Vec::new();
        for batch in reader {
            let batch = batch.map_err(|e| bad(&e))?;
            let columns = batch
                .columns()
                .iter()
                .zip(schema.fields())
                .map(|(c, f)| retype(c.to_data(), f.data_type()).map(make_array))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| bad(&e))?;
            out.push(RecordBatch::try_new(Arc::clone(&schema), columns).map_err(|e| bad(&e))?);
        }
        Ok((schema, out))
    });
    outcome.unwrap_or_else(|_| Err(bad(&"the ORC reader failed (panicked)")))
}

/// `data` as type `ty`: the same values, nested fields as `ty` names them (the field ids'
/// metadata lives in a nested type's fields, so children are retyped too).
fn retype(data: ArrayData, ty: &DataType) -> std::result::Result<ArrayData, ArrowError> {
    let children: Vec<&DataType> = match ty {
        DataType::Struct(fields) => fields.iter().map(|f| f.data_type()).collect(),
        DataType::List(f) | DataType::LargeList(f) | DataType::Map(f, _) => vec![f.data_type()],
        _ => Vec::new(),
    };
    if children.is_empty() {
        return Ok(data);
    }
    let child_data = data
        .child_data()
        .iter()
        .zip(children)
        .map(|(c, t)| retype(c.clone(), t))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    data.into_builder()
        .data_type(ty.clone())
        .child_data(child_data)
        .build()
}

/// The footer's types (pre-order; the root struct first), with their attributes.
fn footer_types(
    bytes: &Bytes,
    compression: Option<orc_rust::compression::Compression>,
) -> std::result::Result<Vec<Type>, String> {
    let len = bytes.len();
    let ps_len = usize::from(*bytes.last().ok_or("empty file")?);
    let ps_at = len.checked_sub(1 + ps_len).ok_or("no postscript")?;
    let ps = PostScript::decode(&bytes[ps_at..len - 1]).map_err(|e| e.to_string())?;
    let footer_len = usize::try_from(ps.footer_length()).map_err(|e| e.to_string())?;
    let footer_at = ps_at
        .checked_sub(footer_len)
        .ok_or("footer outside the file")?;
    let raw = bytes.slice(footer_at..ps_at);
    let mut footer = Vec::new();
    orc_rust::compression::Decompressor::new(raw, compression, Vec::new())
        .read_to_end(&mut footer)
        .map_err(|e| e.to_string())?;
    Ok(Footer::decode(footer.as_slice())
        .map_err(|e| e.to_string())?
        .types)
}

/// `schema` (orc-rust's, for the root struct `types[0]`) with each field's `iceberg.id`.
fn with_field_ids(schema: &SchemaRef, types: &[Type]) -> SchemaRef {
    let children = types.first().map(|t| t.subtypes.as_slice()).unwrap_or(&[]);
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .zip(
            children
                .iter()
                .map(|&c| c as usize)
                .chain(std::iter::repeat(usize::MAX)),
        )
        .map(|(f, t)| field_with_id(f, types, t))
        .collect();
    Arc::new(ArrowSchema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    ))
}

/// `field` (of ORC type `types[t]`) and its children with their `iceberg.id`s.
fn field_with_id(field: &Field, types: &[Type], t: usize) -> Field {
    let Some(ty) = types.get(t) else {
        return field.clone();
    };
    let sub = |i: usize| ty.subtypes.get(i).map_or(usize::MAX, |&s| s as usize);
    let data_type = match field.data_type() {
        DataType::Struct(children) => DataType::Struct(Fields::from(
            children
                .iter()
                .enumerate()
                .map(|(i, c)| field_with_id(c, types, sub(i)))
                .collect::<Vec<_>>(),
        )),
        DataType::List(item) => DataType::List(Arc::new(field_with_id(item, types, sub(0)))),
        DataType::LargeList(item) => {
            DataType::LargeList(Arc::new(field_with_id(item, types, sub(0))))
        }
        DataType::Map(entries, sorted) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                let kv: Vec<Field> = vec![
                    field_with_id(&kv[0], types, sub(0)),
                    field_with_id(&kv[1], types, sub(1)),
                ];
                let entries = entries
                    .as_ref()
                    .clone()
                    .with_data_type(DataType::Struct(kv.into()));
                DataType::Map(Arc::new(entries), *sorted)
            }
            _ => field.data_type().clone(),
        },
        other => other.clone(),
    };
    let mut metadata: HashMap<String, String> = field.metadata().clone();
    if let Some(id) = ty
        .attributes
        .iter()
        .find(|a| a.key.as_deref() == Some(ICEBERG_ID))
        .and_then(|a| a.value.as_deref())
        .and_then(|v| v.parse::<i32>().ok())
    {
        metadata.insert(FIELD_ID_KEY.to_string(), id.to_string());
    }
    field
        .clone()
        .with_data_type(data_type)
        .with_metadata(metadata)
}
