//! The temporal column-lineage graph built from RunEvents.
//!
//! What it guarantees:
//! - Runs: only COMPLETE events and events without `eventType` are runs; the others are counted
//!   in [`GraphStats`] and ignored. Events of one job with the same `runId` are one run (tools
//!   emit several COMPLETE events per run, and the same file may be loaded twice); the run's
//!   time is its earliest COMPLETE `eventTime`. Runs of a job are ordered by time, then run id.
//! - Edges: an edge is (input dataset.field -> output dataset.field, transformation type/subtype,
//!   masking) shown by a run of one job. It is valid from the first run of that job that shows
//!   it until (exclusive) the next run of the same job that does not; if a later run shows it
//!   again a new interval starts; the last interval may be open-ended. Each interval keeps the
//!   evidence file that opened it and the last time a run showed it. Dataset-wide lineage (the
//!   facet's `dataset` list) is an edge with no target field.
//! - Datasets: the resolver maps an OpenLineage (namespace, name) to a canonical key or says it
//!   cannot; such a dataset is *external* and named `namespace/name`, unless a `symlinks` facet
//!   in any event names an identifier the resolver maps (Spark reports tables read by path this
//!   way): then it is that table everywhere.
//! - Runs are kept as dataset-level flows too (inputs -> outputs), with, per output, whether the
//!   run gave column lineage for it and the reasons it is opaque: an input the resolver could
//!   not map to a catalog table, a transformation described `opaque: ...`, an event without a
//!   producer, an input that no column edge of the run starts from (unaccounted). A run's flows are valid from its time until the job's next run.
//! - Ids are canonical: datasets and field names are numbered in name order, edges in
//!   (source dataset, source field, target dataset, target field, transformation, job) order,
//!   so the graph and everything derived from it do not depend on the order events were added.
//! - Strings are interned (u32 ids) and adjacency lives in flat arrays (CSR); 10^5 datasets and
//!   10^6 column edges build in seconds and a few hundred MB (see `examples/walk_bench.rs`).
//!
//! What it does not do: it does not know catalogs (the resolver maps an OpenLineage dataset to
//! a key, e.g. a catalog table name), it does not check that a field exists in a dataset's
//! schema, and it does not merge datasets that the resolver keeps apart.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Range;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::event::{
    DatasetFacets, EventType, RunEvent, Transformation, TransformationType, is_opaque_description,
};

/// Sentinel for "no id" (a dataset-wide edge has no target field).
const NONE: u32 = u32::MAX;
/// The largest number of ids of one kind.
const MAX_IDS: u64 = u32::MAX as u64 - 1;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u32);

        impl $name {
            /// The id as an index (ids are dense, from 0).
            pub fn index(self) -> usize {
                self.0 as usize
            }

            #[allow(dead_code)]
            pub(crate) fn from_index(i: usize) -> Self {
                Self(i as u32)
            }
        }
    };
}

id_type!(
    /// A dataset (canonical key) in a [`LineageGraph`]; ids follow name order.
    DatasetId
);
id_type!(
    /// A field name in a [`LineageGraph`]; ids follow name order.
    FieldId
);
id_type!(
    /// A column edge in a [`LineageGraph`].
    EdgeId
);
id_type!(
    /// A run (merged by job and run id) in a [`LineageGraph`].
    RunIndex
);

fn capacity(what: &'static str) -> Error {
    Error::Capacity {
        what,
        limit: MAX_IDS,
    }
}

fn to_u32(n: usize, what: &'static str) -> Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|&i| u64::from(i) < MAX_IDS)
        .ok_or_else(|| capacity(what))
}

/// The time window a query or walk considers: `[start, +inf)`. An edge (or run) is usable when
/// one of its validity intervals overlaps the window: its end is open or later than `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Window {
    start: Option<DateTime<Utc>>,
}

impl Window {
    /// All of time: every edge and run is usable.
    pub const ALL: Window = Window { start: None };

    /// `[start, +inf)`, e.g. from the subject's first record.
    pub fn since(start: DateTime<Utc>) -> Window {
        Window { start: Some(start) }
    }

    /// The start, `None` for [`Window::ALL`].
    pub fn start(self) -> Option<DateTime<Utc>> {
        self.start
    }

    /// True when something valid until `valid_until` (exclusive; `None` = still valid)
    /// overlaps the window.
    pub fn admits(self, valid_until: Option<DateTime<Utc>>) -> bool {
        match (self.start, valid_until) {
            (None, _) | (_, None) => true,
            (Some(start), Some(until)) => until > start,
        }
    }
}

/// The transformation of a column edge: type, subtype (ASCII upper case) and masking.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransformationKind {
    /// DIRECT, INDIRECT or as written.
    pub kind: TransformationType,
    /// IDENTITY, TRANSFORMATION, AGGREGATION, JOIN, FILTER, ... (upper-cased), if given.
    pub subtype: Option<String>,
    /// The transformation masks values.
    pub masking: bool,
}

impl TransformationKind {
    /// DIRECT/IDENTITY without masking: the target field holds the source field's values.
    /// (A masked "identity" holds something computed from them, so it only shapes.)
    pub fn is_identity(&self) -> bool {
        self.kind == TransformationType::Direct
            && self.subtype.as_deref() == Some("IDENTITY")
            && !self.masking
    }

    fn matches(&self, t: &Transformation) -> bool {
        self.kind == t.kind
            && self.masking == t.masking.unwrap_or(false)
            && match (&self.subtype, &t.subtype) {
                (None, None) => true,
                (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                _ => false,
            }
    }
}

impl fmt::Display for TransformationKind {
    /// `TYPE/SUBTYPE`, or `TYPE` without a subtype.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subtype {
            Some(s) => write!(f, "{}/{}", self.kind, s),
            None => write!(f, "{}", self.kind),
        }
    }
}

/// A job, by OpenLineage namespace and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct JobName<'g> {
    /// Job namespace.
    pub namespace: &'g str,
    /// Job name.
    pub name: &'g str,
}

impl fmt::Display for JobName<'_> {
    /// `namespace/name`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Counts about a built graph.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GraphStats {
    /// Events given to the builder.
    pub events: u64,
    /// Events that are not runs (START, RUNNING, ABORT, FAIL, OTHER), ignored.
    pub ignored_events: u64,
    /// Ignored events by `eventType`.
    pub ignored_by_type: BTreeMap<String, u64>,
    /// Runs after merging events of the same job and run id.
    pub runs: u64,
    /// Jobs with at least one run.
    pub jobs: u64,
    /// Datasets (canonical keys).
    pub datasets: u64,
    /// Datasets the resolver could not map (kept as `namespace/name`).
    pub external_datasets: u64,
    /// Distinct field names.
    pub field_names: u64,
    /// Column edges (per job).
    pub column_edges: u64,
    /// Validity intervals over all edges.
    pub intervals: u64,
    /// Distinct evidence files.
    pub evidence_files: u64,
}

// ---------------------------------------------------------------------------------------------
// Interning.

#[derive(Debug, Default)]
struct Interner {
    ids: HashMap<Box<str>, u32>,
    names: Vec<Box<str>>,
}

impl Interner {
    fn intern(&mut self, s: &str, what: &'static str) -> Result<u32> {
        if let Some(&id) = self.ids.get(s) {
            return Ok(id);
        }
        let id = to_u32(self.names.len(), what)?;
        self.ids.insert(s.into(), id);
        self.names.push(s.into());
        Ok(id)
    }

    fn get(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }

    fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", |s| s)
    }

    fn len(&self) -> usize {
        self.names.len()
    }

    /// Renumbers so that ids follow name order; returns old id -> new id.
    fn sort(&mut self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.names.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| self.names[a as usize].cmp(&self.names[b as usize]));
        let remap = inverse(&order);
        let mut old = std::mem::take(&mut self.names);
        self.names = order
            .iter()
            .map(|&o| std::mem::take(&mut old[o as usize]))
            .collect();
        for v in self.ids.values_mut() {
            *v = remap[*v as usize];
        }
        remap
    }
}

/// `order` lists old ids in their new order; returns old id -> new id.
fn inverse(order: &[u32]) -> Vec<u32> {
    let mut remap = vec![0u32; order.len()];
    for (new, &old) in order.iter().enumerate() {
        remap[old as usize] = new as u32;
    }
    remap
}

/// An unambiguous lookup key for a (namespace, name) pair.
fn pair_key(buf: &mut String, namespace: &str, name: &str) {
    buf.clear();
    buf.push_str(&namespace.len().to_string());
    buf.push(':');
    buf.push_str(namespace);
    buf.push_str(name);
}

// ---------------------------------------------------------------------------------------------
// Building.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct EdgeKey {
    from_ds: u32,
    from_field: u32,
    to_ds: u32,
    to_field: u32,
    kind: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn of(r: Range<usize>, what: &'static str) -> Result<Span> {
        Ok(Span {
            start: to_u32(r.start, what)?,
            end: to_u32(r.end, what)?,
        })
    }

    fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum RawMarker {
    UnknownProducer,
    ExternalInput {
        dataset: u32,
    },
    OpaqueTransformation {
        field: u32,
        input: u32,
        input_field: u32,
        description: u32,
    },
    UnaccountedInput {
        dataset: u32,
    },
}

#[derive(Debug)]
struct Record {
    job: u32,
    run_id: Box<str>,
    time: DateTime<Utc>,
    file: u32,
    edges: Range<usize>,
    inputs: Range<usize>,
    outputs: Range<usize>,
}

#[derive(Debug, Clone)]
struct RawOutput {
    ds: u32,
    has_column_lineage: bool,
    markers: Range<usize>,
}

/// Builds a [`LineageGraph`] from events added one at a time (so lineage files can be
/// streamed), then [`GraphBuilder::finish`].
pub struct GraphBuilder<R> {
    resolver: R,
    datasets: Interner,
    external: Vec<bool>,
    resolved: HashMap<Box<str>, u32>,
    key_buf: String,
    fields: Interner,
    job_ids: HashMap<Box<str>, u32>,
    job_names: Vec<(Box<str>, Box<str>)>,
    files: Interner,
    kinds: Vec<TransformationKind>,
    descriptions: Interner,
    records: Vec<Record>,
    raw_edges: Vec<EdgeKey>,
    raw_inputs: Vec<u32>,
    raw_outputs: Vec<RawOutput>,
    raw_markers: Vec<RawMarker>,
    /// (external dataset, catalog dataset) pairs learnt from `symlinks` facets.
    aliases: Vec<(u32, u32)>,
    stats: GraphStats,
}

impl<R: FnMut(&str, &str) -> Option<String>> GraphBuilder<R> {
    /// A builder with `resolver(namespace, name)`, which maps an OpenLineage dataset to its
    /// canonical key (for lethe: the catalog table name, e.g. `crm.learners`) or returns
    /// `None` when it cannot; such a dataset is kept as `namespace/name` and is *external*
    /// (reading it makes a run's outputs opaque) unless the dataset's `symlinks` facet (as
    /// Spark writes for tables read by path) names an identifier the resolver maps: then the
    /// dataset is that table, in every event, whichever event carried the facet.
    pub fn new(resolver: R) -> GraphBuilder<R> {
        GraphBuilder {
            resolver,
            datasets: Interner::default(),
            external: Vec::new(),
            resolved: HashMap::new(),
            key_buf: String::new(),
            fields: Interner::default(),
            job_ids: HashMap::new(),
            job_names: Vec::new(),
            files: Interner::default(),
            kinds: Vec::new(),
            descriptions: Interner::default(),
            records: Vec::new(),
            raw_edges: Vec::new(),
            raw_inputs: Vec::new(),
            raw_outputs: Vec::new(),
            raw_markers: Vec::new(),
            aliases: Vec::new(),
            stats: GraphStats::default(),
        }
    }

    fn resolve(&mut self, namespace: &str, name: &str) -> Result<u32> {
        pair_key(&mut self.key_buf, namespace, name);
        if let Some(&id) = self.resolved.get(self.key_buf.as_str()) {
            return Ok(id);
        }
        let (key, external) = match (self.resolver)(namespace, name) {
            Some(key) => (key, false),
            None => (format!("{namespace}/{name}"), true),
        };
        let id = self.datasets.intern(&key, "datasets")?;
        if id as usize == self.external.len() {
            self.external.push(external);
        } else if external {
            self.external[id as usize] = true;
        }
        self.resolved.insert(self.key_buf.as_str().into(), id);
        Ok(id)
    }

    /// Resolves an input or output dataset, learning an alias from its `symlinks` facet when
    /// the resolver cannot map its own namespace and name.
    fn resolve_dataset(
        &mut self,
        namespace: &str,
        name: &str,
        facets: &DatasetFacets,
    ) -> Result<u32> {
        let id = self.resolve(namespace, name)?;
        if !self.external.get(id as usize).copied().unwrap_or(false) {
            return Ok(id);
        }
        let identifiers = facets
            .other
            .get("symlinks")
            .and_then(|s| s.get("identifiers"))
            .and_then(Value::as_array);
        for ident in identifiers.into_iter().flatten() {
            let (Some(ns), Some(n)) = (
                ident.get("namespace").and_then(Value::as_str),
                ident.get("name").and_then(Value::as_str),
            ) else {
                continue;
            };
            if let Some(key) = (self.resolver)(ns, n) {
                let table = self.datasets.intern(&key, "datasets")?;
                if table as usize == self.external.len() {
                    self.external.push(false);
                }
                self.aliases.push((id, table));
                break;
            }
        }
        Ok(id)
    }

    fn kind_id(&mut self, t: &Transformation) -> Result<u32> {
        if let Some(i) = self.kinds.iter().position(|k| k.matches(t)) {
            return Ok(i as u32);
        }
        let id = to_u32(self.kinds.len(), "transformation kinds")?;
        self.kinds.push(TransformationKind {
            kind: t.kind.clone(),
            subtype: t.subtype.as_ref().map(|s| s.to_ascii_uppercase()),
            masking: t.masking.unwrap_or(false),
        });
        Ok(id)
    }

    /// Adds one event read from the file `evidence`. Events that are not runs are counted and
    /// ignored. Fails only when the graph runs out of 32-bit ids.
    pub fn add_event(&mut self, evidence: &str, event: &RunEvent) -> Result<()> {
        self.stats.events += 1;
        match event.event_type {
            None | Some(EventType::Complete) => {}
            Some(other) => {
                self.stats.ignored_events += 1;
                *self
                    .stats
                    .ignored_by_type
                    .entry(other.as_str().to_owned())
                    .or_default() += 1;
                return Ok(());
            }
        }
        pair_key(&mut self.key_buf, &event.job.namespace, &event.job.name);
        let job = match self.job_ids.get(self.key_buf.as_str()) {
            Some(&id) => id,
            None => {
                let id = to_u32(self.job_names.len(), "jobs")?;
                self.job_ids.insert(self.key_buf.as_str().into(), id);
                self.job_names.push((
                    event.job.namespace.as_str().into(),
                    event.job.name.as_str().into(),
                ));
                id
            }
        };
        let file = self.files.intern(evidence, "evidence files")?;
        let edges_start = self.raw_edges.len();
        let inputs_start = self.raw_inputs.len();
        let outputs_start = self.raw_outputs.len();

        for input in &event.inputs {
            let ds = self.resolve_dataset(&input.namespace, &input.name, &input.facets)?;
            self.raw_inputs.push(ds);
        }
        let mut opaque: Vec<(usize, RawMarker)> = Vec::new();
        let mut outputs: Vec<u32> = Vec::with_capacity(event.outputs.len());
        let dataset_wide = Transformation {
            kind: TransformationType::Indirect,
            subtype: None,
            description: None,
            masking: None,
            extra: Default::default(),
        };
        for (oi, output) in event.outputs.iter().enumerate() {
            let to_ds = self.resolve_dataset(&output.namespace, &output.name, &output.facets)?;
            outputs.push(to_ds);
            let Some(lineage) = &output.facets.column_lineage else {
                continue;
            };
            for (out_field, field_lineage) in &lineage.fields {
                let to_field = self.fields.intern(out_field, "field names")?;
                for input in &field_lineage.input_fields {
                    let from_ds = self.resolve(&input.namespace, &input.name)?;
                    self.raw_inputs.push(from_ds);
                    let from_field = self.fields.intern(&input.field, "field names")?;
                    for t in field_lineage.transformations_of(input).iter() {
                        let kind = self.kind_id(t)?;
                        self.raw_edges.push(EdgeKey {
                            from_ds,
                            from_field,
                            to_ds,
                            to_field,
                            kind,
                        });
                        if let Some(d) = t
                            .description
                            .as_deref()
                            .filter(|d| is_opaque_description(d))
                        {
                            let description = self.descriptions.intern(d, "descriptions")?;
                            opaque.push((
                                oi,
                                RawMarker::OpaqueTransformation {
                                    field: to_field,
                                    input: from_ds,
                                    input_field: from_field,
                                    description,
                                },
                            ));
                        }
                    }
                }
            }
            for input in &lineage.dataset {
                let from_ds = self.resolve(&input.namespace, &input.name)?;
                self.raw_inputs.push(from_ds);
                let from_field = self.fields.intern(&input.field, "field names")?;
                let listed = if input.transformations.is_empty() {
                    std::slice::from_ref(&dataset_wide)
                } else {
                    &input.transformations[..]
                };
                for t in listed {
                    let kind = self.kind_id(t)?;
                    self.raw_edges.push(EdgeKey {
                        from_ds,
                        from_field,
                        to_ds,
                        to_field: NONE,
                        kind,
                    });
                    if let Some(d) = t
                        .description
                        .as_deref()
                        .filter(|d| is_opaque_description(d))
                    {
                        let description = self.descriptions.intern(d, "descriptions")?;
                        opaque.push((
                            oi,
                            RawMarker::OpaqueTransformation {
                                field: NONE,
                                input: from_ds,
                                input_field: from_field,
                                description,
                            },
                        ));
                    }
                }
            }
        }
        let mut inputs = self.raw_inputs.split_off(inputs_start);
        inputs.sort_unstable();
        inputs.dedup();
        self.raw_inputs.extend_from_slice(&inputs);
        let unknown_producer = event
            .producer
            .as_deref()
            .is_none_or(|p| p.trim().is_empty());
        for (oi, &ds) in outputs.iter().enumerate() {
            let m_start = self.raw_markers.len();
            if unknown_producer {
                self.raw_markers.push(RawMarker::UnknownProducer);
            }
            for &input in &inputs {
                if self.external.get(input as usize).copied().unwrap_or(false) {
                    self.raw_markers
                        .push(RawMarker::ExternalInput { dataset: input });
                }
            }
            self.raw_markers
                .extend(opaque.iter().filter(|(i, _)| *i == oi).map(|(_, m)| *m));
            let mut tail = self.raw_markers.split_off(m_start);
            tail.sort_unstable();
            tail.dedup();
            self.raw_markers.extend_from_slice(&tail);
            self.raw_outputs.push(RawOutput {
                ds,
                has_column_lineage: event.outputs[oi].facets.column_lineage.is_some(),
                markers: m_start..self.raw_markers.len(),
            });
        }
        self.records.push(Record {
            job,
            run_id: event.run.run_id.as_str().into(),
            time: event.event_time.with_timezone(&Utc),
            file,
            edges: edges_start..self.raw_edges.len(),
            inputs: inputs_start..self.raw_inputs.len(),
            outputs: outputs_start..self.raw_outputs.len(),
        });
        Ok(())
    }

    /// Orders runs, computes edge validity intervals and builds the indexes.
    pub fn finish(self) -> Result<LineageGraph> {
        let GraphBuilder {
            mut datasets,
            mut external,
            mut fields,
            job_names,
            files,
            kinds,
            descriptions,
            mut records,
            mut raw_edges,
            mut raw_inputs,
            mut raw_outputs,
            mut raw_markers,
            aliases,
            mut stats,
            ..
        } = self;

        // 0. External datasets that a `symlinks` facet tied to a catalog table become that
        //    table (the alias with the smallest name if several), wherever they appear.
        if !aliases.is_empty() {
            let mut alias_of = vec![NONE; datasets.len()];
            for &(ext, table) in &aliases {
                let (e, t) = (ext as usize, table as usize);
                if external[t] || ext == table {
                    continue;
                }
                if alias_of[e] == NONE || datasets.name(table) < datasets.name(alias_of[e]) {
                    alias_of[e] = table;
                }
            }
            let mut pre_map = vec![NONE; datasets.len()];
            let mut kept = Interner::default();
            let mut kept_external = Vec::new();
            for (old, &alias) in alias_of.iter().enumerate() {
                if alias == NONE {
                    pre_map[old] = kept.intern(datasets.name(old as u32), "datasets")?;
                    kept_external.push(external[old]);
                }
            }
            for (old, &alias) in alias_of.iter().enumerate() {
                if alias != NONE {
                    pre_map[old] = pre_map[alias as usize];
                }
            }
            datasets = kept;
            external = kept_external;
            for e in &mut raw_edges {
                e.from_ds = pre_map[e.from_ds as usize];
                e.to_ds = pre_map[e.to_ds as usize];
            }
            for d in &mut raw_inputs {
                *d = pre_map[*d as usize];
            }
            for o in &mut raw_outputs {
                o.ds = pre_map[o.ds as usize];
            }
            for m in &mut raw_markers {
                match m {
                    RawMarker::UnknownProducer => {}
                    RawMarker::ExternalInput { dataset } => *dataset = pre_map[*dataset as usize],
                    RawMarker::OpaqueTransformation { input, .. } => {
                        *input = pre_map[*input as usize]
                    }
                    RawMarker::UnaccountedInput { dataset } => {
                        *dataset = pre_map[*dataset as usize]
                    }
                }
            }
        }

        // 1. Canonical ids: datasets, fields, jobs and kinds in name order.
        let ds_map = datasets.sort();
        let field_map = fields.sort();
        let mut external_sorted = vec![false; external.len()];
        for (old, &e) in external.iter().enumerate() {
            external_sorted[ds_map[old] as usize] = e;
        }
        let mut job_order: Vec<u32> = (0..job_names.len() as u32).collect();
        job_order.sort_unstable_by(|&a, &b| job_names[a as usize].cmp(&job_names[b as usize]));
        let job_map = inverse(&job_order);
        let jobs: Vec<(Box<str>, Box<str>)> = job_order
            .iter()
            .map(|&o| job_names[o as usize].clone())
            .collect();
        let mut kind_order: Vec<u32> = (0..kinds.len() as u32).collect();
        kind_order.sort_unstable_by(|&a, &b| kinds[a as usize].cmp(&kinds[b as usize]));
        let kind_map = inverse(&kind_order);
        let kinds: Vec<TransformationKind> = kind_order
            .iter()
            .map(|&o| kinds[o as usize].clone())
            .collect();
        let field = |f: u32| {
            if f == NONE {
                NONE
            } else {
                field_map[f as usize]
            }
        };
        for e in &mut raw_edges {
            *e = EdgeKey {
                from_ds: ds_map[e.from_ds as usize],
                from_field: field(e.from_field),
                to_ds: ds_map[e.to_ds as usize],
                to_field: field(e.to_field),
                kind: kind_map[e.kind as usize],
            };
        }
        for d in &mut raw_inputs {
            *d = ds_map[*d as usize];
        }
        for o in &mut raw_outputs {
            o.ds = ds_map[o.ds as usize];
        }
        for m in &mut raw_markers {
            match m {
                RawMarker::UnknownProducer => {}
                RawMarker::ExternalInput { dataset } | RawMarker::UnaccountedInput { dataset } => {
                    *dataset = ds_map[*dataset as usize]
                }
                RawMarker::OpaqueTransformation {
                    field: f,
                    input,
                    input_field,
                    ..
                } => {
                    *f = field(*f);
                    *input = ds_map[*input as usize];
                    *input_field = field(*input_field);
                }
            }
        }
        for r in &mut records {
            r.job = job_map[r.job as usize];
        }

        // 2. Per job, runs in time order (events of one run merged), edge intervals.
        let mut order: Vec<usize> = (0..records.len()).collect();
        // Ties (same job, time and run id) go by evidence file name, so that the evidence
        // recorded does not depend on the order events were added.
        order.sort_by(|&a, &b| {
            let (ra, rb) = (&records[a], &records[b]);
            (ra.job, ra.time, &ra.run_id, files.name(ra.file), a).cmp(&(
                rb.job,
                rb.time,
                &rb.run_id,
                files.name(rb.file),
                b,
            ))
        });
        struct BuildEdge {
            key: EdgeKey,
            job: u32,
            open: u32,
            seen: u64,
        }
        let mut edges: Vec<BuildEdge> = Vec::new();
        let mut intervals: Vec<(u32, IntervalRec)> = Vec::new();
        let mut runs: Vec<RunRec> = Vec::new();
        let mut run_inputs: Vec<u32> = Vec::new();
        let mut run_outputs: Vec<OutputRec> = Vec::new();
        let mut run_markers: Vec<RawMarker> = Vec::new();
        let mut job_edges: HashMap<EdgeKey, u32> = HashMap::new();
        let mut open: Vec<u32> = Vec::new();
        let mut shown: Vec<(EdgeKey, u32)> = Vec::new();
        let mut generation: u64 = 0;
        let mut group_start = 0;
        while group_start < order.len() {
            let job = records[order[group_start]].job;
            let group_end = order[group_start..]
                .iter()
                .position(|&r| records[r].job != job)
                .map_or(order.len(), |p| group_start + p);
            // Merge records of the same run id, in order of first appearance.
            let mut merged: Vec<Vec<usize>> = Vec::new();
            let mut by_run: HashMap<&str, usize> = HashMap::new();
            for &r in &order[group_start..group_end] {
                match by_run.get(&*records[r].run_id) {
                    Some(&m) => merged[m].push(r),
                    None => {
                        by_run.insert(&records[r].run_id, merged.len());
                        merged.push(vec![r]);
                    }
                }
            }
            job_edges.clear();
            open.clear();
            for (k, recs) in merged.iter().enumerate() {
                generation += 1;
                let first = &records[recs[0]];
                let time = first.time;
                let until = merged.get(k + 1).map(|n| records[n[0]].time);
                shown.clear();
                for &r in recs {
                    shown.extend(
                        raw_edges[records[r].edges.clone()]
                            .iter()
                            .map(|&e| (e, records[r].file)),
                    );
                }
                // Stable: for a key shown by several events of the run, the earliest one stays.
                shown.sort_by_key(|&(e, _)| e);
                shown.dedup_by_key(|&mut (e, _)| e);
                for &(key, file) in &shown {
                    let idx = match job_edges.get(&key) {
                        Some(&i) => i,
                        None => {
                            let i = to_u32(edges.len(), "column edges")?;
                            edges.push(BuildEdge {
                                key,
                                job,
                                open: NONE,
                                seen: 0,
                            });
                            job_edges.insert(key, i);
                            i
                        }
                    };
                    let edge = &mut edges[idx as usize];
                    edge.seen = generation;
                    if edge.open == NONE {
                        edge.open = to_u32(intervals.len(), "edge intervals")?;
                        intervals.push((
                            idx,
                            IntervalRec {
                                from: time,
                                until: None,
                                last_seen: time,
                                evidence: file,
                            },
                        ));
                        open.push(idx);
                    } else {
                        intervals[edge.open as usize].1.last_seen = time;
                    }
                }
                open.retain(|&idx| {
                    let edge = &mut edges[idx as usize];
                    if edge.seen == generation {
                        return true;
                    }
                    intervals[edge.open as usize].1.until = Some(time);
                    edge.open = NONE;
                    false
                });
                // The run's dataset-level flow. Inputs that no column edge of the run starts
                // from are unaccounted for in every output that has column lineage.
                let mut accounted: Vec<u32> = shown.iter().map(|(k, _)| k.from_ds).collect();
                accounted.sort_unstable();
                accounted.dedup();
                let in_start = run_inputs.len();
                for &r in recs {
                    run_inputs.extend_from_slice(&raw_inputs[records[r].inputs.clone()]);
                }
                let mut ins = run_inputs.split_off(in_start);
                ins.sort_unstable();
                ins.dedup();
                run_inputs.extend_from_slice(&ins);
                let mut outs: Vec<&RawOutput> = recs
                    .iter()
                    .flat_map(|&r| &raw_outputs[records[r].outputs.clone()])
                    .collect();
                outs.sort_by_key(|o| o.ds);
                let unaccounted: Vec<u32> = ins
                    .iter()
                    .copied()
                    .filter(|&d| {
                        accounted.binary_search(&d).is_err()
                            && !external_sorted[d as usize]
                            && !outs.iter().any(|o| o.ds == d)
                    })
                    .collect();
                let out_start = run_outputs.len();
                let mut i = 0;
                while i < outs.len() {
                    let ds = outs[i].ds;
                    let mut has_column_lineage = false;
                    let m_start = run_markers.len();
                    while i < outs.len() && outs[i].ds == ds {
                        has_column_lineage |= outs[i].has_column_lineage;
                        // An input aliased to a catalog table is no longer external.
                        run_markers.extend(raw_markers[outs[i].markers.clone()].iter().filter(
                            |m| match m {
                                RawMarker::ExternalInput { dataset } => {
                                    external_sorted[*dataset as usize]
                                }
                                _ => true,
                            },
                        ));
                        i += 1;
                    }
                    if has_column_lineage {
                        run_markers.extend(
                            unaccounted
                                .iter()
                                .map(|&dataset| RawMarker::UnaccountedInput { dataset }),
                        );
                    }
                    let mut tail = run_markers.split_off(m_start);
                    tail.sort_unstable();
                    tail.dedup();
                    run_markers.extend_from_slice(&tail);
                    run_outputs.push(OutputRec {
                        ds,
                        has_column_lineage,
                        markers: Span::of(m_start..run_markers.len(), "opaque markers")?,
                    });
                }
                to_u32(runs.len(), "runs")?;
                runs.push(RunRec {
                    job,
                    run_id: first.run_id.clone(),
                    time,
                    until,
                    evidence: first.file,
                    inputs: Span::of(in_start..run_inputs.len(), "run inputs")?,
                    outputs: Span::of(out_start..run_outputs.len(), "run outputs")?,
                    unaccounted: run_outputs[out_start..].iter().any(|o| {
                        run_markers[o.markers.range()]
                            .iter()
                            .any(|m| matches!(m, RawMarker::UnaccountedInput { .. }))
                    }),
                });
            }
            group_start = group_end;
        }
        drop(job_edges);
        drop(raw_edges);
        drop(records);

        // 3. Canonical edge order, intervals grouped per edge.
        let mut edge_order: Vec<u32> = (0..edges.len() as u32).collect();
        edge_order.sort_unstable_by_key(|&i| (edges[i as usize].key, edges[i as usize].job));
        let edge_map = inverse(&edge_order);
        for iv in &mut intervals {
            iv.0 = edge_map[iv.0 as usize];
        }
        intervals.sort_by_key(|iv| iv.0); // stable: each edge's intervals stay in time order
        let mut final_edges: Vec<Edge> = Vec::with_capacity(edges.len());
        let mut pos = 0usize;
        for (new, &old) in edge_order.iter().enumerate() {
            let start = pos;
            while pos < intervals.len() && intervals[pos].0 as usize == new {
                pos += 1;
            }
            let b = &edges[old as usize];
            let valid_until = intervals[start..pos].last().and_then(|(_, iv)| iv.until);
            final_edges.push(Edge {
                key: b.key,
                job: b.job,
                intervals: Span::of(start..pos, "edge intervals")?,
                valid_until,
            });
        }
        let intervals: Vec<IntervalRec> = intervals.into_iter().map(|(_, iv)| iv).collect();
        drop(edges);

        // 4. Indexes.
        let n_ds = datasets.len();
        let out_offsets = offsets(n_ds, final_edges.iter().map(|e| e.key.from_ds))?;
        let (in_offsets, in_edges) = csr(
            n_ds,
            final_edges
                .iter()
                .enumerate()
                .map(|(i, e)| (e.key.to_ds, i as u32)),
        )?;
        let (reads_offsets, reads) = csr(
            n_ds,
            runs.iter().enumerate().flat_map(|(i, r)| {
                run_inputs[r.inputs.range()]
                    .iter()
                    .map(move |&d| (d, i as u32))
            }),
        )?;
        let (writes_offsets, writes) = csr(
            n_ds,
            runs.iter().enumerate().flat_map(|(i, r)| {
                run_outputs[r.outputs.range()]
                    .iter()
                    .map(move |o| (o.ds, i as u32))
            }),
        )?;

        stats.runs = runs.len() as u64;
        stats.jobs = jobs.len() as u64;
        stats.datasets = n_ds as u64;
        stats.external_datasets = external_sorted.iter().filter(|&&e| e).count() as u64;
        stats.field_names = fields.len() as u64;
        stats.column_edges = final_edges.len() as u64;
        stats.intervals = intervals.len() as u64;
        stats.evidence_files = files.len() as u64;

        Ok(LineageGraph {
            datasets,
            external: external_sorted,
            fields,
            jobs,
            files,
            kinds,
            descriptions,
            edges: final_edges,
            intervals,
            out_offsets,
            in_offsets,
            in_edges,
            runs,
            run_inputs,
            run_outputs,
            run_markers,
            reads_offsets,
            reads,
            writes_offsets,
            writes,
            stats,
        })
    }
}

/// Offsets of a sorted key sequence over `n` keys (`offsets[k]..offsets[k+1]`).
fn offsets(n: usize, sorted_keys: impl Iterator<Item = u32>) -> Result<Vec<u32>> {
    let mut counts = vec![0u32; n + 1];
    for k in sorted_keys {
        counts[k as usize + 1] += 1;
    }
    for i in 1..counts.len() {
        counts[i] = counts[i]
            .checked_add(counts[i - 1])
            .ok_or_else(|| capacity("index entries"))?;
    }
    Ok(counts)
}

/// A compressed adjacency (`list[offsets[k]..offsets[k+1]]`) from (key, value) pairs; values
/// keep their order within a key.
fn csr(n: usize, pairs: impl Iterator<Item = (u32, u32)> + Clone) -> Result<(Vec<u32>, Vec<u32>)> {
    let mut counts = vec![0u32; n + 1];
    for (k, _) in pairs.clone() {
        counts[k as usize + 1] += 1;
    }
    for i in 1..counts.len() {
        counts[i] = counts[i]
            .checked_add(counts[i - 1])
            .ok_or_else(|| capacity("index entries"))?;
    }
    let mut fill = counts.clone();
    let mut list = vec![0u32; counts[n] as usize];
    for (k, v) in pairs {
        let slot = &mut fill[k as usize];
        list[*slot as usize] = v;
        *slot += 1;
    }
    Ok((counts, list))
}

// ---------------------------------------------------------------------------------------------
// The graph.

/// An edge as the walk reads it.
pub(crate) struct EdgeCore {
    pub(crate) from_field: FieldId,
    pub(crate) to_ds: DatasetId,
    pub(crate) to_field: Option<FieldId>,
    pub(crate) identity: bool,
    pub(crate) valid_until: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone)]
struct IntervalRec {
    from: DateTime<Utc>,
    until: Option<DateTime<Utc>>,
    last_seen: DateTime<Utc>,
    evidence: u32,
}

#[derive(Debug, Clone)]
struct Edge {
    key: EdgeKey,
    job: u32,
    intervals: Span,
    valid_until: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone)]
struct RunRec {
    job: u32,
    run_id: Box<str>,
    time: DateTime<Utc>,
    until: Option<DateTime<Utc>>,
    evidence: u32,
    inputs: Span,
    outputs: Span,
    /// Some output has an `UnaccountedInput` marker.
    unaccounted: bool,
}

#[derive(Debug, Clone)]
struct OutputRec {
    ds: u32,
    has_column_lineage: bool,
    markers: Span,
}

/// The temporal lineage graph. Build it with [`LineageGraph::build`] or a [`GraphBuilder`].
#[derive(Debug)]
pub struct LineageGraph {
    datasets: Interner,
    external: Vec<bool>,
    fields: Interner,
    jobs: Vec<(Box<str>, Box<str>)>,
    files: Interner,
    kinds: Vec<TransformationKind>,
    descriptions: Interner,
    edges: Vec<Edge>,
    intervals: Vec<IntervalRec>,
    out_offsets: Vec<u32>,
    in_offsets: Vec<u32>,
    in_edges: Vec<u32>,
    runs: Vec<RunRec>,
    run_inputs: Vec<u32>,
    run_outputs: Vec<OutputRec>,
    run_markers: Vec<RawMarker>,
    reads_offsets: Vec<u32>,
    reads: Vec<u32>,
    writes_offsets: Vec<u32>,
    writes: Vec<u32>,
    stats: GraphStats,
}

impl LineageGraph {
    /// Builds the graph from (evidence file name, event) pairs; see [`GraphBuilder::new`] for
    /// the resolver.
    pub fn build<'a, I, R>(events: I, resolver: R) -> Result<LineageGraph>
    where
        I: IntoIterator<Item = (&'a str, &'a RunEvent)>,
        R: FnMut(&str, &str) -> Option<String>,
    {
        let mut builder = GraphBuilder::new(resolver);
        for (file, event) in events {
            builder.add_event(file, event)?;
        }
        builder.finish()
    }

    /// Counts about the graph.
    pub fn stats(&self) -> &GraphStats {
        &self.stats
    }

    /// Number of datasets.
    pub fn dataset_count(&self) -> usize {
        self.datasets.len()
    }

    /// The dataset with canonical key `key`.
    pub fn dataset_id(&self, key: &str) -> Option<DatasetId> {
        self.datasets.get(key).map(DatasetId)
    }

    /// A dataset's canonical key (empty for an id from another graph).
    pub fn dataset_name(&self, id: DatasetId) -> &str {
        self.datasets.name(id.0)
    }

    /// All datasets, in name order.
    pub fn datasets(&self) -> impl Iterator<Item = DatasetId> + '_ {
        (0..self.datasets.len() as u32).map(DatasetId)
    }

    /// True when the resolver could not map the dataset (it is named `namespace/name`).
    pub fn is_external(&self, id: DatasetId) -> bool {
        self.external.get(id.index()).copied().unwrap_or(false)
    }

    /// The field name `name`, if any edge uses it.
    pub fn field_id(&self, name: &str) -> Option<FieldId> {
        self.fields.get(name).map(FieldId)
    }

    /// A field name.
    pub fn field_name(&self, id: FieldId) -> &str {
        self.fields.name(id.0)
    }

    /// Number of column edges.
    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }

    /// A column edge (ids come from this graph's queries).
    pub fn edge(&self, id: EdgeId) -> ColumnEdge<'_> {
        ColumnEdge { graph: self, id }
    }

    fn edge_rec(&self, id: EdgeId) -> Option<&Edge> {
        self.edges.get(id.index())
    }

    fn out_range(&self, ds: DatasetId) -> Range<usize> {
        match (
            self.out_offsets.get(ds.index()),
            self.out_offsets.get(ds.index() + 1),
        ) {
            (Some(&a), Some(&b)) => a as usize..b as usize,
            _ => 0..0,
        }
    }

    pub(crate) fn edge_usable(&self, id: EdgeId, window: Window) -> bool {
        self.edge_rec(id)
            .is_some_and(|e| window.admits(e.valid_until))
    }

    /// Column edges out of `ds` usable in `window`, in canonical order.
    pub fn edges_out(
        &self,
        ds: DatasetId,
        window: Window,
    ) -> impl Iterator<Item = ColumnEdge<'_>> + '_ {
        self.out_range(ds)
            .map(|i| EdgeId(i as u32))
            .filter(move |&e| self.edge_usable(e, window))
            .map(|id| self.edge(id))
    }

    pub(crate) fn edge_ids_out_of_field(&self, ds: DatasetId, field: FieldId) -> Range<usize> {
        let r = self.out_range(ds);
        let slice = &self.edges[r.clone()];
        let lo = slice.partition_point(|e| e.key.from_field < field.0);
        let hi = slice.partition_point(|e| e.key.from_field <= field.0);
        r.start + lo..r.start + hi
    }

    /// Column edges out of `ds.field` usable in `window`, in canonical order.
    pub fn edges_out_of_field(
        &self,
        ds: DatasetId,
        field: FieldId,
        window: Window,
    ) -> impl Iterator<Item = ColumnEdge<'_>> + '_ {
        self.edge_ids_out_of_field(ds, field)
            .map(|i| EdgeId(i as u32))
            .filter(move |&e| self.edge_usable(e, window))
            .map(|id| self.edge(id))
    }

    pub(crate) fn edge_ids_out(&self, ds: DatasetId) -> Range<usize> {
        self.out_range(ds)
    }

    /// Column edges into `ds` usable in `window`, in canonical order.
    pub fn edges_into(
        &self,
        ds: DatasetId,
        window: Window,
    ) -> impl Iterator<Item = ColumnEdge<'_>> + '_ {
        slice_of(&self.in_offsets, &self.in_edges, ds.0)
            .iter()
            .map(|&i| EdgeId(i))
            .filter(move |&e| self.edge_usable(e, window))
            .map(|id| self.edge(id))
    }

    /// Number of runs.
    pub fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// A run (ids come from this graph's queries).
    pub fn run(&self, id: RunIndex) -> RunView<'_> {
        RunView { graph: self, id }
    }

    fn run_rec(&self, id: RunIndex) -> Option<&RunRec> {
        self.runs.get(id.index())
    }

    pub(crate) fn run_usable(&self, id: RunIndex, window: Window) -> bool {
        self.run_rec(id).is_some_and(|r| window.admits(r.until))
    }

    /// Runs that read `ds` (as an input or in column lineage) and are usable in `window`.
    pub fn runs_reading(
        &self,
        ds: DatasetId,
        window: Window,
    ) -> impl Iterator<Item = RunView<'_>> + '_ {
        slice_of(&self.reads_offsets, &self.reads, ds.0)
            .iter()
            .map(|&r| RunIndex(r))
            .filter(move |&r| self.run_usable(r, window))
            .map(|id| self.run(id))
    }

    /// Runs that wrote `ds` and are usable in `window`.
    pub fn runs_writing(
        &self,
        ds: DatasetId,
        window: Window,
    ) -> impl Iterator<Item = RunView<'_>> + '_ {
        slice_of(&self.writes_offsets, &self.writes, ds.0)
            .iter()
            .map(|&r| RunIndex(r))
            .filter(move |&r| self.run_usable(r, window))
            .map(|id| self.run(id))
    }

    /// Jobs with a run that wrote `ds` usable in `window`, sorted, without repeats.
    pub fn producers(&self, ds: DatasetId, window: Window) -> Vec<JobName<'_>> {
        let mut jobs: Vec<JobName<'_>> = self.runs_writing(ds, window).map(|r| r.job()).collect();
        jobs.sort_unstable();
        jobs.dedup();
        jobs
    }

    /// Datasets that some run usable in `window` wrote, in name order. (lethe's
    /// `lineage unaccounted` is the catalog tables not in this list and named by no
    /// declaration.)
    pub fn produced_datasets(&self, window: Window) -> Vec<DatasetId> {
        self.datasets()
            .filter(|&d| self.runs_writing(d, window).next().is_some())
            .collect()
    }

    fn job_name(&self, job: u32) -> JobName<'_> {
        match self.jobs.get(job as usize) {
            Some((namespace, name)) => JobName { namespace, name },
            None => JobName {
                namespace: "",
                name: "",
            },
        }
    }

    pub(crate) fn kind_of(&self, id: EdgeId) -> Option<&TransformationKind> {
        self.edge_rec(id)
            .and_then(|e| self.kinds.get(e.key.kind as usize))
    }

    /// What the walk needs of edge `i`, in one lookup.
    pub(crate) fn edge_core(&self, i: usize) -> Option<EdgeCore> {
        let e = self.edges.get(i)?;
        Some(EdgeCore {
            from_field: FieldId(e.key.from_field),
            to_ds: DatasetId(e.key.to_ds),
            to_field: (e.key.to_field != NONE).then_some(FieldId(e.key.to_field)),
            identity: self
                .kinds
                .get(e.key.kind as usize)
                .is_some_and(|k| k.is_identity()),
            valid_until: e.valid_until,
        })
    }

    pub(crate) fn edge_ends(
        &self,
        id: EdgeId,
    ) -> Option<(DatasetId, FieldId, DatasetId, Option<FieldId>)> {
        self.edge_rec(id).map(|e| {
            let to_field = (e.key.to_field != NONE).then_some(FieldId(e.key.to_field));
            (
                DatasetId(e.key.from_ds),
                FieldId(e.key.from_field),
                DatasetId(e.key.to_ds),
                to_field,
            )
        })
    }

    fn marker(&self, m: &RawMarker) -> OpaqueMarker<'_> {
        match *m {
            RawMarker::UnknownProducer => OpaqueMarker::UnknownProducer,
            RawMarker::ExternalInput { dataset } => OpaqueMarker::ExternalInput {
                dataset: self.datasets.name(dataset),
            },
            RawMarker::OpaqueTransformation {
                field,
                input,
                input_field,
                description,
            } => OpaqueMarker::OpaqueTransformation {
                field: (field != NONE).then(|| self.fields.name(field)),
                input_dataset: self.datasets.name(input),
                input_field: self.fields.name(input_field),
                description: self.descriptions.name(description),
            },
            RawMarker::UnaccountedInput { dataset } => OpaqueMarker::UnaccountedInput {
                dataset: self.datasets.name(dataset),
            },
        }
    }
}

fn slice_of<'a>(offsets: &[u32], list: &'a [u32], key: u32) -> &'a [u32] {
    match (offsets.get(key as usize), offsets.get(key as usize + 1)) {
        (Some(&a), Some(&b)) => list.get(a as usize..b as usize).unwrap_or(&[]),
        _ => &[],
    }
}

// ---------------------------------------------------------------------------------------------
// Views.

/// A column edge of a [`LineageGraph`].
#[derive(Clone, Copy)]
pub struct ColumnEdge<'g> {
    graph: &'g LineageGraph,
    id: EdgeId,
}

/// One validity interval of a column edge: `[valid_from, valid_until)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Interval<'g> {
    /// Time of the run that opened the interval.
    pub valid_from: DateTime<Utc>,
    /// Time of the job's next run that no longer showed the edge; `None` while still valid.
    pub valid_until: Option<DateTime<Utc>>,
    /// Time of the last run that showed the edge in this interval.
    pub last_seen: DateTime<Utc>,
    /// The evidence file of the run that opened the interval.
    pub evidence: &'g str,
}

impl<'g> ColumnEdge<'g> {
    /// The edge's id.
    pub fn id(&self) -> EdgeId {
        self.id
    }

    fn rec(&self) -> Option<&'g Edge> {
        self.graph.edge_rec(self.id)
    }

    /// Source dataset id.
    pub fn from_dataset_id(&self) -> DatasetId {
        DatasetId(self.rec().map_or(NONE, |e| e.key.from_ds))
    }

    /// Target dataset id.
    pub fn to_dataset_id(&self) -> DatasetId {
        DatasetId(self.rec().map_or(NONE, |e| e.key.to_ds))
    }

    /// Source dataset key.
    pub fn from_dataset(&self) -> &'g str {
        self.graph.datasets.name(self.from_dataset_id().0)
    }

    /// Source field.
    pub fn from_field(&self) -> &'g str {
        self.rec()
            .map_or("", |e| self.graph.fields.name(e.key.from_field))
    }

    /// Target dataset key.
    pub fn to_dataset(&self) -> &'g str {
        self.graph.datasets.name(self.to_dataset_id().0)
    }

    /// Target field; `None` for dataset-wide lineage.
    pub fn to_field(&self) -> Option<&'g str> {
        self.rec()
            .filter(|e| e.key.to_field != NONE)
            .map(|e| self.graph.fields.name(e.key.to_field))
    }

    /// The transformation.
    pub fn transformation(&self) -> &'g TransformationKind {
        static UNKNOWN: TransformationKind = TransformationKind {
            kind: TransformationType::Indirect,
            subtype: None,
            masking: false,
        };
        self.graph.kind_of(self.id).unwrap_or(&UNKNOWN)
    }

    /// The job whose runs show the edge.
    pub fn job(&self) -> JobName<'g> {
        self.graph.job_name(self.rec().map_or(NONE, |e| e.job))
    }

    /// Validity intervals, oldest first.
    pub fn intervals(&self) -> impl Iterator<Item = Interval<'g>> + use<'g> {
        let graph = self.graph;
        let range = self.rec().map_or(0..0, |e| e.intervals.range());
        graph.intervals[range].iter().map(move |iv| Interval {
            valid_from: iv.from,
            valid_until: iv.until,
            last_seen: iv.last_seen,
            evidence: graph.files.name(iv.evidence),
        })
    }

    /// When a run first showed the edge.
    pub fn first_observed(&self) -> Option<DateTime<Utc>> {
        self.intervals().next().map(|iv| iv.valid_from)
    }

    /// True when one of the intervals overlaps `window`.
    pub fn is_usable_in(&self, window: Window) -> bool {
        self.graph.edge_usable(self.id, window)
    }

    /// `from_field -> to_field (TYPE/SUBTYPE)`, with `*` as the target of dataset-wide lineage.
    pub fn label(&self) -> String {
        format!(
            "{} -> {} ({})",
            self.from_field(),
            self.to_field().unwrap_or("*"),
            self.transformation()
        )
    }
}

impl fmt::Debug for ColumnEdge<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{} -> {}.{} ({}, job {})",
            self.from_dataset(),
            self.from_field(),
            self.to_dataset(),
            self.to_field().unwrap_or("*"),
            self.transformation(),
            self.job()
        )
    }
}

impl Serialize for ColumnEdge<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(9))?;
        m.serialize_entry("from_dataset", self.from_dataset())?;
        m.serialize_entry("from_field", self.from_field())?;
        m.serialize_entry("to_dataset", self.to_dataset())?;
        m.serialize_entry("to_field", &self.to_field())?;
        m.serialize_entry("transformation", &self.transformation().to_string())?;
        m.serialize_entry("masking", &self.transformation().masking)?;
        m.serialize_entry("job", &self.job())?;
        m.serialize_entry("intervals", &self.intervals().collect::<Vec<_>>())?;
        m.end()
    }
}

/// Why a run's output cannot be resolved from its column lineage alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OpaqueMarker<'g> {
    /// The event had no (or an empty) `producer`.
    UnknownProducer,
    /// The run read a dataset the resolver could not map to a catalog table.
    ExternalInput {
        /// The external dataset (`namespace/name`).
        dataset: &'g str,
    },
    /// A transformation is described `opaque: ...` (e.g. a UDF).
    OpaqueTransformation {
        /// Output field; `None` for dataset-wide lineage.
        field: Option<&'g str>,
        /// Input dataset.
        input_dataset: &'g str,
        /// Input field.
        input_field: &'g str,
        /// The transformation's description.
        description: &'g str,
    },
    /// The run read this dataset but no column lineage of the run mentions it, so where its
    /// data went is unknown. The walk counts it only when this dataset is reached.
    UnaccountedInput {
        /// The input dataset.
        dataset: &'g str,
    },
}

/// A run of a [`LineageGraph`]: one job's run (events with the same run id merged).
#[derive(Clone, Copy)]
pub struct RunView<'g> {
    graph: &'g LineageGraph,
    id: RunIndex,
}

/// An output of a run.
#[derive(Clone, Copy)]
pub struct RunOutput<'g> {
    graph: &'g LineageGraph,
    rec: &'g OutputRec,
}

impl<'g> RunView<'g> {
    /// The run's index.
    pub fn id(&self) -> RunIndex {
        self.id
    }

    fn rec(&self) -> Option<&'g RunRec> {
        self.graph.run_rec(self.id)
    }

    /// The job.
    pub fn job(&self) -> JobName<'g> {
        self.graph.job_name(self.rec().map_or(NONE, |r| r.job))
    }

    /// The OpenLineage run id.
    pub fn run_id(&self) -> &'g str {
        self.rec().map_or("", |r| &r.run_id)
    }

    /// The run's time (its earliest COMPLETE event).
    pub fn time(&self) -> Option<DateTime<Utc>> {
        self.rec().map(|r| r.time)
    }

    /// Time of the job's next run; `None` for the job's latest run.
    pub fn valid_until(&self) -> Option<DateTime<Utc>> {
        self.rec().and_then(|r| r.until)
    }

    /// The evidence file of the run's earliest event.
    pub fn evidence(&self) -> &'g str {
        self.rec().map_or("", |r| self.graph.files.name(r.evidence))
    }

    /// Datasets the run read (inputs and column-lineage inputs), in name order.
    pub fn inputs(&self) -> impl Iterator<Item = DatasetId> + use<'g> {
        let range = self.rec().map_or(0..0, |r| r.inputs.range());
        self.graph.run_inputs[range].iter().map(|&d| DatasetId(d))
    }

    /// For the walk: some output leaves an input unaccounted for.
    pub(crate) fn has_unaccounted(&self) -> bool {
        self.rec().is_some_and(|r| r.unaccounted)
    }

    /// The run's outputs, in name order.
    pub fn outputs(&self) -> impl Iterator<Item = RunOutput<'g>> + use<'g> {
        let graph = self.graph;
        let range = self.rec().map_or(0..0, |r| r.outputs.range());
        graph.run_outputs[range]
            .iter()
            .map(move |rec| RunOutput { graph, rec })
    }
}

impl<'g> RunOutput<'g> {
    /// The output dataset.
    pub fn dataset(&self) -> DatasetId {
        DatasetId(self.rec.ds)
    }

    /// True when the run gave a `columnLineage` facet for this output.
    pub fn has_column_lineage(&self) -> bool {
        self.rec.has_column_lineage
    }

    /// Why column lineage cannot resolve this output (empty when it can, as far as it goes).
    pub fn markers(&self) -> impl Iterator<Item = OpaqueMarker<'g>> + use<'g> {
        let graph = self.graph;
        graph.run_markers[self.rec.markers.range()]
            .iter()
            .map(move |m| graph.marker(m))
    }

    /// True when the output needs more than column lineage: no column lineage or any marker.
    pub fn is_unresolved(&self) -> bool {
        !self.rec.has_column_lineage || self.rec.markers.start != self.rec.markers.end
    }

    /// For the walk: is the output unresolved because of something that holds whatever input
    /// is reached (no column lineage, external input, opaque transformation, unknown producer)?
    pub(crate) fn unresolved_regardless(&self) -> bool {
        !self.rec.has_column_lineage
            || self.graph.run_markers[self.rec.markers.range()]
                .iter()
                .any(|m| !matches!(m, RawMarker::UnaccountedInput { .. }))
    }

    /// For the walk: does the run leave `input` unaccounted for in this output?
    pub(crate) fn leaves_unaccounted(&self, input: DatasetId) -> bool {
        self.graph.run_markers[self.rec.markers.range()]
            .contains(&RawMarker::UnaccountedInput { dataset: input.0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{
        ColumnLineageDatasetFacet, InputDataset, InputField, Job, OutputDataset,
        Transformation as T,
    };
    use chrono::TimeZone;
    use uuid::Uuid;

    fn day(d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 1, d, 12, 0, 0).unwrap()
    }

    fn ev(job: &str, run: u128, d: u32, fields: &[(&str, &str, &str, T)]) -> RunEvent {
        let mut cl = ColumnLineageDatasetFacet::new("urn:test");
        let mut inputs: Vec<&str> = Vec::new();
        for (out, src, f, t) in fields {
            cl = cl.with_field(*out, [InputField::new("lethe", *src, *f, [t.clone()])]);
            if !inputs.contains(src) {
                inputs.push(src);
            }
        }
        let mut e = RunEvent::complete(
            "urn:test",
            Job::new("lethe", job),
            Uuid::from_u128(run),
            day(d),
        )
        .with_output(OutputDataset::new("lethe", "out").with_column_lineage(cl));
        for i in inputs {
            e = e.with_input(InputDataset::new("lethe", i));
        }
        e
    }

    fn resolver(_ns: &str, name: &str) -> Option<String> {
        (!name.starts_with("s3://")).then(|| name.to_owned())
    }

    #[test]
    fn edge_disappearing_and_reappearing_has_two_intervals() {
        let a = ("a", "src", "a", T::direct("IDENTITY"));
        let b = ("b", "src", "b", T::direct("IDENTITY"));
        let events = [
            ev("j", 1, 1, &[a.clone(), b.clone()]),
            ev("j", 2, 2, std::slice::from_ref(&a)),
            ev("j", 3, 3, &[a.clone(), b.clone()]),
            ev("other", 4, 4, &[]),
        ];
        let files = ["d1.json", "d2.json", "d3.json", "d4.json"];
        let g = LineageGraph::build(files.iter().copied().zip(events.iter()), resolver).unwrap();
        let src = g.dataset_id("src").unwrap();
        let b_field = g.field_id("b").unwrap();
        let b_edge = g
            .edges_out_of_field(src, b_field, Window::ALL)
            .next()
            .unwrap();
        let ivs: Vec<_> = b_edge.intervals().collect();
        assert_eq!(ivs.len(), 2);
        assert_eq!(
            (ivs[0].valid_from, ivs[0].valid_until, ivs[0].evidence),
            (day(1), Some(day(2)), "d1.json")
        );
        assert_eq!(
            (ivs[1].valid_from, ivs[1].valid_until, ivs[1].evidence),
            (day(3), None, "d3.json")
        );
        assert_eq!(b_edge.first_observed(), Some(day(1)));
        let a_edge = g
            .edges_out_of_field(src, g.field_id("a").unwrap(), Window::ALL)
            .next()
            .unwrap();
        let ivs: Vec<_> = a_edge.intervals().collect();
        assert_eq!(ivs.len(), 1);
        assert_eq!(
            (ivs[0].valid_from, ivs[0].valid_until, ivs[0].last_seen),
            (day(1), None, day(3))
        );
        assert_eq!(g.stats().runs, 4);
        assert_eq!(g.stats().intervals, 3);
    }

    #[test]
    fn closed_edges_leave_windows_that_start_after_them() {
        let a = ("a", "src", "a", T::direct("IDENTITY"));
        let b = ("b", "src", "b", T::indirect("FILTER"));
        let events = [ev("j", 1, 1, &[a.clone(), b]), ev("j", 2, 5, &[a])];
        let g = LineageGraph::build(events.iter().map(|e| ("f", e)), resolver).unwrap();
        let src = g.dataset_id("src").unwrap();
        assert_eq!(g.edges_out(src, Window::since(day(3))).count(), 2);
        assert_eq!(g.edges_out(src, Window::since(day(5))).count(), 1);
        assert_eq!(g.edges_out(src, Window::since(day(9))).count(), 1);
        let out = g.dataset_id("out").unwrap();
        assert_eq!(
            g.edges_into(out, Window::since(day(6)))
                .map(|e| e.label())
                .collect::<Vec<_>>(),
            ["a -> a (DIRECT/IDENTITY)"]
        );
        // Run 1's flow is valid until run 2.
        assert_eq!(g.runs_writing(out, Window::since(day(6))).count(), 1);
        assert_eq!(g.runs_writing(out, Window::since(day(4))).count(), 2);
        assert_eq!(
            g.producers(out, Window::ALL)
                .iter()
                .map(|j| j.to_string())
                .collect::<Vec<_>>(),
            ["lethe/j"]
        );
        assert_eq!(g.produced_datasets(Window::ALL), vec![out]);
    }

    #[test]
    fn non_runs_are_ignored_and_same_run_events_merge() {
        let a = ("a", "src", "a", T::direct("IDENTITY"));
        let b = ("b", "src", "b", T::direct("IDENTITY"));
        let mut start = ev("j", 1, 1, &[a.clone(), b.clone()]);
        start.event_type = Some(EventType::Start);
        let mut fail = ev("j", 9, 2, &[]);
        fail.event_type = Some(EventType::Fail);
        // Run 2 reports a and b in two COMPLETE events; it must not close b.
        let events = [
            ev("j", 1, 1, &[a.clone(), b.clone()]),
            start,
            fail,
            ev("j", 2, 3, &[a]),
            ev("j", 2, 4, &[b]),
        ];
        let g = LineageGraph::build(events.iter().map(|e| ("f", e)), resolver).unwrap();
        assert_eq!(g.stats().ignored_events, 2);
        assert_eq!(g.stats().ignored_by_type.get("START"), Some(&1));
        assert_eq!(g.stats().runs, 2);
        for e in g.edges_out(g.dataset_id("src").unwrap(), Window::ALL) {
            assert_eq!(e.intervals().count(), 1, "{e:?}");
            assert_eq!(e.intervals().next().unwrap().valid_until, None);
        }
    }

    #[test]
    fn opaque_markers_and_missing_column_lineage() {
        let udf = T::direct("TRANSFORMATION").with_description("opaque: udf normalize()");
        let e1 = ev("udf", 1, 1, &[("n", "crm", "email", udf)]);
        let mut e2 = RunEvent::complete("", Job::new("lethe", "raw"), Uuid::from_u128(2), day(1))
            .with_input(InputDataset::new("s3", "s3://bucket/dump.csv"))
            .with_output(OutputDataset::new("lethe", "staged"));
        e2.producer = None;
        let g = LineageGraph::build([("a.json", &e1), ("b.json", &e2)], resolver).unwrap();
        let ext = g.dataset_id("s3/s3://bucket/dump.csv").unwrap();
        assert!(g.is_external(ext));
        assert_eq!(g.stats().external_datasets, 1);
        let staged = g.dataset_id("staged").unwrap();
        let run = g.runs_writing(staged, Window::ALL).next().unwrap();
        let out = run.outputs().next().unwrap();
        assert!(!out.has_column_lineage());
        let markers: Vec<_> = out.markers().collect();
        assert!(markers.contains(&OpaqueMarker::UnknownProducer));
        assert!(markers.contains(&OpaqueMarker::ExternalInput {
            dataset: "s3/s3://bucket/dump.csv"
        }));
        assert_eq!(run.evidence(), "b.json");
        let out = g
            .run(
                g.runs_writing(g.dataset_id("out").unwrap(), Window::ALL)
                    .next()
                    .unwrap()
                    .id(),
            )
            .outputs()
            .next()
            .unwrap();
        assert!(out.has_column_lineage() && out.is_unresolved());
        assert_eq!(
            out.markers().collect::<Vec<_>>(),
            [OpaqueMarker::OpaqueTransformation {
                field: Some("n"),
                input_dataset: "crm",
                input_field: "email",
                description: "opaque: udf normalize()"
            }]
        );
    }

    #[test]
    fn symlinks_tie_paths_to_catalog_tables_in_every_event() {
        let with_link = |ns: &str, name: &str, table: &str| {
            let mut facets = crate::event::DatasetFacets::default();
            facets.other.insert(
                "symlinks".into(),
                serde_json::json!({"_producer": "p", "_schemaURL": "s",
                    "identifiers": [{"namespace": "iceberg://wh", "name": table, "type": "TABLE"}]}),
            );
            (ns.to_owned(), name.to_owned(), facets)
        };
        let (ns, name, facets) = with_link("file", "/wh/crm/learners", "crm.learners");
        let mut input = InputDataset::new(ns, name);
        input.facets = facets;
        let (ns, name, facets) = with_link("file", "/wh/mart/x", "mart.x");
        let mut output = OutputDataset::new(ns, name).with_column_lineage(
            ColumnLineageDatasetFacet::new("p").with_field(
                "id",
                [InputField::new(
                    "file",
                    "/wh/crm/learners",
                    "id",
                    [T::direct("IDENTITY")],
                )],
            ),
        );
        output.facets.other = facets.other;
        let spark = RunEvent::complete("p", Job::new("spark", "s"), Uuid::from_u128(1), day(1))
            .with_input(input)
            .with_output(output);
        // Another job reads the same path without the facet.
        let other = RunEvent::complete("p", Job::new("lethe", "o"), Uuid::from_u128(2), day(2))
            .with_input(InputDataset::new("file", "/wh/crm/learners"))
            .with_output(OutputDataset::new("lethe", "y").with_column_lineage(
                ColumnLineageDatasetFacet::new("p").with_field(
                    "id",
                    [InputField::new(
                        "file",
                        "/wh/crm/learners",
                        "id",
                        [T::direct("IDENTITY")],
                    )],
                ),
            ));
        let resolve =
            |ns: &str, name: &str| (ns == "iceberg://wh" || ns == "lethe").then(|| name.to_owned());
        let g1 = LineageGraph::build([("b", &other), ("a", &spark)], resolve).unwrap();
        let g2 = LineageGraph::build([("a", &spark), ("b", &other)], resolve).unwrap();
        for g in [&g1, &g2] {
            assert_eq!(g.stats().external_datasets, 0);
            assert_eq!(
                g.datasets().map(|d| g.dataset_name(d)).collect::<Vec<_>>(),
                ["crm.learners", "mart.x", "y"]
            );
            let src = g.dataset_id("crm.learners").unwrap();
            let targets: Vec<&str> = g
                .edges_out(src, Window::ALL)
                .map(|e| e.to_dataset())
                .collect();
            assert_eq!(targets, ["mart.x", "y"]);
            let y = g.dataset_id("y").unwrap();
            assert!(
                g.runs_writing(y, Window::ALL)
                    .all(|r| r.outputs().all(|o| !o.is_unresolved()))
            );
        }
        let dump = |g: &LineageGraph| {
            (0..g.edge_count())
                .map(|i| format!("{:?}", g.edge(EdgeId(i as u32))))
                .collect::<Vec<_>>()
        };
        assert_eq!(dump(&g1), dump(&g2));
    }

    #[test]
    fn ids_do_not_depend_on_event_order() {
        let e1 = ev(
            "j1",
            1,
            1,
            &[
                ("x", "b", "x", T::direct("IDENTITY")),
                ("y", "a", "y", T::indirect("JOIN")),
            ],
        );
        let e2 = ev("j2", 2, 2, &[("z", "c", "z", T::direct("AGGREGATION"))]);
        let g1 = LineageGraph::build([("1", &e1), ("2", &e2)], resolver).unwrap();
        let g2 = LineageGraph::build([("2", &e2), ("1", &e1)], resolver).unwrap();
        let dump = |g: &LineageGraph| {
            (0..g.edge_count())
                .map(|i| format!("{:?}", g.edge(EdgeId(i as u32))))
                .collect::<Vec<_>>()
        };
        assert_eq!(dump(&g1), dump(&g2));
        assert_eq!(g1.dataset_name(DatasetId(0)), "a");
    }
}
