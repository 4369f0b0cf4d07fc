//! Finding the rows of one Parquet data file that a predicate selects, reading as little as
//! the file's own statistics allow (an ORC data file is read whole by the caller).
//!
//! Manifest bounds (and, in partitioned tables, partition values) prune whole files before
//! this runs ([`file_may_match`], or the iceberg crate's scan planning for partitioned
//! tables, in [`crate::ops::rewrite`]). Inside a file that may hold matches,
//! [`matching_rows`] prunes, in order:
//! 1. **row groups by their column-chunk statistics** (min, max, null count);
//! 2. **row groups by bloom filters**, where the file has them, for `=` and `IN`;
//! 3. **pages by the page index** (column index min/max/null pages, offset index row
//!    ranges), when the predicate names one column;
//!
//! and then decodes **only the predicate's columns** of the rows left, evaluates the predicate
//! on them exactly as a full read would ([`Predicate::evaluate`], in the table's current
//! schema: field ids, renames and type promotion as [`crate::read`] does) and returns the
//! positions of the stored rows it selects. Delete files are not applied here: a row hidden
//! by one still counts as stored, which is what a copy-on-write change needs (such a row is
//! purged too) and what a reader applying deletes afterwards filters.
//!
//! Pruning is conservative by construction: a unit (row group, page) is skipped only when its
//! statistics prove no row in it can satisfy the predicate. Only `=`/`IN`/`IS NULL`/`IS NOT
//! NULL` on top-level integer (`int`, `long`) and `string` columns, and `AND`/`OR` of them,
//! prune; anything else reads every unit. A NULL never equals a value, so a unit whose rows
//! are all NULL holds no match for `IN`. String statistics may be truncated (Parquet writers
//! truncate long min/max values; the maximum is then either a prefix of the true maximum or
//! a prefix incremented in its last byte): a value is ruled out by a maximum `m` only when
//! the value's first `len(m)` bytes already compare greater than `m`, which holds for both
//! forms, as Iceberg's spec asks of truncated upper bounds. A truncated minimum is a prefix of
//! the true minimum, so it is a lower bound as it stands. Byte-array statistics are used only
//! when the file declares the type-defined (unsigned byte) order; older files without it are
//! read whole. A predicate column the file lacks (added to the table later, read as null or
//! its `initial-default`) or a nested path makes [`matching_rows`] return `None`: the caller
//! reads the file the ordinary way.

use std::collections::BTreeSet;

use arrow::array::{Array, RecordBatch, RecordBatchReader};
use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::basic::{ColumnOrder, SortOrder, Type as PhysicalType};
use parquet::bloom_filter::Sbbf;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData};
use parquet::file::page_index::column_index::ColumnIndexMetaData;

use crate::error::{Error, Result};
use crate::predicate::{CmpOp, Predicate, Value};
use crate::read::{batch_rows, project_batches};
use crate::store::{FileStore, StoredReader};

/// A bound from a file's statistics, in the column's Iceberg type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Bound {
    /// An `int` or `long` value.
    Int(i64),
    /// A `string` value's UTF-8 bytes (possibly truncated).
    Bytes(Vec<u8>),
}

/// What the statistics of one unit (row group or page) say about one column.
#[derive(Debug, Clone, Default)]
pub(crate) struct UnitStats {
    /// Rows in the unit.
    pub rows: u64,
    /// A lower bound of the non-null values.
    pub min: Option<Bound>,
    /// An upper bound of the non-null values (for strings possibly truncated: see the module
    /// docs).
    pub max: Option<Bound>,
    /// NULLs in the unit, when known.
    pub nulls: Option<u64>,
    /// Whether the unit holds only NULLs (a page index's null page), when known.
    pub all_null: bool,
    /// The unit's bloom filter, when the file has one.
    pub bloom: Option<Sbbf>,
    /// The column's physical type (for the bloom filter's hashing).
    pub physical: Option<PhysicalType>,
}

impl UnitStats {
    fn only_nulls(&self) -> bool {
        self.all_null || (self.rows > 0 && self.nulls == Some(self.rows))
    }

    /// Whether a non-null `value` may be stored in the unit.
    pub(crate) fn may_contain(&self, value: &Value) -> bool {
        if self.only_nulls() {
            return false;
        }
        let in_bounds = match value {
            Value::Int(x) => {
                let below = matches!(&self.min, Some(Bound::Int(m)) if x < m);
                let above = matches!(&self.max, Some(Bound::Int(m)) if x > m);
                !(below || above)
            }
            Value::Str(s) => {
                let b = s.as_bytes();
                let below = matches!(&self.min, Some(Bound::Bytes(m)) if b < m.as_slice());
                // A maximum may be truncated: compare the value's prefix of its length.
                let above = matches!(&self.max, Some(Bound::Bytes(m)) if &b[..b.len().min(m.len())] > m.as_slice());
                !(below || above)
            }
            _ => true,
        };
        if !in_bounds {
            return false;
        }
        match (&self.bloom, self.physical, value) {
            (Some(f), Some(PhysicalType::INT64), Value::Int(x)) => f.check(x),
            (Some(f), Some(PhysicalType::INT32), Value::Int(x)) => match i32::try_from(*x) {
                Ok(v) => f.check(&v),
                // Not representable in the column: not stored.
                Err(_) => false,
            },
            (Some(f), Some(PhysicalType::BYTE_ARRAY), Value::Str(s)) => f.check(s.as_str()),
            _ => true,
        }
    }
}

/// Whether rows of a unit may satisfy `p`, given each column's statistics (`None`: nothing
/// known about the column, anything may match).
pub(crate) fn may_match(p: &Predicate, stats: &dyn Fn(&str) -> Option<UnitStats>) -> bool {
    match p {
        Predicate::True => true,
        Predicate::In { column, values } => {
            if values.is_empty() {
                return false;
            }
            match stats(column) {
                Some(s) => values.iter().any(|v| s.may_contain(v)),
                None => true,
            }
        }
        Predicate::Cmp {
            column,
            op: CmpOp::Eq,
            value,
        } => stats(column).is_none_or(|s| s.may_contain(value)),
        Predicate::IsNull(c) => stats(c).is_none_or(|s| s.all_null || s.nulls != Some(0)),
        Predicate::NotNull(c) => stats(c).is_none_or(|s| !s.only_nulls()),
        Predicate::And(ps) => ps.iter().all(|q| may_match(q, stats)),
        Predicate::Or(ps) => ps.iter().any(|q| may_match(q, stats)),
        // Conservative: other comparisons, affixes and NOT read every unit.
        _ => true,
    }
}

/// Whether the data file `df` may hold rows `p` selects, by the column bounds and null counts
/// its manifest entry keeps (top-level `int`, `long` and `string` columns of `schema`, the
/// rules of [`may_match`]; truncated string bounds as the module docs say). This is the
/// inclusive metrics check of Iceberg's scan planning for the predicates lethe prunes with;
/// partition values are not looked at (the caller plans partitioned tables with the iceberg
/// crate's scan). A file without bounds for a column may match.
pub(crate) fn file_may_match(p: &Predicate, schema: &Schema, df: &iceberg::spec::DataFile) -> bool {
    use iceberg::spec::PrimitiveLiteral;
    let bound = |d: &iceberg::spec::Datum| match d.literal() {
        PrimitiveLiteral::Int(i) => Some(Bound::Int(i64::from(*i))),
        PrimitiveLiteral::Long(l) => Some(Bound::Int(*l)),
        PrimitiveLiteral::String(s) => Some(Bound::Bytes(s.as_bytes().to_vec())),
        _ => None,
    };
    let stats = |column: &str| -> Option<UnitStats> {
        let field = schema.as_struct().field_by_name(column)?;
        let Type::Primitive(t) = field.field_type.as_ref() else {
            return None;
        };
        if !prunable(t) {
            return None;
        }
        Some(UnitStats {
            rows: df.record_count(),
            min: df.lower_bounds().get(&field.id).and_then(bound),
            max: df.upper_bounds().get(&field.id).and_then(bound),
            nulls: df.null_value_counts().get(&field.id).copied(),
            ..Default::default()
        })
    };
    may_match(p, &stats)
}

/// Whether statistics can prune on a column of this Iceberg type.
fn prunable(t: &PrimitiveType) -> bool {
    matches!(
        t,
        PrimitiveType::Int | PrimitiveType::Long | PrimitiveType::String
    )
}

/// A predicate column found in the file.
struct Leaf {
    name: String,
    field: NestedField,
    /// The Parquet leaf column index.
    index: usize,
    physical: PhysicalType,
    /// Whether its statistics and bloom filters may be used (an `int`, `long` or `string`
    /// column in the order its statistics are kept by).
    stats_ok: bool,
}

/// The rows of a data file a predicate selects (stored rows: delete files not applied).
#[derive(Debug, Clone, Default)]
pub struct FileMatches {
    /// Positions (0-based, in file order) of the stored rows the predicate selects.
    pub positions: Vec<u64>,
    /// Row groups in the file.
    pub row_groups: usize,
    /// Row groups skipped by statistics or bloom filters.
    pub row_groups_pruned: usize,
    /// Rows skipped by the page index inside the row groups read.
    pub rows_pruned_by_pages: u64,
}

fn find_leaves(meta: &ParquetMetaData, schema: &Schema, columns: &[&str]) -> Option<Vec<Leaf>> {
    let descr = meta.file_metadata().schema_descr();
    let any_ids =
        (0..descr.num_columns()).any(|i| descr.column(i).self_type().get_basic_info().has_id());
    let mut out = Vec::new();
    for c in columns {
        // Top-level columns only.
        let field = schema
            .as_struct()
            .fields()
            .iter()
            .find(|f| f.name == *c)?
            .as_ref()
            .clone();
        let Type::Primitive(_) = field.field_type.as_ref() else {
            return None;
        };
        let index = (0..descr.num_columns()).find(|&i| {
            let col = descr.column(i);
            if col.path().parts().len() != 1 {
                return false;
            }
            let info = col.self_type().get_basic_info();
            if any_ids {
                info.has_id() && info.id() == field.id
            } else {
                col.name() == field.name
            }
        })?;
        let col = descr.column(index);
        let physical = col.physical_type();
        let order = meta.file_metadata().column_order(index);
        let stats_ok = match field.field_type.as_ref() {
            Type::Primitive(t) if prunable(t) => match (t, physical) {
                (
                    PrimitiveType::Int | PrimitiveType::Long,
                    PhysicalType::INT32 | PhysicalType::INT64,
                ) => {
                    matches!(
                        order,
                        ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::SIGNED) | ColumnOrder::UNDEFINED
                    ) && matches!(col.sort_order(), SortOrder::SIGNED)
                }
                (PrimitiveType::String, PhysicalType::BYTE_ARRAY) => {
                    order == ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::UNSIGNED)
                }
                _ => false,
            },
            _ => false,
        };
        out.push(Leaf {
            name: c.to_string(),
            field,
            index,
            physical,
            stats_ok,
        });
    }
    Some(out)
}

fn bound_from_bytes(physical: PhysicalType, b: &[u8]) -> Option<Bound> {
    match physical {
        PhysicalType::INT32 => Some(Bound::Int(i32::from_le_bytes(b.try_into().ok()?) as i64)),
        PhysicalType::INT64 => Some(Bound::Int(i64::from_le_bytes(b.try_into().ok()?))),
        PhysicalType::BYTE_ARRAY => Some(Bound::Bytes(b.to_vec())),
        _ => None,
    }
}

fn row_group_stats(meta: &ParquetMetaData, rg: usize, leaf: &Leaf) -> UnitStats {
    let g = meta.row_group(rg);
    let chunk = g.column(leaf.index);
    let mut s = UnitStats {
        rows: g.num_rows().max(0) as u64,
        physical: Some(leaf.physical),
        ..Default::default()
    };
    if let Some(st) = chunk.statistics() {
        s.nulls = st.null_count_opt();
        if leaf.stats_ok {
            s.min = st
                .min_bytes_opt()
                .and_then(|b| bound_from_bytes(leaf.physical, b));
            s.max = st
                .max_bytes_opt()
                .and_then(|b| bound_from_bytes(leaf.physical, b));
        }
    }
    s
}

/// Per page of `leaf` in row group `rg`: its statistics and its row range in the group.
fn page_stats(
    meta: &ParquetMetaData,
    rg: usize,
    leaf: &Leaf,
) -> Option<Vec<(UnitStats, u64, u64)>> {
    let ci = meta.column_index()?.get(rg)?.get(leaf.index)?;
    let oi = meta.offset_index()?.get(rg)?.get(leaf.index)?;
    let locs = oi.page_locations();
    let rows = meta.row_group(rg).num_rows().max(0) as u64;
    let n = locs.len();
    if n == 0 || ci.num_pages() as usize != n {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for (i, l) in locs.iter().enumerate() {
        let start = l.first_row_index.max(0) as u64;
        let end = locs
            .get(i + 1)
            .map_or(rows, |x| x.first_row_index.max(0) as u64);
        let mut s = UnitStats {
            rows: end.saturating_sub(start),
            nulls: ci.null_count(i).map(|v| v.max(0) as u64),
            all_null: ci.is_null_page(i),
            physical: Some(leaf.physical),
            ..Default::default()
        };
        if leaf.stats_ok && !s.all_null {
            match ci {
                ColumnIndexMetaData::INT32(x) => {
                    s.min = x.min_value(i).map(|v| Bound::Int(*v as i64));
                    s.max = x.max_value(i).map(|v| Bound::Int(*v as i64));
                }
                ColumnIndexMetaData::INT64(x) => {
                    s.min = x.min_value(i).map(|v| Bound::Int(*v));
                    s.max = x.max_value(i).map(|v| Bound::Int(*v));
                }
                ColumnIndexMetaData::BYTE_ARRAY(x) => {
                    s.min = x.min_value(i).map(|v| Bound::Bytes(v.to_vec()));
                    s.max = x.max_value(i).map(|v| Bound::Bytes(v.to_vec()));
                }
                _ => {}
            }
        }
        out.push((s, start, end));
    }
    Some(out)
}

/// Rows `[start, end)` of a row group kept by page pruning, as a selection of the group.
fn selectors(kept: &[(u64, u64)], rows: u64) -> Vec<RowSelector> {
    let mut out = Vec::new();
    let mut at = 0u64;
    for &(s, e) in kept {
        if s > at {
            out.push(RowSelector::skip((s - at) as usize));
        }
        if e > s {
            out.push(RowSelector::select((e - s) as usize));
        }
        at = e;
    }
    if rows > at {
        out.push(RowSelector::skip((rows - at) as usize));
    }
    out
}

/// Opens a data file's metadata with its page index (when it has one).
fn open(store: &dyn FileStore, location: &str) -> Result<(StoredReader, ArrowReaderMetadata)> {
    let reader = store.open(location)?;
    let meta = ArrowReaderMetadata::load(
        &reader,
        ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional),
    )
    .map_err(|e| Error::invalid(format!("{location} can't be read as Parquet: {e}")))?;
    Ok((reader, meta))
}

/// The stored rows of the data file at `location` that `predicate` selects, pruned by the
/// file's statistics (see the module docs), reading only the predicate's columns. `None`
/// when the predicate can't be evaluated from this file's columns alone (a column the file
/// lacks, a nested path, no column at all): read the file whole instead.
pub fn matching_rows(
    store: &dyn FileStore,
    location: &str,
    schema: &Schema,
    predicate: &Predicate,
) -> Result<Option<FileMatches>> {
    let columns = predicate.columns();
    if columns.is_empty() {
        return Ok(None);
    }
    let (reader, meta) = match open(store, location) {
        Ok(opened) => opened,
        // An ORC data file has no Parquet statistics to prune by: read whole.
        Err(_) if crate::orc::is_orc_file(store, location)? => return Ok(None),
        Err(e) => return Err(e),
    };
    let md = meta.metadata().clone();
    let Some(leaves) = find_leaves(&md, schema, &columns) else {
        return Ok(None);
    };
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(reader, meta);
    let n_groups = md.num_row_groups();
    let mut out = FileMatches {
        row_groups: n_groups,
        ..Default::default()
    };
    // Row groups: statistics, then bloom filters.
    let mut groups: Vec<usize> = Vec::new();
    for rg in 0..n_groups {
        let stats: Vec<UnitStats> = leaves.iter().map(|l| row_group_stats(&md, rg, l)).collect();
        let lookup = |c: &str| {
            leaves
                .iter()
                .position(|l| l.name == c)
                .map(|i| stats[i].clone())
        };
        if !may_match(predicate, &lookup) {
            out.row_groups_pruned += 1;
            continue;
        }
        let mut with_bloom = stats.clone();
        let mut any_bloom = false;
        // Only where values hash as the predicate's (int, long and string columns).
        for (i, l) in leaves.iter().enumerate().filter(|(_, l)| l.stats_ok) {
            if let Some(f) = builder
                .get_row_group_column_bloom_filter(rg, l.index)
                .map_err(|e| Error::invalid(format!("{location}: bloom filter: {e}")))?
            {
                with_bloom[i].bloom = Some(f);
                any_bloom = true;
            }
        }
        if any_bloom {
            let lookup = |c: &str| {
                leaves
                    .iter()
                    .position(|l| l.name == c)
                    .map(|i| with_bloom[i].clone())
            };
            if !may_match(predicate, &lookup) {
                out.row_groups_pruned += 1;
                continue;
            }
        }
        groups.push(rg);
    }
    if groups.is_empty() {
        return Ok(Some(out));
    }
    // Pages (one-column predicates): the row ranges of each group left to read.
    let mut first_row = vec![0u64; n_groups + 1];
    for rg in 0..n_groups {
        first_row[rg + 1] = first_row[rg] + md.row_group(rg).num_rows().max(0) as u64;
    }
    let mut ranges: Vec<(u64, u64)> = Vec::new(); // absolute, in read order
    let mut sel: Vec<RowSelector> = Vec::new();
    for &rg in &groups {
        let rows = first_row[rg + 1] - first_row[rg];
        let pages = match leaves.as_slice() {
            [l] => page_stats(&md, rg, l),
            _ => None,
        };
        let kept: Vec<(u64, u64)> = match pages {
            Some(pages) => {
                let mut kept: Vec<(u64, u64)> = Vec::new();
                for (s, start, end) in pages {
                    let lookup = |_: &str| Some(s.clone());
                    if may_match(predicate, &lookup) {
                        match kept.last_mut() {
                            Some(last) if last.1 == start => last.1 = end,
                            _ => kept.push((start, end)),
                        }
                    } else {
                        out.rows_pruned_by_pages += end - start;
                    }
                }
                kept
            }
            None => vec![(0, rows)],
        };
        sel.extend(selectors(&kept, rows));
        ranges.extend(
            kept.iter()
                .map(|(s, e)| (first_row[rg] + s, first_row[rg] + e)),
        );
    }
    if ranges.is_empty() {
        return Ok(Some(out));
    }
    let descr = md.file_metadata().schema_descr();
    let mask = ProjectionMask::leaves(descr, leaves.iter().map(|l| l.index));
    let sub = Schema::builder()
        .with_fields(leaves.iter().map(|l| {
            let mut f = l.field.clone();
            f.required = false;
            std::sync::Arc::new(f)
        }))
        .build()?;
    let selected: u64 = ranges.iter().map(|(s, e)| e - s).sum();
    let reader = builder
        .with_projection(mask)
        .with_row_groups(groups)
        .with_row_selection(RowSelection::from(sel))
        .with_batch_size(batch_rows(selected))
        .build()?;
    let file_schema = reader.schema();
    // Walk the absolute ranges alongside the rows read.
    let mut range = 0usize;
    let mut offset = 0u64;
    for batch in reader {
        let batch = batch?;
        let projected = project_batches(&file_schema, &[batch], &sub, location, true)?;
        let b: &RecordBatch = &projected[0];
        let mask = predicate.evaluate(b)?;
        let mut i = 0usize;
        let n = b.num_rows();
        let mut set: BTreeSet<usize> = BTreeSet::new();
        if mask.true_count() > 0 {
            set.extend((0..n).filter(|&k| mask.is_valid(k) && mask.value(k)));
        }
        while i < n {
            let (s, e) = ranges[range];
            let take = ((e - s - offset) as usize).min(n - i);
            for k in set.range(i..i + take) {
                out.positions.push(s + offset + (k - i) as u64);
            }
            i += take;
            offset += take as u64;
            if s + offset == e {
                range += 1;
                offset = 0;
            }
        }
    }
    Ok(Some(out))
}

/// Reads only the rows at `positions` (sorted, as [`matching_rows`] returns them) of the data
/// file at `location`, in the table's current `schema`: pages holding none of them are
/// skipped when the file has a page index.
pub fn read_positions(
    store: &dyn FileStore,
    location: &str,
    schema: &Schema,
    positions: &[u64],
) -> Result<Vec<RecordBatch>> {
    if positions.is_empty() {
        return Ok(Vec::new());
    }
    let (reader, meta) = open(store, location)?;
    let md = meta.metadata().clone();
    let mut groups = Vec::new();
    let mut sel: Vec<RowSelector> = Vec::new();
    let mut start = 0u64;
    let mut p = 0usize;
    for rg in 0..md.num_row_groups() {
        let rows = md.row_group(rg).num_rows().max(0) as u64;
        let end = start + rows;
        let mut kept: Vec<(u64, u64)> = Vec::new();
        while p < positions.len() && positions[p] < end {
            let r = positions[p] - start;
            match kept.last_mut() {
                Some(last) if last.1 == r => last.1 = r + 1,
                _ => kept.push((r, r + 1)),
            }
            p += 1;
        }
        if !kept.is_empty() {
            groups.push(rg);
            sel.extend(selectors(&kept, rows));
        }
        start = end;
    }
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(reader, meta);
    let file_schema = builder.schema().clone();
    let reader = builder
        .with_row_groups(groups)
        .with_row_selection(RowSelection::from(sel))
        .with_batch_size(batch_rows(positions.len() as u64))
        .build()?;
    let mut batches = Vec::new();
    for b in reader {
        batches.push(b?);
    }
    project_batches(&file_schema, &batches, schema, location, false)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int32Array, Int64Array, StringArray};
    use iceberg::spec::NestedField;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::{EnabledStatistics, WriterProperties};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::read::read_data_file;
    use crate::store::LocalStore;

    fn schema() -> Schema {
        Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(3, "n", Type::Primitive(PrimitiveType::Int)).into(),
            ])
            .build()
            .unwrap()
    }

    type Row = (i64, Option<String>, Option<i32>);

    /// Writes rows into a Parquet file as lethe's writer lays it out (field ids), with the
    /// given row-group and page sizes, bloom filters and statistics truncation.
    fn write(
        store: &LocalStore,
        dir: &std::path::Path,
        rows: &[Row],
        props: WriterProperties,
    ) -> String {
        let arrow = crate::writer::arrow_schema(&schema()).unwrap();
        let batch = RecordBatch::try_new(
            arrow.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(StringArray::from_iter(rows.iter().map(|r| r.1.clone()))),
                Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.2))),
            ],
        )
        .unwrap();
        let path = dir.join(format!("{}.parquet", uuid::Uuid::new_v4()));
        let file = std::fs::File::create(&path).unwrap();
        let mut w = ArrowWriter::try_new(file, arrow, Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        store.location_of(&path)
    }

    fn props(group: usize, page: usize) -> parquet::file::properties::WriterPropertiesBuilder {
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(group))
            .set_data_page_row_count_limit(page)
            .set_write_batch_size(page)
            .set_statistics_enabled(EnabledStatistics::Page)
    }

    /// Every position a full read selects: the oracle.
    fn brute(store: &LocalStore, loc: &str, p: &Predicate) -> Vec<u64> {
        let mut out = Vec::new();
        let mut at = 0u64;
        for b in read_data_file(store, loc, &schema()).unwrap() {
            let m = p.evaluate(&b).unwrap();
            for i in 0..b.num_rows() {
                if m.value(i) {
                    out.push(at + i as u64);
                }
            }
            at += b.num_rows() as u64;
        }
        out
    }

    fn ints(v: &[i64]) -> Predicate {
        Predicate::is_in("id", v.iter().map(|x| Value::Int(*x)).collect())
    }

    fn rows(ids: impl Iterator<Item = i64>) -> Vec<Row> {
        ids.map(|i| (i, Some(format!("user-{i:05}")), Some(i as i32 % 7)))
            .collect()
    }

    #[test]
    fn bounds_rule_out_values_outside_them_and_all_null_units() {
        let s = UnitStats {
            rows: 10,
            min: Some(Bound::Int(5)),
            max: Some(Bound::Int(9)),
            nulls: Some(0),
            ..Default::default()
        };
        assert!(!s.may_contain(&Value::Int(4)));
        assert!(s.may_contain(&Value::Int(5)));
        assert!(s.may_contain(&Value::Int(9)));
        assert!(!s.may_contain(&Value::Int(10)));
        // Types statistics don't cover are never ruled out.
        assert!(s.may_contain(&Value::Float(100.0)));
        let lookup = |_: &str| Some(s.clone());
        assert!(!may_match(&ints(&[1, 2, 10]), &lookup));
        assert!(may_match(&ints(&[1, 7]), &lookup));
        assert!(!may_match(&ints(&[]), &lookup), "IN () selects nothing");
        assert!(!may_match(&Predicate::IsNull("id".into()), &lookup));
        assert!(may_match(&Predicate::NotNull("id".into()), &lookup));
        // OR: any branch; AND: every branch; NOT and ranges are never pruned.
        let or = Predicate::Or(vec![ints(&[1]), ints(&[6])]);
        assert!(may_match(&or, &lookup));
        assert!(!may_match(&ints(&[6]).and(ints(&[1])), &lookup));
        assert!(may_match(&Predicate::Not(Box::new(ints(&[6]))), &lookup));
        assert!(may_match(
            &Predicate::cmp("id", CmpOp::Lt, Value::Int(0)),
            &lookup
        ));
        // Only NULLs: no value is stored, IS NULL may match.
        let nulls = UnitStats {
            rows: 3,
            nulls: Some(3),
            ..Default::default()
        };
        let lookup = |_: &str| Some(nulls.clone());
        assert!(!may_match(&ints(&[1]), &lookup));
        assert!(may_match(&Predicate::IsNull("id".into()), &lookup));
        assert!(!may_match(&Predicate::NotNull("id".into()), &lookup));
        // Nothing known: anything may match.
        assert!(may_match(&ints(&[1]), &|_: &str| None));
    }

    #[test]
    fn a_truncated_string_maximum_rules_out_only_what_its_prefix_proves() {
        let s = |max: &str| UnitStats {
            rows: 2,
            min: Some(Bound::Bytes(b"abc".to_vec())),
            max: Some(Bound::Bytes(max.as_bytes().to_vec())),
            ..Default::default()
        };
        let str = |v: &str| Value::Str(v.to_string());
        // Truncated to a prefix of the true maximum "abczz": "abcq" <= "abczz" is kept.
        assert!(s("abc").may_contain(&str("abcq")));
        assert!(s("abc").may_contain(&str("abczzz")));
        assert!(!s("abc").may_contain(&str("abd")));
        // Truncated and incremented ("abd" for "abczz"): still an upper bound.
        assert!(s("abd").may_contain(&str("abczz")));
        // Which form a maximum is can't be told: "abda" may lie under a prefix "abd".
        assert!(s("abd").may_contain(&str("abda")));
        assert!(!s("abd").may_contain(&str("abe")));
        // The minimum is a lower bound as it stands (a truncated one is a prefix).
        assert!(!s("abd").may_contain(&str("abb")));
        assert!(!s("abd").may_contain(&str("ab")));
        assert!(s("abd").may_contain(&str("abc")));
    }

    #[test]
    fn row_group_statistics_skip_groups_without_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new();
        let loc = write(&store, dir.path(), &rows(0..1000), props(100, 1000).build());
        let p = ints(&[250, 251, 999]);
        let m = matching_rows(&store, &loc, &schema(), &p).unwrap().unwrap();
        assert_eq!(m.row_groups, 10);
        assert_eq!(m.row_groups_pruned, 8);
        assert_eq!(m.positions, vec![250, 251, 999]);
        let absent = matching_rows(&store, &loc, &schema(), &ints(&[5000]))
            .unwrap()
            .unwrap();
        assert_eq!(absent.row_groups_pruned, 10);
        assert!(absent.positions.is_empty());
    }

    #[test]
    fn the_page_index_skips_pages_without_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new();
        let loc = write(&store, dir.path(), &rows(0..1000), props(1000, 100).build());
        let name = Predicate::eq("name", Value::Str("user-00420".into()));
        let m = matching_rows(&store, &loc, &schema(), &name)
            .unwrap()
            .unwrap();
        assert_eq!(m.row_groups_pruned, 0);
        assert_eq!(m.rows_pruned_by_pages, 900, "{m:?}");
        assert_eq!(m.positions, vec![420]);
        let back = read_positions(&store, &loc, &schema(), &m.positions).unwrap();
        assert_eq!(back.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
        assert_eq!(
            back[0]
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .value(0),
            420
        );
    }

    #[test]
    fn bloom_filters_skip_groups_whose_bounds_hold_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new();
        // Even ids only, one group: 501 lies inside the bounds but is not stored.
        let loc = write(
            &store,
            dir.path(),
            &rows((0..1000).map(|i| i * 2)),
            props(1000, 1000).set_bloom_filter_enabled(true).build(),
        );
        let odd = matching_rows(&store, &loc, &schema(), &ints(&[501]))
            .unwrap()
            .unwrap();
        assert_eq!(odd.row_groups_pruned, 1, "{odd:?}");
        let name = Predicate::eq("name", Value::Str("user-00501".into()));
        let odd = matching_rows(&store, &loc, &schema(), &name)
            .unwrap()
            .unwrap();
        assert_eq!(odd.row_groups_pruned, 1, "{odd:?}");
        let even = matching_rows(&store, &loc, &schema(), &ints(&[500]))
            .unwrap()
            .unwrap();
        assert_eq!(even.row_groups_pruned, 0);
        assert_eq!(even.positions, vec![250]);
        // An int column asked for a value no int32 holds: not stored.
        let n = Predicate::is_in("n", vec![Value::Int(1 << 40), Value::Int(3)]);
        let m = matching_rows(&store, &loc, &schema(), &n).unwrap().unwrap();
        assert_eq!(m.positions, brute(&store, &loc, &n));
    }

    #[test]
    fn a_column_the_file_lacks_or_a_predicate_without_columns_reads_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new();
        let loc = write(&store, dir.path(), &rows(0..10), props(10, 10).build());
        let wider = Schema::builder()
            .with_fields(schema().as_struct().fields().iter().cloned().chain([
                NestedField::optional(4, "added", Type::Primitive(PrimitiveType::Long)).into(),
            ]))
            .build()
            .unwrap();
        let p = Predicate::eq("added", Value::Int(1));
        assert!(matching_rows(&store, &loc, &wider, &p).unwrap().is_none());
        assert!(
            matching_rows(&store, &loc, &schema(), &Predicate::True)
                .unwrap()
                .is_none()
        );
    }

    /// Random files (row groups, pages, bloom filters, truncated statistics, NULLs, sorted
    /// and shuffled ids, shared string prefixes) and random predicates: the positions found
    /// are exactly a full read's.
    #[test]
    fn pruned_positions_equal_a_full_read_on_random_files() {
        let seed = crate::test_seed();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new();
        let (mut groups_pruned, mut pages_pruned) = (0, 0);
        for round in 0..40 {
            let n = rng.random_range(1..600usize);
            let spread = rng.random_range(1..2000i64);
            let mut ids: Vec<i64> = (0..n).map(|_| rng.random_range(0..spread)).collect();
            if rng.random_bool(0.5) {
                ids.sort_unstable();
            }
            let long = rng.random_bool(0.5);
            let rows: Vec<Row> = ids
                .iter()
                .map(|&i| {
                    let name = (!rng.random_bool(0.1)).then(|| {
                        if long {
                            format!("a-very-long-shared-prefix-{i:06}")
                        } else {
                            format!("u{i}")
                        }
                    });
                    let num = (!rng.random_bool(0.2)).then_some((i % 50) as i32);
                    (i, name, num)
                })
                .collect();
            let mut b = props(rng.random_range(1..200), rng.random_range(1..100))
                .set_bloom_filter_enabled(rng.random_bool(0.5))
                .set_dictionary_enabled(rng.random_bool(0.5));
            if rng.random_bool(0.5) {
                let t = rng.random_range(1..12);
                b = b
                    .set_statistics_truncate_length(Some(t))
                    .set_column_index_truncate_length(Some(t));
            }
            let loc = write(&store, dir.path(), &rows, b.build());
            for _ in 0..10 {
                let k = rng.random_range(0..6);
                let pick: Vec<i64> = (0..k).map(|_| rng.random_range(-5..spread + 5)).collect();
                let p = match rng.random_range(0..5) {
                    0 => ints(&pick),
                    1 => Predicate::is_in(
                        "name",
                        pick.iter()
                            .map(|i| {
                                Value::Str(if long {
                                    format!("a-very-long-shared-prefix-{i:06}")
                                } else {
                                    format!("u{i}")
                                })
                            })
                            .collect(),
                    ),
                    2 => Predicate::is_in("n", pick.iter().map(|i| Value::Int(i % 60)).collect()),
                    3 => ints(&pick).and(Predicate::NotNull("name".into())),
                    _ => Predicate::Or(vec![ints(&pick), Predicate::IsNull("n".into())]),
                };
                let m = matching_rows(&store, &loc, &schema(), &p).unwrap().unwrap();
                groups_pruned += m.row_groups_pruned;
                pages_pruned += m.rows_pruned_by_pages;
                assert_eq!(
                    m.positions,
                    brute(&store, &loc, &p),
                    "seed {seed}, round {round}: {p:?} on {n} rows"
                );
            }
        }
        // The rules did prune (the test is not vacuous).
        assert!(groups_pruned > 0 && pages_pruned > 0, "seed {seed}");
    }
}
