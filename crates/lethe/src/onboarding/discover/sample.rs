//! A bounded random sample of a table's rows, read without reading the table.
//!
//! The row positions are drawn first, uniformly without replacement over the live data files'
//! record counts (from the manifests: no data file is opened to count). Then only the files that
//! hold a drawn position are opened, and in each only the row groups that hold one, with a row
//! selection that skips the other rows and a projection of the columns sampled. Memory is
//! bounded by the sample size times the sampled width (text is cut at [`MAX_TEXT`] bytes); time
//! by the time budget, after which the sample stops early and says so. Files are visited in a
//! random order, so a sample cut short by the budget is still spread over the table.
//!
//! Every value is kept as text (numbers, dates and timestamps in Arrow's text form), aligned
//! by row across columns so that relations between columns of one row can be checked. Nested
//! columns are sampled field by field (`contact.email`, `addresses.element.street`,
//! `attributes.value`), read by field id: a struct field has a value per row like a column;
//! a field inside a list or a map has every element of every sampled row (not aligned by
//! row). Rows deleted by position delete files or deletion vectors are not sampled (a drawn
//! position they delete is dropped, so the sample is smaller); rows deleted by equality deletes
//! may be: telling them apart would mean reading every row. A top-level column a file lacks
//! samples as its `initial-default` (format v3), else null.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use iceberg::spec::{DataFileFormat, PrimitiveType, Type};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection, RowSelector};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use crate::error::{Error, Result};
use lethe_iceberg::deletes::{DeleteIndex, DeleteReader};
use lethe_iceberg::nested::{FieldPath, Step, field_paths, type_name};
use lethe_iceberg::table::{LoadedTable, Warehouse};

/// The Iceberg field id a Parquet column carries (`PARQUET:field_id`), if any.
fn field_id_of(f: &arrow::datatypes::Field) -> Option<i32> {
    f.metadata()
        .get("PARQUET:field_id")
        .and_then(|v| v.parse().ok())
}

/// Text values longer than this are cut (at a character boundary) in a sample.
pub const MAX_TEXT: usize = 512;

/// One sampled column: a top-level column, or a field inside a nested one.
#[derive(Debug, Clone)]
pub struct SampledColumn {
    /// Its path in the current schema (`email`, `contact.email`, `addresses.element.street`,
    /// `attributes.value`).
    pub name: String,
    /// Its Iceberg type as Iceberg writes it (`string`, `long`,
    /// `struct<email: string, phone: string>`...).
    pub ty: String,
    /// Whether its values are sampled (primitive fields; a struct, list or map is named, and
    /// its fields are sampled one by one).
    pub sampled: bool,
    /// Whether it is a field inside a struct, list or map (not a top-level column).
    pub nested: bool,
    /// Whether it is inside a list or a map (a row holds any number of its values).
    pub repeated: bool,
    /// Whether it is a map's keys.
    pub map_key: bool,
    /// One value per sampled row (None: null, not sampled, or a repeated field).
    pub values: Vec<Option<String>>,
    /// A repeated field's values, every element of every sampled row.
    pub elements: Vec<String>,
    /// Its top-level column's position in the current schema.
    column: usize,
    /// The steps from the top-level column to the field.
    steps: Vec<Step>,
}

impl SampledColumn {
    /// A column of `path` with no values yet.
    pub fn new(path: FieldPath) -> SampledColumn {
        SampledColumn {
            name: path.name.clone(),
            ty: type_name(&path.field.field_type),
            sampled: matches!(path.field.field_type.as_ref(), Type::Primitive(p) if !matches!(p, PrimitiveType::Binary | PrimitiveType::Fixed(_))),
            nested: !path.steps.is_empty(),
            repeated: path.repeated,
            map_key: path.map_key,
            values: Vec::new(),
            elements: Vec::new(),
            column: path.column,
            steps: path.steps,
        }
    }

    /// A top-level column with its values (for tests).
    #[cfg(test)]
    pub(crate) fn top_level(name: &str, ty: &str, values: Vec<Option<String>>) -> SampledColumn {
        SampledColumn {
            name: name.into(),
            ty: ty.into(),
            sampled: true,
            nested: false,
            repeated: false,
            map_key: false,
            values,
            elements: Vec::new(),
            column: 0,
            steps: Vec::new(),
        }
    }

    /// Whether the column holds text.
    pub fn is_text(&self) -> bool {
        self.ty == "string"
    }

    /// Whether the column holds whole numbers.
    pub fn is_integer(&self) -> bool {
        self.ty == "long" || self.ty == "int"
    }

    /// Whether it is a struct, list or map.
    pub fn nested_type(&self) -> bool {
        self.ty.starts_with("struct<")
            || self.ty.starts_with("list<")
            || self.ty.starts_with("map<")
    }

    /// Whether it has one value per row (a top-level column or a struct field), so that
    /// values of one row can be compared across columns.
    pub fn is_per_row(&self) -> bool {
        !self.repeated
    }

    /// The non-null values (every element, for a repeated field).
    pub fn present(&self) -> impl Iterator<Item = &str> + Clone {
        self.values
            .iter()
            .filter_map(|v| v.as_deref())
            .chain(self.elements.iter().map(String::as_str))
    }
}

/// A sample of one table.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The table.
    pub table: String,
    /// Rows in the table's current snapshot (manifest record counts).
    pub rows_total: u64,
    /// Rows sampled.
    pub rows: usize,
    /// Data files holding at least one drawn row, opened.
    pub files_read: usize,
    /// Live data files.
    pub files_total: usize,
    /// Whether the time budget cut the sample short.
    pub cut_short: bool,
    /// Columns in schema order.
    pub columns: Vec<SampledColumn>,
}

impl Sample {
    /// A column by name.
    pub fn column(&self, name: &str) -> Option<&SampledColumn> {
        self.columns.iter().find(|c| c.name == name)
    }
}

/// How to sample.
#[derive(Debug, Clone)]
pub struct SampleOptions {
    /// Rows per table at most.
    pub rows: usize,
    /// Time per table at most.
    pub budget: Duration,
    /// The random seed (samples are reproducible for a seed and a table state).
    pub seed: u64,
}

/// Samples `table`: at most `opts.rows` rows drawn uniformly from its current snapshot.
pub async fn sample(wh: &Warehouse, table: &LoadedTable, opts: &SampleOptions) -> Result<Sample> {
    let started = Instant::now();
    let schema = table.metadata.current_schema().clone();
    let fields: Vec<_> = schema.as_struct().fields().to_vec();
    // Top-level columns and every field inside nested ones.
    let mut columns: Vec<SampledColumn> = field_paths(&schema)
        .into_iter()
        .filter(|p| p.steps.is_empty() || p.is_leaf())
        .map(SampledColumn::new)
        .collect();
    let all = wh.current_files(table).await?;
    let files: Vec<_> = all.iter().filter(|f| f.is_data()).cloned().collect();
    let counts: Vec<u64> = files
        .iter()
        .map(|f| f.entry.data_file.record_count())
        .collect();
    let rows_total: u64 = counts.iter().sum();
    let mut out = Sample {
        table: table.name.to_string(),
        rows_total,
        rows: 0,
        files_read: 0,
        files_total: files.len(),
        cut_short: false,
        columns: Vec::new(),
    };
    if rows_total == 0 {
        out.columns = columns;
        return Ok(out);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed ^ fxhash(&out.table));
    let wanted = opts
        .rows
        .min(usize::try_from(rows_total).unwrap_or(usize::MAX));
    let mut drawn = draw(&mut rng, rows_total, wanted);
    drawn.sort_unstable();
    // Positions per file, relative to the file.
    let mut per_file: Vec<Vec<u64>> = vec![Vec::new(); files.len()];
    let mut start = 0u64;
    let mut it = drawn.iter().peekable();
    for (i, n) in counts.iter().enumerate() {
        while let Some(p) = it.peek() {
            if **p < start + n {
                per_file[i].push(**p - start);
                it.next();
            } else {
                break;
            }
        }
        start += n;
    }
    let index = DeleteIndex::load(wh, table, &all)?;
    if !index.is_empty() {
        let mut reader = DeleteReader::new(wh.store.as_ref(), table)?;
        for (f, wanted) in files.iter().zip(per_file.iter_mut()) {
            if wanted.is_empty() {
                continue;
            }
            let applicable = index.for_data_file(f, wh.store.as_ref());
            if applicable.is_empty() {
                continue;
            }
            let deleted =
                reader.deleted_positions(&index, &applicable, f.entry.data_file.file_path())?;
            wanted.retain(|p| deleted.binary_search(p).is_err());
        }
    }
    let mut order: Vec<usize> = (0..files.len())
        .filter(|i| !per_file[*i].is_empty())
        .collect();
    order.shuffle(&mut rng);
    for i in order {
        if started.elapsed() > opts.budget {
            out.cut_short = true;
            break;
        }
        let df = &files[i].entry.data_file;
        if df.file_format() != DataFileFormat::Parquet {
            return Err(Error::Unsupported {
                table: out.table.clone(),
                feature: format!("{:?} data files", df.file_format()),
                detail: format!("{} can't be sampled: lethe reads Parquet", df.file_path()),
            });
        }
        let before = out.rows;
        out.rows += read_positions(wh, df.file_path(), &per_file[i], &fields, &mut columns)?;
        if out.rows > before {
            out.files_read += 1;
        }
    }
    out.columns = columns;
    Ok(out)
}

/// `k` distinct positions in `0..n`, uniformly (Floyd's algorithm: k draws, no table of n).
fn draw(rng: &mut ChaCha8Rng, n: u64, k: usize) -> Vec<u64> {
    use rand::Rng;
    let mut chosen: std::collections::HashSet<u64> = std::collections::HashSet::with_capacity(k);
    let mut out = Vec::with_capacity(k);
    let k = k as u64;
    for j in (n - k)..n {
        let t = rng.random_range(0..=j);
        let pick = if chosen.contains(&t) { j } else { t };
        chosen.insert(pick);
        out.push(pick);
    }
    out
}

fn fxhash(s: &str) -> u64 {
    // A stable hash of the table name, so each table gets its own draw for one seed.
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Reads the rows at `positions` (sorted, relative to the file) of one Parquet file and appends
/// them to `columns`; returns the rows read.
fn read_positions(
    wh: &Warehouse,
    location: &str,
    positions: &[u64],
    fields: &[iceberg::spec::NestedFieldRef],
    columns: &mut [SampledColumn],
) -> Result<usize> {
    let reader = wh.store.open(location)?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(reader)
        .map_err(|e| Error::invalid(format!("{location} can't be read as Parquet: {e}")))?;
    let arrow_schema = builder.schema().clone();
    let meta = builder.metadata().clone();
    // File columns by field id (by name when the file has no ids).
    let by_id: HashMap<i32, usize> = arrow_schema
        .fields()
        .iter()
        .enumerate()
        .filter_map(|(i, f)| field_id_of(f).map(|id| (id, i)))
        .collect();
    // For each top-level column of the current schema with a sampled field, its file column.
    let wanted: Vec<bool> = (0..fields.len())
        .map(|i| columns.iter().any(|c| c.sampled && c.column == i))
        .collect();
    let file_index: Vec<Option<usize>> = fields
        .iter()
        .zip(&wanted)
        .map(|(f, w)| {
            if !w {
                None
            } else if by_id.is_empty() {
                arrow_schema.index_of(&f.name).ok()
            } else {
                by_id.get(&f.id).copied()
            }
        })
        .collect();
    let roots: Vec<usize> = file_index.iter().flatten().copied().collect();
    // Row groups holding a position, and the selection inside them.
    let mut groups: Vec<usize> = Vec::new();
    let mut selectors: Vec<RowSelector> = Vec::new();
    let mut group_start = 0u64;
    let mut p = 0usize;
    for (g, rg) in meta.row_groups().iter().enumerate() {
        let n = rg.num_rows().max(0) as u64;
        let end = group_start + n;
        let mut cursor = group_start;
        let mut any = false;
        while p < positions.len() && positions[p] < end {
            let pos = positions[p];
            if pos >= cursor {
                if pos > cursor {
                    selectors.push(RowSelector::skip((pos - cursor) as usize));
                }
                selectors.push(RowSelector::select(1));
                cursor = pos + 1;
                any = true;
            }
            p += 1;
        }
        if any {
            if end > cursor {
                selectors.push(RowSelector::skip((end - cursor) as usize));
            }
            groups.push(g);
        }
        group_start = end;
    }
    if groups.is_empty() {
        return Ok(0);
    }
    let mask = ProjectionMask::roots(meta.file_metadata().schema_descr(), roots.iter().copied());
    let reader = builder
        .with_row_groups(groups)
        .with_row_selection(RowSelection::from(selectors))
        .with_projection(mask)
        .with_batch_size(8192)
        .build()?;
    // Projected batches keep the file's column order: map file index to batch index.
    let mut sorted_roots = roots.clone();
    sorted_roots.sort_unstable();
    // A top-level column the file lacks reads as its initial-default (format v3), else null.
    let defaults: Vec<Option<String>> = fields
        .iter()
        .map(|f| -> Result<Option<String>> {
            let Some(d) = f.initial_default.as_ref() else {
                return Ok(None);
            };
            let t = iceberg::arrow::type_to_arrow_type(&f.field_type)?;
            let a = lethe_iceberg::read::default_array(d, &t, 1)
                .map_err(|e| Error::invalid(format!("{location}: column `{}`: {e}", f.name)))?;
            Ok(as_text(&a, location, &f.name)?.pop().flatten())
        })
        .collect::<Result<_>>()?;
    let target = lethe_iceberg::writer::arrow_schema(
        &iceberg::spec::Schema::builder()
            .with_fields(fields.to_vec())
            .build()?,
    )?;
    let mut rows = 0usize;
    for batch in reader {
        let batch = batch?;
        let n = batch.num_rows();
        rows += n;
        // Each wanted top-level column, in the current schema's type (nested fields by id).
        let mut current: HashMap<usize, arrow::array::ArrayRef> = HashMap::new();
        for (i, fi) in file_index.iter().enumerate() {
            if let Some(bi) = fi.and_then(|fi| sorted_roots.iter().position(|r| *r == fi)) {
                let a = lethe_iceberg::nested::project_array(batch.column(bi), target.field(i))
                    .map_err(|e| {
                        Error::invalid(format!(
                            "{location}: column `{}` can't be read for sampling: {e}",
                            fields[i].name
                        ))
                    })?;
                current.insert(i, a);
            }
        }
        for c in columns.iter_mut() {
            let col = current.get(&c.column).filter(|_| c.sampled);
            let Some(col) = col else {
                let d = if c.steps.is_empty() {
                    defaults[c.column].clone()
                } else {
                    None
                };
                c.values.extend(std::iter::repeat_n(d, n));
                continue;
            };
            if c.steps.is_empty() {
                c.values.extend(as_text(col, location, &c.name)?);
                continue;
            }
            let by_row = lethe_iceberg::nested::leaf(col, &c.steps)
                .and_then(|l| l.texts_by_row(n))
                .map_err(|e| {
                    Error::invalid(format!(
                        "{location}: field `{}` can't be read as text for sampling: {e}",
                        c.name
                    ))
                })?;
            if c.repeated {
                c.values.extend(std::iter::repeat_n(None, n));
                c.elements
                    .extend(by_row.into_iter().flatten().map(|v| cut(&v)));
            } else {
                c.values.extend(
                    by_row
                        .into_iter()
                        .map(|v| v.into_iter().next().map(|v| cut(&v))),
                );
            }
        }
    }
    Ok(rows)
}

/// A column's values as text (None for null).
fn as_text(
    a: &arrow::array::ArrayRef,
    location: &str,
    column: &str,
) -> Result<Vec<Option<String>>> {
    let cast = match a.data_type() {
        DataType::Utf8 => a.clone(),
        _ => arrow::compute::cast(a, &DataType::Utf8).map_err(|e| {
            Error::invalid(format!(
                "{location}: column `{column}` can't be read as text for sampling: {e}"
            ))
        })?,
    };
    let s = cast.as_string::<i32>();
    Ok((0..s.len())
        .map(|i| s.is_valid(i).then(|| cut(s.value(i))))
        .collect())
}

fn cut(s: &str) -> String {
    if s.len() <= MAX_TEXT {
        return s.to_string();
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Reads one column of a table in full, value by value, until `f` returns false or the budget
/// is spent; returns whether every value was read. Used to match sampled values against an
/// identifier column without holding that column in memory.
pub async fn for_each_value(
    wh: &Warehouse,
    table: &LoadedTable,
    column: &str,
    budget: Duration,
    f: &mut dyn FnMut(&str) -> bool,
) -> Result<bool> {
    let started = Instant::now();
    let schema = table.metadata.current_schema().clone();
    let path = lethe_iceberg::nested::resolve(&schema, column)
        .map_err(|e| Error::invalid(format!("table `{}`: {e}", table.name)))?;
    let field = schema.as_struct().fields()[path.column].clone();
    let target = lethe_iceberg::writer::arrow_schema(&schema)?;
    for tf in wh.current_files(table).await? {
        if !tf.is_data() {
            continue;
        }
        if started.elapsed() > budget {
            return Ok(false);
        }
        let location = tf.entry.data_file.file_path();
        let reader = wh.store.open(location)?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(reader)
            .map_err(|e| Error::invalid(format!("{location} can't be read as Parquet: {e}")))?;
        let arrow_schema = builder.schema().clone();
        let idx = arrow_schema
            .fields()
            .iter()
            .position(|f| field_id_of(f) == Some(field.id))
            .or_else(|| arrow_schema.index_of(&field.name).ok());
        let Some(idx) = idx else { continue };
        let mask = ProjectionMask::roots(builder.parquet_schema(), [idx]);
        for batch in builder
            .with_projection(mask)
            .with_batch_size(8192)
            .build()?
        {
            let batch = batch?;
            let values: Vec<String> = if path.steps.is_empty() {
                as_text(batch.column(0), location, column)?
                    .into_iter()
                    .flatten()
                    .collect()
            } else {
                let a = lethe_iceberg::nested::project_array(
                    batch.column(0),
                    target.field(path.column),
                )?;
                lethe_iceberg::nested::leaf(&a, &path.steps)?
                    .texts_by_row(batch.num_rows())?
                    .into_iter()
                    .flatten()
                    .collect()
            };
            for v in values {
                if !f(&v) {
                    return Ok(true);
                }
            }
            if started.elapsed() > budget {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floyd_draws_distinct_positions_in_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for (n, k) in [(10u64, 10usize), (1000, 7), (5, 0), (1, 1)] {
            let d = draw(&mut rng, n, k);
            assert_eq!(d.len(), k);
            let set: std::collections::HashSet<_> = d.iter().collect();
            assert_eq!(set.len(), k, "distinct");
            assert!(d.iter().all(|p| *p < n));
        }
    }

    #[test]
    fn draws_are_spread_over_the_range() {
        // 1,000 of 100,000: every tenth of the range gets some (a uniform draw would get ~100).
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let d = draw(&mut rng, 100_000, 1000);
        let mut buckets = [0usize; 10];
        for p in d {
            buckets[(p / 10_000) as usize] += 1;
        }
        assert!(buckets.iter().all(|b| (50..150).contains(b)), "{buckets:?}");
    }

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        let s = "é".repeat(MAX_TEXT);
        let c = cut(&s);
        assert!(c.len() <= MAX_TEXT && c.is_char_boundary(c.len()));
    }
}
