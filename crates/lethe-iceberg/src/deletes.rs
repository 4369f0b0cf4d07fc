//! Merge-on-read delete files: which apply to which data file, reading and applying them,
//! cleaning them up after a copy-on-write rewrite, and writing them.
//!
//! Guarantees:
//! - Delete files are matched to data files by the spec's rules ([`DeleteIndex`]): a deletion
//!   vector (format v3) applies to the one data file its `referenced_data_file` names, when that
//!   file's data sequence number is less than or equal to the vector's and both have the same
//!   partition (spec and values); a position delete file applies to data files of its partition
//!   (or every partition when its spec is unpartitioned) whose data sequence number is less
//!   than or equal to its own, and only to the rows at the positions it lists for that file's
//!   path (or to `referenced_data_file`), unless a deletion vector applies to that data file
//!   (the vector holds every earlier delete of it); an equality delete applies to data files of
//!   its partition (or every partition, for an unpartitioned spec) whose data sequence number
//!   is strictly smaller than its own, to rows whose equality columns (by field id) equal one
//!   of its rows (null equals null).
//! - [`DeleteReader::live_masks`] gives, for the batches of one data file read in file order,
//!   which rows are live. Every delete file (every vector of a Puffin file) is read once per
//!   reader; a deletion vector is validated first ([`crate::deletion_vector`]) and a corrupt one
//!   is an error naming its Puffin file.
//! - [`DeleteReader::plan_cleanup`] decides, after a rewrite removed data files, which delete
//!   files to drop or rewrite: the deletion vector of a removed data file is removed (by its
//!   Puffin file and offset: the other vectors of the same Puffin file stay live), a position
//!   delete file loses the rows naming data files that are no longer live (dropped when none is
//!   left), an equality delete file that applies to no remaining data file is dropped, and with
//!   a subject predicate an equality delete file's rows that match it are dropped (the
//!   subject's key must not stay behind in a delete file). A rewritten delete file keeps its
//!   rows byte for byte (same Arrow schema, same field ids) and its data sequence number, so it
//!   applies to exactly the data files it applied to before.
//! - [`write_position_deletes`] and [`write_equality_deletes`] write spec-conforming delete
//!   files (sorted `file_path`/`pos`, reserved field ids, optional `row`), as Trino, Spark or
//!   Flink would; lethe uses them for fixtures and benchmarks, never to delete rows itself.
//!
//! Not supported (refused with [`Error::Unsupported`] before anything is written): delete
//! files that are neither Parquet nor deletion vectors, equality deletes on nested or dropped
//! columns, and in a format v3 table a Parquet position delete file that would have to be
//! rewritten (the spec forbids adding position delete files to v3 tables; such files exist
//! only in tables upgraded from v2).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray, StructArray,
};
use arrow::compute;
use arrow::datatypes::{DataType, Field, Fields, Schema as ArrowSchema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, FormatVersion, Schema,
    Struct, TableMetadata, Type,
};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

use crate::deletion_vector::{DeletionVector, read_deletion_vector};
use crate::error::{Error, Result};
use crate::predicate::Predicate;
use crate::read::{field_id_of, project_batches, read_raw};
use crate::snapshot::KeptDelete;
use crate::store::FileStore;
use crate::table::{LoadedTable, TrackedFile, Warehouse};

/// Field id of a position delete file's `file_path` column (reserved by the spec).
pub const FILE_PATH_FIELD_ID: i32 = 2_147_483_546;
/// Field id of a position delete file's `pos` column.
pub const POS_FIELD_ID: i32 = 2_147_483_545;
/// Field id of a position delete file's optional `row` column (the deleted row).
pub const ROW_FIELD_ID: i32 = 2_147_483_544;

const FIELD_ID_KEY: &str = "PARQUET:field_id";

/// The data sequence number of a tracked file (0 for format v1, which has none).
pub fn data_sequence_number(f: &TrackedFile) -> i64 {
    f.entry.sequence_number.unwrap_or(0)
}

fn norm(store: &dyn FileStore, p: &str) -> String {
    store.normalize(p).unwrap_or_else(|_| p.to_string())
}

fn is_delete(f: &TrackedFile) -> bool {
    matches!(
        f.entry.data_file.content_type(),
        DataContentType::PositionDeletes | DataContentType::EqualityDeletes
    )
}

fn is_deletion_vector(f: &TrackedFile) -> bool {
    crate::deletion_vector::is_deletion_vector(&f.entry.data_file)
}

/// A location as a lookup key: `file:` URIs in any spelling (`file:/x`, `file:///x`,
/// `file://localhost/x`) become the path; other URIs stay as they are.
fn path_key(p: &str) -> String {
    match p.strip_prefix("file:") {
        Some(rest) => {
            let rest = rest.strip_prefix("//localhost").unwrap_or(rest);
            format!("/{}", rest.trim_start_matches('/'))
        }
        None => p.to_string(),
    }
}

/// Refuses delete files lethe can't apply: delete files that are neither Parquet nor deletion
/// vectors (an equality delete in a Puffin file, ORC or Avro delete files). Names the table and
/// the first such file.
pub fn check_supported(table: &LoadedTable, files: &[TrackedFile]) -> Result<()> {
    for f in files.iter().filter(|f| is_delete(f)) {
        let df = &f.entry.data_file;
        if is_deletion_vector(f) {
            continue;
        }
        if df.file_format() != DataFileFormat::Parquet {
            return Err(Error::Unsupported {
                table: table.name.to_string(),
                feature: format!("{:?} delete files", df.file_format()),
                detail: format!(
                    "delete file {} is not Parquet; lethe reads Parquet delete files only",
                    df.file_path()
                ),
            });
        }
    }
    Ok(())
}

/// What about a table lethe can't erase correctly yet, found before anything changes: delete
/// files it can't read (neither Parquet nor deletion vectors) and, in a format v3 table,
/// Parquet position delete files that name more than one data file (a rewrite would have to
/// write them again, and v3 allows no new position delete file). `None` when lethe can read
/// and rewrite it.
///
/// Deletion vectors, row lineage and default values are handled (see [`crate::deletion_vector`],
/// [`crate::lineage`], [`crate::read`]); column types the iceberg crate can't represent
/// (`variant`, `geometry`, `geography`, `unknown`) keep the table from loading at all:
/// [`crate::table::Warehouse::load`] refuses such tables with [`Error::Unsupported`] (see
/// [`crate::table::unrepresentable_columns`]).
pub async fn unsupported_features(wh: &Warehouse, table: &LoadedTable) -> Result<Option<String>> {
    let mut found: Vec<String> = Vec::new();
    let files = wh.current_files(table).await?;
    let mut other_formats: Vec<&str> = Vec::new();
    let mut shared_position_files = 0usize;
    for f in files
        .iter()
        .filter(|f| is_delete(f) && !is_deletion_vector(f))
    {
        let df = &f.entry.data_file;
        if df.file_format() != DataFileFormat::Parquet {
            other_formats.push(df.file_path());
        } else if table.metadata.format_version() == FormatVersion::V3
            && df.content_type() == DataContentType::PositionDeletes
            && df.referenced_data_file().is_none()
        {
            shared_position_files += 1;
        }
    }
    if let Some(first) = other_formats.first() {
        found.push(format!(
            "{} delete files that are neither Parquet nor deletion vectors (first: {first})",
            other_formats.len()
        ));
    }
    if shared_position_files > 0 {
        found.push(format!(
            "{shared_position_files} Parquet position delete files naming several data files in a format v3 table (an erasure would have to rewrite them, and v3 allows only deletion vectors)"
        ));
    }
    if found.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "{}: lethe can't rewrite this table correctly",
        found.join("; ")
    )))
}

/// Which live delete files apply to which live data files, by the spec's rules.
#[derive(Debug, Clone, Default)]
pub struct DeleteIndex {
    deletes: Vec<TrackedFile>,
    /// Partition spec id by manifest location (a file's spec is its manifest's).
    specs: HashMap<String, i32>,
    /// Delete files by (spec id, partition).
    by_partition: HashMap<(i32, Struct), Vec<usize>>,
    /// Delete files of an unpartitioned spec: they apply to every partition.
    global: Vec<usize>,
    /// Deletion vectors by the data file they name ([`path_key`] of `referenced_data_file`).
    vectors: HashMap<String, Vec<usize>>,
}

impl DeleteIndex {
    /// Indexes the delete files among `files` (the live files of the table's current
    /// snapshot); reads the snapshot's manifest list for the files' partition specs.
    pub fn load(wh: &Warehouse, table: &LoadedTable, files: &[TrackedFile]) -> Result<Self> {
        let mut specs = HashMap::new();
        if let Some(snapshot) = table.current_snapshot() {
            for mf in wh.manifest_list(table, snapshot)?.entries() {
                specs.insert(mf.manifest_path.clone(), mf.partition_spec_id);
            }
        }
        Ok(Self::new(&table.metadata, files, specs))
    }

    /// Indexes the delete files among `files`; `specs` gives the partition spec id of each
    /// manifest the files are in.
    pub fn new(
        metadata: &TableMetadata,
        files: &[TrackedFile],
        specs: HashMap<String, i32>,
    ) -> Self {
        let mut index = DeleteIndex {
            specs,
            ..Default::default()
        };
        for f in files.iter().filter(|f| is_delete(f)) {
            let i = index.deletes.len();
            index.deletes.push(f.clone());
            if is_deletion_vector(f) {
                let target = f.entry.data_file.referenced_data_file().unwrap_or_default();
                index.vectors.entry(path_key(&target)).or_default().push(i);
                continue;
            }
            let spec_id = index.spec_id(f);
            let unpartitioned = metadata
                .partition_spec_by_id(spec_id)
                .is_none_or(|s| s.is_unpartitioned());
            if unpartitioned {
                index.global.push(i);
            } else {
                index
                    .by_partition
                    .entry((spec_id, f.entry.data_file.partition().clone()))
                    .or_default()
                    .push(i);
            }
        }
        index
    }

    /// The partition spec id of a tracked file (its manifest's; 0 when unknown).
    pub fn spec_id(&self, f: &TrackedFile) -> i32 {
        self.specs.get(&f.manifest).copied().unwrap_or(0)
    }

    /// Whether the snapshot has no delete file.
    pub fn is_empty(&self) -> bool {
        self.deletes.is_empty()
    }

    /// The delete files, in the order indices refer to.
    pub fn deletes(&self) -> &[TrackedFile] {
        &self.deletes
    }

    /// Whether delete file `d` applies to data file `data` by sequence numbers and
    /// `referenced_data_file` (the partition is matched by the index).
    fn applies(d: &TrackedFile, data: &TrackedFile, store: &dyn FileStore) -> bool {
        let (ds, fs) = (data_sequence_number(d), data_sequence_number(data));
        match d.entry.data_file.content_type() {
            DataContentType::PositionDeletes => {
                fs <= ds
                    && d.entry.data_file.referenced_data_file().is_none_or(|r| {
                        r == data.entry.data_file.file_path()
                            || norm(store, &r) == norm(store, data.entry.data_file.file_path())
                    })
            }
            DataContentType::EqualityDeletes => fs < ds,
            DataContentType::Data => false,
        }
    }

    /// The delete files that apply to data file `data`, by reference.
    pub fn refs_for_data_file(
        &self,
        data: &TrackedFile,
        store: &dyn FileStore,
    ) -> Vec<DeleteFileRef> {
        self.for_data_file(data, store)
            .into_iter()
            .filter_map(|i| DeleteFileRef::of(&self.deletes[i]))
            .collect()
    }

    /// Indices of the deletion vectors that apply to data file `data`: it is the file they
    /// name, it is not newer than they are, and it has their partition.
    fn vectors_for<'s>(&'s self, data: &'s TrackedFile) -> impl Iterator<Item = usize> + 's {
        let df = &data.entry.data_file;
        let (spec, seq) = (self.spec_id(data), data_sequence_number(data));
        self.vectors
            .get(&path_key(df.file_path()))
            .into_iter()
            .flatten()
            .copied()
            .filter(move |i| {
                let d = &self.deletes[*i];
                seq <= data_sequence_number(d)
                    && self.spec_id(d) == spec
                    && d.entry.data_file.partition() == df.partition()
            })
    }

    /// Indices of the delete files that apply to data file `data`. When a deletion vector
    /// applies, position delete files don't (the vector holds their deletes of this file).
    pub fn for_data_file(&self, data: &TrackedFile, store: &dyn FileStore) -> Vec<usize> {
        self.matching(data, store, true)
    }

    /// Delete files that apply to `data` by partition, sequence number and path;
    /// `vector_wins` drops position delete files when a deletion vector applies.
    fn matching(&self, data: &TrackedFile, store: &dyn FileStore, vector_wins: bool) -> Vec<usize> {
        if self.deletes.is_empty() {
            return Vec::new();
        }
        let vectors: Vec<usize> = self.vectors_for(data).collect();
        let key = (self.spec_id(data), data.entry.data_file.partition().clone());
        let mut out: Vec<usize> = self
            .global
            .iter()
            .chain(self.by_partition.get(&key).into_iter().flatten())
            .copied()
            .filter(|i| Self::applies(&self.deletes[*i], data, store))
            .filter(|i| {
                !(vector_wins
                    && !vectors.is_empty()
                    && self.deletes[*i].entry.data_file.content_type()
                        == DataContentType::PositionDeletes)
            })
            .collect();
        out.extend(vectors);
        out
    }
}

/// A delete file by what applying it takes: where it is and, for an equality delete, the field
/// ids it compares. What a task run elsewhere receives instead of the manifest entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeleteFileRef {
    /// The delete file's location as its manifest spells it.
    pub location: String,
    /// The equality field ids of an equality delete; None for a position delete.
    pub equality_ids: Option<Vec<i32>>,
}

impl DeleteFileRef {
    /// The reference of a tracked delete file (None for a data file).
    pub fn of(f: &TrackedFile) -> Option<Self> {
        let df = &f.entry.data_file;
        match df.content_type() {
            DataContentType::PositionDeletes => Some(DeleteFileRef {
                location: df.file_path().to_string(),
                equality_ids: None,
            }),
            DataContentType::EqualityDeletes => Some(DeleteFileRef {
                location: df.file_path().to_string(),
                equality_ids: Some(df.equality_ids().unwrap_or_default()),
            }),
            DataContentType::Data => None,
        }
    }
}

/// A position delete file's content: sorted positions by (normalised) data file path.
#[derive(Debug, Default)]
struct PositionDeletes {
    by_path: HashMap<String, Vec<u64>>,
}

/// An equality delete file's content: its keys, encoded with the table's current types.
#[derive(Debug)]
struct EqualityDeletes {
    /// Column positions (in the table's current schema) of the equality fields.
    columns: Vec<usize>,
    fields: Vec<SortField>,
    keys: HashSet<Vec<u8>>,
}

/// What the cleanup after a rewrite does to delete files.
#[derive(Debug, Clone, Default)]
pub struct DeleteCleanup {
    /// Delete files to remove (dropped, or replaced by a rewritten copy).
    pub removed: Vec<String>,
    /// Deletion vectors to remove, by Puffin file and `content_offset` (the vectors of removed
    /// data files).
    pub removed_vectors: Vec<(String, i64)>,
    /// Puffin files none of whose vectors stays live after the change.
    pub puffin_files_emptied: Vec<String>,
    /// Of those, the ones replaced by a rewritten copy.
    pub rewritten: Vec<String>,
    /// Rewritten delete files to add, with the sequence number and spec they keep.
    pub added: Vec<(DataFile, KeptDelete)>,
    /// Delete rows dropped (they named removed data files, or matched the subject).
    pub rows_dropped: u64,
}

/// Reads delete files (each at most once) and applies them to data files of one table.
pub struct DeleteReader<'a> {
    store: &'a dyn FileStore,
    table: &'a LoadedTable,
    schema: Schema,
    target: SchemaRef,
    positions: HashMap<String, Arc<PositionDeletes>>,
    equalities: HashMap<String, Arc<EqualityDeletes>>,
    vectors: HashMap<(String, i64), Arc<DeletionVector>>,
}

impl std::fmt::Debug for DeleteReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeleteReader")
            .field("table", &self.table.name)
            .field("position_files", &self.positions.len())
            .field("equality_files", &self.equalities.len())
            .field("deletion_vectors", &self.vectors.len())
            .finish()
    }
}

/// The index of the Arrow column with Iceberg field id `id` (`PARQUET:field_id`), if any.
pub fn column_by_id(schema: &ArrowSchema, id: i32) -> Option<usize> {
    schema
        .fields()
        .iter()
        .position(|f| field_id_of(f) == Some(id))
}

impl<'a> DeleteReader<'a> {
    /// A reader for `table` (its current schema).
    pub fn new(store: &'a dyn FileStore, table: &'a LoadedTable) -> Result<Self> {
        let schema = table.metadata.current_schema().as_ref().clone();
        Ok(DeleteReader {
            store,
            table,
            target: crate::writer::arrow_schema(&schema)?,
            schema,
            positions: HashMap::new(),
            equalities: HashMap::new(),
            vectors: HashMap::new(),
        })
    }

    /// The deletion vector a delete entry points at, read and validated once.
    fn deletion_vector(&mut self, f: &TrackedFile) -> Result<Arc<DeletionVector>> {
        let df = &f.entry.data_file;
        let key = (
            df.file_path().to_string(),
            df.content_offset().unwrap_or(-1),
        );
        if let Some(v) = self.vectors.get(&key) {
            return Ok(v.clone());
        }
        let v = Arc::new(read_deletion_vector(self.store, df).map_err(|e| match e {
            Error::Invalid(m) => Error::Invalid(format!("{}: {m}", self.table.name)),
            other => other,
        })?);
        self.vectors.insert(key, v.clone());
        Ok(v)
    }

    fn position_deletes(&mut self, f: &TrackedFile) -> Result<Arc<PositionDeletes>> {
        self.position_deletes_at(f.entry.data_file.file_path())
    }

    fn position_deletes_at(&mut self, path: &str) -> Result<Arc<PositionDeletes>> {
        if let Some(p) = self.positions.get(path) {
            return Ok(p.clone());
        }
        let (schema, batches) = read_raw(self.store, path)?;
        let pi =
            column_by_id(&schema, FILE_PATH_FIELD_ID).or_else(|| schema.index_of("file_path").ok());
        let qi = column_by_id(&schema, POS_FIELD_ID).or_else(|| schema.index_of("pos").ok());
        let (Some(pi), Some(qi)) = (pi, qi) else {
            return Err(Error::invalid(format!(
                "{}: position delete file {path} has no file_path/pos columns",
                self.table.name
            )));
        };
        let mut out = PositionDeletes::default();
        let mut last: Option<(String, String)> = None;
        for b in &batches {
            let paths = compute::cast(b.column(pi), &DataType::Utf8)?;
            let paths = paths.as_string::<i32>();
            let pos = compute::cast(b.column(qi), &DataType::Int64)?;
            let pos = pos.as_primitive::<arrow::datatypes::Int64Type>();
            for i in 0..b.num_rows() {
                if paths.is_null(i) || pos.is_null(i) || pos.value(i) < 0 {
                    return Err(Error::invalid(format!(
                        "{}: position delete file {path} has a null or negative entry at row {i}",
                        self.table.name
                    )));
                }
                let raw = paths.value(i);
                let key = match &last {
                    Some((r, k)) if r == raw => k.clone(),
                    _ => {
                        let k = norm(self.store, raw);
                        last = Some((raw.to_string(), k.clone()));
                        k
                    }
                };
                out.by_path
                    .entry(key)
                    .or_default()
                    .push(pos.value(i) as u64);
            }
        }
        for v in out.by_path.values_mut() {
            v.sort_unstable();
            v.dedup();
        }
        let out = Arc::new(out);
        self.positions.insert(path.to_string(), out.clone());
        Ok(out)
    }

    /// Positions (in the table's current schema) and Arrow types of the columns of equality
    /// delete file `path`, which compares field ids `ids`.
    fn equality_columns_of(&self, path: &str, ids: &[i32]) -> Result<(Vec<i32>, Vec<usize>)> {
        if ids.is_empty() {
            return Err(Error::invalid(format!(
                "{}: equality delete file {path} names no equality field",
                self.table.name,
            )));
        }
        let fields = self.schema.as_struct().fields();
        let mut cols = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(pos) = fields.iter().position(|f| f.id == *id) else {
                return Err(Error::Unsupported {
                    table: self.table.name.to_string(),
                    feature: "equality deletes on nested or dropped columns".into(),
                    detail: format!(
                        "delete file {path} compares field id {id}, which is not a top-level column of the current schema",
                    ),
                });
            };
            cols.push(pos);
        }
        Ok((ids.to_vec(), cols))
    }

    /// Reads an equality delete file's rows projected onto the table's current schema
    /// (columns it doesn't hold are null).
    fn equality_rows(
        &self,
        f: &TrackedFile,
    ) -> Result<(SchemaRef, Vec<RecordBatch>, Vec<RecordBatch>)> {
        self.equality_rows_at(f.entry.data_file.file_path())
    }

    fn equality_rows_at(
        &self,
        path: &str,
    ) -> Result<(SchemaRef, Vec<RecordBatch>, Vec<RecordBatch>)> {
        let (schema, raw) = read_raw(self.store, path)?;
        let projected = project_batches(&schema, &raw, &self.schema, path, true)?;
        Ok((schema, raw, projected))
    }

    fn equality_deletes(&mut self, f: &TrackedFile) -> Result<Arc<EqualityDeletes>> {
        let df = &f.entry.data_file;
        self.equality_deletes_at(df.file_path(), &df.equality_ids().unwrap_or_default())
    }

    fn equality_deletes_at(&mut self, path: &str, ids: &[i32]) -> Result<Arc<EqualityDeletes>> {
        if let Some(e) = self.equalities.get(path) {
            return Ok(e.clone());
        }
        let (_, columns) = self.equality_columns_of(path, ids)?;
        let (_, _, projected) = self.equality_rows_at(path)?;
        let fields: Vec<SortField> = columns
            .iter()
            .map(|c| SortField::new(self.target.field(*c).data_type().clone()))
            .collect();
        let converter = RowConverter::new(fields.clone())?;
        let mut keys = HashSet::new();
        for b in &projected {
            let arrays: Vec<ArrayRef> = columns.iter().map(|c| b.column(*c).clone()).collect();
            let rows = converter.convert_columns(&arrays)?;
            for r in rows.iter() {
                keys.insert(r.as_ref().to_vec());
            }
        }
        let out = Arc::new(EqualityDeletes {
            columns,
            fields,
            keys,
        });
        self.equalities.insert(path.to_string(), out.clone());
        Ok(out)
    }

    /// The positions of data file `data_path` that the position delete files and deletion
    /// vectors among `deletes` (from [`DeleteIndex::for_data_file`]) delete, ascending and
    /// without repeats. Equality deletes are not applied here.
    pub fn deleted_positions(
        &mut self,
        index: &DeleteIndex,
        deletes: &[usize],
        data_path: &str,
    ) -> Result<Vec<u64>> {
        let key = norm(self.store, data_path);
        let mut positions: Vec<u64> = Vec::new();
        for i in deletes {
            let d = &index.deletes()[*i];
            if d.entry.data_file.content_type() != DataContentType::PositionDeletes {
                continue;
            }
            if is_deletion_vector(d) {
                positions.extend(self.deletion_vector(d)?.iter());
            } else if let Some(v) = self.position_deletes(d)?.by_path.get(&key) {
                positions.extend_from_slice(v);
            }
        }
        positions.sort_unstable();
        positions.dedup();
        Ok(positions)
    }

    /// Which rows of a data file are live, given the delete files that apply to it (`deletes`,
    /// from [`DeleteIndex::for_data_file`]) and its batches in file order in the table's
    /// current schema (as [`crate::read::read_data_file`] returns them). `None` when nothing
    /// applies.
    pub fn live_masks(
        &mut self,
        index: &DeleteIndex,
        deletes: &[usize],
        data_path: &str,
        batches: &[RecordBatch],
    ) -> Result<Option<Vec<BooleanArray>>> {
        if deletes.is_empty() {
            return Ok(None);
        }
        let positions = self.deleted_positions(index, deletes, data_path)?;
        let mut equalities: Vec<Arc<EqualityDeletes>> = Vec::new();
        for i in deletes {
            let d = &index.deletes()[*i];
            if d.entry.data_file.content_type() == DataContentType::EqualityDeletes {
                let e = self.equality_deletes(d)?;
                if !e.keys.is_empty() {
                    equalities.push(e);
                }
            }
        }
        masks_of(&positions, &equalities, batches)
    }

    /// [`Self::live_masks`] for delete files given by reference (as a task run elsewhere
    /// receives them: [`DeleteIndex::refs_for_data_file`]). Deletion vectors are not among
    /// them (tables with deletion vectors are rewritten where they are planned).
    pub fn live_masks_of(
        &mut self,
        deletes: &[DeleteFileRef],
        data_path: &str,
        batches: &[RecordBatch],
    ) -> Result<Option<Vec<BooleanArray>>> {
        if deletes.is_empty() {
            return Ok(None);
        }
        let key = norm(self.store, data_path);
        let mut positions: Vec<u64> = Vec::new();
        let mut equalities: Vec<Arc<EqualityDeletes>> = Vec::new();
        for d in deletes {
            match &d.equality_ids {
                None => {
                    let p = self.position_deletes_at(&d.location)?;
                    if let Some(v) = p.by_path.get(&key) {
                        positions.extend_from_slice(v);
                    }
                }
                Some(ids) => {
                    let e = self.equality_deletes_at(&d.location, ids)?;
                    if !e.keys.is_empty() {
                        equalities.push(e);
                    }
                }
            }
        }
        positions.sort_unstable();
        positions.dedup();
        masks_of(&positions, &equalities, batches)
    }

    /// Decides what happens to the delete files once `removed_data` (locations as the
    /// manifests spell them) are no longer live. `data_files` are the live data files before
    /// the change; data files the change adds get a newer sequence number, so no existing
    /// delete file applies to them. With `subject`, equality delete rows matching it are
    /// dropped when the predicate only names equality columns of that file. Rewritten files
    /// are written here when `write` is set (the caller commits or deletes them); otherwise
    /// they are only listed (a dry run).
    pub fn plan_cleanup(
        &mut self,
        index: &DeleteIndex,
        data_files: &[TrackedFile],
        removed_data: &HashSet<String>,
        subject: Option<&Predicate>,
        write: bool,
    ) -> Result<DeleteCleanup> {
        let mut out = DeleteCleanup::default();
        if index.is_empty() {
            return Ok(out);
        }
        let store = self.store;
        let removed_norm: HashSet<String> = removed_data.iter().map(|p| norm(store, p)).collect();
        let mut touched: HashSet<usize> = HashSet::new();
        let mut still_applies: HashMap<usize, HashSet<String>> = HashMap::new();
        for d in data_files.iter().filter(|f| f.is_data()) {
            let path = d.entry.data_file.file_path();
            let gone = removed_data.contains(path) || removed_norm.contains(&norm(store, path));
            // Every delete file that names the data file, also position delete files a
            // deletion vector overrides: none may be left naming a removed file.
            for i in index.matching(d, store, false) {
                if gone {
                    touched.insert(i);
                } else {
                    still_applies
                        .entry(i)
                        .or_default()
                        .insert(norm(store, path));
                }
            }
        }
        let subject_ids: Option<Vec<i32>> = subject.and_then(|p| {
            p.columns()
                .iter()
                .map(|c| self.schema.field_by_name(c).map(|f| f.id))
                .collect::<Option<Vec<i32>>>()
        });
        let result: Result<()> = (|| {
            for (i, d) in index.deletes().iter().enumerate() {
                let df = &d.entry.data_file;
                let path = df.file_path().to_string();
                match df.content_type() {
                    DataContentType::PositionDeletes if is_deletion_vector(d) => {
                        // A vector names one data file: it goes with it.
                        if touched.contains(&i) {
                            out.removed_vectors
                                .push((path.clone(), df.content_offset().unwrap_or(-1)));
                            out.rows_dropped += df.record_count();
                        }
                    }
                    DataContentType::PositionDeletes => {
                        if !touched.contains(&i) {
                            continue;
                        }
                        let valid = still_applies.get(&i).cloned().unwrap_or_default();
                        let content = self.position_deletes(d)?;
                        let total: usize = content.by_path.values().map(Vec::len).sum();
                        let kept: usize = content
                            .by_path
                            .iter()
                            .filter(|(p, _)| valid.contains(*p))
                            .map(|(_, v)| v.len())
                            .sum();
                        if kept == total {
                            continue;
                        }
                        out.removed.push(path.clone());
                        if kept == 0 {
                            out.rows_dropped += df.record_count();
                            continue;
                        }
                        if self.table.metadata.format_version() == FormatVersion::V3 {
                            return Err(Error::Unsupported {
                                table: self.table.name.to_string(),
                                feature: "rewriting a position delete file in a format v3 table"
                                    .into(),
                                detail: format!(
                                    "position delete file {path} names removed and live data files; v3 allows no new position delete file, and lethe does not convert them to deletion vectors"
                                ),
                            });
                        }
                        out.rewritten.push(path.clone());
                        if !write {
                            out.rows_dropped += (total - kept) as u64;
                            continue;
                        }
                        let (schema, raw) = read_raw(store, &path)?;
                        let pi = column_by_id(&schema, FILE_PATH_FIELD_ID)
                            .or_else(|| schema.index_of("file_path").ok())
                            .ok_or_else(|| {
                                Error::invalid(format!("{path}: no file_path column"))
                            })?;
                        let mut masks = Vec::with_capacity(raw.len());
                        for b in &raw {
                            let paths = compute::cast(b.column(pi), &DataType::Utf8)?;
                            let paths = paths.as_string::<i32>();
                            let m: BooleanArray = (0..b.num_rows())
                                .map(|r| {
                                    Some(
                                        paths.is_valid(r)
                                            && valid.contains(&norm(store, paths.value(r))),
                                    )
                                })
                                .collect();
                            masks.push(m);
                        }
                        let (file, dropped) =
                            self.rewrite_delete_file(d, index.spec_id(d), &schema, &raw, &masks)?;
                        out.rows_dropped += dropped;
                        out.added.push((
                            file,
                            KeptDelete {
                                sequence_number: data_sequence_number(d),
                                spec_id: index.spec_id(d),
                            },
                        ));
                    }
                    DataContentType::EqualityDeletes => {
                        if !still_applies.contains_key(&i) {
                            out.removed.push(path.clone());
                            out.rows_dropped += df.record_count();
                            continue;
                        }
                        let Some(ids) = &subject_ids else { continue };
                        let eq = df.equality_ids().unwrap_or_default();
                        if ids.is_empty() || !ids.iter().all(|id| eq.contains(id)) {
                            continue;
                        }
                        let Some(p) = subject else { continue };
                        let (schema, raw, projected) = self.equality_rows(d)?;
                        let mut any = false;
                        let mut masks = Vec::with_capacity(raw.len());
                        for b in &projected {
                            let hit = p.evaluate(b)?;
                            any |= hit.true_count() > 0;
                            masks.push(compute::not(&hit)?);
                        }
                        if !any {
                            continue;
                        }
                        out.removed.push(path.clone());
                        let kept: usize = masks.iter().map(|m| m.true_count()).sum();
                        if kept == 0 {
                            out.rows_dropped += df.record_count();
                            continue;
                        }
                        out.rewritten.push(path.clone());
                        if !write {
                            out.rows_dropped += df.record_count().saturating_sub(kept as u64);
                            continue;
                        }
                        let (file, dropped) =
                            self.rewrite_delete_file(d, index.spec_id(d), &schema, &raw, &masks)?;
                        out.rows_dropped += dropped;
                        out.added.push((
                            file,
                            KeptDelete {
                                sequence_number: data_sequence_number(d),
                                spec_id: index.spec_id(d),
                            },
                        ));
                    }
                    DataContentType::Data => {}
                }
            }
            Ok(())
        })();
        if let Err(e) = result {
            for (f, _) in &out.added {
                let _ = store.delete(f.file_path());
            }
            return Err(e);
        }
        let gone: HashSet<&(String, i64)> = out.removed_vectors.iter().collect();
        let mut emptied: Vec<String> = Vec::new();
        for (p, _) in &out.removed_vectors {
            if emptied.contains(p) {
                continue;
            }
            let still_live = index.deletes().iter().any(|d| {
                let df = &d.entry.data_file;
                is_deletion_vector(d)
                    && df.file_path() == p
                    && !gone.contains(&(p.clone(), df.content_offset().unwrap_or(-1)))
            });
            if !still_live {
                emptied.push(p.clone());
            }
        }
        out.puffin_files_emptied = emptied;
        Ok(out)
    }

    /// Writes the rows of delete file `d` that `keep` selects into a new file beside it (same
    /// Arrow schema, partition, spec and equality ids). Returns the file and the rows dropped.
    fn rewrite_delete_file(
        &self,
        d: &TrackedFile,
        spec_id: i32,
        schema: &SchemaRef,
        raw: &[RecordBatch],
        keep: &[BooleanArray],
    ) -> Result<(DataFile, u64)> {
        let old = &d.entry.data_file;
        let mut kept = Vec::with_capacity(raw.len());
        let mut dropped = 0u64;
        for (b, m) in raw.iter().zip(keep) {
            dropped += (b.num_rows() - m.true_count()) as u64;
            kept.push(compute::filter_record_batch(b, m)?);
        }
        let dir = old
            .file_path()
            .rsplit_once('/')
            .map(|(d, _)| d.to_string())
            .unwrap_or_else(|| format!("{}/data", self.table.location()));
        let location = format!("{dir}/{}-deletes.parquet", uuid::Uuid::new_v4());
        let size = write_parquet(self.store, &location, schema, &kept)?;
        let rows: u64 = kept.iter().map(|b| b.num_rows() as u64).sum();
        let mut b = DataFileBuilder::default();
        b.content(old.content_type())
            .file_path(location.clone())
            .file_format(DataFileFormat::Parquet)
            .partition(old.partition().clone())
            .partition_spec_id(spec_id)
            .record_count(rows)
            .file_size_in_bytes(size);
        if let Some(o) = old.sort_order_id() {
            b.sort_order_id(o);
        }
        if let Some(ids) = old.equality_ids() {
            b.equality_ids(Some(ids));
        }
        if old.content_type() == DataContentType::PositionDeletes {
            let (counts, lower, upper, referenced) = position_metrics(&kept, schema)?;
            b.value_counts(counts.clone())
                .null_value_counts(counts.keys().map(|k| (*k, 0)).collect())
                .lower_bounds(lower)
                .upper_bounds(upper)
                .referenced_data_file(referenced);
        } else {
            b.value_counts(value_counts(&kept, schema))
                .null_value_counts(null_counts(&kept, schema));
        }
        let file = b.build().map_err(|e| {
            let _ = self.store.delete(&location);
            Error::Internal(format!("delete file metadata: {e}"))
        })?;
        Ok((file, dropped))
    }
}

/// Writes `batches` (all in `schema`) as one Parquet file; returns its size.
fn write_parquet(
    store: &dyn FileStore,
    location: &str,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<u64> {
    let sink = store.create(location)?;
    let props = WriterProperties::builder()
        .set_created_by("lethe".to_string())
        .build();
    let result: Result<u64> = (|| {
        let mut w = ArrowWriter::try_new(sink, schema.clone(), Some(props))?;
        for b in batches {
            w.write(b)?;
        }
        w.finish()?;
        w.inner_mut().finish()
    })();
    if result.is_err() {
        let _ = store.delete(location);
    }
    result
}

fn value_counts(batches: &[RecordBatch], schema: &SchemaRef) -> HashMap<i32, u64> {
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    schema
        .fields()
        .iter()
        .filter(|f| !matches!(f.data_type(), DataType::Struct(_)))
        .filter_map(|f| field_id_of(f).map(|id| (id, rows)))
        .collect()
}

fn null_counts(batches: &[RecordBatch], schema: &SchemaRef) -> HashMap<i32, u64> {
    schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| !matches!(f.data_type(), DataType::Struct(_)))
        .filter_map(|(i, f)| {
            field_id_of(f).map(|id| {
                (
                    id,
                    batches
                        .iter()
                        .map(|b| b.column(i).null_count() as u64)
                        .sum(),
                )
            })
        })
        .collect()
}

type PositionMetrics = (
    HashMap<i32, u64>,
    HashMap<i32, Datum>,
    HashMap<i32, Datum>,
    Option<String>,
);

/// Counts and bounds of a position delete file's `file_path` and `pos` (never of `row`, which
/// holds a table's values), and the one data file it references, if only one.
fn position_metrics(batches: &[RecordBatch], schema: &SchemaRef) -> Result<PositionMetrics> {
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    let mut counts = HashMap::new();
    let mut lower = HashMap::new();
    let mut upper = HashMap::new();
    counts.insert(FILE_PATH_FIELD_ID, rows);
    counts.insert(POS_FIELD_ID, rows);
    let pi = column_by_id(schema, FILE_PATH_FIELD_ID).or_else(|| schema.index_of("file_path").ok());
    let qi = column_by_id(schema, POS_FIELD_ID).or_else(|| schema.index_of("pos").ok());
    let mut min_p: Option<String> = None;
    let mut max_p: Option<String> = None;
    let mut min_q: Option<i64> = None;
    let mut max_q: Option<i64> = None;
    for b in batches {
        if let Some(pi) = pi {
            let c = compute::cast(b.column(pi), &DataType::Utf8)?;
            let s = c.as_string::<i32>();
            if let (Some(lo), Some(hi)) = (compute::min_string(s), compute::max_string(s)) {
                if min_p.as_deref().is_none_or(|m| lo < m) {
                    min_p = Some(lo.to_string());
                }
                if max_p.as_deref().is_none_or(|m| hi > m) {
                    max_p = Some(hi.to_string());
                }
            }
        }
        if let Some(qi) = qi {
            let c = compute::cast(b.column(qi), &DataType::Int64)?;
            let p = c.as_primitive::<arrow::datatypes::Int64Type>();
            if let (Some(lo), Some(hi)) = (compute::min(p), compute::max(p)) {
                min_q = Some(min_q.map_or(lo, |m| m.min(lo)));
                max_q = Some(max_q.map_or(hi, |m| m.max(hi)));
            }
        }
    }
    let referenced = match (&min_p, &max_p) {
        (Some(a), Some(b)) if a == b => Some(a.clone()),
        _ => None,
    };
    if let (Some(a), Some(b)) = (min_p, max_p) {
        lower.insert(FILE_PATH_FIELD_ID, Datum::string(a));
        upper.insert(FILE_PATH_FIELD_ID, Datum::string(b));
    }
    if let (Some(a), Some(b)) = (min_q, max_q) {
        lower.insert(POS_FIELD_ID, Datum::long(a));
        upper.insert(POS_FIELD_ID, Datum::long(b));
    }
    Ok((counts, lower, upper, referenced))
}

fn with_id(f: Field, id: i32) -> Field {
    let mut md = f.metadata().clone();
    md.insert(FIELD_ID_KEY.to_string(), id.to_string());
    f.with_metadata(md)
}

fn delete_location(metadata: &TableMetadata, spec_id: i32, partition: &Struct) -> Result<String> {
    let base = metadata.location().trim_end_matches('/');
    let spec = metadata
        .partition_spec_by_id(spec_id)
        .ok_or_else(|| Error::invalid(format!("the table has no partition spec {spec_id}")))?;
    let dir = if spec.is_unpartitioned() {
        format!("{base}/data")
    } else {
        format!(
            "{base}/data/{}",
            spec.partition_to_path(partition, metadata.current_schema().clone())
        )
    };
    Ok(format!("{dir}/{}-deletes.parquet", uuid::Uuid::new_v4()))
}

/// Writes a position delete file: `deletes` lists (data file location, row position) pairs
/// (sorted here by path, then position, as the spec requires); `rows`, when given, holds the
/// deleted rows in the table's current Arrow schema, one per pair in the same order, stored in
/// the optional `row` column. The file gets the partition (`spec_id`, `partition`) of the data
/// files it names. Returns the delete file's metadata (not committed).
pub fn write_position_deletes(
    store: &dyn FileStore,
    metadata: &TableMetadata,
    spec_id: i32,
    partition: Struct,
    deletes: &[(String, i64)],
    rows: Option<&RecordBatch>,
) -> Result<DataFile> {
    if let Some(r) = rows
        && r.num_rows() != deletes.len()
    {
        return Err(Error::invalid(format!(
            "position deletes: {} rows for {} positions",
            r.num_rows(),
            deletes.len()
        )));
    }
    let mut order: Vec<usize> = (0..deletes.len()).collect();
    order.sort_by(|a, b| deletes[*a].cmp(&deletes[*b]));
    let paths: StringArray = order.iter().map(|i| Some(deletes[*i].0.as_str())).collect();
    let pos: Int64Array = order.iter().map(|i| Some(deletes[*i].1)).collect();
    let mut fields = vec![
        with_id(
            Field::new("file_path", DataType::Utf8, false),
            FILE_PATH_FIELD_ID,
        ),
        with_id(Field::new("pos", DataType::Int64, false), POS_FIELD_ID),
    ];
    let mut columns: Vec<ArrayRef> = vec![Arc::new(paths), Arc::new(pos)];
    if let Some(r) = rows {
        let target = crate::writer::arrow_schema(metadata.current_schema())?;
        let aligned = crate::writer::align_batch(r, metadata.current_schema(), &target)?;
        let idx =
            arrow::array::UInt32Array::from(order.iter().map(|i| *i as u32).collect::<Vec<_>>());
        let taken = aligned
            .columns()
            .iter()
            .map(|c| compute::take(c, &idx, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let struct_fields: Fields = target.fields().clone();
        let s = StructArray::try_new(struct_fields.clone(), taken, None)?;
        fields.push(with_id(
            Field::new("row", DataType::Struct(struct_fields), true),
            ROW_FIELD_ID,
        ));
        columns.push(Arc::new(s));
    }
    let schema = Arc::new(ArrowSchema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    let location = delete_location(metadata, spec_id, &partition)?;
    let size = write_parquet(store, &location, &schema, std::slice::from_ref(&batch))?;
    let (counts, lower, upper, referenced) =
        position_metrics(std::slice::from_ref(&batch), &schema)?;
    let mut b = DataFileBuilder::default();
    b.content(DataContentType::PositionDeletes)
        .file_path(location.clone())
        .file_format(DataFileFormat::Parquet)
        .partition(partition)
        .partition_spec_id(spec_id)
        .record_count(deletes.len() as u64)
        .file_size_in_bytes(size)
        .value_counts(counts.clone())
        .null_value_counts(counts.keys().map(|k| (*k, 0)).collect())
        .lower_bounds(lower)
        .upper_bounds(upper)
        .referenced_data_file(referenced);
    b.build().map_err(|e| {
        let _ = store.delete(&location);
        Error::Internal(format!("delete file metadata: {e}"))
    })
}

/// Writes an equality delete file: `keys` holds the deleted keys in columns named as
/// `equality_columns` (top-level columns of the table's current schema); the file compares
/// their field ids. Returns the delete file's metadata (not committed). Bounds are not kept:
/// the keys are often a person's ID.
pub fn write_equality_deletes(
    store: &dyn FileStore,
    metadata: &TableMetadata,
    spec_id: i32,
    partition: Struct,
    equality_columns: &[&str],
    keys: &RecordBatch,
) -> Result<DataFile> {
    let schema = metadata.current_schema();
    let mut ids = Vec::new();
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    let target = crate::writer::arrow_schema(schema)?;
    for c in equality_columns {
        let f = schema
            .field_by_name(c)
            .ok_or_else(|| Error::invalid(format!("equality deletes: no column `{c}`")))?;
        if !matches!(f.field_type.as_ref(), Type::Primitive(_)) {
            return Err(Error::invalid(format!(
                "equality deletes: column `{c}` is not primitive"
            )));
        }
        let tf = target.field_with_name(c)?;
        let col = keys
            .column_by_name(c)
            .ok_or_else(|| Error::invalid(format!("equality deletes: the keys lack `{c}`")))?;
        ids.push(f.id);
        fields.push(tf.clone());
        columns.push(compute::cast(col, tf.data_type())?);
    }
    let arrow_schema = Arc::new(ArrowSchema::new(fields));
    let batch = RecordBatch::try_new(arrow_schema.clone(), columns)?;
    let location = delete_location(metadata, spec_id, &partition)?;
    let size = write_parquet(
        store,
        &location,
        &arrow_schema,
        std::slice::from_ref(&batch),
    )?;
    let mut b = DataFileBuilder::default();
    b.content(DataContentType::EqualityDeletes)
        .file_path(location.clone())
        .file_format(DataFileFormat::Parquet)
        .partition(partition)
        .partition_spec_id(spec_id)
        .record_count(batch.num_rows() as u64)
        .file_size_in_bytes(size)
        .equality_ids(Some(ids))
        .value_counts(value_counts(std::slice::from_ref(&batch), &arrow_schema))
        .null_value_counts(null_counts(std::slice::from_ref(&batch), &arrow_schema));
    b.build().map_err(|e| {
        let _ = store.delete(&location);
        Error::Internal(format!("delete file metadata: {e}"))
    })
}

/// The live masks of `batches` (a data file's rows in file order) given the deleted positions
/// (ascending) and the equality deletes that apply; None when nothing applies.
fn masks_of(
    positions: &[u64],
    equalities: &[Arc<EqualityDeletes>],
    batches: &[RecordBatch],
) -> Result<Option<Vec<BooleanArray>>> {
    if positions.is_empty() && equalities.is_empty() {
        return Ok(None);
    }
    let mut masks = Vec::with_capacity(batches.len());
    let mut offset = 0u64;
    let mut next = 0usize;
    for b in batches {
        let n = b.num_rows();
        let mut live = vec![true; n];
        let end = offset + n as u64;
        while next < positions.len() && positions[next] < end {
            live[(positions[next] - offset) as usize] = false;
            next += 1;
        }
        for e in equalities {
            let converter = RowConverter::new(e.fields.clone())?;
            let arrays: Vec<ArrayRef> = e.columns.iter().map(|c| b.column(*c).clone()).collect();
            let rows = converter.convert_columns(&arrays)?;
            for (i, r) in rows.iter().enumerate() {
                if live[i] && e.keys.contains(r.as_ref()) {
                    live[i] = false;
                }
            }
        }
        masks.push(BooleanArray::from(live));
        offset = end;
    }
    Ok(Some(masks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_locations_key_alike_in_every_spelling() {
        let k = path_key("file:/w/t/data/a.parquet");
        assert_eq!(k, "/w/t/data/a.parquet");
        assert_eq!(path_key("file:///w/t/data/a.parquet"), k);
        assert_eq!(path_key("file://localhost/w/t/data/a.parquet"), k);
        assert_eq!(path_key("s3://b/t/a.parquet"), "s3://b/t/a.parquet");
    }
}
