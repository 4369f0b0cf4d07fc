//! EXPLAIN ERASURE: one subject's erasure planned from the catalog, the governance files and
//! temporal column lineage.
//!
//! The plan is decided by columns and lineage, not rows: a table with the subject's identifier
//! column is in the plan whether or not it holds the subject today. Each table gets exactly one
//! action:
//! - `REWRITE` when `retention.toml` records a legal exception for it (keep the rows, null the
//!   exception's `erase_columns`);
//! - `NO_ACTION` when `subjects.toml` declares it free of the subject's data (with the
//!   justification);
//! - `UNRESOLVED` when lineage reaches it through a job without column lineage, an opaque step
//!   (UDF, external path), an unknown producer, or it lives outside the catalog — or when
//!   the table uses features lethe can't change correctly yet (format v3: deletion vectors,
//!   row lineage, default values; see [`crate::deletes::unsupported_features`]);
//! - `DELETE` where a column holds the subject's values: a declared identifier column (by name,
//!   or classified in `metadata.toml` as identifying the subject), a mapped identifier, or a
//!   DIRECT/IDENTITY copy of one of those or of the key of a row the subject owns;
//! - `RECOMPUTE` for a table the subject's rows reach only through other edges: its pipeline
//!   is rerun after the sources are erased.
//!
//! Any UNRESOLVED step makes the plan INCOMPLETE. The preflight lists, for every table the
//! plan changes, the table settings that would keep the subject after the erasure
//! (`gc.enabled=false`, `history.expire.min-snapshots-to-keep > 1`, branches or tags); an
//! erasure refuses to start while any table is blocked. Steps are ordered sources first.
//!
//! [`plan`] is pure (no I/O) so it can be benchmarked on generated inventories;
//! [`resolve_values`] reads the tables to resolve each step's values before anything is
//! deleted.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use chrono::{DateTime, Utc};
use iceberg::spec::{PrimitiveType, Type};
use lethe_lineage::{GraphBuilder, LineageGraph, Seed, Via, Walk, Window, parse_events, walk};
use serde::{Deserialize, Serialize};

use crate::catalog::TableName;
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::governance::subjects::{Subject, SubjectRef, split_column};
use crate::ops::expire::blockers;
use crate::ops::rewrite::select_rows;
use crate::predicate::{Predicate, Value};
use crate::table::Warehouse;

/// What the plan does to a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Action {
    /// Delete the subject's rows.
    Delete,
    /// Keep the rows under a legal exception, null the exception's columns.
    Rewrite,
    /// Rerun the table's pipeline after its sources are erased.
    Recompute,
    /// Declared free of the subject's data.
    NoAction,
    /// Lineage can't say where the subject's data is.
    Unresolved,
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Action::Delete => "DELETE",
            Action::Rewrite => "REWRITE",
            Action::Recompute => "RECOMPUTE",
            Action::NoAction => "NO_ACTION",
            Action::Unresolved => "UNRESOLVED",
        })
    }
}

/// One step of the plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Step {
    /// The table.
    pub table: String,
    /// The action.
    pub action: Action,
    /// The column that selects the subject's rows (DELETE, REWRITE).
    pub column: Option<String>,
    /// The value set that column holds: the root identifier's name, a mapped identifier, or
    /// `table.key` for the keys of rows the subject owns.
    pub label: Option<String>,
    /// The values, once resolved (ID values; other identifiers are counted, not shown).
    pub values: Vec<String>,
    /// REWRITE: the columns set to null.
    pub erase_columns: Vec<String>,
    /// How the table came into the plan: the lineage edge, or the declaration.
    pub via: String,
    /// The evidence file of the lineage edge, when there is one.
    pub evidence: Option<String>,
    /// The reason (REWRITE: the exception's reason; NO_ACTION: the justification; UNRESOLVED:
    /// what lineage can't resolve; RECOMPUTE: the pipeline).
    pub reason: Option<String>,
    /// RECOMPUTE: the pipeline to rerun.
    pub pipeline: Option<String>,
    /// Settings that would keep the subject after the erasure.
    pub blockers: Vec<String>,
}

/// How much of the plan was resolved.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Coverage {
    /// Tables in the plan.
    pub discovered: usize,
    /// DELETE and RECOMPUTE steps.
    pub resolved: usize,
    /// REWRITE and NO_ACTION steps (decided by people, recorded in governance files).
    pub exempt: usize,
    /// UNRESOLVED steps.
    pub unresolved: usize,
    /// (resolved + exempt) / discovered, in percent; allowed to be low.
    pub percent: f64,
}

/// The plan's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    /// Every table is accounted for and none is blocked.
    Complete,
    /// Some table is UNRESOLVED.
    Incomplete,
    /// Every table is accounted for, but table settings would keep the subject.
    Blocked,
}

/// A subject's erasure plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// The subject's name (`learner`).
    pub subject: String,
    /// The window start: lineage edges that ended before it are not used.
    pub lineage_since: Option<DateTime<Utc>>,
    /// The steps, sources first.
    pub steps: Vec<Step>,
    /// Coverage.
    pub coverage: Coverage,
    /// Verdict.
    pub verdict: Verdict,
    /// Tables whose settings block the erasure, with the reasons.
    pub blocked: BTreeMap<String, Vec<String>>,
    /// The lineage subgraph the plan used, for Graphviz.
    #[serde(skip)]
    pub dot: String,
}

/// What the planner needs to know about one catalog table.
#[derive(Debug, Clone, Default)]
pub struct TableInfo {
    /// Top-level columns with their types.
    pub columns: Vec<(String, String)>,
    /// Settings that would keep a subject after an erasure.
    pub blockers: Vec<String>,
    /// Iceberg identifier fields (row key), by name.
    pub identifier_fields: Vec<String>,
    /// Why lethe can't change this table correctly yet (format v3 features), if it can't:
    /// a DELETE, REWRITE or RECOMPUTE step on it becomes UNRESOLVED with this reason.
    pub unsupported: Option<String>,
}

/// The catalog as the planner sees it.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// Tables by dotted name.
    pub tables: BTreeMap<String, TableInfo>,
    /// Table locations (normalised) by dotted name, to resolve lineage datasets named by path.
    pub locations: BTreeMap<String, String>,
}

impl Inventory {
    /// Reads every table's schema, settings and location.
    pub async fn load(wh: &Warehouse) -> Result<Inventory> {
        let mut inv = Inventory::default();
        for name in wh.tables().await? {
            let t = wh.load(&name).await?;
            let schema = t.metadata.current_schema();
            let info = TableInfo {
                columns: schema
                    .as_struct()
                    .fields()
                    .iter()
                    .map(|f| (f.name.clone(), f.field_type.to_string()))
                    .collect(),
                blockers: blockers(&t)?,
                identifier_fields: schema
                    .identifier_field_ids()
                    .filter_map(|id| schema.name_by_field_id(id).map(str::to_string))
                    .collect(),
                unsupported: crate::deletes::unsupported_features(wh, &t).await?,
            };
            if let Ok(loc) = wh.store.normalize(t.location()) {
                inv.locations.insert(name.to_string(), loc);
            }
            inv.tables.insert(name.to_string(), info);
        }
        Ok(inv)
    }

    fn has_column(&self, table: &str, column: &str) -> bool {
        self.tables
            .get(table)
            .is_some_and(|t| t.columns.iter().any(|(c, _)| c == column))
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
        if let Ok(p) = crate::store::normalize_local(stripped)
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

fn is_lethe_pipeline(job_ns: &str) -> bool {
    job_ns == crate::pipeline::JOB_NAMESPACE
}

/// An edge in words: `from.table.col -> to.table.col (TYPE/SUBTYPE) by job ns/name`.
fn edge_text(e: &lethe_lineage::ColumnEdge<'_>) -> String {
    format!(
        "{}.{} -> {}.{} ({}) by job {}",
        e.from_dataset(),
        e.from_field(),
        e.to_dataset(),
        e.to_field().unwrap_or("*"),
        e.transformation(),
        e.job()
    )
}

/// Plans one subject's erasure. Pure: values are resolved later by [`resolve_values`].
pub fn plan(
    inv: &Inventory,
    gov: &Governance,
    graph: &LineageGraph,
    subject_name: &str,
    since: Option<DateTime<Utc>>,
    pipelines: &BTreeSet<String>,
) -> Result<Plan> {
    plan_drawn(inv, gov, graph, subject_name, since, pipelines, false)
}

/// [`plan`], with the walked lineage subgraph drawn as DOT in `Plan::dot` when `draw` is set
/// (it can be large: every reached dataset and edge).
pub fn plan_drawn(
    inv: &Inventory,
    gov: &Governance,
    graph: &LineageGraph,
    subject_name: &str,
    since: Option<DateTime<Utc>>,
    pipelines: &BTreeSet<String>,
    draw: bool,
) -> Result<Plan> {
    let subject = gov.subjects.get(subject_name)?;
    let (root_table, root_column) = subject.root()?;
    if !inv.has_column(&root_table, &root_column) {
        return Err(gov.subjects.error_at(
            &format!("{subject_name}.identifiers"),
            format!("{root_table}.{root_column} is not a column of a catalog table"),
        ));
    }
    // Seeds: declared identifier columns by name, and columns classified as identifying the
    // subject; mapped identifiers in their mapping table.
    let id_names: BTreeSet<String> = subject
        .identifiers
        .iter()
        .map(|c| split_column(c).map(|(_, c)| c))
        .collect::<Result<_>>()?;
    let mut seeds: Vec<Seed> = Vec::new();
    let mut declared: BTreeMap<String, (String, String, String)> = BTreeMap::new();
    let derived_cols =
        crate::discover::derived::declared(gov, subject_name, &derived_sources(subject)?)?;
    let mut seed_via: BTreeMap<(String, String), String> = BTreeMap::new();
    for (table, info) in &inv.tables {
        for (col, _) in &info.columns {
            let by_name = id_names.contains(col);
            let by_class = gov
                .metadata
                .table(table)
                .and_then(|t| t.columns.get(col))
                .and_then(|c| c.identifies())
                == Some(subject_name);
            if by_name || by_class {
                // A derived identifier (metadata.toml `derived`) has values of its own,
                // resolved through its pattern (crate::discover::derived).
                let derived = (!by_name)
                    .then(|| {
                        derived_cols
                            .iter()
                            .find(|d| &d.table == table && &d.column == col)
                    })
                    .flatten();
                let label = if by_name {
                    col.clone()
                } else if let Some(d) = derived {
                    d.label.clone()
                } else {
                    root_column.clone()
                };
                seeds.push(Seed::new(table.clone(), col.clone(), label.clone()));
                let via = if by_name {
                    format!("declared identifier column `{col}` (subjects.toml)")
                } else if let Some(d) = derived {
                    format!(
                        "column `{col}` derived from {} as `{}` (metadata.toml)",
                        d.from,
                        d.pattern.render()
                    )
                } else {
                    format!(
                        "column `{col}` classified as identifying {subject_name} (metadata.toml)"
                    )
                };
                seed_via.insert((table.clone(), col.clone()), via.clone());
                declared
                    .entry(table.clone())
                    .or_insert((col.clone(), label, via));
            }
        }
    }
    for m in &subject.mapped {
        if inv.has_column(&m.via, &m.column) {
            seeds.push(Seed::new(m.via.clone(), m.column.clone(), m.column.clone()));
        } else {
            return Err(gov.subjects.error_at(
                &format!("{subject_name}.mapped"),
                format!("{}.{} is not a column of a catalog table", m.via, m.column),
            ));
        }
    }
    let start = since.unwrap_or(DateTime::<Utc>::MIN_UTC);
    let keys = |ds: &str| -> Vec<String> {
        let declared = gov
            .metadata
            .table(ds)
            .map(|t| t.key.clone())
            .unwrap_or_default();
        if !declared.is_empty() {
            return declared;
        }
        inv.tables
            .get(ds)
            .map(|t| t.identifier_fields.clone())
            .unwrap_or_default()
    };
    let w: Walk<'_> = walk(graph, start, &seeds, keys);
    let window = Window::since(start);

    // Candidate tables: seeded ones and every dataset the walk reached.
    let mut order: Vec<String> = Vec::new();
    for d in w.datasets() {
        order.push(d.name().to_string());
    }
    let in_walk: std::collections::HashSet<String> = order.iter().cloned().collect();
    for t in declared.keys() {
        if !in_walk.contains(t) {
            order.push(t.clone());
        }
    }
    // Depth by the graph's dataset index (a name lookup per edge cost half a second on a
    // million edges); `None` until the dataset is placed.
    let mut depth: Vec<Option<usize>> = vec![None; graph.dataset_count()];
    let mut steps: Vec<(usize, Step)> = Vec::new();
    for name in &order {
        let reached = w.dataset(name);
        // Depth: one more than the deepest dataset an edge brought it from.
        let mut d = 0usize;
        if let Some(r) = &reached {
            let own = r.dataset_id();
            let mut from = |e: &lethe_lineage::ColumnEdge<'_>| {
                let f = e.from_dataset_id();
                if Some(f) != own {
                    let at = depth.get(f.index()).copied().flatten();
                    d = d.max(at.map_or(1, |x| x + 1));
                }
            };
            for l in r.labels() {
                if let Via::Edge(e) = l.via {
                    from(&e);
                }
            }
            for e in r.shaped_by() {
                from(&e);
            }
            if let Some(slot) = own.and_then(|id| depth.get_mut(id.index())) {
                *slot = Some(d);
            }
        }
        let in_catalog = inv.tables.contains_key(name);
        let exception = gov.retention.value.erasure.exceptions.get(name);
        let no_action = subject.no_action.get(name);
        let mut step = Step {
            table: name.clone(),
            action: Action::Unresolved,
            column: None,
            label: None,
            values: Vec::new(),
            erase_columns: Vec::new(),
            via: String::new(),
            evidence: None,
            reason: None,
            pipeline: None,
            blockers: inv
                .tables
                .get(name)
                .map(|t| t.blockers.clone())
                .unwrap_or_default(),
        };
        // The column that selects the subject's rows, preferring the root identifier, then
        // mapped identifiers, then keys of owned rows; an identity edge over a declaration when
        // lineage produces the table.
        let mut best: Option<(u8, String, String, String, Option<String>)> = None;
        if let Some(r) = &reached {
            for l in r.labels() {
                let rank = if l.label == root_column {
                    0
                } else if subject.mapped.iter().any(|m| m.column == l.label) {
                    1
                } else {
                    2
                };
                // A seeded column that lineage also copies is shown with its lineage edge.
                let identity_in = || {
                    graph.dataset_id(name).and_then(|id| {
                        graph.edges_into(id, window).find(|e| {
                            e.to_field() == Some(l.field)
                                && e.transformation().is_identity()
                                && e.from_dataset() != name
                        })
                    })
                };
                let (via, evidence, sub) = match l.via {
                    Via::Edge(e) => (
                        edge_text(&e),
                        e.intervals().next().map(|i| i.evidence.to_string()),
                        0,
                    ),
                    Via::Seed => match identity_in() {
                        Some(e) => (
                            edge_text(&e),
                            e.intervals().next().map(|i| i.evidence.to_string()),
                            0,
                        ),
                        None => (
                            seed_via
                                .get(&(name.clone(), l.field.to_string()))
                                .or_else(|| declared.get(name).map(|d| &d.2))
                                .cloned()
                                .unwrap_or_else(|| {
                                    format!("mapped identifier `{}` (subjects.toml)", l.field)
                                }),
                            None,
                            1,
                        ),
                    },
                    Via::Key => (
                        format!(
                            "row key `{}` of a table holding the subject's rows",
                            l.field
                        ),
                        None,
                        2,
                    ),
                };
                let key = rank * 3 + sub;
                if best.as_ref().is_none_or(|b| key < b.0) {
                    best = Some((key, l.field.to_string(), l.label.to_string(), via, evidence));
                }
            }
        } else if let Some((col, label, via)) = declared.get(name) {
            best = Some((0, col.clone(), label.clone(), via.clone(), None));
        }
        let unresolved: Vec<String> = reached
            .as_ref()
            .map(|r| r.unresolved().map(|u| u.to_string()).collect())
            .unwrap_or_default();
        // The shaping edge shown: a DIRECT one first (it says most about why), then by name.
        // Only that one is put in words: a table can be shaped by thousands of edges.
        let shaped_edge: Option<lethe_lineage::ColumnEdge<'_>> = reached.as_ref().and_then(|r| {
            r.shaped_by().min_by_key(|e| {
                (
                    e.transformation().kind != lethe_lineage::TransformationType::Direct,
                    e.from_dataset(),
                    e.from_field(),
                    e.to_field(),
                )
            })
        });
        let shaped: Option<String> = shaped_edge.as_ref().map(edge_text);
        if !in_catalog {
            step.action = Action::Unresolved;
            step.reason = Some(format!(
                "lineage reaches `{name}`, which is not a table of the catalog: lethe can't see or erase it"
            ));
            step.via = shaped.clone().unwrap_or_default();
        } else if let Some(ex) = exception {
            step.action = Action::Rewrite;
            step.erase_columns = ex.erase_columns.clone();
            step.reason = Some(format!("{} (decided by {})", ex.reason, ex.decided_by));
            if let Some((_, col, label, via, ev)) = best {
                step.column = Some(col);
                step.label = Some(label);
                step.via = via;
                step.evidence = ev;
            } else {
                step.via = "legal exception (retention.toml)".into();
            }
        } else if let Some(j) = no_action {
            step.action = Action::NoAction;
            step.reason = Some(j.clone());
            step.via = "declared free of the subject's data (subjects.toml)".into();
        } else if !unresolved.is_empty() {
            step.action = Action::Unresolved;
            step.reason = Some(unresolved.join("; "));
            step.via = shaped.clone().unwrap_or_default();
        } else if let Some((_, col, label, via, ev)) = best {
            step.action = Action::Delete;
            step.column = Some(col);
            step.label = Some(label);
            step.via = via;
            step.evidence = ev;
        } else if let Some(shaped) = shaped {
            let id = graph.dataset_id(name);
            let producers: Vec<(String, String)> = id
                .map(|id| {
                    graph
                        .producers(id, window)
                        .into_iter()
                        .map(|j| (j.namespace.to_string(), j.name.to_string()))
                        .collect()
                })
                .unwrap_or_default();
            step.via = shaped;
            step.evidence = shaped_edge
                .as_ref()
                .and_then(|e| e.intervals().next().map(|i| i.evidence.to_string()));
            let lethe: Vec<&(String, String)> = producers
                .iter()
                .filter(|(ns, n)| is_lethe_pipeline(ns) && pipelines.contains(n))
                .collect();
            if lethe.len() == 1 && producers.len() == 1 {
                step.action = Action::Recompute;
                step.pipeline = Some(lethe[0].1.clone());
                step.reason = Some(format!(
                    "only shaped by the subject's rows: rerun pipeline `{}` after its sources are erased",
                    lethe[0].1
                ));
            } else {
                step.action = Action::Unresolved;
                step.reason = Some(format!(
                    "shaped by the subject's rows, but produced by {} which lethe can't rerun",
                    if producers.is_empty() {
                        "no known job".to_string()
                    } else {
                        producers
                            .iter()
                            .map(|(a, b)| format!("{a}/{b}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ));
            }
        } else {
            continue;
        }
        // A table lethe can't change correctly (format v3 features) is never touched: its
        // step is UNRESOLVED with the reason, and nothing selects rows in it.
        if let Some(why) = inv.tables.get(name).and_then(|t| t.unsupported.as_ref())
            && matches!(
                step.action,
                Action::Delete | Action::Rewrite | Action::Recompute
            )
        {
            step.reason = Some(format!(
                "{why}; planned as {} but left unchanged",
                step.action
            ));
            step.action = Action::Unresolved;
            step.column = None;
            step.label = None;
            step.erase_columns.clear();
            step.pipeline = None;
        }
        steps.push((d, step));
    }
    // Upstream first, then by name.
    steps.sort_unstable_by(|a, b| (a.0, &a.1.table).cmp(&(b.0, &b.1.table)));
    let steps: Vec<Step> = steps.into_iter().map(|(_, s)| s).collect();
    let mut coverage = Coverage {
        discovered: steps.len(),
        ..Default::default()
    };
    for s in &steps {
        match s.action {
            Action::Delete | Action::Recompute => coverage.resolved += 1,
            Action::Rewrite | Action::NoAction => coverage.exempt += 1,
            Action::Unresolved => coverage.unresolved += 1,
        }
    }
    coverage.percent = if coverage.discovered == 0 {
        100.0
    } else {
        ((coverage.resolved + coverage.exempt) as f64 * 1000.0 / coverage.discovered as f64).round()
            / 10.0
    };
    let blocked: BTreeMap<String, Vec<String>> = steps
        .iter()
        .filter(|s| {
            matches!(
                s.action,
                Action::Delete | Action::Rewrite | Action::Recompute
            ) && !s.blockers.is_empty()
        })
        .map(|s| (s.table.clone(), s.blockers.clone()))
        .collect();
    let verdict = if coverage.unresolved > 0 {
        Verdict::Incomplete
    } else if !blocked.is_empty() {
        Verdict::Blocked
    } else {
        Verdict::Complete
    };
    Ok(Plan {
        subject: subject_name.to_string(),
        lineage_since: since,
        steps,
        coverage,
        verdict,
        blocked,
        dot: if draw { w.to_dot() } else { String::new() },
    })
}

/// The earliest first record of the subjects `ids`: the root rows' `first_seen` column, when
/// subjects.toml names one. None (every lineage edge applies) when it names none or when a
/// subject has no root row. One read of the root table, however many subjects.
pub async fn first_seen(
    wh: &Warehouse,
    subject: &Subject,
    ids: &[Value],
) -> Result<Option<DateTime<Utc>>> {
    let Some(col) = &subject.first_seen else {
        return Ok(None);
    };
    let (table, root) = subject.root()?;
    let t = wh.load(&TableName::parse(&table)?).await?;
    let ty = crate::predicate::column_type(t.metadata.current_schema(), col, &table)?;
    if !matches!(
        ty,
        PrimitiveType::Date | PrimitiveType::Timestamp | PrimitiveType::Timestamptz
    ) {
        return Err(Error::invalid(format!(
            "first_seen column {table}.{col} is {ty}, not a date or timestamp"
        )));
    }
    let rows = select_rows(wh, &t, &Predicate::is_in(root.clone(), ids.to_vec())).await?;
    let found: BTreeSet<String> = rows
        .iter()
        .map(|b| column_values(std::slice::from_ref(b), &root))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .map(|v| v.to_string())
        .collect();
    if ids.iter().any(|id| !found.contains(&id.to_string())) {
        return Ok(None);
    }
    let mut min: Option<DateTime<Utc>> = None;
    for b in rows {
        let c = b
            .column_by_name(col)
            .ok_or_else(|| Error::Internal(format!("no column {col}")))?;
        let c = arrow::compute::cast(
            c,
            &arrow::datatypes::DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None),
        )?;
        let ts = c
            .as_any()
            .downcast_ref::<arrow::array::TimestampMicrosecondArray>()
            .ok_or_else(|| Error::Internal("cast".into()))?;
        for v in ts.iter().flatten() {
            let t = DateTime::<Utc>::from_timestamp_micros(v);
            if let Some(t) = t {
                min = Some(min.map_or(t, |m: DateTime<Utc>| m.min(t)));
            }
        }
    }
    Ok(min)
}

/// The values of every label the plan uses, read from the tables (before anything is deleted):
/// the root identifier, mapped identifiers through their mapping table, and the keys of rows
/// the subject owns.
pub async fn resolve_values(
    wh: &Warehouse,
    gov: &Governance,
    plan: &Plan,
    subject_ids: &[Value],
) -> Result<BTreeMap<String, Vec<Value>>> {
    let subject = gov.subjects.get(&plan.subject)?;
    let (root_table, root_column) = subject.root()?;
    let mut values: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    values.insert(root_column.clone(), subject_ids.to_vec());
    for m in &subject.mapped {
        let t = wh.load(&TableName::parse(&m.via)?).await?;
        let rows = select_rows(
            wh,
            &t,
            &Predicate::is_in(root_column.clone(), subject_ids.to_vec()),
        )
        .await?;
        values.insert(m.column.clone(), column_values(&rows, &m.column)?);
    }
    let _ = root_table;
    let labels: BTreeSet<String> = plan.steps.iter().filter_map(|s| s.label.clone()).collect();
    // Derived identifiers: the values their pattern selects.
    let wanted: std::collections::HashSet<String> = labels.iter().cloned().collect();
    for (label, (_, pairs)) in
        crate::discover::derived::resolve_labels(wh, gov, &plan.subject, &wanted, &values).await?
    {
        values.insert(label, pairs.into_iter().map(|(v, _)| v).collect());
    }
    // Keys of owned rows: `table.key` labels, resolved from the table's labelled column.
    for label in labels {
        if values.contains_key(&label) {
            continue;
        }
        let Some((table, key)) = label.rsplit_once('.') else {
            continue;
        };
        let Some(source) = plan.steps.iter().find(|s| s.table == table) else {
            return Err(Error::Internal(format!(
                "label {label} names a table outside the plan"
            )));
        };
        let (Some(col), Some(src_label)) = (&source.column, &source.label) else {
            return Err(Error::Internal(format!(
                "label {label}: {table} has no selecting column"
            )));
        };
        let src_values = values.get(src_label).cloned().unwrap_or_default();
        let t = wh.load(&TableName::parse(table)?).await?;
        let rows = select_rows(wh, &t, &Predicate::is_in(col.clone(), src_values)).await?;
        values.insert(label.clone(), column_values(&rows, key)?);
    }
    Ok(values)
}

/// The labels a derived identifier may be derived from: the root identifier column and the
/// mapped identifier columns (their values are resolved first).
pub fn derived_sources(subject: &Subject) -> Result<Vec<String>> {
    let (_, root) = subject.root()?;
    let mut out = vec![root];
    out.extend(subject.mapped.iter().map(|m| m.column.clone()));
    Ok(out)
}

/// Distinct non-null values of a column, as predicate values.
pub fn column_values(batches: &[arrow::array::RecordBatch], column: &str) -> Result<Vec<Value>> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::DataType;
    let mut out: Vec<Value> = Vec::new();
    let mut seen = BTreeSet::new();
    for b in batches {
        let c = b
            .column_by_name(column)
            .ok_or_else(|| Error::invalid(format!("no column `{column}`")))?;
        match c.data_type() {
            DataType::Int64 | DataType::Int32 => {
                let c = arrow::compute::cast(c, &DataType::Int64)?;
                for v in c
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .iter()
                    .flatten()
                {
                    if seen.insert(v.to_string()) {
                        out.push(Value::Int(v));
                    }
                }
            }
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                let c = arrow::compute::cast(c, &DataType::Utf8)?;
                let s = c.as_string::<i32>();
                for i in 0..s.len() {
                    if s.is_valid(i) && seen.insert(s.value(i).to_string()) {
                        out.push(Value::Str(s.value(i).to_string()));
                    }
                }
            }
            other => {
                return Err(Error::Unsupported {
                    table: String::new(),
                    feature: format!("identifier column `{column}` of type {other}"),
                    detail: "identifiers are whole numbers or text".into(),
                });
            }
        }
    }
    Ok(out)
}

/// Whether a column type can hold identifiers.
pub fn identifier_type(t: &Type) -> bool {
    matches!(
        t,
        Type::Primitive(PrimitiveType::Long | PrimitiveType::Int | PrimitiveType::String)
    )
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
