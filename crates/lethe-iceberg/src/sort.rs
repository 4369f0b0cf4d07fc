//! Rows in a table's declared sort order.
//!
//! A table's default sort order (`sort-orders` / `default-sort-order-id` in its metadata) says
//! how writers should order rows within each data file; engines honour it when they write
//! (Spark sorts a write by it, and Iceberg Java records the order's id in each data file's
//! `sort_order_id`). lethe's writer does the same ([`crate::writer::write_batches`], and the
//! copy-on-write rewrite keeps each rewritten file sorted, [`crate::ops::rewrite`]): rows are
//! sorted by the order's fields (each field's transform applied, its direction and null order
//! honoured; ties keep the input order), and files written that way record the order's id.
//! A table sorted by a subject's identifier then keeps each subject's rows in few files with
//! narrow column bounds, so a row change reads and rewrites only those.
//!
//! Not applied (the rows are written in input order and the files record no sort order, which
//! the spec reads as unsorted): an unsorted table, and an order with a field whose source is
//! not a top-level column.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::{self, SortColumn, SortOptions};
use iceberg::spec::{NullOrder, SortDirection, TableMetadata, Transform};
use iceberg::transform::{BoxedTransformFunction, create_transform_function};

use crate::error::{Error, Result};

/// One field of a sort order, resolved against the current schema.
struct Key {
    /// Position of the source column among the table's top-level columns.
    pos: usize,
    /// The field's transform; `None` for identity.
    transform: Option<BoxedTransformFunction>,
    options: SortOptions,
}

/// A table's default sort order, ready to sort batches in the table's Arrow schema.
pub struct TableSort {
    order_id: i32,
    keys: Vec<Key>,
}

impl std::fmt::Debug for TableSort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableSort")
            .field("order_id", &self.order_id)
            .field("fields", &self.keys.len())
            .finish()
    }
}

impl TableSort {
    /// The default sort order of the table `metadata` describes; `None` when the table is
    /// unsorted or the order names a column that is not top-level (then nothing is sorted).
    pub fn of(metadata: &TableMetadata) -> Result<Option<Self>> {
        let order = metadata.default_sort_order();
        if order.is_unsorted() {
            return Ok(None);
        }
        let fields = metadata.current_schema().as_struct().fields();
        let mut keys = Vec::new();
        for f in &order.fields {
            let Some(pos) = fields.iter().position(|c| c.id == f.source_id) else {
                return Ok(None);
            };
            let transform = match f.transform {
                Transform::Identity => None,
                Transform::Void => continue,
                t => Some(create_transform_function(&t)?),
            };
            keys.push(Key {
                pos,
                transform,
                options: SortOptions {
                    descending: f.direction == SortDirection::Descending,
                    nulls_first: f.null_order == NullOrder::First,
                },
            });
        }
        if keys.is_empty() {
            return Ok(None);
        }
        let order_id = i32::try_from(order.order_id).map_err(|_| {
            Error::invalid(format!("sort order id {} is too large", order.order_id))
        })?;
        Ok(Some(TableSort { order_id, keys }))
    }

    /// The order's id, recorded in each data file written in this order.
    pub fn order_id(&self) -> i32 {
        self.order_id
    }

    /// `batches` (all with the same schema, the table's columns first) as batches of at most
    /// `chunk` rows in the order; rows with equal keys keep their input order.
    pub fn sort(&self, batches: &[RecordBatch], chunk: usize) -> Result<Vec<RecordBatch>> {
        let batches: Vec<&RecordBatch> = batches.iter().filter(|b| b.num_rows() > 0).collect();
        let total: usize = batches.iter().map(|b| b.num_rows()).sum();
        if total == 0 {
            return Ok(Vec::new());
        }
        if u32::try_from(total).is_err() {
            return Err(Error::invalid(format!(
                "{total} rows are too many to sort in one write"
            )));
        }
        let mut columns = Vec::with_capacity(self.keys.len() + 1);
        for k in &self.keys {
            let parts = batches
                .iter()
                .map(|b| {
                    let c = b.column(k.pos).clone();
                    match &k.transform {
                        None => Ok(c),
                        Some(t) => Ok(t.transform(c)?),
                    }
                })
                .collect::<Result<Vec<ArrayRef>>>()?;
            let refs: Vec<&dyn arrow::array::Array> = parts.iter().map(|a| a.as_ref()).collect();
            columns.push(SortColumn {
                values: compute::concat(&refs)?,
                options: Some(k.options),
            });
        }
        // The input position last: equal keys keep their order, so the result is deterministic.
        columns.push(SortColumn {
            values: Arc::new(UInt32Array::from_iter_values(0..total as u32)),
            options: None,
        });
        let order = compute::lexsort_to_indices(&columns, None)?;
        let mut starts = Vec::with_capacity(batches.len());
        let mut at = 0usize;
        for b in &batches {
            starts.push(at);
            at += b.num_rows();
        }
        let locate = |i: u32| {
            let i = i as usize;
            let b = starts.partition_point(|s| *s <= i) - 1;
            (b, i - starts[b])
        };
        let mut out = Vec::with_capacity(total.div_ceil(chunk.max(1)));
        for part in order.values().chunks(chunk.max(1)) {
            let idx: Vec<(usize, usize)> = part.iter().map(|i| locate(*i)).collect();
            out.push(arrow::compute::interleave_record_batch(&batches, &idx)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray, Int64Array, StringArray};
    use arrow::datatypes::Int64Type;
    use iceberg::spec::{NestedField, PrimitiveType, Schema, SortField, SortOrder, Type};

    fn metadata(order: SortOrder) -> TableMetadata {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
            ])
            .build()
            .unwrap();
        crate::test_metadata(schema, order, "file:///t".into())
    }

    fn batch(ids: Vec<Option<i64>>, names: Vec<&str>) -> RecordBatch {
        RecordBatch::try_from_iter(vec![
            ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
            ("name", Arc::new(StringArray::from(names)) as ArrayRef),
        ])
        .unwrap()
    }

    #[test]
    fn sorts_across_batches_by_direction_and_null_order_keeping_ties_in_input_order() {
        let order = SortOrder::builder()
            .with_order_id(1)
            .with_sort_field(SortField {
                source_id: 1,
                transform: Transform::Identity,
                direction: SortDirection::Descending,
                null_order: NullOrder::First,
            })
            .build_unbound()
            .unwrap();
        let m = metadata(order);
        let s = TableSort::of(&m).unwrap().expect("sorted table");
        assert_eq!(s.order_id(), 1);
        let out = s
            .sort(
                &[
                    batch(vec![Some(2), None, Some(5)], vec!["a", "b", "c"]),
                    batch(vec![Some(5), Some(1)], vec!["d", "e"]),
                ],
                2,
            )
            .unwrap();
        assert_eq!(
            out.iter().map(|b| b.num_rows()).collect::<Vec<_>>(),
            [2, 2, 1]
        );
        let names: Vec<String> = out
            .iter()
            .flat_map(|b| {
                let n = b.column(1).as_string::<i32>();
                (0..n.len())
                    .map(|i| n.value(i).to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(
            names,
            ["b", "c", "d", "a", "e"],
            "nulls first, then 5 5 2 1"
        );
        let first = out[0].column(0).as_primitive::<Int64Type>();
        assert!(first.is_null(0));
    }

    #[test]
    fn an_unsorted_table_is_not_sorted() {
        let m = metadata(SortOrder::unsorted_order());
        assert!(TableSort::of(&m).unwrap().is_none());
    }
}
