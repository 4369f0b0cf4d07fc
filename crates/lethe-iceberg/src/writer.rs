//! lethe's data-file writer: Parquet via arrow-rs, with Iceberg metrics computed by lethe.
//!
//! The iceberg crate's own writer stores full bounds and ignores `write.metadata.metrics.*`
//! (apache/iceberg-rust issue 2362), which would put personal values into manifests. This
//! writer honours the table's metrics modes (see [`crate::metrics`]): `none` keeps nothing,
//! `counts` keeps value/null/NaN counts and column sizes, `truncate(n)` adds bounds truncated as
//! Iceberg Java does, `full` whole bounds. Bounds are computed from the Arrow values written
//! (NaN excluded, as the spec requires); string order is UTF-8 byte order.
//!
//! Parquet bloom filters are written for the columns the table's
//! `write.parquet.bloom-filter-*` properties name (see [`bloom_filters`]), so a lookup by a
//! subject's ID can skip files that don't hold it by their bloom filters, also in the files
//! lethe rewrites.
//!
//! Files are split by partition (the table's default spec, with the iceberg crate's transform
//! functions) and rolled at `max_rows_per_file`. Paths follow PyIceberg's layout:
//! `<table location>/data/<partition path>/<uuid>-<n>.parquet`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use arrow::compute;
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type,
    SchemaRef as ArrowSchemaRef, Time64MicrosecondType, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use arrow::row::{RowConverter, SortField};
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, Literal, NestedFieldRef,
    PartitionSpecRef, PrimitiveLiteral, PrimitiveType, Schema, SchemaRef, Struct, TableMetadata,
    Type,
};
use iceberg::transform::{BoxedTransformFunction, create_transform_function};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{WriterProperties, WriterPropertiesBuilder};
use parquet::schema::types::ColumnPath;

use crate::error::{Error, Result};
use crate::metrics::{self, MetricsConfig, MetricsMode};
use crate::store::{FileSink, FileStore};

/// Options of a write.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Start a new file after this many rows (None: one file per partition).
    pub max_rows_per_file: Option<usize>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            max_rows_per_file: Some(1_000_000),
        }
    }
}

/// The Arrow schema lethe writes for an Iceberg schema (field ids in `PARQUET:field_id`).
pub fn arrow_schema(schema: &Schema) -> Result<ArrowSchemaRef> {
    Ok(Arc::new(iceberg::arrow::schema_to_arrow_schema(schema)?))
}

struct OpenFile {
    location: String,
    writer: ArrowWriter<Box<dyn FileSink>>,
    rows: usize,
    stats: HashMap<i32, ColumnStats>,
    partition: Struct,
}

/// Writes Arrow batches (already in the table's Arrow schema) into data files of one table.
pub struct TableWriter<'a> {
    store: &'a dyn FileStore,
    schema: SchemaRef,
    arrow_schema: ArrowSchemaRef,
    spec: PartitionSpecRef,
    transforms: Vec<(usize, BoxedTransformFunction)>,
    metrics: MetricsConfig,
    /// Leaves inside a list or a map: counts from the Parquet footer, never bounds.
    repeated: std::collections::HashSet<i32>,
    props: WriterProperties,
    location: String,
    options: WriteOptions,
    open: HashMap<Vec<u8>, OpenFile>,
    done: Vec<DataFile>,
    run: String,
    counter: usize,
    /// The sort order every file's rows are in, recorded in each data file.
    sort_order_id: Option<i32>,
}

impl std::fmt::Debug for TableWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableWriter")
            .field("location", &self.location)
            .field("open_files", &self.open.len())
            .field("done", &self.done.len())
            .finish()
    }
}

/// Rows of a file's first batch that [`plain_columns`] looks at.
const DICTIONARY_SAMPLE: usize = 4096;

/// The top-level columns of a new file that are written without a dictionary, judged on the
/// first [`DICTIONARY_SAMPLE`] rows of `first`: a column keeps dictionary encoding only where
/// the dictionary plus its indices take at most three quarters of the plain encoding's bytes.
///
/// This is parquet-mr's fallback rule (the writer of Iceberg Java and Spark, which gives up a
/// column's dictionary when it doesn't make the first page smaller), with a margin because
/// pages are compressed afterwards and zstd shrinks plain pages of unique values about as well
/// as a dictionary would. arrow-rs keeps a dictionary until it reaches its size limit, which
/// for unique values (ids, timestamps, addresses) spends most of a write hashing them for a
/// larger file. Booleans (never dictionary-encoded), nested columns and samples under 64
/// non-null values keep the writer's default.
fn plain_columns(first: &RecordBatch) -> Vec<ColumnPath> {
    let n = first.num_rows().min(DICTIONARY_SAMPLE);
    let mut out = Vec::new();
    for (field, column) in first.schema().fields().iter().zip(first.columns()) {
        let column = column.slice(0, n);
        let Some((distinct, dict_bytes, values, plain_bytes)) = dictionary_sample(&column) else {
            continue;
        };
        if values < 64 {
            continue;
        }
        let bits = (usize::BITS - distinct.saturating_sub(1).leading_zeros()).max(1) as usize;
        let encoded = dict_bytes + (values * bits).div_ceil(8);
        if encoded * 4 > plain_bytes * 3 {
            out.push(ColumnPath::from(field.name().as_str()));
        }
    }
    out
}

/// For a flat column: its distinct non-null values, their plain-encoded bytes, the non-null
/// values and their plain-encoded bytes (byte arrays carry a 4-byte length each). `None` for
/// the types [`plain_columns`] leaves alone.
fn dictionary_sample(column: &ArrayRef) -> Option<(usize, usize, usize, usize)> {
    let n = column.len();
    Some(match column.data_type() {
        DataType::Utf8 => tally(
            column
                .as_string::<i32>()
                .iter()
                .flatten()
                .map(str::as_bytes),
            4,
            n,
        ),
        DataType::LargeUtf8 => tally(
            column
                .as_string::<i64>()
                .iter()
                .flatten()
                .map(str::as_bytes),
            4,
            n,
        ),
        DataType::Binary => tally(column.as_binary::<i32>().iter().flatten(), 4, n),
        DataType::LargeBinary => tally(column.as_binary::<i64>().iter().flatten(), 4, n),
        DataType::FixedSizeBinary(_) => tally(column.as_fixed_size_binary().iter().flatten(), 0, n),
        t if t.is_primitive() => {
            let width = t.primitive_width()?;
            let data = column.to_data();
            let bytes = &data.buffers().first()?.as_slice()[data.offset() * width..];
            tally(
                (0..data.len())
                    .filter(|&i| data.is_valid(i))
                    .map(|i| &bytes[i * width..(i + 1) * width]),
                0,
                n,
            )
        }
        _ => return None,
    })
}

/// [`dictionary_sample`]'s figures for `values` (at most `len` of them), each stored plain with
/// `extra` bytes more.
fn tally<'a>(
    values: impl Iterator<Item = &'a [u8]>,
    extra: usize,
    len: usize,
) -> (usize, usize, usize, usize) {
    let mut seen: std::collections::HashSet<&[u8], foldhash::fast::FixedState> =
        std::collections::HashSet::with_capacity_and_hasher(
            len.min(DICTIONARY_SAMPLE),
            foldhash::fast::FixedState::default(),
        );
    let (mut dict_bytes, mut count, mut plain_bytes) = (0usize, 0usize, 0usize);
    for v in values {
        count += 1;
        plain_bytes += v.len() + extra;
        if seen.insert(v) {
            dict_bytes += v.len() + extra;
        }
    }
    (seen.len(), dict_bytes, count, plain_bytes)
}

fn compression(props: &HashMap<String, String>) -> Result<Compression> {
    let codec = props
        .get("write.parquet.compression-codec")
        .map(|s| s.to_ascii_lowercase())
        .unwrap_or_else(|| "zstd".into());
    let level = props
        .get("write.parquet.compression-level")
        .and_then(|s| s.parse::<i32>().ok());
    Ok(match codec.as_str() {
        "zstd" => Compression::ZSTD(
            ZstdLevel::try_new(level.unwrap_or(1))
                .map_err(|e| Error::invalid(format!("write.parquet.compression-level: {e}")))?,
        ),
        "snappy" => Compression::SNAPPY,
        "gzip" => Compression::GZIP(Default::default()),
        "uncompressed" | "none" => Compression::UNCOMPRESSED,
        other => {
            return Err(Error::invalid(format!(
                "write.parquet.compression-codec `{other}` is not supported (zstd, snappy, gzip, uncompressed)"
            )));
        }
    })
}

/// `write.parquet.bloom-filter-enabled.column.<name>`: `true` writes a bloom filter for the
/// column (Iceberg's table property).
const BLOOM_ENABLED_PREFIX: &str = "write.parquet.bloom-filter-enabled.column.";
/// `write.parquet.bloom-filter-fpp.column.<name>`: the filter's false-positive probability
/// (Iceberg's default 0.01).
const BLOOM_FPP_PREFIX: &str = "write.parquet.bloom-filter-fpp.column.";
/// `write.parquet.bloom-filter-ndv.column.<name>`: the distinct values the filter is sized for.
const BLOOM_NDV_PREFIX: &str = "write.parquet.bloom-filter-ndv.column.";
/// `write.parquet.bloom-filter-max-bytes`: the largest filter (Iceberg's default 1 MiB).
const BLOOM_MAX_BYTES: &str = "write.parquet.bloom-filter-max-bytes";

/// Sets up the Parquet bloom filters a table's properties ask for, as Iceberg Java's Parquet
/// writer reads them: a column is named by its full dotted name and gets a filter when
/// `write.parquet.bloom-filter-enabled.column.<name>` is `true` (case-insensitive; anything
/// else is off, as Java's `Boolean.parseBoolean`), with the fpp of
/// `write.parquet.bloom-filter-fpp.column.<name>` (default 0.01). A property naming a column
/// the schema lacks is skipped with a warning, as Java does (a dropped or renamed column);
/// so is a column inside a list or a map, which lethe doesn't filter yet.
///
/// Sizing: the filter starts sized for `write.parquet.bloom-filter-ndv.column.<name>` distinct
/// values, else for the row group's row limit, never larger than
/// `write.parquet.bloom-filter-max-bytes` (default 1 MiB; the power of two at or below it);
/// the Parquet writer then folds it to the smallest size that keeps the fpp for the values
/// actually written. An fpp outside (0, 1), or an ndv or max-bytes that isn't a positive
/// integer, is an error naming the property.
fn bloom_filters(
    schema: &Schema,
    props: &HashMap<String, String>,
    row_group: usize,
    mut builder: WriterPropertiesBuilder,
) -> Result<WriterPropertiesBuilder> {
    let positive = |key: &str| -> Result<Option<u64>> {
        props
            .get(key)
            .map(|v| {
                v.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "table property {key} = `{v}`: not a positive integer"
                        ))
                    })
            })
            .transpose()
    };
    let mut columns: Vec<&str> = props
        .iter()
        .filter_map(|(k, v)| {
            let col = k.strip_prefix(BLOOM_ENABLED_PREFIX)?;
            v.trim().eq_ignore_ascii_case("true").then_some(col)
        })
        .collect();
    if columns.is_empty() {
        return Ok(builder);
    }
    columns.sort_unstable();
    let max_bytes = positive(BLOOM_MAX_BYTES)?.unwrap_or(1 << 20);
    // The filter's bytes are a power of two: the largest at or below max-bytes.
    let max_bytes = 1u64 << (63 - max_bytes.leading_zeros());
    let paths = crate::nested::field_paths(schema);
    for col in columns {
        let Some(path) = paths.iter().find(|p| p.name == col && p.is_leaf()) else {
            tracing::warn!(
                "bloom filter property for column `{col}` skipped: the schema has no primitive column by that name"
            );
            continue;
        };
        if path.repeated {
            tracing::warn!(
                "bloom filter property for column `{col}` skipped: lethe writes bloom filters only for columns outside lists and maps"
            );
            continue;
        }
        let fpp_key = format!("{BLOOM_FPP_PREFIX}{col}");
        let fpp = match props.get(&fpp_key) {
            Some(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|f| *f > 0.0 && *f < 1.0)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "table property {fpp_key} = `{v}`: a false-positive probability is a number between 0 and 1 (exclusive)"
                    ))
                })?,
            None => 0.01,
        };
        let ndv = positive(&format!("{BLOOM_NDV_PREFIX}{col}"))?.unwrap_or(row_group as u64);
        // A split-block bloom filter holds -8 / ln(1 - fpp^(1/8)) bits per distinct value.
        let per_byte = -(1.0 - fpp.powf(1.0 / 8.0)).ln();
        let cap = ((max_bytes as f64) * per_byte).floor().max(1.0) as u64;
        let names: Vec<String> = path
            .ids
            .iter()
            .filter_map(|id| schema.field_by_id(*id).map(|f| f.name.clone()))
            .collect();
        let column = ColumnPath::new(names);
        builder = builder
            .set_column_bloom_filter_enabled(column.clone(), true)
            .set_column_bloom_filter_fpp(column.clone(), fpp)
            .set_column_bloom_filter_ndv(column, ndv.min(cap));
    }
    Ok(builder)
}

impl<'a> TableWriter<'a> {
    /// A writer for the table described by `metadata` (current schema, default partition spec,
    /// properties).
    pub fn new(
        store: &'a dyn FileStore,
        metadata: &TableMetadata,
        options: WriteOptions,
    ) -> Result<Self> {
        let schema = metadata.current_schema().clone();
        let spec = metadata.default_partition_spec().clone();
        let mut transforms = Vec::new();
        for field in spec.fields() {
            let pos = schema
                .as_struct()
                .fields()
                .iter()
                .position(|f| f.id == field.source_id)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "partition field `{}` has a source column that isn't a top-level column",
                        field.name
                    ))
                })?;
            transforms.push((pos, create_transform_function(&field.transform)?));
        }
        let props = metadata.properties();
        let row_group = props
            .get("write.parquet.row-group-limit")
            .and_then(|s| s.parse::<usize>().ok())
            .unwrap_or(1_048_576);
        let writer_props = bloom_filters(
            &schema,
            props,
            row_group,
            WriterProperties::builder()
                .set_compression(compression(props)?)
                .set_max_row_group_row_count(Some(row_group))
                .set_created_by("lethe".to_string()),
        )?
        .build();
        Ok(TableWriter {
            store,
            arrow_schema: arrow_schema(&schema)?,
            metrics: MetricsConfig::from_properties(&schema, props)?,
            repeated: crate::nested::field_paths(&schema)
                .into_iter()
                .filter(|p| p.repeated && p.is_leaf())
                .map(|p| p.id())
                .collect(),
            schema,
            spec,
            transforms,
            props: writer_props,
            location: metadata.location().trim_end_matches('/').to_string(),
            options,
            open: HashMap::new(),
            done: Vec::new(),
            run: uuid::Uuid::new_v4().to_string(),
            counter: 0,
            sort_order_id: None,
        })
    }

    /// Names the files this writer creates `<n>-<run>.parquet` instead of with a random
    /// uuid (a task run elsewhere names its files by its job, task and attempt, so that the
    /// files of an attempt that didn't finish can be told apart).
    pub fn with_run(mut self, run: impl Into<String>) -> Self {
        self.run = run.into();
        self
    }

    /// The Arrow schema batches must have.
    pub fn arrow_schema(&self) -> &ArrowSchemaRef {
        &self.arrow_schema
    }

    /// Writes row lineage too (format v3 rewrites): batches then carry `_row_id` and
    /// `_last_updated_sequence_number` after the table's columns (as
    /// [`crate::lineage::read_with_lineage`] reads them), and both are stored in the files
    /// under their reserved field ids. Metrics cover the table's columns only.
    pub fn with_row_lineage(mut self) -> Self {
        self.arrow_schema = crate::lineage::with_lineage_fields(&self.arrow_schema);
        self
    }

    /// Records `order_id` as every file's `sort_order_id`: the caller writes each file's rows
    /// in that sort order ([`crate::sort::TableSort`]).
    pub fn with_sort_order_id(mut self, order_id: i32) -> Self {
        self.sort_order_id = Some(order_id);
        self
    }

    /// Closes every open file: rows written after this go to new files (a rewrite gives each
    /// file it replaces its own new file, so a sorted table's files keep their narrow bounds).
    pub fn roll(&mut self) -> Result<()> {
        let mut keys: Vec<Vec<u8>> = self.open.keys().cloned().collect();
        keys.sort();
        for k in keys {
            let file = self.open.remove(&k).expect("present");
            let df = self.close_file(file)?;
            self.done.push(df);
        }
        Ok(())
    }

    /// Writes a batch; it must have the table's Arrow schema (see [`align_batch`]).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if batch.schema().fields().len() != self.arrow_schema.fields().len() {
            return Err(Error::Internal(
                "batch does not have the table's schema".into(),
            ));
        }
        if self.transforms.is_empty() {
            return self.write_partition(Vec::new(), Struct::empty(), batch);
        }
        let part_arrays = self
            .transforms
            .iter()
            .map(|(pos, f)| f.transform(batch.column(*pos).clone()))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let converter = RowConverter::new(
            part_arrays
                .iter()
                .map(|a| SortField::new(a.data_type().clone()))
                .collect(),
        )?;
        let rows = converter.convert_columns(&part_arrays)?;
        let mut groups: Vec<(Vec<u8>, Vec<u32>)> = Vec::new();
        let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
        for i in 0..batch.num_rows() {
            let key = rows.row(i).as_ref().to_vec();
            let slot = *index.entry(key.clone()).or_insert_with(|| {
                groups.push((key, Vec::new()));
                groups.len() - 1
            });
            groups[slot].1.push(i as u32);
        }
        let part_type = self.spec.partition_type(&self.schema)?;
        for (key, idx) in groups {
            let first = idx[0] as usize;
            let values = part_arrays
                .iter()
                .zip(part_type.fields())
                .map(|(a, f)| literal_at(a, first, &f.field_type))
                .collect::<Result<Vec<_>>>()?;
            let indices = UInt32Array::from(idx);
            let columns = batch
                .columns()
                .iter()
                .map(|c| compute::take(c, &indices, None))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let part_batch = RecordBatch::try_new(batch.schema(), columns)?;
            self.write_partition(key, Struct::from_iter(values), &part_batch)?;
        }
        Ok(())
    }

    fn write_partition(
        &mut self,
        key: Vec<u8>,
        partition: Struct,
        batch: &RecordBatch,
    ) -> Result<()> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            if !self.open.contains_key(&key) {
                let file =
                    self.open_file(&partition, &batch.slice(offset, batch.num_rows() - offset))?;
                self.open.insert(key.clone(), file);
            }
            let file = self.open.get_mut(&key).expect("just inserted");
            let room = self
                .options
                .max_rows_per_file
                .map_or(usize::MAX, |m| m.saturating_sub(file.rows).max(1));
            let take = room.min(batch.num_rows() - offset);
            let slice = batch.slice(offset, take);
            file.writer.write(&slice)?;
            file.rows += take;
            update_stats(
                self.schema.as_struct().fields(),
                slice.columns(),
                &self.metrics,
                &mut file.stats,
            )?;
            offset += take;
            if self
                .options
                .max_rows_per_file
                .is_some_and(|m| file.rows >= m)
            {
                let file = self.open.remove(&key).expect("present");
                let df = self.close_file(file)?;
                self.done.push(df);
            }
        }
        Ok(())
    }

    /// Opens a new file whose first rows are `first` (they choose its columns' encodings: see
    /// [`plain_columns`]).
    fn open_file(&mut self, partition: &Struct, first: &RecordBatch) -> Result<OpenFile> {
        self.counter += 1;
        let dir = if self.transforms.is_empty() {
            format!("{}/data", self.location)
        } else {
            format!(
                "{}/data/{}",
                self.location,
                self.spec.partition_to_path(partition, self.schema.clone())
            )
        };
        let location = format!("{dir}/{:05}-{}.parquet", self.counter, self.run);
        let sink = self.store.create(&location)?;
        // Tests stop here, the file created and nothing in it yet (a kill then leaves it
        // empty).
        #[cfg(feature = "failpoints")]
        fail::eval("table-writer-file-created", |_| ());
        let plain = plain_columns(first);
        let props = if plain.is_empty() {
            self.props.clone()
        } else {
            plain
                .into_iter()
                .fold(self.props.clone().into_builder(), |b, c| {
                    b.set_column_dictionary_enabled(c, false)
                })
                .build()
        };
        let writer = ArrowWriter::try_new(sink, self.arrow_schema.clone(), Some(props))?;
        Ok(OpenFile {
            location,
            writer,
            rows: 0,
            stats: HashMap::new(),
            partition: partition.clone(),
        })
    }

    fn close_file(&self, file: OpenFile) -> Result<DataFile> {
        let OpenFile {
            location,
            mut writer,
            rows,
            stats,
            partition,
        } = file;
        let meta = writer.finish()?;
        let size = writer.inner_mut().finish()?;
        let mut column_sizes: HashMap<i32, u64> = HashMap::new();
        // Leaves inside lists and maps: value and null counts as the footer has them (as Java).
        let mut footer_counts: HashMap<i32, (u64, Option<u64>)> = HashMap::new();
        let mut split_offsets = Vec::new();
        for rg in meta.row_groups() {
            split_offsets.push(rg.file_offset().unwrap_or(4));
            for col in rg.columns() {
                let id = col.column_descr().self_type().get_basic_info();
                if id.has_id() {
                    *column_sizes.entry(id.id()).or_default() += col.compressed_size() as u64;
                    if self.repeated.contains(&id.id()) {
                        let e = footer_counts.entry(id.id()).or_insert((0, Some(0)));
                        e.0 += col.num_values().max(0) as u64;
                        e.1 = match (e.1, col.statistics().and_then(|s| s.null_count_opt())) {
                            (Some(a), Some(b)) => Some(a + b),
                            _ => None,
                        };
                    }
                }
            }
        }
        let mut b = DataFileBuilder::default();
        b.content(DataContentType::Data)
            .file_path(location)
            .file_format(DataFileFormat::Parquet)
            .partition(partition)
            .partition_spec_id(self.spec.spec_id())
            .record_count(rows as u64)
            .file_size_in_bytes(size)
            .split_offsets(Some(split_offsets));
        if let Some(id) = self.sort_order_id {
            b.sort_order_id(id);
        }
        let mut sizes = HashMap::new();
        let mut values = HashMap::new();
        let mut nulls = HashMap::new();
        let mut nans = HashMap::new();
        let mut lower = HashMap::new();
        let mut upper = HashMap::new();
        for (name_id, field) in metrics::primitive_leaves(&self.schema)
            .into_iter()
            .map(|(_, f)| (f.id, f))
        {
            let mode = self.metrics.mode(name_id);
            if !mode.keeps_counts() {
                continue;
            }
            if let Some(s) = column_sizes.get(&name_id) {
                sizes.insert(name_id, *s);
            }
            if let Some((v, n)) = footer_counts.get(&name_id) {
                values.insert(name_id, *v);
                if let Some(n) = n {
                    nulls.insert(name_id, *n);
                }
                continue;
            }
            let Some(st) = stats.get(&name_id) else {
                continue;
            };
            values.insert(name_id, st.values);
            nulls.insert(name_id, st.nulls);
            if st.float {
                nans.insert(name_id, st.nans);
            }
            if mode.keeps_bounds() {
                let Type::Primitive(p) = field.field_type.as_ref() else {
                    continue;
                };
                if let Some(min) = &st.min
                    && let Some(d) = to_datum(min, p, mode, Side::Lower)?
                {
                    lower.insert(name_id, d);
                }
                if let Some(max) = &st.max
                    && let Some(d) = to_datum(max, p, mode, Side::Upper)?
                {
                    upper.insert(name_id, d);
                }
            }
        }
        b.column_sizes(sizes)
            .value_counts(values)
            .null_value_counts(nulls)
            .nan_value_counts(nans)
            .lower_bounds(lower)
            .upper_bounds(upper);
        b.build()
            .map_err(|e| Error::Internal(format!("data file metadata: {e}")))
    }

    /// The data files closed so far ([`TableWriter::roll`]), handed over: [`TableWriter::finish`]
    /// and [`TableWriter::locations`] no longer list them.
    pub fn take_done(&mut self) -> Vec<DataFile> {
        std::mem::take(&mut self.done)
    }

    /// Closes every open file and returns the data files written.
    pub fn finish(mut self) -> Result<Vec<DataFile>> {
        self.roll()?;
        Ok(self.done)
    }

    /// Locations of files written so far and still open (for cleanup after a failure).
    pub fn locations(&self) -> Vec<String> {
        self.done
            .iter()
            .map(|d| d.file_path().to_string())
            .chain(self.open.values().map(|f| f.location.clone()))
            .collect()
    }
}

/// Writes `batches` (in the table's Arrow schema) and returns the data files. A table with a
/// sort order gets its rows sorted by it, each file recording the order's id
/// ([`crate::sort`]).
pub fn write_batches(
    store: &dyn FileStore,
    metadata: &TableMetadata,
    batches: &[RecordBatch],
    options: WriteOptions,
) -> Result<Vec<DataFile>> {
    let mut w = TableWriter::new(store, metadata, options)?;
    let sorted;
    let batches = match crate::sort::TableSort::of(metadata)? {
        Some(order) => {
            sorted = order.sort(batches, SORT_CHUNK_ROWS)?;
            w = w.with_sort_order_id(order.order_id());
            sorted.as_slice()
        }
        None => batches,
    };
    for b in batches {
        if let Err(e) = w.write(b) {
            cleanup(store, &w.locations());
            return Err(e);
        }
    }
    let locations = w.locations();
    w.finish().inspect_err(|_| cleanup(store, &locations))
}

/// Rows per batch handed to the writer after sorting.
const SORT_CHUNK_ROWS: usize = 65_536;

fn cleanup(store: &dyn FileStore, locations: &[String]) {
    for l in locations {
        if let Err(e) = store.delete(l) {
            tracing::warn!("could not remove a partly written file {l}: {e}");
        }
    }
}

/// Casts/reorders a batch to the table's Arrow schema by column name (exact, then
/// case-insensitive). A missing column gets its `write-default` (format v3) when it has one,
/// else null when it is optional; a missing required column without one is an error naming
/// it.
pub fn align_batch(
    batch: &RecordBatch,
    schema: &Schema,
    target: &ArrowSchemaRef,
) -> Result<RecordBatch> {
    let input = batch.schema();
    let mut columns = Vec::with_capacity(target.fields().len());
    for (tf, field) in target.fields().iter().zip(schema.as_struct().fields()) {
        let pos = input.index_of(tf.name()).ok().or_else(|| {
            input
                .fields()
                .iter()
                .position(|f| f.name().eq_ignore_ascii_case(tf.name()))
        });
        let col = match pos {
            Some(p) => {
                let c = batch.column(p);
                if c.data_type() == tf.data_type() {
                    c.clone()
                } else {
                    compute::cast(c, tf.data_type()).map_err(|e| {
                        Error::invalid(format!(
                            "column `{}` can't be written as {}: {e}",
                            tf.name(),
                            field.field_type
                        ))
                    })?
                }
            }
            None => match &field.write_default {
                Some(default) => {
                    crate::read::default_array(default, tf.data_type(), batch.num_rows()).map_err(
                        |e| {
                            Error::invalid(format!(
                                "column `{}`: its write-default can't be written as {}: {e}",
                                tf.name(),
                                field.field_type
                            ))
                        },
                    )?
                }
                None if !field.required => {
                    arrow::array::new_null_array(tf.data_type(), batch.num_rows())
                }
                None => {
                    return Err(Error::invalid(format!(
                        "required column `{}` is missing from the rows to write",
                        tf.name()
                    )));
                }
            },
        };
        if field.required && col.null_count() > 0 {
            return Err(Error::invalid(format!(
                "required column `{}` has {} null values",
                tf.name(),
                col.null_count()
            )));
        }
        columns.push(col);
    }
    Ok(RecordBatch::try_new(target.clone(), columns)?)
}

/// A comparable value seen in a column.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
enum Scalar {
    Bool(bool),
    Int(i64),
    F32(f32),
    F64(f64),
    Dec(i128),
    Str(String),
    Bytes(Vec<u8>),
}

#[derive(Debug, Default)]
struct ColumnStats {
    values: u64,
    nulls: u64,
    nans: u64,
    float: bool,
    min: Option<Scalar>,
    max: Option<Scalar>,
}

impl ColumnStats {
    fn offer(&mut self, lo: Scalar, hi: Scalar) {
        if self.min.as_ref().is_none_or(|m| lo < *m) {
            self.min = Some(lo);
        }
        if self.max.as_ref().is_none_or(|m| hi > *m) {
            self.max = Some(hi);
        }
    }
}

fn update_stats(
    fields: &[NestedFieldRef],
    arrays: &[ArrayRef],
    config: &MetricsConfig,
    stats: &mut HashMap<i32, ColumnStats>,
) -> Result<()> {
    for (f, a) in fields.iter().zip(arrays) {
        match f.field_type.as_ref() {
            Type::Primitive(_) => {
                let mode = config.mode(f.id);
                if mode == MetricsMode::None {
                    continue;
                }
                let st = stats.entry(f.id).or_default();
                st.values += a.len() as u64;
                st.nulls += a.null_count() as u64;
                update_column(a, mode.keeps_bounds(), st)?;
            }
            Type::Struct(s) => {
                if let Some(sa) = a.as_struct_opt() {
                    update_stats(s.fields(), sa.columns(), config, stats)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn update_column(a: &ArrayRef, bounds: bool, st: &mut ColumnStats) -> Result<()> {
    match a.data_type() {
        DataType::Float32 => {
            st.float = true;
            let mut lo: Option<f32> = None;
            let mut hi: Option<f32> = None;
            for v in a.as_primitive::<Float32Type>().iter().flatten() {
                if v.is_nan() {
                    st.nans += 1;
                } else {
                    lo = Some(lo.map_or(v, |l| l.min(v)));
                    hi = Some(hi.map_or(v, |h| h.max(v)));
                }
            }
            if bounds && let (Some(l), Some(h)) = (lo, hi) {
                st.offer(Scalar::F32(l), Scalar::F32(h));
            }
            return Ok(());
        }
        DataType::Float64 => {
            st.float = true;
            let mut lo: Option<f64> = None;
            let mut hi: Option<f64> = None;
            for v in a.as_primitive::<Float64Type>().iter().flatten() {
                if v.is_nan() {
                    st.nans += 1;
                } else {
                    lo = Some(lo.map_or(v, |l| l.min(v)));
                    hi = Some(hi.map_or(v, |h| h.max(v)));
                }
            }
            if bounds && let (Some(l), Some(h)) = (lo, hi) {
                st.offer(Scalar::F64(l), Scalar::F64(h));
            }
            return Ok(());
        }
        _ => {}
    }
    if !bounds || a.null_count() == a.len() {
        return Ok(());
    }
    let pair = match a.data_type() {
        DataType::Boolean => {
            let b = a.as_boolean();
            compute::min_boolean(b)
                .zip(compute::max_boolean(b))
                .map(|(l, h)| (Scalar::Bool(l), Scalar::Bool(h)))
        }
        DataType::Int32 => {
            let p = a.as_primitive::<Int32Type>();
            compute::min(p)
                .zip(compute::max(p))
                .map(|(l, h)| (Scalar::Int(l as i64), Scalar::Int(h as i64)))
        }
        DataType::Date32 => {
            let p = a.as_primitive::<Date32Type>();
            compute::min(p)
                .zip(compute::max(p))
                .map(|(l, h)| (Scalar::Int(l as i64), Scalar::Int(h as i64)))
        }
        DataType::Int64 => {
            let p = a.as_primitive::<Int64Type>();
            compute::min(p)
                .zip(compute::max(p))
                .map(|(l, h)| (Scalar::Int(l), Scalar::Int(h)))
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let p = a.as_primitive::<Time64MicrosecondType>();
            compute::min(p)
                .zip(compute::max(p))
                .map(|(l, h)| (Scalar::Int(l), Scalar::Int(h)))
        }
        DataType::Timestamp(unit, _) => {
            let (l, h) = match unit {
                TimeUnit::Microsecond => {
                    let p = a.as_primitive::<TimestampMicrosecondType>();
                    (compute::min(p), compute::max(p))
                }
                TimeUnit::Nanosecond => {
                    let p = a.as_primitive::<TimestampNanosecondType>();
                    (compute::min(p), compute::max(p))
                }
                TimeUnit::Millisecond => {
                    let p = a.as_primitive::<TimestampMillisecondType>();
                    (compute::min(p), compute::max(p))
                }
                TimeUnit::Second => {
                    let p = a.as_primitive::<TimestampSecondType>();
                    (compute::min(p), compute::max(p))
                }
            };
            l.zip(h).map(|(l, h)| (Scalar::Int(l), Scalar::Int(h)))
        }
        DataType::Decimal128(_, _) => {
            let p = a.as_primitive::<Decimal128Type>();
            compute::min(p)
                .zip(compute::max(p))
                .map(|(l, h)| (Scalar::Dec(l), Scalar::Dec(h)))
        }
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            compute::min_string(s)
                .zip(compute::max_string(s))
                .map(|(l, h)| (Scalar::Str(l.to_string()), Scalar::Str(h.to_string())))
        }
        DataType::LargeUtf8 => {
            let s = a.as_string::<i64>();
            compute::min_string(s)
                .zip(compute::max_string(s))
                .map(|(l, h)| (Scalar::Str(l.to_string()), Scalar::Str(h.to_string())))
        }
        DataType::Binary => {
            let s = a.as_binary::<i32>();
            compute::min_binary(s)
                .zip(compute::max_binary(s))
                .map(|(l, h)| (Scalar::Bytes(l.to_vec()), Scalar::Bytes(h.to_vec())))
        }
        DataType::LargeBinary => {
            let s = a.as_binary::<i64>();
            compute::min_binary(s)
                .zip(compute::max_binary(s))
                .map(|(l, h)| (Scalar::Bytes(l.to_vec()), Scalar::Bytes(h.to_vec())))
        }
        DataType::FixedSizeBinary(_) => {
            let s = a.as_fixed_size_binary();
            let lo = s.iter().flatten().min().map(<[u8]>::to_vec);
            let hi = s.iter().flatten().max().map(<[u8]>::to_vec);
            lo.zip(hi)
                .map(|(l, h)| (Scalar::Bytes(l), Scalar::Bytes(h)))
        }
        _ => None,
    };
    if let Some((l, h)) = pair {
        st.offer(l, h);
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Side {
    Lower,
    Upper,
}

fn to_datum(v: &Scalar, t: &PrimitiveType, mode: MetricsMode, side: Side) -> Result<Option<Datum>> {
    let n = match mode {
        MetricsMode::Truncate(n) => Some(n),
        _ => None,
    };
    Ok(Some(match (t, v) {
        (PrimitiveType::Boolean, Scalar::Bool(b)) => Datum::bool(*b),
        (PrimitiveType::Int, Scalar::Int(i)) => Datum::int(*i as i32),
        (PrimitiveType::Long, Scalar::Int(i)) => Datum::long(*i),
        (PrimitiveType::Date, Scalar::Int(i)) => Datum::date(*i as i32),
        (PrimitiveType::Time, Scalar::Int(i)) => Datum::time_micros(*i)?,
        (PrimitiveType::Timestamp, Scalar::Int(i)) => Datum::timestamp_micros(*i),
        (PrimitiveType::Timestamptz, Scalar::Int(i)) => Datum::timestamptz_micros(*i),
        (PrimitiveType::TimestampNs, Scalar::Int(i)) => Datum::timestamp_nanos(*i),
        (PrimitiveType::TimestamptzNs, Scalar::Int(i)) => Datum::timestamptz_nanos(*i),
        (PrimitiveType::Float, Scalar::F32(f)) => Datum::float(*f),
        (PrimitiveType::Double, Scalar::F64(f)) => Datum::double(*f),
        (PrimitiveType::Decimal { .. }, Scalar::Dec(d)) => {
            Datum::try_from_bytes(&decimal_bytes(*d), t.clone())?
        }
        (PrimitiveType::String, Scalar::Str(s)) => match (n, side) {
            (Some(n), Side::Lower) => Datum::string(metrics::truncate_lower_str(s, n)),
            (Some(n), Side::Upper) => match metrics::truncate_upper_str(s, n) {
                Some(u) => Datum::string(u),
                None => return Ok(None),
            },
            (None, _) => Datum::string(s),
        },
        (PrimitiveType::Binary, Scalar::Bytes(b)) => match (n, side) {
            (Some(n), Side::Lower) => Datum::binary(metrics::truncate_lower_bytes(b, n).to_vec()),
            (Some(n), Side::Upper) => match metrics::truncate_upper_bytes(b, n) {
                Some(u) => Datum::binary(u),
                None => return Ok(None),
            },
            (None, _) => Datum::binary(b.clone()),
        },
        (PrimitiveType::Fixed(_), Scalar::Bytes(b)) => Datum::fixed(b.clone()),
        (PrimitiveType::Uuid, Scalar::Bytes(b)) => {
            let u = uuid::Uuid::from_slice(b)
                .map_err(|e| Error::Internal(format!("uuid bound: {e}")))?;
            Datum::uuid(u)
        }
        _ => return Ok(None),
    }))
}

/// Minimal big-endian two's-complement bytes of an unscaled decimal (the spec's encoding).
fn decimal_bytes(v: i128) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let b = bytes[start];
        let next = bytes[start + 1];
        if (b == 0 && next & 0x80 == 0) || (b == 0xFF && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    bytes[start..].to_vec()
}

/// The Iceberg literal of row `i` of a partition value array.
fn literal_at(a: &ArrayRef, i: usize, t: &Type) -> Result<Option<Literal>> {
    if a.is_null(i) {
        return Ok(None);
    }
    let Type::Primitive(p) = t else {
        return Err(Error::Internal("partition field of nested type".into()));
    };
    let lit = match (p, a.data_type()) {
        (PrimitiveType::Int | PrimitiveType::Date, DataType::Int32) => {
            PrimitiveLiteral::Int(a.as_primitive::<Int32Type>().value(i))
        }
        (PrimitiveType::Int | PrimitiveType::Date, DataType::Date32) => {
            PrimitiveLiteral::Int(a.as_primitive::<Date32Type>().value(i))
        }
        (PrimitiveType::Long, DataType::Int64) => {
            PrimitiveLiteral::Long(a.as_primitive::<Int64Type>().value(i))
        }
        (
            PrimitiveType::Timestamp | PrimitiveType::Timestamptz,
            DataType::Timestamp(TimeUnit::Microsecond, _),
        ) => PrimitiveLiteral::Long(a.as_primitive::<TimestampMicrosecondType>().value(i)),
        (PrimitiveType::Boolean, DataType::Boolean) => {
            PrimitiveLiteral::Boolean(a.as_boolean().value(i))
        }
        (PrimitiveType::String, DataType::Utf8) => {
            PrimitiveLiteral::String(a.as_string::<i32>().value(i).to_string())
        }
        (PrimitiveType::String, DataType::LargeUtf8) => {
            PrimitiveLiteral::String(a.as_string::<i64>().value(i).to_string())
        }
        (PrimitiveType::Decimal { .. }, DataType::Decimal128(_, _)) => {
            PrimitiveLiteral::Int128(a.as_primitive::<Decimal128Type>().value(i))
        }
        (PrimitiveType::Binary | PrimitiveType::Fixed(_), DataType::Binary) => {
            PrimitiveLiteral::Binary(a.as_binary::<i32>().value(i).to_vec())
        }
        (PrimitiveType::Binary | PrimitiveType::Fixed(_), DataType::LargeBinary) => {
            PrimitiveLiteral::Binary(a.as_binary::<i64>().value(i).to_vec())
        }
        (p, d) => {
            return Err(Error::Unsupported {
                table: String::from("(partitioned table)"),
                feature: format!("partition values of type {p}"),
                detail: format!("arrow type {d}"),
            });
        }
    };
    Ok(Some(Literal::Primitive(lit)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_encoding_is_minimal() {
        assert_eq!(decimal_bytes(0), vec![0]);
        assert_eq!(decimal_bytes(1), vec![1]);
        assert_eq!(decimal_bytes(-1), vec![0xFF]);
        assert_eq!(decimal_bytes(128), vec![0, 128]);
        assert_eq!(decimal_bytes(-129), vec![0xFF, 0x7F]);
        assert_eq!(decimal_bytes(1999), vec![0x07, 0xCF]);
    }

    /// The bloom filters of the first row group of a written file and their stored lengths, by
    /// column path.
    fn bloom_of(f: &DataFile) -> HashMap<String, (parquet::bloom_filter::Sbbf, i32)> {
        use parquet::file::properties::ReaderProperties;
        use parquet::file::reader::FileReader;
        use parquet::file::serialized_reader::{ReadOptionsBuilder, SerializedFileReader};
        let path = crate::store::normalize_local(f.file_path()).unwrap();
        let opts = ReadOptionsBuilder::new()
            .with_reader_properties(
                ReaderProperties::builder()
                    .set_read_bloom_filter(true)
                    .build(),
            )
            .build();
        let r = SerializedFileReader::new_with_options(std::fs::File::open(path).unwrap(), opts)
            .unwrap();
        let rg = r.get_row_group(0).unwrap();
        let columns: Vec<(String, i32)> = rg
            .metadata()
            .columns()
            .iter()
            .map(|c| {
                (
                    c.column_path().string(),
                    c.bloom_filter_length().unwrap_or(0),
                )
            })
            .collect();
        columns
            .into_iter()
            .enumerate()
            .filter_map(|(i, (n, len))| {
                rg.get_column_bloom_filter(i)
                    .cloned()
                    .map(|b| (n, (b, len)))
            })
            .collect()
    }

    #[test]
    fn bloom_filters_follow_the_table_properties() {
        use arrow::array::{Int64Array, StringArray, StructArray};
        use iceberg::spec::{NestedField, SortOrder, StructType};
        let dir = tempfile::tempdir().unwrap();
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "email", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(
                    3,
                    "address",
                    Type::Struct(StructType::new(vec![
                        NestedField::optional(4, "city", Type::Primitive(PrimitiveType::String))
                            .into(),
                    ])),
                )
                .into(),
            ])
            .build()
            .unwrap();
        let metadata_with = |props: &[(&str, &str)]| {
            iceberg::spec::TableMetadataBuilder::new(
                schema.clone(),
                iceberg::spec::UnboundPartitionSpec::builder().build(),
                SortOrder::unsorted_order(),
                format!("file://{}", dir.path().display()),
                iceberg::spec::FormatVersion::V2,
                props
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
            .unwrap()
            .build()
            .unwrap()
            .metadata
        };
        let store = crate::store::LocalStore::new();
        let n = 5000i64;
        let write = |metadata: &TableMetadata| {
            let mut w = TableWriter::new(&store, metadata, WriteOptions::default())?;
            let city = StringArray::from_iter_values((0..n).map(|i| format!("city{}", i % 97)));
            let batch = RecordBatch::try_new(
                w.arrow_schema().clone(),
                vec![
                    // Even ids only: the odd ones in between are absent but inside the bounds.
                    Arc::new(Int64Array::from_iter_values((0..n).map(|i| 2 * i))) as ArrayRef,
                    Arc::new(StringArray::from_iter_values(
                        (0..n).map(|i| format!("learner{i}@example.org")),
                    )),
                    Arc::new(StructArray::new(
                        match w.arrow_schema().field(2).data_type() {
                            DataType::Struct(fields) => fields.clone(),
                            other => panic!("{other}"),
                        },
                        vec![Arc::new(city) as ArrayRef],
                        None,
                    )),
                ],
            )
            .unwrap();
            w.write(&batch)?;
            w.finish()
        };
        // No property: no filter.
        let files = write(&metadata_with(&[])).unwrap();
        assert!(bloom_of(&files[0]).is_empty());
        let files = write(&metadata_with(&[
            ("write.parquet.bloom-filter-enabled.column.id", "TRUE"),
            ("write.parquet.bloom-filter-enabled.column.email", "false"),
            (
                "write.parquet.bloom-filter-enabled.column.address.city",
                "true",
            ),
            ("write.parquet.bloom-filter-fpp.column.address.city", "0.05"),
            // A column the schema doesn't have (dropped since): skipped, as Java does.
            ("write.parquet.bloom-filter-enabled.column.phone", "true"),
        ]))
        .unwrap();
        let blooms = bloom_of(&files[0]);
        let mut names: Vec<&String> = blooms.keys().collect();
        names.sort();
        assert_eq!(names, ["address.city", "id"]);
        let (id, id_len) = &blooms["id"];
        assert!((0..n).all(|i| id.check(&(2 * i))), "no false negatives");
        let false_positives = (0..n).filter(|i| id.check(&(2 * i + 1))).count();
        assert!(
            false_positives < n as usize * 3 / 100,
            "{false_positives} of {n} absent ids pass a filter asked for fpp 0.01"
        );
        // Sized for 1,048,576 rows at first, folded to the 5,000 values written: a 1 MiB
        // filter would be 1,048,576 bytes.
        assert!(*id_len <= 16 * 1024, "{id_len} bytes");
        let (city, _) = &blooms["address.city"];
        assert!((0..97).all(|i| city.check(&format!("city{i}").as_str())));
        // The filter that pruning reads skips the file for an absent id inside its bounds.
        let iceberg_schema = metadata_with(&[]).current_schema().clone();
        let location = files[0].file_path();
        let absent = (0..n).map(|i| 2 * i + 1).find(|v| !id.check(v)).unwrap();
        let look = |v: i64| {
            crate::prune::matching_rows(
                &store,
                location,
                &iceberg_schema,
                &crate::predicate::Predicate::eq("id", crate::predicate::Value::Int(v)),
            )
            .unwrap()
            .unwrap()
        };
        let m = look(absent);
        assert_eq!((m.row_groups_pruned, m.positions.len()), (1, 0));
        let m = look(2 * 1234);
        assert_eq!((m.row_groups_pruned, m.positions), (0, vec![1234]));
        // Bad values name the property; nothing is written.
        for (k, v) in [
            ("write.parquet.bloom-filter-fpp.column.id", "1.5"),
            ("write.parquet.bloom-filter-ndv.column.id", "-3"),
            ("write.parquet.bloom-filter-max-bytes", "lots"),
        ] {
            let err = write(&metadata_with(&[
                ("write.parquet.bloom-filter-enabled.column.id", "true"),
                (k, v),
            ]))
            .unwrap_err()
            .to_string();
            assert!(err.contains(k) && err.contains(v), "{err}");
        }
    }

    /// Which columns of each written file got a dictionary page.
    fn dictionary_columns(files: &[DataFile]) -> Vec<Vec<String>> {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        files
            .iter()
            .map(|f| {
                let path = crate::store::normalize_local(f.file_path()).unwrap();
                let r = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
                let rg = r.metadata().row_group(0);
                rg.columns()
                    .iter()
                    .filter(|c| c.dictionary_page_offset().is_some())
                    .map(|c| c.column_path().string())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_column_keeps_its_dictionary_only_where_the_dictionary_is_smaller() {
        use arrow::array::{Int64Array, StringArray};
        use iceberg::spec::{NestedField, SortOrder};
        let dir = tempfile::tempdir().unwrap();
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "kind", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(3, "email", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(4, "course", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap();
        let metadata = crate::test_metadata(
            schema,
            SortOrder::unsorted_order(),
            format!("file://{}", dir.path().display()),
        );
        let store = crate::store::LocalStore::new();
        let rows = |n: i64| {
            let mut w = TableWriter::new(&store, &metadata, WriteOptions::default()).unwrap();
            let batch = RecordBatch::try_new(
                w.arrow_schema().clone(),
                vec![
                    // Unique ids: a dictionary holds every value and the indices besides.
                    Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
                    // Three kinds: the dictionary is tiny.
                    Arc::new(StringArray::from_iter_values(
                        (0..n).map(|i| ["view", "download", "quiz"][i as usize % 3]),
                    )),
                    // Unique strings, every other one NULL.
                    Arc::new(StringArray::from_iter((0..n).map(|i| {
                        (i % 2 == 0).then(|| format!("learner{i}@example.org"))
                    }))),
                    // 3 in 4 values distinct: indices plus dictionary exceed 3/4 of plain.
                    Arc::new(Int64Array::from_iter_values(
                        (0..n).map(|i| i - i % 4 + (i % 4).min(2)),
                    )),
                ],
            )
            .unwrap();
            w.write(&batch).unwrap();
            let files = w.finish().unwrap();
            (files, batch)
        };
        let (files, batch) = rows(5000);
        assert_eq!(dictionary_columns(&files), vec![vec!["kind".to_string()]]);
        // The values read back as written, whatever the encoding.
        let path = crate::store::normalize_local(files[0].file_path()).unwrap();
        let read: Vec<RecordBatch> =
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                std::fs::File::open(path).unwrap(),
            )
            .unwrap()
            .build()
            .unwrap()
            .collect::<std::result::Result<_, _>>()
            .unwrap();
        let read = arrow::compute::concat_batches(&read[0].schema(), &read).unwrap();
        assert_eq!(read.columns(), batch.columns());
        // Too few rows to judge: the writer's default (a dictionary for every column).
        let (files, _) = rows(40);
        assert_eq!(dictionary_columns(&files)[0].len(), 4);
    }
}
