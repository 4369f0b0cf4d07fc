//! OpenLineage column lineage for lethe.
//!
//! Three parts, each with its own guarantees (see the module docs):
//! - [`event`]: the OpenLineage RunEvent model, tolerant of facets it does not know, and
//!   constructors for the COMPLETE events lethe writes; [`parse_events`] reads lineage files.
//! - [`graph`]: a temporal column-lineage graph. Each edge keeps the intervals during which the
//!   runs of its job showed it, with the evidence file that opened each interval.
//! - [`mod@walk`] and [`walk()`]: the walk EXPLAIN ERASURE plans from: which datasets hold the subject's rows
//!   (and through which columns), which are shaped by them, and which lineage cannot resolve.
//!
//! This crate knows nothing of catalogs or governance: lethe maps OpenLineage datasets to
//! catalog tables through a resolver and turns a [`Walk`] into plan steps.

#![warn(missing_docs)]

mod dot;
pub mod error;
pub mod event;
pub mod graph;
pub mod parse;
pub mod walk;

pub use dot::to_dot;
pub use error::{Error, Result};
pub use event::{
    ColumnLineageDatasetFacet, ColumnLineageField, DatasetFacets, EventType, FacetMap,
    InputDataset, InputField, Job, OutputDataset, Run, RunEvent, SchemaDatasetFacet, SchemaField,
    Transformation, TransformationType, events_to_json_pretty,
};
pub use graph::{
    ColumnEdge, DatasetId, EdgeId, FieldId, GraphBuilder, GraphStats, Interval, JobName,
    LineageGraph, OpaqueMarker, RunIndex, RunOutput, RunView, TransformationKind, Window,
};
pub use parse::parse_events;
pub use walk::{FieldLabel, ReachedDataset, Seed, UnresolvedReason, Via, Walk, walk};
