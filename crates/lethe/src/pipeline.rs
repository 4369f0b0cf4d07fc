//! SQL pipelines: DataFusion over the Iceberg tables, the result written by lethe as a new
//! snapshot that replaces the target table's contents, and the run's column lineage recorded
//! as an OpenLineage `RunEvent` in `lineage/`.
//!
//! A pipeline is a `.sql` file in `pipelines/` whose header names its target:
//!
//! ```sql
//! -- lethe:target marketing.audience
//! -- lethe:consent marketing          (optional: the consent purposes its filter reads)
//! SELECT ...
//! ```
//!
//! Lineage comes from the query's logical plan ([`lethe_sql::column_lineage`]), never from the
//! SQL text. Each run records the snapshot of every table it read ([`INPUTS_KEY`]); an
//! erasure's RECOMPUTE ([`recompute`]) uses that record to skip a pipeline nothing of which
//! changed, or to rebuild only the target rows whose key the changed input rows carry when
//! the plan proves that is a full run's result ([`lethe_sql::incremental`]). A failing pipeline leaves the target table as it was: nothing is committed until
//! the whole result is written.
//!
//! The query runs in this process, or — with a query engine (`[engine]`, `--engine ballista`;
//! [`crate::engine::Engines::query`]) — on a cluster that reads each input table as the data
//! files of its current snapshot; the rows come back here and are written and committed the
//! same way, and the lineage is taken from the same local plan. Where that is not natural the
//! query runs here and the run says so (`engine: local`, the reason logged at info): see
//! `rows_on_engine`.
//!
//! While a restriction is in force ([`crate::requests::scope`]), every input table its scope
//! reaches is read through a view that leaves the restricted subject's rows out, so no
//! pipeline run processes them; the column lineage is still taken from the query over the
//! tables themselves, so a restriction changes no lineage.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{MemorySchemaProvider, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use iceberg::spec::FormatVersion;
use iceberg_datafusion::IcebergStaticTableProvider;
use lethe_lineage::{
    ColumnLineageDatasetFacet, InputDataset, InputField, Job, OutputDataset, RunEvent,
    SchemaDatasetFacet, SchemaField, Transformation, TransformationType,
};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::workspace::Workspace;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::replace_contents;
use lethe_iceberg::writer::WriteOptions;

mod recompute;
pub use recompute::recompute;

/// The producer URI lethe stamps on its lineage events.
pub const PRODUCER: &str = concat!(
    "https://github.com/lethe-erasure/lethe/tree/v",
    env!("CARGO_PKG_VERSION")
);
/// The OpenLineage job namespace of lethe's pipelines.
pub const JOB_NAMESPACE: &str = "lethe";

/// A pipeline definition.
#[derive(Debug, Clone, Serialize)]
pub struct Pipeline {
    /// Its name (the file stem).
    pub name: String,
    /// The file.
    pub file: PathBuf,
    /// The table it builds.
    pub target: TableName,
    /// The consent purposes its filter reads.
    pub consent: Vec<String>,
    /// The query.
    pub sql: String,
}

impl Pipeline {
    /// Reads one pipeline file.
    pub fn load(path: &Path) -> Result<Pipeline> {
        let text =
            std::fs::read_to_string(path).map_err(|e| Error::io(path.display().to_string(), e))?;
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| Error::invalid(format!("{}: not a pipeline file name", path.display())))?
            .to_string();
        let mut target = None;
        let mut consent = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let Some(rest) = line.trim().strip_prefix("-- lethe:") else {
                continue;
            };
            let (key, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let bad = |m: String| Error::Config {
                file: path.to_path_buf(),
                line: i + 1,
                key: format!("lethe:{key}"),
                message: m,
            };
            match key {
                "target" => {
                    target = Some(TableName::parse(value.trim()).map_err(|e| bad(e.to_string()))?)
                }
                "consent" => consent.extend(
                    value
                        .split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty()),
                ),
                other => {
                    return Err(bad(format!(
                        "unknown pipeline header `lethe:{other}` (use lethe:target, lethe:consent)"
                    )));
                }
            }
        }
        let target = target.ok_or_else(|| Error::Config {
            file: path.to_path_buf(),
            line: 1,
            key: "lethe:target".into(),
            message: "a pipeline names its target table in a `-- lethe:target ns.table` line"
                .into(),
        })?;
        Ok(Pipeline {
            name,
            file: path.to_path_buf(),
            target,
            consent,
            sql: text,
        })
    }

    /// Every pipeline in a folder, by name.
    pub fn load_all(dir: &Path) -> Result<Vec<Pipeline>> {
        let mut out = Vec::new();
        if !dir.exists() {
            return Ok(out);
        }
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| Error::io(dir.display().to_string(), e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "sql"))
            .collect();
        paths.sort();
        for p in paths {
            out.push(Pipeline::load(&p)?);
        }
        Ok(out)
    }

    /// A pipeline by name.
    pub fn find(dir: &Path, name: &str) -> Result<Pipeline> {
        let all = Pipeline::load_all(dir)?;
        let known: Vec<String> = all.iter().map(|p| p.name.clone()).collect();
        all.into_iter().find(|p| p.name == name).ok_or_else(|| {
            Error::invalid(format!(
                "no pipeline `{name}` in {} (pipelines: {})",
                dir.display(),
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            ))
        })
    }
}

/// What a pipeline run did.
#[derive(Debug, Clone, Serialize)]
pub struct PipelineRun {
    /// The pipeline.
    pub pipeline: String,
    /// The table it replaced.
    pub target: String,
    /// Rows written.
    pub rows: u64,
    /// The snapshot committed.
    pub snapshot_id: Option<i64>,
    /// The lineage event written.
    pub lineage_file: PathBuf,
    /// Where the query ran: `local`, or the engine's name (`ballista`).
    pub engine: String,
}

/// How [`recompute`] brought a pipeline's target up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecomputeMode {
    /// Nothing the pipeline reads changed since it built its target: nothing ran.
    Unchanged,
    /// Only the target rows whose key the changed input rows carry were rebuilt.
    Incremental,
    /// The whole query ran and replaced the target.
    Full,
}

/// The account of one [`recompute`]: what ran and, when it was not incremental, why. Holds
/// column names and counts, never a key's value (a key may be a person's ID).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Recompute {
    /// What ran.
    pub mode: RecomputeMode,
    /// Incremental: the target's column whose values select the rows rebuilt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Incremental: how many distinct keys the changed rows carry (the rows rebuilt are those
    /// with these keys).
    #[serde(default)]
    pub keys: usize,
    /// Full: why the recompute was not incremental.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl std::fmt::Display for Recompute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.mode {
            RecomputeMode::Unchanged => write!(f, "not rerun: nothing it reads changed"),
            RecomputeMode::Incremental => write!(
                f,
                "incremental: the rows of {} key(s) of {} recomputed",
                self.keys,
                self.key.as_deref().unwrap_or_default()
            ),
            RecomputeMode::Full => write!(
                f,
                "full run: {}",
                self.reason.as_deref().unwrap_or("not incremental")
            ),
        }
    }
}

/// What [`recompute`] did: the run (None when nothing was committed) and how.
#[derive(Debug, Clone, Serialize)]
pub struct Recomputed {
    /// The run, if one committed or wrote anything.
    pub run: Option<PipelineRun>,
    /// How.
    pub how: Recompute,
}

/// The DataFusion provider lethe reads `table` through (pipelines and the enforced query
/// path): the iceberg crate's scan, or — for a format v3 table with deletion vectors, which
/// the iceberg crate 0.10 does not apply — the table's live rows as lethe reads them (delete
/// files and deletion vectors applied), held in memory.
pub async fn table_provider(
    ws: &Workspace,
    table: &lethe_iceberg::table::LoadedTable,
) -> Result<Arc<dyn TableProvider>> {
    let provider =
        IcebergStaticTableProvider::try_new_from_table(ws.warehouse.iceberg_table(table)?).await?;
    let with_vectors = table.metadata.format_version() == FormatVersion::V3
        && ws
            .warehouse
            .current_files(table)
            .await?
            .iter()
            .any(|f| lethe_iceberg::deletion_vector::is_deletion_vector(&f.entry.data_file));
    if !with_vectors {
        return Ok(Arc::new(provider));
    }
    let schema = provider.schema();
    let rows = lethe_iceberg::ops::rewrite::select_rows(
        &ws.warehouse,
        table,
        &lethe_iceberg::predicate::Predicate::True,
    )
    .await?;
    let batches = rows
        .into_iter()
        .map(|b| RecordBatch::try_new(schema.clone(), b.columns().to_vec()))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(Arc::new(MemTable::try_new(schema, vec![batches])?))
}

/// A DataFusion session with every catalog table registered as `namespace.table`.
pub async fn session(ws: &Workspace) -> Result<SessionContext> {
    session_restricted(ws, &crate::requests::scope::Restrictions::default()).await
}

/// [`session`], with the tables `restrictions` reach registered as views that leave the
/// restricted subjects' rows out.
pub async fn session_restricted(
    ws: &Workspace,
    restrictions: &crate::requests::scope::Restrictions,
) -> Result<SessionContext> {
    session_over(ws, restrictions, None).await
}

/// The catalog tables a query names as `namespace.table` (None when it can't be told: the
/// query doesn't parse, or names a table without its namespace). A session for the query
/// needs only these: DataFusion resolves exactly the statement's table references when it
/// plans it.
fn tables_named(sql: &str) -> Option<std::collections::BTreeSet<String>> {
    // Parsed as a `SessionContext::new()` would (its dialect, recursion limit and identifier
    // normalisation), without building one: a session registers every built-in function,
    // which costs milliseconds each time the tables are asked for.
    let config = datafusion::prelude::SessionConfig::new();
    let options = &config.options().sql_parser;
    let dialect = datafusion::sql::sqlparser::dialect::dialect_from_str(options.dialect)?;
    let mut statements = datafusion::sql::parser::DFParserBuilder::new(sql)
        .with_dialect(dialect.as_ref())
        .with_recursion_limit(options.recursion_limit)
        .build()
        .ok()?
        .parse_statements()
        .ok()?;
    if statements.len() != 1 {
        return None;
    }
    let statement = statements.pop_front()?;
    let (refs, _) = datafusion::sql::resolve::resolve_table_references(
        &statement,
        options.enable_ident_normalization,
    )
    .ok()?;
    let mut out = std::collections::BTreeSet::new();
    for r in refs {
        match r {
            datafusion::common::TableReference::Partial { schema, table } => {
                out.insert(format!("{schema}.{table}"));
            }
            _ => return None,
        }
    }
    Some(out)
}

/// A session with the catalog tables registered (only those in `only`, when given).
async fn session_over(
    ws: &Workspace,
    restrictions: &crate::requests::scope::Restrictions,
    only: Option<&std::collections::BTreeSet<String>>,
) -> Result<SessionContext> {
    let ctx = SessionContext::new();
    let catalog = ctx
        .catalog("datafusion")
        .ok_or_else(|| Error::Internal("DataFusion has no default catalog".into()))?;
    let mut schemas: HashMap<String, Arc<MemorySchemaProvider>> = HashMap::new();
    for name in ws.warehouse.tables().await? {
        if only.is_some_and(|o| !o.contains(&name.to_string())) {
            continue;
        }
        let table = ws.warehouse.load(&name).await?;
        let provider = table_provider(ws, &table).await?;
        let ns = name.namespace_str();
        let schema = schemas.entry(ns.clone()).or_insert_with(|| {
            let s = Arc::new(MemorySchemaProvider::new());
            catalog.register_schema(&ns, s.clone()).ok();
            s
        });
        use datafusion::catalog::SchemaProvider;
        match restrictions.filter(&name.to_string()) {
            Some((keep, _)) => {
                let view = datafusion::logical_expr::LogicalPlanBuilder::scan(
                    datafusion::common::TableReference::from(name.to_string()),
                    datafusion::datasource::provider_as_source(provider),
                    None,
                )?
                .filter(keep)?
                .build()?;
                schema.register_table(
                    name.name.clone(),
                    Arc::new(datafusion::catalog::view::ViewTable::new(view, None)),
                )?;
            }
            None => {
                schema.register_table(name.name.clone(), provider)?;
            }
        }
    }
    Ok(ctx)
}

impl Pipeline {
    /// The tables a run reads: those its query names. None when that can't be told (the query
    /// names a table without its namespace, or doesn't parse) or when a restriction is in force
    /// (the run then reads through views whose scope may reach other tables).
    pub fn tables_read(
        &self,
        ws: &Workspace,
    ) -> Result<Option<std::collections::BTreeSet<String>>> {
        if !crate::requests::scope::Restrictions::active(&ws.config.paths.state)?.is_empty() {
            return Ok(None);
        }
        Ok(tables_named(&self.sql))
    }
}

/// Runs a pipeline: query, write, commit, record lineage.
pub async fn run(ws: &Workspace, p: &Pipeline) -> Result<PipelineRun> {
    run_with(ws, p, BTreeMap::new()).await
}

/// Runs a pipeline, adding `extra` keys to the commit's snapshot summary.
pub async fn run_with(
    ws: &Workspace,
    p: &Pipeline,
    extra: BTreeMap<String, String>,
) -> Result<PipelineRun> {
    let named = tables_named(&p.sql);
    let restrictions = crate::requests::scope::Restrictions::active(&ws.config.paths.state)?;
    let inputs = inputs_read(ws, p, named.as_ref(), &restrictions).await?;
    run_over(ws, p, extra, named, restrictions, inputs).await
}

/// The snapshot summary key where a pipeline's commit records what it read: a hash of the
/// query and each table it names at the snapshot it read (`sql=<hash> ns.t@<snapshot id> …`).
pub const INPUTS_KEY: &str = "lethe-pipeline-inputs";

/// What a run of `p` reads: the query's hash and each table it names at its current
/// snapshot. None when that can't be told (the query names a table without its namespace or
/// doesn't parse) or when a restriction is in force (what a run reads then depends on the
/// restrictions too).
async fn inputs_read(
    ws: &Workspace,
    p: &Pipeline,
    named: Option<&std::collections::BTreeSet<String>>,
    restrictions: &crate::requests::scope::Restrictions,
) -> Result<Option<String>> {
    use sha2::Digest;
    let Some(named) = named else { return Ok(None) };
    if !restrictions.is_empty() {
        return Ok(None);
    }
    let hash = hex::encode(sha2::Sha256::digest(p.sql.as_bytes()));
    let mut out = format!("sql={}", &hash[..16]);
    for t in named {
        let Ok(name) = TableName::parse(t) else {
            return Ok(None);
        };
        if !ws.warehouse.catalog.table_exists(&name).await? {
            return Ok(None);
        }
        let table = ws.warehouse.load(&name).await?;
        match table.current_snapshot() {
            Some(s) => out.push_str(&format!(" {t}@{}", s.snapshot_id())),
            None => out.push_str(&format!(" {t}@none")),
        }
    }
    Ok(Some(out))
}

/// Reruns `p` unless nothing it reads changed since it built its target (see [`recompute`],
/// which this is without the account of how): the rows written are a full run's.
pub async fn rerun_if_changed(
    ws: &Workspace,
    p: &Pipeline,
    extra: BTreeMap<String, String>,
) -> Result<Option<PipelineRun>> {
    Ok(recompute(ws, p, extra).await?.run)
}

/// A run over a session of the tables `named` (all, when None), recording `inputs`.
async fn run_over(
    ws: &Workspace,
    p: &Pipeline,
    extra: BTreeMap<String, String>,
    named: Option<std::collections::BTreeSet<String>>,
    restrictions: crate::requests::scope::Restrictions,
    inputs: Option<String>,
) -> Result<PipelineRun> {
    let fail = |m: String| Error::Pipeline {
        pipeline: p.name.clone(),
        message: m,
    };
    // Only the tables the query names are loaded (a query naming a table without its
    // namespace gets them all, and DataFusion's error if it names one that doesn't exist).
    let none = crate::requests::scope::Restrictions::default();
    let ctx = session_over(ws, &none, named.as_ref()).await?;
    let df = ctx.sql(&p.sql).await.map_err(|e| fail(e.to_string()))?;
    let lineage = lethe_sql::column_lineage(df.logical_plan())
        .map_err(|e| fail(format!("column lineage: {e}")))?;
    let (ctx, df) = if restrictions.is_empty() {
        (ctx, df)
    } else {
        let restricted = session_over(ws, &restrictions, named.as_ref()).await?;
        let df = restricted
            .sql(&p.sql)
            .await
            .map_err(|e| fail(e.to_string()))?;
        (restricted, df)
    };
    let schema: arrow::datatypes::SchemaRef = Arc::new(df.schema().as_arrow().clone());
    let (batches, engine) =
        match rows_on_engine(ws, p, &lineage.tables, !restrictions.is_empty(), &schema).await? {
            Some(on_engine) => on_engine,
            None => (
                df.collect().await.map_err(|e| fail(e.to_string()))?,
                "local".to_string(),
            ),
        };
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    let wh = &ws.warehouse;
    if !wh.catalog.table_exists(&p.target).await? {
        let arrow_schema = match batches.first() {
            Some(b) => b.schema(),
            None => Arc::new(
                df_schema_of(&ctx, &p.sql)
                    .await
                    .map_err(|e| fail(e.to_string()))?,
            ),
        };
        let relaxed = arrow::datatypes::Schema::new(
            arrow_schema
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        );
        let schema = iceberg::arrow::arrow_schema_to_schema_auto_assign_ids(&relaxed)
            .map_err(|e| fail(e.to_string()))?;
        wh.create_table(
            &p.target,
            schema,
            None,
            None,
            HashMap::new(),
            FormatVersion::V2,
        )
        .await?;
    }
    apply_generated_properties(ws, &p.target).await?;
    let mut summary = extra;
    summary.insert("lethe-pipeline".to_string(), p.name.clone());
    if let Some(inputs) = inputs {
        summary.insert(INPUTS_KEY.to_string(), inputs);
    }
    let snapshot_id = replace_contents(
        wh,
        &p.target,
        &batches,
        summary,
        WriteOptions {
            max_rows_per_file: Some(50_000),
        },
    )
    .await
    .map_err(|e| fail(format!("writing {}: {e}", p.target)))?;
    let lineage_file = record_lineage(ws, p, &lineage).await?;
    Ok(PipelineRun {
        pipeline: p.name.clone(),
        target: p.target.to_string(),
        rows,
        snapshot_id,
        lineage_file,
        engine,
    })
}

/// Generated properties, when the warehouse uses them, are applied before writing so the
/// rebuilt files carry the right metrics (a rebuilt table must not lose them).
async fn apply_generated_properties(ws: &Workspace, target: &TableName) -> Result<()> {
    let wh = &ws.warehouse;
    if crate::lifecycle::properties::in_use(wh).await? {
        let gov = ws.governance()?;
        let t = wh.load(target).await?;
        let g = crate::lifecycle::properties::generate(&t, &gov);
        if !crate::lifecycle::properties::missing(&t, &g).is_empty() {
            let mut a = lethe_iceberg::commit::SetProperties {
                set: g.set.into_iter().collect(),
                remove: g.remove,
            };
            lethe_iceberg::commit::commit(wh, target, &mut a).await?;
        }
    }
    Ok(())
}

/// The pipeline's rows computed on the workspace's query engine (`[engine]`, `--engine`), or
/// None when the query runs in this process: without an engine, or when the run isn't
/// natural on it — a restriction in force (its views are applied here), a warehouse in a
/// local folder (the engine's workers don't see it), an input table whose current snapshot
/// isn't just its data files (delete files, format v3), or SQL the engine can't take. Each
/// such case is logged at info with its reason. The rows come back in the schema the local
/// plan gives (`schema`); the caller writes and commits them as for a local run.
async fn rows_on_engine(
    ws: &Workspace,
    p: &Pipeline,
    tables: &[String],
    restricted: bool,
    schema: &arrow::datatypes::SchemaRef,
) -> Result<Option<(Vec<RecordBatch>, String)>> {
    use lethe_iceberg::ops::query_tasks::{QueryOutcome, SnapshotFiles};
    let Some(engine) = ws.engines.query.as_ref() else {
        return Ok(None);
    };
    let here = |why: String| {
        tracing::info!(
            "pipeline {} runs in this process, not on {}: {why}",
            p.name,
            engine.name()
        );
        Ok(None)
    };
    if restricted {
        return here("a restriction is in force (its views are applied here)".into());
    }
    if let crate::config::WarehouseLocation::Local(_) = ws.config.warehouse_location() {
        return here("the warehouse is a local folder".into());
    }
    let mut inputs = Vec::new();
    for t in tables {
        let name = TableName::parse(t)?;
        let table = ws.warehouse.load(&name).await?;
        match SnapshotFiles::of(&ws.warehouse, &table).await? {
            Ok(files) => inputs.push(files),
            Err(why) => return here(why),
        }
    }
    match engine.query(&p.name, &p.sql, &inputs).await? {
        QueryOutcome::Declined(why) => here(why),
        QueryOutcome::Rows(batches) => {
            let batches = batches
                .into_iter()
                .map(|b| RecordBatch::try_new(schema.clone(), b.columns().to_vec()))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| Error::Pipeline {
                    pipeline: p.name.clone(),
                    message: format!("the rows {} returned: {e}", engine.name()),
                })?;
            Ok(Some((batches, engine.name().to_string())))
        }
    }
}

async fn df_schema_of(
    ctx: &SessionContext,
    sql: &str,
) -> datafusion::error::Result<arrow::datatypes::Schema> {
    let df = ctx.sql(sql).await?;
    Ok(df.schema().as_arrow().clone())
}

fn transformation(i: &lethe_sql::InputColumn) -> Transformation {
    let kind = match i.kind {
        lethe_sql::LineageKind::Direct => TransformationType::Direct,
        lethe_sql::LineageKind::Indirect => TransformationType::Indirect,
    };
    let t = Transformation::new(kind, i.subtype.as_str());
    match &i.description {
        Some(d) => t.with_description(d.clone()),
        None => t,
    }
}

/// Writes the run's OpenLineage event into `lineage/` and returns its path.
async fn record_lineage(
    ws: &Workspace,
    p: &Pipeline,
    lineage: &lethe_sql::ColumnLineage,
) -> Result<PathBuf> {
    let ns = ws.lineage_namespace();
    let now = ws.clock.now();
    let run_id = uuid::Uuid::new_v4();
    let target = ws.warehouse.load(&p.target).await?;
    let schema_facet = |t: &lethe_iceberg::table::LoadedTable| {
        SchemaDatasetFacet::new(
            PRODUCER,
            t.metadata
                .current_schema()
                .as_struct()
                .fields()
                .iter()
                .map(|f| SchemaField::new(f.name.clone(), f.field_type.to_string())),
        )
    };
    let mut facet = ColumnLineageDatasetFacet::new(PRODUCER);
    for out in &lineage.outputs {
        let inputs: Vec<InputField> = out
            .inputs
            .iter()
            .map(|i| {
                InputField::new(
                    ns.clone(),
                    i.table.clone(),
                    i.column.clone(),
                    [transformation(i)],
                )
            })
            .collect();
        facet = facet.with_field(out.name.clone(), inputs);
    }
    for i in &lineage.dataset_indirect {
        facet = facet.with_dataset_input(InputField::new(
            ns.clone(),
            i.table.clone(),
            i.column.clone(),
            [transformation(i)],
        ));
    }
    let mut event = RunEvent::complete(
        PRODUCER,
        Job::new(JOB_NAMESPACE, p.name.clone()),
        run_id,
        now,
    );
    for t in &lineage.tables {
        let mut input = InputDataset::new(ns.clone(), t.clone());
        if let Ok(name) = TableName::parse(t)
            && let Ok(loaded) = ws.warehouse.load(&name).await
        {
            input = input.with_schema(schema_facet(&loaded));
        }
        event = event.with_input(input);
    }
    event = event.with_output(
        OutputDataset::new(ns.clone(), p.target.to_string())
            .with_schema(schema_facet(&target))
            .with_column_lineage(facet),
    );
    let dir = &ws.config.paths.lineage;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    let file = dir.join(format!(
        "{}-{}-{}.json",
        now.format("%Y%m%dT%H%M%S%.3fZ"),
        p.name,
        &run_id.to_string()[..8]
    ));
    std::fs::write(&file, event.to_json_pretty()?)
        .map_err(|e| Error::io(file.display().to_string(), e))?;
    Ok(file)
}

/// Names of the pipelines in the workspace.
pub fn names(ws: &Workspace) -> Result<std::collections::BTreeSet<String>> {
    Ok(Pipeline::load_all(&ws.config.paths.pipelines)?
        .into_iter()
        .map(|p| p.name)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::tables_named;

    fn named(sql: &str) -> Option<Vec<String>> {
        tables_named(sql).map(|s| s.into_iter().collect())
    }

    #[test]
    fn the_tables_a_query_names_are_read_from_its_text() {
        assert_eq!(
            named(
                "WITH recent AS (SELECT * FROM learning.events WHERE kind = 'view') \
                 SELECT c.title, count(*) FROM recent r \
                 JOIN learning.courses c ON c.course_id = r.course_id \
                 WHERE r.learner_id IN (SELECT learner_id FROM CRM.Learners) GROUP BY c.title"
            ),
            // The CTE is no table; unquoted names are normalised to lower case.
            Some(vec![
                "crm.learners".to_string(),
                "learning.courses".to_string(),
                "learning.events".to_string()
            ])
        );
        // A table without its namespace, two statements, or text that doesn't parse: the
        // tables can't be told.
        assert_eq!(named("SELECT * FROM events"), None);
        assert_eq!(named("SELECT 1 FROM a.b; SELECT 2 FROM c.d"), None);
        assert_eq!(named("SELEC * FROM a.b"), None);
        assert_eq!(named("SELECT * FROM cat.a.b"), None);
    }
}
