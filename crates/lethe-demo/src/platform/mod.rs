//! `lethe demo init`: the online learning platform every walkthrough and test uses.
//!
//! Builds, deterministically for a seed: the catalog and warehouse with eight source tables
//! written by lethe's writer in several appends (so snapshots, manifests and old files exist
//! as in production; learning.events declares the sort order `learner_id, occurred_at` and
//! holds a compacted history plus daily appends, as a platform clustering its event table by
//! learner keeps it, so one learner's events are in few files), the reviewed governance files, the SQL pipelines, and the four derived
//! tables built by running those pipelines (which records their column lineage); and the
//! platform's systems outside the warehouse: the application database the warehouse is loaded
//! from ([`appdb`], SQLite or PostgreSQL), and with [`DemoOptions::stores`] the evaluation set
//! in Git ([`evalset`]), the search index rebuilt from support tickets ([`search`]), the
//! helpdesk vendor's API ([`vendor`]) and `governance/stores.toml` registering them.
//!
//! The catalog is the embedded SQLite one over a local folder by default
//! ([`DemoCatalog::Sqlite`], what the README's first command uses: nothing to install), or a
//! production one the caller names — the SQL catalog on PostgreSQL or an Iceberg REST catalog,
//! over S3 object storage — built through the same library calls.
//!
//! The library outside this module knows nothing of these tables: they reach the rest of lethe
//! only through the catalog and the files written here.

pub mod appdb;
pub mod data;
pub mod evalset;
pub mod files;
pub mod search;
pub mod vendor;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use arrow::datatypes::{Field, Schema as ArrowSchema};
use iceberg::spec::FormatVersion;

use lethe::config::Config;
use lethe::error::{Error, Result};
use lethe::workspace::Workspace;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::append;
use lethe_iceberg::writer::WriteOptions;

/// The demo's subject ID column (`bloom_filters` puts a bloom filter on it).
const LEARNER_ID: &str = "learner_id";

/// The CRM application's export of learners, relative to the demo folder.
pub const EXPORT: &str = "exports/crm_learners.parquet";

/// What the nightly reload did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadReport {
    /// Learners read from the application database.
    pub rows_in_export: u64,
    /// Rows of erased learners suppressed (with `--suppress`).
    pub suppressed: u64,
    /// Rows loaded into crm.learners.
    pub rows_loaded: u64,
    /// Pipelines rerun.
    pub pipelines: Vec<String>,
    /// Tickets loaded into support.tickets.
    pub tickets_loaded: u64,
    /// Tickets of erased learners suppressed (with `--suppress`).
    pub tickets_suppressed: u64,
    /// Documents in the rebuilt search index (when the demo has one).
    pub indexed: Option<u64>,
}

/// The arrow schema of a warehouse table's current columns (no field ids).
async fn table_schema(ws: &Workspace, table: &str) -> Result<ArrowSchema> {
    let t = ws.warehouse.load(&TableName::parse(table)?).await?;
    let a = iceberg::arrow::schema_to_arrow_schema(t.metadata.current_schema())?;
    Ok(ArrowSchema::new(
        a.fields()
            .iter()
            .map(|f| Field::new(f.name(), f.data_type().clone(), f.is_nullable()))
            .collect::<Vec<_>>(),
    ))
}

/// What a load filtered by the register (`suppress`) keeps of `table` as it is: the rows of
/// learners under a restriction (their processing is suspended: the application database's
/// versions are not loaded) and the rows a legal hold keeps (the application database no
/// longer has them once the rest of the learner was erased). Those rows of the incoming batches
/// are dropped, the table's are kept.
async fn hold_restricted(
    ws: &Workspace,
    suppress: bool,
    table: &str,
    batches: Vec<arrow::array::RecordBatch>,
) -> Result<Vec<arrow::array::RecordBatch>> {
    if !suppress {
        return Ok(batches);
    }
    let restricted = lethe::requests::scope::restricted_hashes(&ws.config.paths.state, "learner")?;
    let held = lethe::erasure::holds::held_rows(ws, table)?;
    if restricted.is_empty() && held.is_none() {
        return Ok(batches);
    }
    let gov = ws.governance()?;
    let (_, column) = gov.subjects.get("learner")?.root()?;
    let key = lethe::erasure::register::RegisterKey::load(
        lethe::erasure::register::default_key_file(ws).as_deref(),
    )?;
    let (mut kept, _) =
        lethe::requests::scope::hold_restricted(&batches, &key, &restricted, "learner", &column)?;
    let wh = &ws.warehouse;
    let t = wh.load(&TableName::parse(table)?).await?;
    let current = lethe_iceberg::ops::rewrite::select_rows(
        wh,
        &t,
        &lethe_iceberg::predicate::Predicate::True,
    )
    .await?;
    let (_, mut stored) =
        lethe::requests::scope::hold_restricted(&current, &key, &restricted, "learner", &column)?;
    if let Some(p) = held {
        let mut incoming = Vec::new();
        for b in kept {
            let hit = p.evaluate(&b)?;
            incoming.push(arrow::compute::filter_record_batch(
                &b,
                &arrow::compute::not(&hit)?,
            )?);
        }
        kept = incoming;
        for b in &current {
            let hit = p.evaluate(b)?;
            stored.push(arrow::compute::filter_record_batch(b, &hit)?);
        }
    }
    kept.extend(stored);
    Ok(kept)
}

/// The demo's nightly job: reload crm.learners and support.tickets from the application
/// database (which holds whoever nobody erased there), crm.learners optionally through the
/// register's suppression; rerun every pipeline; rebuild the search index when there is one.
pub async fn reload(ws: &Workspace, suppress: bool) -> Result<ReloadReport> {
    let db = appdb::of_demo(&ws.config.root)?;
    let learners_schema = table_schema(ws, "crm.learners").await?;
    let batches = vec![appdb::read(&ws.config.root, &db, "learners", &learners_schema).await?];
    let rows_in_export = batches.iter().map(|b| b.num_rows() as u64).sum();
    // Rows of erased learners dropped before loading (with --suppress).
    let filter =
        |batches: Vec<arrow::array::RecordBatch>| -> Result<(Vec<arrow::array::RecordBatch>, u64)> {
            if !suppress {
                return Ok((batches, 0));
            }
            let gov = ws.governance()?;
            let subject = gov.subjects.get("learner")?;
            let (_, column) = subject.root()?;
            let key = lethe::erasure::register::RegisterKey::load(
                lethe::erasure::register::default_key_file(ws).as_deref(),
            )?;
            let hashes = lethe::erasure::register::Register::in_state(&ws.config.paths.state)
                .hashes("learner")?;
            let (kept, stats) = lethe::erasure::register::suppress(
                &batches,
                &key,
                &hashes,
                "learner",
                &column,
                lethe::erasure::register::SuppressMode::Drop,
                &[],
            )?;
            Ok((kept, stats.suppressed))
        };
    let (batches, suppressed) = filter(batches)?;
    let batches = hold_restricted(ws, suppress, "crm.learners", batches).await?;
    let rows_loaded = batches.iter().map(|b| b.num_rows() as u64).sum();
    let mut summary = BTreeMap::new();
    summary.insert(
        "lethe-load".to_string(),
        "nightly reload from the application database".to_string(),
    );
    lethe_iceberg::ops::rewrite::replace_contents(
        &ws.warehouse,
        &TableName::parse("crm.learners")?,
        &batches,
        summary,
        WriteOptions {
            max_rows_per_file: Some(50_000),
        },
    )
    .await?;
    let tickets_schema = table_schema(ws, "support.tickets").await?;
    let (tickets, tickets_suppressed) = filter(vec![
        appdb::read(&ws.config.root, &db, "tickets", &tickets_schema).await?,
    ])?;
    let tickets = hold_restricted(ws, suppress, "support.tickets", tickets).await?;
    let tickets_loaded = tickets.iter().map(|b| b.num_rows() as u64).sum();
    lethe_iceberg::ops::rewrite::replace_contents(
        &ws.warehouse,
        &TableName::parse("support.tickets")?,
        &tickets,
        [(
            "lethe-load".to_string(),
            "nightly reload from the application database".to_string(),
        )]
        .into(),
        WriteOptions {
            max_rows_per_file: Some(50_000),
        },
    )
    .await?;
    let mut pipelines = Vec::new();
    for p in lethe::pipeline::Pipeline::load_all(&ws.config.paths.pipelines)? {
        lethe::pipeline::run(ws, &p).await?;
        pipelines.push(p.name);
    }
    let indexed = if ws.config.root.join(search::SEARCH_DB).exists() {
        Some(search::rebuild(ws).await?)
    } else {
        None
    };
    Ok(ReloadReport {
        rows_in_export,
        suppressed,
        rows_loaded,
        pipelines,
        tickets_loaded,
        tickets_suppressed,
        indexed,
    })
}

/// Which catalog and store the demo is built in.
#[derive(Debug, Clone, Default)]
pub enum DemoCatalog {
    /// The embedded SQLite catalog and a local warehouse folder in the demo folder.
    #[default]
    Sqlite,
    /// The SQL catalog on PostgreSQL (`postgresql://user@host:port/db`, password from
    /// `$PGPASSWORD`) over an object-storage warehouse (`s3://bucket/prefix`).
    Postgres {
        /// The database URI (no password).
        uri: String,
        /// The warehouse location.
        warehouse: String,
    },
    /// An Iceberg REST catalog (auth from `$LETHE_REST_CREDENTIAL`, or SigV4 with a signing
    /// name) and the warehouse it serves (`s3://warehouse`).
    Rest {
        /// The catalog's base URI.
        uri: String,
        /// The warehouse.
        warehouse: String,
        /// SigV4 signing name instead of OAuth2.
        sigv4: Option<String>,
    },
}

/// Options of `demo init`.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// The folder to create.
    pub dir: PathBuf,
    /// Scale units (1 = 5,000 learners, 100,000 events).
    pub scale: u32,
    /// The seed.
    pub seed: u64,
    /// Replace an existing demo in `dir` (and, in a production catalog, its tables).
    pub force: bool,
    /// The application database (SQLite in the demo folder by default).
    pub app_db: appdb::AppDb,
    /// Also build the systems outside the warehouse — evaluation set, search index, vendor —
    /// and register them (with the application database) in governance/stores.toml.
    pub stores: bool,
    /// The catalog and store.
    pub catalog: DemoCatalog,
    /// The catalog name (`catalog_name` of the SQL catalog; default `lethe`).
    pub catalog_name: Option<String>,
    /// `[storage]` for an object-storage warehouse.
    pub storage: lethe::config::StorageConfig,
    /// Tables with a `learner_id` column get a Parquet bloom filter on it
    /// (`write.parquet.bloom-filter-enabled.column.learner_id`), as a warehouse tuned for
    /// lookups by ID has: finding one learner then skips the files that don't hold them.
    pub bloom_filters: bool,
}

impl DemoOptions {
    /// Scale 1, seed 42, SQLite, no stores: the warehouse-only demo the tests mostly use.
    pub fn new(dir: impl Into<PathBuf>) -> DemoOptions {
        DemoOptions {
            dir: dir.into(),
            scale: 1,
            seed: 42,
            force: false,
            app_db: appdb::AppDb::Sqlite,
            stores: false,
            catalog: DemoCatalog::Sqlite,
            catalog_name: None,
            storage: Default::default(),
            bloom_filters: false,
        }
    }

    /// The embedded demo in `dir` at `scale` with `seed`.
    pub fn embedded(dir: PathBuf, scale: u32, seed: u64, force: bool) -> Self {
        DemoOptions {
            scale,
            seed,
            force,
            ..DemoOptions::new(dir)
        }
    }

    /// The `lethe.toml` of this demo.
    fn config_text(&self) -> String {
        let name = self.catalog_name.clone().unwrap_or_else(|| "lethe".into());
        let catalog = match &self.catalog {
            DemoCatalog::Sqlite => {
                return Config::render(&name, "sqlite:catalog.db", "warehouse", &["raw"]);
            }
            DemoCatalog::Postgres { uri, warehouse } => lethe::config::CatalogConfig {
                kind: "sql".into(),
                name,
                uri: uri.clone(),
                warehouse: warehouse.clone(),
                ..Default::default()
            },
            DemoCatalog::Rest {
                uri,
                warehouse,
                sigv4,
            } => lethe::config::CatalogConfig {
                kind: "rest".into(),
                name,
                uri: uri.clone(),
                warehouse: warehouse.clone(),
                sigv4: sigv4.as_ref().map(|_| true),
                signing_name: sigv4.clone(),
                ..Default::default()
            },
        };
        Config::render_with(&catalog, &self.storage, &["raw"])
    }
}

/// What `demo init` built.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DemoReport {
    /// The folder.
    pub dir: PathBuf,
    /// Rows per table.
    pub tables: BTreeMap<String, u64>,
    /// Pipelines run.
    pub pipelines: Vec<String>,
}

/// Builds the demo platform.
pub async fn init(opts: &DemoOptions, progress: &dyn Fn(&str)) -> Result<DemoReport> {
    let dir = if opts.dir.is_absolute() {
        opts.dir.clone()
    } else {
        std::env::current_dir()
            .map_err(|e| Error::io(".", e))?
            .join(&opts.dir)
    };
    let config_file = dir.join(lethe::config::CONFIG_FILE);
    if config_file.exists() {
        if !opts.force {
            return Err(Error::invalid(format!(
                "{} already holds a lethe configuration: pass --force to rebuild the demo there",
                dir.display()
            )));
        }
        for sub in [
            "warehouse",
            "lineage",
            "state",
            "raw",
            "exports",
            "governance",
            "pipelines",
            "app",
            "evalset",
            "search",
            "vendor",
        ] {
            let p = dir.join(sub);
            if p.exists() {
                std::fs::remove_dir_all(&p).map_err(|e| Error::io(p.display().to_string(), e))?;
            }
        }
        for f in [
            "catalog.db",
            "catalog.db-journal",
            lethe::config::CONFIG_FILE,
        ] {
            let p = dir.join(f);
            if p.exists() {
                std::fs::remove_file(&p).map_err(|e| Error::io(p.display().to_string(), e))?;
            }
        }
    }
    for sub in [
        "governance",
        "pipelines",
        "lineage",
        "state",
        "warehouse",
        "raw",
        "exports",
    ] {
        let p = dir.join(sub);
        std::fs::create_dir_all(&p).map_err(|e| Error::io(p.display().to_string(), e))?;
    }
    let config_text = opts.config_text();
    // Checked (and, for a production catalog, connected) before anything is written.
    let config = Config::from_text(&config_file, &config_text)?;
    let ws = Workspace::open(&config)?;
    for t in data::TABLES {
        let name = TableName::parse(t)?;
        if ws.warehouse.catalog.table_exists(&name).await? {
            if !opts.force {
                return Err(Error::invalid(format!(
                    "{} already holds the demo's table {name}: pass --force to rebuild the demo there",
                    ws.warehouse.catalog.describe()
                )));
            }
            drop_with_files(&ws, &name).await?;
        }
    }
    write(&config_file, &config_text)?;
    write(&dir.join("governance/metadata.toml"), files::METADATA)?;
    write(&dir.join("governance/retention.toml"), files::RETENTION)?;
    write(&dir.join("governance/subjects.toml"), files::SUBJECTS)?;
    write(&dir.join("governance/policy.toml"), files::POLICY)?;
    for (name, text) in files::PIPELINES {
        write(&dir.join("pipelines").join(name), text)?;
    }
    // The demo's keys; a deployment keeps them in a secret store and passes them as
    // LETHE_REGISTER_KEY(_FILE) and LETHE_PSEUDONYM_KEY(_FILE).
    lethe::keys::write_random_key(&dir.join("state/register.key"))?;
    lethe::keys::write_random_key(&dir.join("state/pseudonym.key"))?;
    let mut report = DemoReport {
        dir: dir.clone(),
        tables: BTreeMap::new(),
        pipelines: Vec::new(),
    };
    progress(&format!(
        "generating data (scale {}, seed {})",
        opts.scale, opts.seed
    ));
    let generated = data::generate(opts.scale, opts.seed);
    progress("the application database");
    appdb::create(&dir, &opts.app_db, &generated).await?;
    if opts.stores {
        write_stores(&dir, &opts.app_db, &generated)?;
    }
    for t in generated {
        let name = TableName::parse(t.table)?;
        let first = t
            .appends
            .first()
            .ok_or_else(|| Error::Internal(format!("no data for {}", t.table)))?;
        let schema = iceberg_schema(first.schema().as_ref())?;
        let order = sort_order(&schema, t.sorted_by)?;
        let mut properties = HashMap::new();
        if opts.bloom_filters && schema.field_by_name(LEARNER_ID).is_some() {
            properties.insert(
                format!("write.parquet.bloom-filter-enabled.column.{LEARNER_ID}"),
                "true".to_string(),
            );
        }
        ws.warehouse
            .create_table(&name, schema, None, order, properties, FormatVersion::V2)
            .await?;
        if t.table == "crm.learners" {
            // The CRM application's export, which the nightly reload reads.
            lethe::batchio::write_batches(&dir.join(EXPORT), &t.appends)?;
        }
        let mut rows = 0u64;
        for (i, b) in t.appends.iter().enumerate() {
            progress(&format!(
                "{}: append {}/{} ({} rows)",
                t.table,
                i + 1,
                t.appends.len(),
                b.num_rows()
            ));
            append(
                &ws.warehouse,
                &name,
                std::slice::from_ref(b),
                BTreeMap::new(),
                WriteOptions {
                    max_rows_per_file: Some(50_000),
                },
            )
            .await?;
            rows += b.num_rows() as u64;
        }
        report.tables.insert(t.table.to_string(), rows);
    }
    progress("consent.records: seeding from the sign-up form's answers");
    let seeded = lethe::access::consent::seed_from_attributes(&ws, "sign-up form").await?;
    report.tables.insert("consent.records".to_string(), seeded);
    for p in lethe::pipeline::Pipeline::load_all(&ws.config.paths.pipelines)? {
        progress(&format!("pipeline {} -> {}", p.name, p.target));
        let run = lethe::pipeline::run(&ws, &p).await?;
        report.tables.insert(p.target.to_string(), run.rows);
        report.pipelines.push(p.name.clone());
    }
    if opts.stores {
        progress("the evaluation set (Git) and the search index");
        evalset::create(&dir)?;
        search::rebuild(&ws).await?;
    }
    Ok(report)
}

/// The base URL of a demo's vendor API, from its stores.toml.
pub fn vendor_url(dir: &Path) -> Result<Option<String>> {
    let reg = lethe::stores::registry::load(&dir.join("governance"))?;
    Ok(reg.value.stores.get("helpdesk").and_then(|s| {
        s.delete_request.as_ref().and_then(|r| {
            r.url
                .strip_suffix("/v1/users/{subject}")
                .map(str::to_string)
        })
    }))
}

/// Writes stores.toml, destinations.txt and the vendor's users for a demo with stores.
fn write_stores(dir: &Path, db: &appdb::AppDb, generated: &[data::TableData]) -> Result<()> {
    let vendor = format!("http://127.0.0.1:{}", vendor::free_port()?);
    let (app, app_dest) = match db {
        appdb::AppDb::Sqlite => (
            format!("engine = \"sqlite\"\npath = \"{}\"\n", appdb::APP_DB),
            format!("sqlite:{}", appdb::APP_DB),
        ),
        appdb::AppDb::Postgres(_) => (
            format!(
                "engine = \"postgres\"\nurl_env = \"{}\"\n",
                appdb::APP_DB_URL_ENV
            ),
            format!("postgres:{}", appdb::APP_DB_URL_ENV),
        ),
    };
    write(
        &dir.join("governance/stores.toml"),
        &files::STORES
            .replace("{APP_DB}", &app)
            .replace("{VENDOR}", &vendor),
    )?;
    write(
        &dir.join("governance/destinations.txt"),
        &files::DESTINATIONS
            .replace("{APP_DB_DESTINATION}", &app_dest)
            .replace("{VENDOR}", &vendor),
    )?;
    // The helpdesk knows the learners who opened tickets, by email.
    let emails: BTreeMap<i64, String> = generated
        .iter()
        .filter(|t| t.table == "crm.learners")
        .flat_map(|t| t.appends.iter())
        .flat_map(|b| {
            let ids = b.column_by_name("learner_id").expect("learner_id").clone();
            let em = b.column_by_name("email").expect("email").clone();
            let ids =
                arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(&ids).clone();
            let em = arrow::array::AsArray::as_string::<i32>(&em).clone();
            (0..ids.len())
                .map(|i| (ids.value(i), em.value(i).to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    let mut users: BTreeMap<String, u64> = BTreeMap::new();
    for t in generated.iter().filter(|t| t.table == "support.tickets") {
        for b in &t.appends {
            let ids = b.column_by_name("learner_id").expect("learner_id").clone();
            let ids =
                arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(&ids).clone();
            for i in 0..ids.len() {
                if let Some(e) = emails.get(&ids.value(i)) {
                    *users.entry(e.clone()).or_default() += 1;
                }
            }
        }
    }
    vendor::write_users(dir, &users)
}

/// The search index's nightly rebuild from support.tickets: documents indexed.
pub async fn rebuild_index(ws: &Workspace) -> Result<u64> {
    search::rebuild(ws).await
}

/// Drops a demo table from a production catalog and deletes its files (a rebuild with
/// `--force`; the SQLite demo removes its whole warehouse folder instead).
async fn drop_with_files(ws: &Workspace, name: &TableName) -> Result<()> {
    let wh = &ws.warehouse;
    let location = match wh.load(name).await {
        Ok(t) => Some(t.location().to_string()),
        Err(_) => None,
    };
    wh.catalog.drop_table(name).await?;
    if let Some(loc) = location
        && wh.store.local_path(&loc).is_err()
    {
        let prefix = format!("{}/", loc.trim_end_matches('/'));
        let files: Vec<String> = wh
            .store
            .list(&prefix)?
            .map(|f| f.map(|f| f.location))
            .collect::<lethe_iceberg::Result<_>>()?;
        for f in files {
            wh.store.delete(&f)?;
        }
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::io(path.display().to_string(), e))
}

/// The Iceberg schema of a demo table: `*_id` columns of the first position are required.
/// The sort order declared for a table sorted by `columns` (ascending, nulls first); `None`
/// for none.
fn sort_order(
    schema: &iceberg::spec::Schema,
    columns: &[&str],
) -> Result<Option<iceberg::spec::SortOrder>> {
    if columns.is_empty() {
        return Ok(None);
    }
    let mut b = iceberg::spec::SortOrder::builder();
    for c in columns {
        let field = schema
            .field_by_name(c)
            .ok_or_else(|| Error::Internal(format!("no column {c} to sort by")))?;
        b.with_sort_field(iceberg::spec::SortField {
            source_id: field.id,
            transform: iceberg::spec::Transform::Identity,
            direction: iceberg::spec::SortDirection::Ascending,
            null_order: iceberg::spec::NullOrder::First,
        });
    }
    let order = b
        .with_order_id(1)
        .build(schema)
        .map_err(|e| Error::Internal(format!("sort order: {e}")))?;
    Ok(Some(order))
}

fn iceberg_schema(arrow: &ArrowSchema) -> Result<iceberg::spec::Schema> {
    let fields: Vec<Field> = arrow
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let required = i == 0 && f.name().ends_with("_id");
            f.as_ref().clone().with_nullable(!required)
        })
        .collect();
    Ok(iceberg::arrow::arrow_schema_to_schema_auto_assign_ids(
        &ArrowSchema::new(fields),
    )?)
}
