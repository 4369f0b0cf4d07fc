//! The catalog as the planner sees it: every table's columns, settings and location; the
//! lineage folder read into a graph whose datasets are named as catalog tables; the subject's
//! identifier typed by its root column.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use lethe_iceberg::catalog::TableName;
use lethe_iceberg::nested::{field_paths, type_name};
use lethe_iceberg::ops::expire::{gc_blockers, history_blockers};
use lethe_iceberg::predicate::Value;
use lethe_iceberg::table::{LoadedTable, Warehouse};
use lethe_lineage::{GraphBuilder, LineageGraph, Window, parse_events};

use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::governance::subjects::{Subject, SubjectRef};

/// What the planner needs to know about one catalog table.
#[derive(Debug, Clone, Default)]
pub struct TableInfo {
    /// Top-level columns with their types (as Iceberg writes them: `struct<email: string>`).
    pub columns: Vec<(String, String)>,
    /// Struct fields below the top level with one value per row (`contact.email`): they can
    /// identify rows as top-level columns do.
    pub struct_fields: Vec<String>,
    /// Its schemas, the current one first (empty for inventories built by hand): governance
    /// paths are checked against them.
    pub schemas: Vec<iceberg::spec::SchemaRef>,
    /// Settings that would keep a subject after an erasure whatever lethe does
    /// (`gc.enabled=false`).
    pub blockers: Vec<String>,
    /// The history the table keeps (refs other than `main`, `min-snapshots-to-keep` above 1):
    /// blockers unless retention.toml decides to rewrite it ([`crate::governance::retention`]).
    pub keeps_history: Vec<String>,
    /// Iceberg identifier fields (row key), by name.
    pub identifier_fields: Vec<String>,
    /// Why lethe can't change this table correctly yet (delete files it can't rewrite, column
    /// types it can't represent), if it can't: a DELETE, REWRITE or RECOMPUTE step on it
    /// becomes UNRESOLVED with this reason.
    pub unsupported: Option<String>,
}

/// The catalog as the planner sees it.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// Tables by dotted name.
    pub tables: BTreeMap<String, TableInfo>,
    /// Table locations (normalised) by dotted name, to resolve lineage datasets named by path.
    pub locations: BTreeMap<String, String>,
    /// The tables as loaded, by dotted name (those the iceberg crate can represent): what
    /// reads the same snapshots later takes from here rather than loading them again.
    pub loaded: HashMap<String, Arc<LoadedTable>>,
}

/// One table as [`Inventory::load`] reads it.
struct Read {
    name: String,
    info: TableInfo,
    location: Option<String>,
    loaded: Option<Arc<LoadedTable>>,
}

/// Reads one table's schema, settings and location.
async fn read_table(wh: &Warehouse, name: TableName) -> Result<Read> {
    let t = match wh.load(&name).await {
        Ok(t) => t,
        Err(lethe_iceberg::Error::Unsupported {
            feature, detail, ..
        }) => {
            // A table the iceberg crate can't represent (a `variant` column, say) is still
            // planned: a step on it is UNRESOLVED with this reason.
            let info = TableInfo {
                columns: wh.raw_columns(&name).await?,
                unsupported: Some(format!("{feature}: {detail}")),
                ..Default::default()
            };
            return Ok(Read {
                name: name.to_string(),
                info,
                location: None,
                loaded: None,
            });
        }
        Err(e) => return Err(e.into()),
    };
    let schema = t.metadata.current_schema();
    let mut schemas = vec![schema.clone()];
    schemas.extend(
        t.metadata
            .schemas_iter()
            .filter(|s| s.schema_id() != schema.schema_id())
            .cloned(),
    );
    let info = TableInfo {
        columns: schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| (f.name.clone(), type_name(&f.field_type)))
            .collect(),
        struct_fields: field_paths(schema)
            .into_iter()
            .filter(|p| !p.steps.is_empty() && !p.repeated && p.is_leaf())
            .map(|p| p.name)
            .collect(),
        schemas,
        blockers: {
            let mut b = gc_blockers(&t);
            // A table lethe may not change (outside the warehouse) blocks its step.
            if let Err(e) = wh.check_changeable(&t) {
                b.push(e.to_string());
            }
            b
        },
        keeps_history: history_blockers(&t)?,
        identifier_fields: schema
            .identifier_field_ids()
            .filter_map(|id| schema.name_by_field_id(id).map(str::to_string))
            .collect(),
        unsupported: lethe_iceberg::deletes::unsupported_features(wh, &t).await?,
    };
    Ok(Read {
        name: name.to_string(),
        info,
        location: wh.store.normalize(t.location()).ok(),
        loaded: Some(Arc::new(t)),
    })
}

impl Inventory {
    /// Reads every table's schema, settings and location, the tables at once (each a task of
    /// its own, as many at once as the machine has cores: parsing a table's metadata and
    /// reading its manifests for the features lethe can't rewrite is work one task would do on
    /// one core), kept in the catalog's order.
    pub async fn load(wh: &Warehouse) -> Result<Inventory> {
        use futures::{StreamExt, TryStreamExt};
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let read: Vec<Read> = futures::stream::iter(wh.tables().await?)
            .map(|name| {
                let wh = wh.clone();
                async move {
                    match tokio::spawn(async move { read_table(&wh, name).await }).await {
                        Ok(r) => r,
                        Err(e) => match e.try_into_panic() {
                            Ok(p) => std::panic::resume_unwind(p),
                            Err(e) => Err(Error::Internal(format!(
                                "a table's read for the inventory ended: {e}"
                            ))),
                        },
                    }
                }
            })
            .buffered(cores)
            .try_collect()
            .await?;
        let mut inv = Inventory::default();
        for r in read {
            if let Some(loc) = r.location {
                inv.locations.insert(r.name.clone(), loc);
            }
            if let Some(t) = r.loaded {
                inv.loaded.insert(r.name.clone(), t);
            }
            inv.tables.insert(r.name, r.info);
        }
        Ok(inv)
    }

    pub(super) fn has_column(&self, table: &str, column: &str) -> bool {
        self.tables.get(table).is_some_and(|t| {
            t.columns.iter().any(|(c, _)| c == column)
                || t.struct_fields.iter().any(|c| c == column)
        })
    }

    /// Every table's schemas, for [`crate::governance::paths::check`].
    pub fn schemas(&self) -> crate::governance::paths::Schemas {
        self.tables
            .iter()
            .filter(|(_, t)| !t.schemas.is_empty())
            .map(|(n, t)| (n.clone(), t.schemas.clone()))
            .collect()
    }
}

/// Reads every OpenLineage file in `dir` (`.json`, `.jsonl`, `.ndjson`) into a graph whose
/// datasets are named as catalog tables where the inventory knows them.
pub fn load_lineage(dir: &Path, inv: &Inventory) -> Result<LineageGraph> {
    let tables: BTreeSet<String> = inv.tables.keys().cloned().collect();
    let by_location: HashMap<String, String> = inv
        .locations
        .iter()
        .map(|(t, l)| (l.clone(), t.clone()))
        .collect();
    let resolver = move |_ns: &str, name: &str| -> Option<String> {
        if tables.contains(name) {
            return Some(name.to_string());
        }
        let stripped = name.trim_end_matches('/');
        if let Ok(p) = lethe_iceberg::store::normalize_local(stripped)
            && let Some(t) = by_location.get(&format!("file://{}", p.display()))
        {
            return Some(t.clone());
        }
        None
    };
    let mut builder = GraphBuilder::new(resolver);
    if dir.exists() {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| Error::io(dir.display().to_string(), e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x == "json" || x == "jsonl" || x == "ndjson")
            })
            .collect();
        files.sort();
        for f in files {
            let bytes = std::fs::read(&f).map_err(|e| Error::io(f.display().to_string(), e))?;
            let shown = f
                .strip_prefix(dir.parent().unwrap_or(dir))
                .unwrap_or(&f)
                .display()
                .to_string();
            for ev in parse_events(&shown, &bytes)? {
                builder.add_event(&shown, &ev)?;
            }
        }
    }
    Ok(builder.finish()?)
}

/// The subject's identifier value, typed by the root column.
pub fn parse_id(subject: &Subject, r: &SubjectRef, inv: &Inventory) -> Result<Value> {
    let (table, column) = subject.root()?;
    let ty = inv
        .tables
        .get(&table)
        .and_then(|t| t.columns.iter().find(|(c, _)| c == &column))
        .map(|(_, t)| t.clone())
        .ok_or_else(|| {
            Error::invalid(format!(
                "the subject's root identifier {table}.{column} is not in the catalog"
            ))
        })?;
    match ty.as_str() {
        "long" | "int" => r.id.parse::<i64>().map(Value::Int).map_err(|_| {
            Error::invalid(format!(
                "`{}={}`: {table}.{column} holds whole numbers ({ty}); `{}` is not one",
                r.subject, r.id, r.id
            ))
        }),
        "string" => Ok(Value::Str(r.id.clone())),
        other => Err(Error::invalid(format!(
            "{table}.{column} has type {other}; lethe addresses subjects by long, int or string identifiers"
        ))),
    }
}

/// Catalog tables no lineage produces and no declaration names as a source
/// (`lethe lineage unaccounted`).
pub fn unaccounted(inv: &Inventory, gov: &Governance, graph: &LineageGraph) -> Vec<String> {
    let produced: BTreeSet<&str> = graph
        .produced_datasets(Window::ALL)
        .into_iter()
        .map(|id| graph.dataset_name(id))
        .collect();
    inv.tables
        .keys()
        .filter(|t| !produced.contains(t.as_str()))
        .filter(|t| {
            gov.metadata
                .table(t)
                .and_then(|m| m.source.as_ref())
                .is_none()
        })
        .cloned()
        .collect()
}
