//! The warehouse: a catalog plus a file store, and the tables in them.
//!
//! [`Warehouse`] loads a table's current metadata through the catalog (a SQL catalog's
//! pointer and the metadata file; a REST catalog's `loadTable`), reads its snapshots' manifest
//! lists and manifests, creates tables (a SQL catalog's at `<warehouse>/<namespace>.db/<table>`
//! as PyIceberg's SqlCatalog places them, with metadata written as PyIceberg and Java do:
//! `<location>/metadata/00000-<uuid>.metadata.json`; a REST catalog's where its server says),
//! and gives the iceberg crate's `Table` for scans.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use iceberg::TableCreation;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, FormatVersion, ManifestContentType, ManifestEntry,
    ManifestFile, ManifestList, ManifestStatus, Schema, Snapshot, SortOrder, TableMetadata,
    UnboundPartitionSpec,
};

use crate::catalog::{Catalog, TableName};
use crate::error::{Error, Result};
use crate::parsed_cache::ParsedCache;
use crate::store::FileStore;

/// A table as loaded: its name, where its current metadata is, and that metadata.
#[derive(Debug, Clone)]
pub struct LoadedTable {
    /// The table's name.
    pub name: TableName,
    /// The current metadata file's location.
    pub metadata_location: String,
    /// The current metadata.
    pub metadata: Arc<TableMetadata>,
}

impl LoadedTable {
    /// The table's location (no trailing slash).
    pub fn location(&self) -> &str {
        self.metadata.location().trim_end_matches('/')
    }

    /// The snapshot the main branch points at.
    pub fn current_snapshot(&self) -> Option<&Arc<Snapshot>> {
        self.metadata.current_snapshot()
    }

    /// The names of the current schema's top-level columns, in order.
    pub fn column_names(&self) -> Vec<String> {
        self.metadata
            .current_schema()
            .as_struct()
            .fields()
            .iter()
            .map(|f| f.name.clone())
            .collect()
    }

    /// A table property.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.metadata.properties().get(key).map(String::as_str)
    }
}

/// A live (or deleted) file of a snapshot with the manifest entry that tracks it.
#[derive(Debug, Clone)]
pub struct TrackedFile {
    /// The manifest that holds the entry.
    pub manifest: String,
    /// The entry (sequence numbers inherited).
    pub entry: ManifestEntry,
}

impl TrackedFile {
    /// Whether this is a data file (not a delete file).
    pub fn is_data(&self) -> bool {
        self.entry.data_file.content_type() == DataContentType::Data
    }
}

/// A catalog and the store its tables' files live in.
#[derive(Debug, Clone)]
pub struct Warehouse {
    /// The catalog.
    pub catalog: Arc<dyn Catalog>,
    /// The file store.
    pub store: Arc<dyn FileStore>,
    /// The warehouse root location (`file:///.../warehouse`), where new tables go.
    pub root: String,
    /// Where lethe may change tables (see [`Warehouse::check_changeable`]).
    confinement: Arc<Confinement>,
    /// Manifest lists and manifests already read (shared by clones).
    metadata_files: Arc<MetadataFiles>,
}

/// The tables outside the warehouse root that lethe may change anyway, each at the location
/// it was listed with, and how the configuration lists them (for the refusal's advice).
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    /// (table, its location as listed).
    pub outside: Vec<(TableName, String)>,
    /// Where such tables are listed (e.g. "[tables_outside_warehouse] in /x/lethe.toml").
    pub listed_in: String,
}

/// Whether normalised `location` is `root` or under it.
fn inside(location: &str, root: &str) -> bool {
    let root = root.trim_end_matches('/');
    let location = location.trim_end_matches('/');
    location == root
        || location
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Manifest lists and manifests read through a [`Warehouse`], kept for the rest of its life.
///
/// Both are immutable once written (a commit writes new files under new names and never
/// rewrites one), so a second read of the same file can only give the same content: an
/// erasure reads each table's manifests for its values, its step, its commit and its cleanup,
/// and parses each once. The key carries what the entries inherit from the manifest list
/// (sequence numbers, the first row id) besides the path. At most [`MetadataFiles::LIMIT`]
/// manifest entries are kept; past that, files are read again each time.
///
/// Data files are immutable too, so the same holds for what a predicate selects: the files of
/// a snapshot that manifests leave for a predicate, and the stored rows of a data file it
/// selects ([`crate::prune::matching_rows`]), are kept by (table, snapshot, predicate) and
/// (file, schema, predicate): an erasure's values step and its row change ask the same.
#[derive(Default)]
struct MetadataFiles {
    lists: Mutex<HashMap<(String, FormatVersion), ManifestList>>,
    manifests: Mutex<HashMap<ManifestKey, Arc<Vec<ManifestEntry>>>>,
    entries: std::sync::atomic::AtomicUsize,
    candidates: Mutex<HashMap<(String, i64, String), Arc<FileSet>>>,
    matches: Mutex<HashMap<(String, i32, String), Option<crate::prune::FileMatches>>>,
}

type ManifestKey = (String, i64, i64, i64, Option<u64>);

/// Normalised data file locations.
type FileSet = std::collections::HashSet<String>;

impl MetadataFiles {
    /// Manifest entries kept at most (about 1 KB each with column bounds).
    const LIMIT: usize = 200_000;
    /// Selections (candidate sets, a file's matching rows) kept at most; past that the kept
    /// ones are dropped and computed again when asked.
    const SELECTIONS: usize = 50_000;
}

impl std::fmt::Debug for MetadataFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataFiles")
            .field("entries", &self.entries)
            .finish_non_exhaustive()
    }
}

impl Warehouse {
    /// A warehouse. The first one of a process installs lethe's Avro name checks
    /// ([`crate::avro_names`]).
    pub fn new(catalog: Arc<dyn Catalog>, store: Arc<dyn FileStore>, root: String) -> Self {
        crate::avro_names::install();
        Warehouse {
            catalog,
            store,
            root: root.trim_end_matches('/').to_string(),
            confinement: Arc::default(),
            metadata_files: Arc::default(),
        }
    }

    /// The same warehouse, allowed to change the tables `confinement` lists outside its root
    /// too (by default only tables inside the root are changed).
    pub fn with_confinement(mut self, confinement: Confinement) -> Self {
        self.confinement = Arc::new(confinement);
        self
    }

    /// Refuses ([`Error::Refused`]) to change a table whose location is outside the warehouse
    /// root, unless it is listed at that location ([`Warehouse::with_confinement`]). Every
    /// commit and every sweep asks this first, before writing or deleting anything: a
    /// catalog copied with its workspace (`cp -a demo copy`) still names the original's files,
    /// and lethe working in the copy must not commit to or sweep them. A location the store
    /// can't match is refused by the store's own error.
    pub fn check_changeable(&self, table: &LoadedTable) -> Result<()> {
        let location = self.store.normalize(table.location())?;
        let root = self.store.normalize(&self.root)?;
        if inside(&location, &root) || self.same_place(&location, &root, true) {
            return Ok(());
        }
        for (name, listed) in &self.confinement.outside {
            if name == &table.name
                && let Ok(l) = self.store.normalize(listed)
                && (l.trim_end_matches('/') == location || self.same_place(&location, &l, false))
            {
                return Ok(());
            }
        }
        let how = if self.confinement.listed_in.is_empty() {
            String::new()
        } else {
            format!(
                "; if lethe should change it there, list it in {} as \"{}\" = \"{}\"",
                self.confinement.listed_in,
                table.name,
                table.location()
            )
        };
        Err(Error::Refused(format!(
            "{}: its location {} is outside the warehouse {}: lethe changes no table there, and nothing was changed (a workspace copied with its catalog still names the original's files){how}",
            table.name,
            table.location(),
            self.root
        )))
    }

    /// Whether local `location` is the same folder as `other` (or, with `within`, inside it)
    /// once symbolic links are resolved; false for object stores and folders that don't exist.
    fn same_place(&self, location: &str, other: &str, within: bool) -> bool {
        let (Ok(a), Ok(b)) = (
            self.store.local_path(location),
            self.store.local_path(other),
        ) else {
            return false;
        };
        match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(a), Ok(b)) => a == b || (within && a.starts_with(&b)),
            _ => false,
        }
    }

    /// The same warehouse (catalog, files, the manifests already read) for one of several
    /// pieces of work that commit concurrently, e.g. cleanups of different tables: its store
    /// defers its commits' syncs apart from every other's ([`FileStore::with_own_syncs`]), so
    /// each commit's files are durable at its own pointer swap.
    pub fn for_concurrent_work(&self) -> Self {
        let mut wh = self.clone();
        if let Some(store) = self.store.with_own_syncs() {
            wh.store = store;
        }
        wh
    }

    /// Every table in the catalog.
    pub async fn tables(&self) -> Result<Vec<TableName>> {
        self.catalog.list_tables().await
    }

    /// Loads a table's current metadata.
    pub async fn load(&self, name: &TableName) -> Result<LoadedTable> {
        self.catalog.load_table(name, self.store.as_ref()).await
    }

    /// Reads the metadata file at `location` for table `name` (see [`read_metadata`]).
    pub fn load_at(&self, name: &TableName, location: &str) -> Result<LoadedTable> {
        read_metadata(self.store.as_ref(), name, location)
    }

    /// The top-level columns (name, type as written) of a table's current schema, read from
    /// its metadata JSON without the iceberg crate: for tables [`Warehouse::load`] can't
    /// represent.
    pub async fn raw_columns(&self, name: &TableName) -> Result<Vec<(String, String)>> {
        let location = self
            .catalog
            .metadata_location(name)
            .await?
            .ok_or_else(|| Error::NoSuchTable(name.to_string()))?;
        let json = metadata_json(&location, &self.store.read(&location)?)?;
        let current = json.get("current-schema-id").and_then(|v| v.as_i64());
        let schema = json
            .get("schemas")
            .and_then(|s| s.as_array())
            .and_then(|s| {
                s.iter()
                    .find(|x| x.get("schema-id").and_then(|v| v.as_i64()) == current)
            })
            .or_else(|| json.get("schema"));
        Ok(schema
            .and_then(|s| s.get("fields"))
            .and_then(|f| f.as_array())
            .map(|fields| {
                fields
                    .iter()
                    .filter_map(|f| {
                        let name = f.get("name")?.as_str()?.to_string();
                        let t = f.get("type")?;
                        Some((
                            name,
                            t.as_str().map_or_else(|| t.to_string(), str::to_string),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Loads a table by its dotted name.
    pub async fn load_str(&self, name: &str) -> Result<LoadedTable> {
        self.load(&TableName::parse(name)?).await
    }

    /// The default location for a new table: `<root>/<namespace>.db/<table>`.
    pub fn default_location(&self, name: &TableName) -> String {
        format!("{}/{}.db/{}", self.root, name.namespace_str(), name.name)
    }

    /// Creates a table (v2 unless `format_version` says otherwise).
    pub async fn create_table(
        &self,
        name: &TableName,
        schema: Schema,
        partition: Option<UnboundPartitionSpec>,
        sort_order: Option<SortOrder>,
        properties: HashMap<String, String>,
        format_version: FormatVersion,
    ) -> Result<LoadedTable> {
        let location = self
            .catalog
            .client_places_tables()
            .then(|| self.default_location(name));
        let creation = TableCreation::builder()
            .name(name.name.clone())
            .location_opt(location)
            .schema(schema)
            .partition_spec_opt(partition)
            .sort_order_opt(sort_order)
            .properties(properties)
            .format_version(format_version)
            .build();
        self.catalog
            .create_table(name, creation, self.store.as_ref())
            .await
    }

    /// The manifest list of a snapshot.
    pub fn manifest_list(&self, table: &LoadedTable, snapshot: &Snapshot) -> Result<ManifestList> {
        let key = (
            snapshot.manifest_list().to_string(),
            table.metadata.format_version(),
        );
        if let Some(l) = self.metadata_files.lists.lock().expect("lock").get(&key) {
            return Ok(l.clone());
        }
        let bytes = self.store.read(snapshot.manifest_list())?;
        let list = ManifestList::parse_with_version(&bytes, table.metadata.format_version())?;
        self.metadata_files
            .lists
            .lock()
            .expect("lock")
            .insert(key, list.clone());
        Ok(list)
    }

    /// Every entry of a manifest, with sequence numbers inherited from the manifest list and,
    /// in a data manifest with a `first_row_id` (format v3), each live data file's
    /// `first_row_id` inherited as the spec says: a null one becomes the manifest's plus the
    /// record counts of the live files before it that had a null one too.
    pub async fn manifest_entries(&self, manifest: &ManifestFile) -> Result<Vec<ManifestEntry>> {
        let key: ManifestKey = (
            manifest.manifest_path.clone(),
            manifest.sequence_number,
            manifest.min_sequence_number,
            manifest.added_snapshot_id,
            manifest.first_row_id,
        );
        if let Some(e) = self
            .metadata_files
            .manifests
            .lock()
            .expect("lock")
            .get(&key)
        {
            return Ok(e.as_ref().clone());
        }
        let entries = self.read_manifest_entries(manifest).await?;
        let kept = &self.metadata_files.entries;
        if kept.load(std::sync::atomic::Ordering::Relaxed) + entries.len() <= MetadataFiles::LIMIT {
            kept.fetch_add(entries.len(), std::sync::atomic::Ordering::Relaxed);
            self.metadata_files
                .manifests
                .lock()
                .expect("lock")
                .insert(key, Arc::new(entries.clone()));
        }
        Ok(entries)
    }

    async fn read_manifest_entries(&self, manifest: &ManifestFile) -> Result<Vec<ManifestEntry>> {
        let mut entries: Vec<ManifestEntry> = if manifest.key_metadata.is_some() {
            // An encrypted manifest: the iceberg crate decrypts it.
            let m = manifest.load_manifest(self.store.file_io()).await?;
            let (entries, _) = m.into_parts();
            entries
                .into_iter()
                .map(|e| Arc::try_unwrap(e).unwrap_or_else(|a| (*a).clone()))
                .collect()
        } else {
            let bytes = self.store.read(&manifest.manifest_path)?;
            let mut entries = crate::manifest_avro::read_entries(&manifest.manifest_path, &bytes)?;
            for e in &mut entries {
                inherit(e, manifest);
            }
            #[cfg(debug_assertions)]
            if let Ok(m) = iceberg::spec::Manifest::parse_avro(&bytes) {
                // What the iceberg crate reads (where it can) is what lethe reads.
                let (theirs, _) = m.into_parts();
                let theirs: Vec<ManifestEntry> = theirs
                    .iter()
                    .map(|e| {
                        let mut e = (**e).clone();
                        inherit(&mut e, manifest);
                        e
                    })
                    .collect();
                assert_eq!(
                    entries, theirs,
                    "manifest {} read differently than the iceberg crate reads it",
                    manifest.manifest_path
                );
            }
            entries
        };
        if manifest.content == ManifestContentType::Data
            && let Some(first) = manifest.first_row_id
        {
            let mut next = first as i64;
            for e in entries.iter_mut() {
                if e.status == ManifestStatus::Deleted || e.data_file.first_row_id().is_some() {
                    continue;
                }
                let count = e.data_file.record_count() as i64;
                e.data_file = with_first_row_id(&e.data_file, Some(next));
                next += count;
            }
        }
        Ok(entries)
    }

    /// The data files of `table`'s current snapshot that its manifests leave for `predicate`
    /// (computed by `plan` once per table, snapshot and predicate).
    pub(crate) async fn candidates_cached<F, Fut>(
        &self,
        table: &LoadedTable,
        predicate: &crate::predicate::Predicate,
        plan: F,
    ) -> Result<Arc<std::collections::HashSet<String>>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<std::collections::HashSet<String>>>,
    {
        let key = (
            format!("{}@{}", table.metadata.uuid(), table.metadata_location),
            table.metadata.current_snapshot_id().unwrap_or(-1),
            serde_json::to_string(predicate).map_err(|e| Error::Internal(e.to_string()))?,
        );
        if let Some(c) = self
            .metadata_files
            .candidates
            .lock()
            .expect("lock")
            .get(&key)
        {
            return Ok(c.clone());
        }
        let c = Arc::new(plan().await?);
        let mut kept = self.metadata_files.candidates.lock().expect("lock");
        if kept.len() >= MetadataFiles::SELECTIONS {
            kept.clear();
        }
        kept.insert(key, c.clone());
        Ok(c)
    }

    /// [`crate::prune::matching_rows`] of a data file, computed once per file, schema and
    /// predicate.
    pub fn matching_rows(
        &self,
        location: &str,
        schema: &Schema,
        predicate: &crate::predicate::Predicate,
    ) -> Result<Option<crate::prune::FileMatches>> {
        let key = (
            self.store.normalize(location)?,
            schema.schema_id(),
            serde_json::to_string(predicate).map_err(|e| Error::Internal(e.to_string()))?,
        );
        if let Some(m) = self.metadata_files.matches.lock().expect("lock").get(&key) {
            return Ok(m.clone());
        }
        let m = crate::prune::matching_rows(self.store.as_ref(), location, schema, predicate)?;
        let mut kept = self.metadata_files.matches.lock().expect("lock");
        if kept.len() >= MetadataFiles::SELECTIONS {
            kept.clear();
        }
        kept.insert(key, m.clone());
        Ok(m)
    }

    /// The live files (data and delete) of a snapshot.
    pub async fn live_files(
        &self,
        table: &LoadedTable,
        snapshot: &Snapshot,
    ) -> Result<Vec<TrackedFile>> {
        let mut out = Vec::new();
        for mf in self.manifest_list(table, snapshot)?.entries() {
            for entry in self.manifest_entries(mf).await? {
                if entry.status != ManifestStatus::Deleted {
                    out.push(TrackedFile {
                        manifest: mf.manifest_path.clone(),
                        entry,
                    });
                }
            }
        }
        Ok(out)
    }

    /// The live files of the current snapshot (none for an empty table).
    pub async fn current_files(&self, table: &LoadedTable) -> Result<Vec<TrackedFile>> {
        match table.current_snapshot() {
            Some(s) => self.live_files(table, s).await,
            None => Ok(Vec::new()),
        }
    }

    /// The iceberg crate's table, for scans.
    pub fn iceberg_table(&self, table: &LoadedTable) -> Result<iceberg::table::Table> {
        Ok(iceberg::table::Table::builder()
            .metadata(table.metadata.clone())
            .metadata_location(table.metadata_location.clone())
            .identifier(table.name.ident()?)
            .file_io(self.store.file_io().clone())
            .runtime(iceberg::Runtime::try_current()?)
            .readonly(true)
            .build()?)
    }
}

/// Reads the metadata file at `location` for table `name`.
///
/// A table with columns of a type the iceberg crate can't represent (`variant`,
/// `geometry`, `geography`, `unknown`) is [`Error::Unsupported`], naming those columns
/// (see [`unrepresentable_columns`]); other unparseable metadata is [`Error::Invalid`].
pub fn read_metadata(
    store: &dyn FileStore,
    name: &TableName,
    location: &str,
) -> Result<LoadedTable> {
    let bytes = store.read(location)?;
    if let Some(metadata) = parsed_metadata().lock().expect("lock").get(&bytes) {
        return Ok(LoadedTable {
            name: name.clone(),
            metadata_location: location.to_string(),
            metadata,
        });
    }
    let metadata = parse_metadata(location, &bytes).map_err(|e| {
        let columns = unrepresentable_columns(&bytes);
        if !columns.is_empty() {
            return Error::Unsupported {
                table: name.to_string(),
                feature: "column types the iceberg crate 0.10 can't represent".into(),
                detail: format!(
                    "{} (in {location}); lethe can neither read nor rewrite the table",
                    columns
                        .iter()
                        .map(|(c, t)| format!("column `{c}` is `{t}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
        }
        match e {
            Error::Invalid(m) => Error::Invalid(format!("{name}: {m}")),
            other => other,
        }
    })?;
    let metadata = Arc::new(metadata);
    parsed_metadata()
        .lock()
        .expect("lock")
        .insert(bytes.to_vec(), metadata.clone());
    Ok(LoadedTable {
        name: name.clone(),
        metadata_location: location.to_string(),
        metadata,
    })
}

/// Metadata files parsed in this process, keyed by their bytes: one erasure loads a table
/// several times (planning, its step, a pipeline reading it, its cleanup), and a metadata
/// file's bytes parse to the same metadata every time.
fn parsed_metadata() -> &'static Mutex<ParsedCache<TableMetadata>> {
    static CACHE: OnceLock<Mutex<ParsedCache<TableMetadata>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(ParsedCache::new(64, 32 << 20)))
}

/// What a manifest entry inherits from the manifest list's entry for its manifest, as the
/// spec (and the iceberg crate's `load_manifest`) says: a null snapshot id is the manifest's
/// `added_snapshot_id`; null sequence numbers are the manifest's sequence number when the
/// entry is ADDED or the manifest's sequence number is the initial one (0).
fn inherit(e: &mut ManifestEntry, manifest: &ManifestFile) {
    if e.snapshot_id.is_none() {
        e.snapshot_id = Some(manifest.added_snapshot_id);
    }
    let inherits = e.status == ManifestStatus::Added || manifest.sequence_number == 0;
    if e.sequence_number.is_none() && inherits {
        e.sequence_number = Some(manifest.sequence_number);
    }
    if e.file_sequence_number.is_none() && inherits {
        e.file_sequence_number = Some(manifest.sequence_number);
    }
}

/// A copy of `df` with `first_row_id` set (the iceberg crate has no setter for it). The
/// in-memory `partition_spec_id` (not stored in manifests) is not copied: lethe takes a file's
/// spec from its manifest.
pub fn with_first_row_id(df: &DataFile, first_row_id: Option<i64>) -> DataFile {
    let mut b = DataFileBuilder::default();
    b.content(df.content_type())
        .file_path(df.file_path().to_string())
        .file_format(df.file_format())
        .partition(df.partition().clone())
        .record_count(df.record_count())
        .file_size_in_bytes(df.file_size_in_bytes())
        .column_sizes(df.column_sizes().clone())
        .value_counts(df.value_counts().clone())
        .null_value_counts(df.null_value_counts().clone())
        .nan_value_counts(df.nan_value_counts().clone())
        .lower_bounds(df.lower_bounds().clone())
        .upper_bounds(df.upper_bounds().clone())
        .key_metadata(df.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(df.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(df.equality_ids())
        .first_row_id(first_row_id)
        .referenced_data_file(df.referenced_data_file())
        .content_offset(df.content_offset())
        .content_size_in_bytes(df.content_size_in_bytes());
    if let Some(o) = df.sort_order_id() {
        b.sort_order_id(o);
    }
    b.build()
        .expect("every required field of a DataFile is copied from one")
}

/// A metadata file's bytes, gunzipped when they are gzip.
fn metadata_bytes<'b>(location: &str, bytes: &'b [u8]) -> Result<std::borrow::Cow<'b, [u8]>> {
    if bytes.len() > 2 && bytes[0] == 0x1F && bytes[1] == 0x8B {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .map_err(|e| Error::io(location, e))?;
        Ok(std::borrow::Cow::Owned(out))
    } else {
        Ok(std::borrow::Cow::Borrowed(bytes))
    }
}

fn metadata_json(location: &str, bytes: &[u8]) -> Result<serde_json::Value> {
    serde_json::from_slice(&metadata_bytes(location, bytes)?)
        .map_err(|e| Error::invalid(format!("metadata file {location} is not valid JSON: {e}")))
}

/// Columns (dotted paths, any schema of the metadata) whose type the iceberg crate can't
/// represent: `variant`, `geometry`, `geography` (with any parameters) and `unknown`, with
/// their types as written. Empty when there are none or the bytes aren't metadata JSON.
pub fn unrepresentable_columns(bytes: &[u8]) -> Vec<(String, String)> {
    fn walk(t: &serde_json::Value, path: &str, out: &mut Vec<(String, String)>) {
        match t {
            serde_json::Value::String(s) => {
                let base = s.split('(').next().unwrap_or(s).trim();
                if ["variant", "geometry", "geography", "unknown"].contains(&base)
                    && !out.iter().any(|(p, _)| p == path)
                {
                    out.push((path.to_string(), s.clone()));
                }
            }
            serde_json::Value::Object(o) => {
                if let Some(fields) = o.get("fields").and_then(|f| f.as_array()) {
                    for f in fields {
                        let name = f.get("name").and_then(|n| n.as_str()).unwrap_or("?");
                        let p = if path.is_empty() {
                            name.to_string()
                        } else {
                            format!("{path}.{name}")
                        };
                        if let Some(t) = f.get("type") {
                            walk(t, &p, out);
                        }
                    }
                }
                for (k, sub) in [("element", "element"), ("key", "key"), ("value", "value")] {
                    if let Some(t) = o.get(k) {
                        walk(t, &format!("{path}.{sub}"), out);
                    }
                }
            }
            _ => {}
        }
    }
    let Ok(json) = metadata_json("", bytes) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let schemas = json
        .get("schemas")
        .and_then(|s| s.as_array())
        .cloned()
        .unwrap_or_default();
    for s in schemas.iter().chain(json.get("schema")) {
        walk(s, "", &mut out);
    }
    out
}

/// Parses a table metadata file's bytes (plain JSON, or gzip as `*.gz.metadata.json`).
pub fn parse_metadata(location: &str, bytes: &[u8]) -> Result<TableMetadata> {
    let parsed = serde_json::from_slice(&metadata_bytes(location, bytes)?);
    parsed.map_err(|e| {
        Error::invalid(format!(
            "metadata file {location} is not valid Iceberg metadata: {e}"
        ))
    })
}

/// `<location>/metadata/<version:05>-<uuid>.metadata.json`, as Java and PyIceberg name them.
pub fn new_metadata_location(table_location: &str, version: u64) -> String {
    format!(
        "{}/metadata/{version:05}-{}.metadata.json",
        table_location.trim_end_matches('/'),
        uuid::Uuid::new_v4()
    )
}

/// The version number in a metadata file name (`00003-...` is 3), or None.
pub fn metadata_version(location: &str) -> Option<u64> {
    let file = location.rsplit('/').next()?;
    let (num, _) = file.split_once('-')?;
    num.parse().ok()
}

/// Serialises metadata as JSON (gzip when `write.metadata.compression-codec` is gzip).
pub fn serialize_metadata(metadata: &TableMetadata) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(metadata)?;
    match metadata
        .properties()
        .get("write.metadata.compression-codec")
        .map(|s| s.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("none") => Ok(json),
        Some("gzip") => {
            use std::io::Write;
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(&json).map_err(|e| Error::io("metadata", e))?;
            enc.finish().map_err(|e| Error::io("metadata", e))
        }
        Some(other) => Err(Error::invalid(format!(
            "write.metadata.compression-codec `{other}` is not supported (none, gzip)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_versions() {
        assert_eq!(
            metadata_version("file:///w/t/metadata/00003-abc.metadata.json"),
            Some(3)
        );
        assert_eq!(
            metadata_version("file:///w/t/metadata/v3.metadata.json"),
            None
        );
        let l = new_metadata_location("file:///w/t/", 12);
        assert!(l.starts_with("file:///w/t/metadata/00012-"), "{l}");
        assert!(l.ends_with(".metadata.json"));
    }

    /// Metadata is parsed once per distinct bytes: a file read again gives the same parsed
    /// metadata, and other bytes at the same location (a file replaced in place) are parsed
    /// anew, as are bytes that don't parse.
    #[test]
    fn metadata_read_again_is_parsed_from_its_bytes() {
        use iceberg::spec::{NestedField, PrimitiveType, Type};
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::LocalStore::new();
        let path = dir.path().join("00001-x.metadata.json");
        let location = store.location_of(&path);
        let name = TableName::parse("shop.t").unwrap();
        let metadata = |column: &str| {
            let schema = Schema::builder()
                .with_fields(vec![
                    NestedField::optional(1, column, Type::Primitive(PrimitiveType::Long)).into(),
                ])
                .build()
                .unwrap();
            let m = crate::test_metadata(
                schema,
                SortOrder::unsorted_order(),
                store.location_of(dir.path()),
            );
            serialize_metadata(&m).unwrap()
        };
        let column = |t: &LoadedTable| {
            t.metadata.current_schema().as_struct().fields()[0]
                .name
                .clone()
        };
        std::fs::write(&path, metadata("first")).unwrap();
        let a = read_metadata(&store, &name, &location).unwrap();
        let b = read_metadata(&store, &name, &location).unwrap();
        assert_eq!(column(&a), "first");
        assert!(Arc::ptr_eq(&a.metadata, &b.metadata), "parsed once");
        std::fs::write(&path, metadata("second")).unwrap();
        let c = read_metadata(&store, &name, &location).unwrap();
        assert_eq!(column(&c), "second", "new bytes at the same location");
        std::fs::write(&path, b"{").unwrap();
        assert!(matches!(
            read_metadata(&store, &name, &location),
            Err(Error::Invalid(_))
        ));
    }
}
