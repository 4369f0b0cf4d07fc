//! The planner's middle stage: the tables the lineage walk reached (and the seeded ones it
//! didn't), sources first, and exactly one step for each.

use std::collections::{BTreeSet, HashSet};

use lethe_lineage::{
    ColumnEdge, LineageGraph, ReachedDataset, TransformationType, Via, Walk, Window,
};

use super::seeds::Seeded;
use super::{Action, Inventory, Selector, Step};
use crate::governance::Governance;
use crate::governance::subjects::Subject;

/// Whether a job namespace is lethe's own pipelines'.
fn is_lethe_pipeline(job_ns: &str) -> bool {
    job_ns == crate::pipeline::JOB_NAMESPACE
}

/// An edge in words: `from.table.col -> to.table.col (TYPE/SUBTYPE) by job ns/name`.
fn edge_text(e: &ColumnEdge<'_>) -> String {
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

/// The first edge's evidence file.
fn evidence_of(e: &ColumnEdge<'_>) -> Option<String> {
    e.intervals().next().map(|i| i.evidence.to_string())
}

/// A column that selects a table's rows: rank, column, label, how, evidence.
struct Selecting {
    rank: u8,
    column: String,
    label: String,
    via: String,
    evidence: Option<String>,
}

/// What the planner works from.
pub(super) struct Planner<'a> {
    pub inv: &'a Inventory,
    pub gov: &'a Governance,
    pub graph: &'a LineageGraph,
    pub subject: &'a Subject,
    pub root_column: &'a str,
    pub window: Window,
    pub pipelines: &'a BTreeSet<String>,
    pub seeded: &'a Seeded,
}

impl Planner<'_> {
    /// One step per candidate table (every dataset the walk reached, then seeded tables it
    /// didn't), upstream first, then by name.
    pub(super) fn steps(&self, w: &Walk<'_>) -> Vec<Step> {
        let mut order: Vec<String> = w.datasets().map(|d| d.name().to_string()).collect();
        let in_walk: HashSet<String> = order.iter().cloned().collect();
        for t in self.seeded.declared.keys() {
            if !in_walk.contains(t) {
                order.push(t.clone());
            }
        }
        // Depth by the graph's dataset index (a name lookup per edge cost half a second on a
        // million edges); `None` until the dataset is placed.
        let mut depth: Vec<Option<usize>> = vec![None; self.graph.dataset_count()];
        let mut steps: Vec<(usize, Step)> = Vec::new();
        for name in &order {
            let reached = w.dataset(name);
            let d = reached.as_ref().map_or(0, |r| depth_of(r, &mut depth));
            if let Some(step) = self.step_for(name, reached.as_ref()) {
                steps.push((d, step));
            }
        }
        steps.sort_unstable_by(|a, b| (a.0, &a.1.table).cmp(&(b.0, &b.1.table)));
        steps.into_iter().map(|(_, s)| s).collect()
    }

    /// The step for one table, or None when nothing about the subject reaches it.
    fn step_for(&self, name: &str, reached: Option<&ReachedDataset<'_>>) -> Option<Step> {
        let mut step = Step {
            table: name.to_string(),
            action: Action::Unresolved,
            column: None,
            label: None,
            values: Vec::new(),
            also: Vec::new(),
            erase_columns: Vec::new(),
            via: String::new(),
            evidence: None,
            reason: None,
            pipeline: None,
            blockers: Vec::new(),
            history: None,
            held: None,
        };
        self.history_of(&mut step);
        let best = self.selecting_columns(name, reached);
        let unresolved: Vec<String> = reached
            .map(|r| r.unresolved().map(|u| u.to_string()).collect())
            .unwrap_or_default();
        // The shaping edge shown: a DIRECT one first (it says most about why), then by name.
        // Only that one is put in words: a table can be shaped by thousands of edges.
        let shaped_edge: Option<ColumnEdge<'_>> = reached.and_then(|r| {
            r.shaped_by().min_by_key(|e| {
                (
                    e.transformation().kind != TransformationType::Direct,
                    e.from_dataset(),
                    e.from_field(),
                    e.to_field(),
                )
            })
        });
        let shaped: Option<String> = shaped_edge.as_ref().map(edge_text);
        let exception = self.gov.retention.value.erasure.exceptions.get(name);
        if !self.inv.tables.contains_key(name) {
            step.reason = Some(format!(
                "lineage reaches `{name}`, which is not a table of the catalog: lethe can't see or erase it"
            ));
            step.via = shaped.unwrap_or_default();
        } else if let Some(ex) = exception {
            step.action = Action::Rewrite;
            step.erase_columns = ex.erase_columns.clone();
            step.reason = Some(format!("{} (decided by {})", ex.reason, ex.decided_by));
            if best.is_empty() {
                step.via = "legal exception (retention.toml)".into();
            }
            select_by(&mut step, best);
        } else if let Some(j) = self.subject.no_action.get(name) {
            step.action = Action::NoAction;
            step.reason = Some(j.clone());
            step.via = "declared free of the subject's data (subjects.toml)".into();
        } else if !unresolved.is_empty() {
            step.reason = Some(unresolved.join("; "));
            step.via = shaped.unwrap_or_default();
        } else if !best.is_empty() {
            step.action = Action::Delete;
            select_by(&mut step, best);
        } else if let Some(shaped) = shaped {
            step.via = shaped;
            step.evidence = shaped_edge.as_ref().and_then(evidence_of);
            self.recompute_or_unresolved(&mut step, name);
        } else {
            return None;
        }
        self.leave_unsupported(&mut step);
        // Only rows a column addresses can be taken out of kept snapshots: a RECOMPUTE (or
        // UNRESOLVED) table's kept history stays a blocker.
        if !matches!(step.action, Action::Delete | Action::Rewrite)
            && let Some(h) = step.history.take()
        {
            step.blockers.extend(h.keeps.into_iter().map(|k| {
                format!(
                    "{k} (a {} table's kept history can't be rewritten row by row)",
                    step.action
                )
            }));
        }
        Some(step)
    }

    /// Every column that selects the subject's rows, best first: the root identifier, then
    /// mapped identifiers, then keys of owned rows (an identity edge over a declaration when
    /// lineage produces the table), each (column, label) once. The table's own row key is left
    /// out: its values are read from the rows the others select.
    fn selecting_columns(
        &self,
        name: &str,
        reached: Option<&ReachedDataset<'_>>,
    ) -> Vec<Selecting> {
        let Some(r) = reached else {
            return self
                .seeded
                .declared
                .get(name)
                .into_iter()
                .flatten()
                .map(|(col, label, via)| Selecting {
                    rank: 0,
                    column: col.clone(),
                    label: label.clone(),
                    via: via.clone(),
                    evidence: None,
                })
                .collect();
        };
        let mut all: Vec<Selecting> = Vec::new();
        for l in r.labels() {
            if matches!(l.via, Via::Key) && l.label == format!("{name}.{}", l.field) {
                continue;
            }
            let rank = if l.label == self.root_column {
                0
            } else if self.subject.mapped.iter().any(|m| m.column == l.label) {
                1
            } else {
                2
            };
            let (via, evidence, sub) = match l.via {
                Via::Edge(e) => (edge_text(&e), evidence_of(&e), 0),
                // A seeded column that lineage also copies is shown with its lineage edge.
                Via::Seed => match self.identity_into(name, l.field) {
                    Some(e) => (edge_text(&e), evidence_of(&e), 0),
                    None => (
                        self.seeded
                            .seed_via
                            .get(&(name.to_string(), l.field.to_string()))
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
            match all
                .iter_mut()
                .find(|s| s.column == l.field && s.label == l.label)
            {
                Some(s) if key < s.rank => {
                    *s = Selecting {
                        rank: key,
                        column: l.field.to_string(),
                        label: l.label.to_string(),
                        via,
                        evidence,
                    };
                }
                Some(_) => {}
                None => all.push(Selecting {
                    rank: key,
                    column: l.field.to_string(),
                    label: l.label.to_string(),
                    via,
                    evidence,
                }),
            }
        }
        all.sort_by(|a, b| (a.rank, &a.column, &a.label).cmp(&(b.rank, &b.column, &b.label)));
        all
    }

    /// The step's blockers: `gc.enabled=false`, and the history its table keeps unless
    /// retention.toml decides to rewrite it (then the step carries the rewrite instead).
    fn history_of(&self, step: &mut Step) {
        let Some(t) = self.inv.tables.get(&step.table) else {
            return;
        };
        step.blockers = t.blockers.clone();
        if t.keeps_history.is_empty() {
            return;
        }
        match self.gov.retention.value.snapshots.rewrite_of(&step.table) {
            Some(decision) => {
                step.history = Some(super::HistoryRewrite {
                    keeps: t.keeps_history.clone(),
                    decision,
                });
            }
            None => step.blockers.extend(t.keeps_history.iter().cloned()),
        }
    }

    /// An IDENTITY edge from another dataset into `name.field`, if lineage has one.
    fn identity_into(&self, name: &str, field: &str) -> Option<ColumnEdge<'_>> {
        let id = self.graph.dataset_id(name)?;
        self.graph.edges_into(id, self.window).find(|e| {
            e.to_field() == Some(field)
                && e.transformation().is_identity()
                && e.from_dataset() != name
        })
    }

    /// A table only shaped by the subject's rows: RECOMPUTE when exactly one producer made it
    /// and that producer is one of lethe's pipelines, else UNRESOLVED naming the producers.
    fn recompute_or_unresolved(&self, step: &mut Step, name: &str) {
        let producers: Vec<(String, String)> = self
            .graph
            .dataset_id(name)
            .map(|id| {
                self.graph
                    .producers(id, self.window)
                    .into_iter()
                    .map(|j| (j.namespace.to_string(), j.name.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let lethe: Vec<&(String, String)> = producers
            .iter()
            .filter(|(ns, n)| is_lethe_pipeline(ns) && self.pipelines.contains(n))
            .collect();
        if lethe.len() == 1 && producers.len() == 1 {
            step.action = Action::Recompute;
            step.pipeline = Some(lethe[0].1.clone());
            step.reason = Some(format!(
                "only shaped by the subject's rows: rerun pipeline `{}` after its sources are erased",
                lethe[0].1
            ));
            return;
        }
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

    /// A table lethe can't change correctly (see [`super::inventory::TableInfo::unsupported`])
    /// is never touched: its step
    /// is UNRESOLVED with the reason, and nothing selects rows in it.
    fn leave_unsupported(&self, step: &mut Step) {
        let Some(why) = self
            .inv
            .tables
            .get(&step.table)
            .and_then(|t| t.unsupported.as_ref())
        else {
            return;
        };
        if !matches!(
            step.action,
            Action::Delete | Action::Rewrite | Action::Recompute
        ) {
            return;
        }
        step.reason = Some(format!(
            "{why}; planned as {} but left unchanged",
            step.action
        ));
        step.action = Action::Unresolved;
        step.column = None;
        step.label = None;
        step.also.clear();
        step.erase_columns.clear();
        step.pipeline = None;
    }
}

/// Sets a step's selecting columns (the first as its `column`, the rest as `also`), how the
/// first came in and its evidence.
fn select_by(step: &mut Step, selecting: Vec<Selecting>) {
    let mut it = selecting.into_iter();
    let Some(b) = it.next() else { return };
    step.column = Some(b.column);
    step.label = Some(b.label);
    step.via = b.via;
    step.evidence = b.evidence;
    step.also = it
        .map(|s| Selector {
            column: s.column,
            label: s.label,
            via: s.via,
            evidence: s.evidence,
            values: Vec::new(),
        })
        .collect();
}

/// A dataset's depth: one more than the deepest dataset an edge brought it from (0 for a
/// seed); recorded in `depth` by dataset index.
fn depth_of(r: &ReachedDataset<'_>, depth: &mut [Option<usize>]) -> usize {
    let own = r.dataset_id();
    let mut d = 0usize;
    let mut from = |e: &ColumnEdge<'_>| {
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
    d
}
