//! The OpenLineage RunEvent model (spec 2-0-2) with the `schema` and `columnLineage` dataset
//! facets typed, and constructors for the events lethe writes itself.
//!
//! Guarantees:
//! - Reading is tolerant where tools differ and strict where lineage would be lost: unknown
//!   keys at every level and unknown facets are kept verbatim (as `serde_json::Value`) and
//!   written back; a missing `producer`/`schemaURL` or facet `_producer` is accepted (and later
//!   counted as an unknown producer by the graph). A known facet whose shape is wrong is an
//!   error naming its JSON path, never silently dropped.
//! - Legacy column lineage (only `transformationType`/`transformationDescription` on the output
//!   field) is understood by [`ColumnLineageField::transformations_of`]: `IDENTITY` becomes
//!   DIRECT/IDENTITY, anything else DIRECT/TRANSFORMATION.
//! - Every facet built by the constructors here carries `_producer` and `_schemaURL`.
//!
//! Not guaranteed: byte-exact round trips. Objects are written with sorted keys, an absent
//! `transformations` list and an empty one are written the same way (omitted), and an
//! `eventTime` is written in RFC 3339 with its original offset (`Z` for UTC).
//! The `eventTime` must carry a time zone, as the spec requires.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, FixedOffset, SecondsFormat, Utc};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};

/// `schemaURL` of the RunEvents this crate writes.
pub const RUN_EVENT_SCHEMA_URL: &str =
    "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent";
/// `_schemaURL` of the `schema` dataset facet this crate writes.
pub const SCHEMA_FACET_SCHEMA_URL: &str =
    "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet";
/// `_schemaURL` of the `columnLineage` dataset facet this crate writes.
pub const COLUMN_LINEAGE_FACET_SCHEMA_URL: &str = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet";

/// Facets (or other objects) this crate does not model, kept verbatim by name.
pub type FacetMap = BTreeMap<String, Value>;

/// The `eventType` of a RunEvent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    /// `START`
    Start,
    /// `RUNNING`
    Running,
    /// `COMPLETE`: the only type (with a missing one) that the graph treats as a run.
    Complete,
    /// `ABORT`
    Abort,
    /// `FAIL`
    Fail,
    /// `OTHER`
    Other,
}

impl EventType {
    /// The spec's spelling (`"COMPLETE"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Start => "START",
            EventType::Running => "RUNNING",
            EventType::Complete => "COMPLETE",
            EventType::Abort => "ABORT",
            EventType::Fail => "FAIL",
            EventType::Other => "OTHER",
        }
    }

    /// Parses the spec's spelling, ignoring ASCII case.
    pub fn parse(s: &str) -> Option<EventType> {
        [
            EventType::Start,
            EventType::Running,
            EventType::Complete,
            EventType::Abort,
            EventType::Fail,
            EventType::Other,
        ]
        .into_iter()
        .find(|t| t.as_str().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for EventType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One OpenLineage RunEvent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunEvent {
    /// `eventType`; `None` when the event has none (the graph then treats it as a run).
    #[serde(rename = "eventType", skip_serializing_if = "Option::is_none")]
    pub event_type: Option<EventType>,
    /// `eventTime`, with the offset it was written with.
    #[serde(rename = "eventTime", serialize_with = "write_time")]
    pub event_time: DateTime<FixedOffset>,
    /// `run`
    pub run: Run,
    /// `job`
    pub job: Job,
    /// `inputs` (empty when absent).
    pub inputs: Vec<InputDataset>,
    /// `outputs` (empty when absent).
    pub outputs: Vec<OutputDataset>,
    /// `producer`: required by the spec; `None` when missing (an unknown producer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub producer: Option<String>,
    /// `schemaURL`: required by the spec; `None` when missing.
    #[serde(rename = "schemaURL", skip_serializing_if = "Option::is_none")]
    pub schema_url: Option<String>,
    /// Keys this crate does not model, kept verbatim.
    #[serde(flatten)]
    pub extra: FacetMap,
}

/// `run` of a RunEvent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// `runId`: a UUID by the spec; kept as written (not validated).
    #[serde(rename = "runId")]
    pub run_id: String,
    /// Run facets, verbatim.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub facets: FacetMap,
    /// Keys this crate does not model.
    #[serde(flatten)]
    pub extra: FacetMap,
}

/// `job` of a RunEvent: a job is identified by namespace and name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Job {
    /// `namespace`
    pub namespace: String,
    /// `name`
    pub name: String,
    /// Job facets, verbatim.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub facets: FacetMap,
    /// Keys this crate does not model.
    #[serde(flatten)]
    pub extra: FacetMap,
}

/// An element of `inputs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputDataset {
    /// `namespace`
    pub namespace: String,
    /// `name`
    pub name: String,
    /// Dataset facets.
    #[serde(skip_serializing_if = "DatasetFacets::is_empty")]
    pub facets: DatasetFacets,
    /// `inputFacets`, verbatim.
    #[serde(rename = "inputFacets", skip_serializing_if = "BTreeMap::is_empty")]
    pub input_facets: FacetMap,
    /// Keys this crate does not model.
    #[serde(flatten)]
    pub extra: FacetMap,
}

/// An element of `outputs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputDataset {
    /// `namespace`
    pub namespace: String,
    /// `name`
    pub name: String,
    /// Dataset facets; `columnLineage` lives here.
    #[serde(skip_serializing_if = "DatasetFacets::is_empty")]
    pub facets: DatasetFacets,
    /// `outputFacets`, verbatim.
    #[serde(rename = "outputFacets", skip_serializing_if = "BTreeMap::is_empty")]
    pub output_facets: FacetMap,
    /// Keys this crate does not model.
    #[serde(flatten)]
    pub extra: FacetMap,
}

/// The `facets` of a dataset: `schema` and `columnLineage` typed, every other facet verbatim.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DatasetFacets {
    /// The `schema` facet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<SchemaDatasetFacet>,
    /// The `columnLineage` facet.
    #[serde(rename = "columnLineage", skip_serializing_if = "Option::is_none")]
    pub column_lineage: Option<ColumnLineageDatasetFacet>,
    /// Every other facet, by name, verbatim.
    #[serde(flatten)]
    pub other: FacetMap,
}

impl DatasetFacets {
    /// True when there is no facet at all.
    pub fn is_empty(&self) -> bool {
        self.schema.is_none() && self.column_lineage.is_none() && self.other.is_empty()
    }
}

/// The `schema` dataset facet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemaDatasetFacet {
    /// `_producer`
    #[serde(rename = "_producer", skip_serializing_if = "Option::is_none")]
    pub producer: Option<String>,
    /// `_schemaURL`
    #[serde(rename = "_schemaURL", skip_serializing_if = "Option::is_none")]
    pub schema_url: Option<String>,
    /// `fields`
    pub fields: Vec<SchemaField>,
    /// Keys this crate does not model (e.g. `_deleted`).
    #[serde(flatten)]
    pub extra: FacetMap,
}

/// A field of the `schema` facet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemaField {
    /// `name`
    pub name: String,
    /// `type`
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub data_type: Option<String>,
    /// `description`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Nested `fields` of a struct-typed field.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<SchemaField>,
    /// Keys this crate does not model.
    #[serde(flatten)]
    pub extra: FacetMap,
}

/// The `columnLineage` dataset facet of an output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ColumnLineageDatasetFacet {
    /// `_producer`
    #[serde(rename = "_producer", skip_serializing_if = "Option::is_none")]
    pub producer: Option<String>,
    /// `_schemaURL`
    #[serde(rename = "_schemaURL", skip_serializing_if = "Option::is_none")]
    pub schema_url: Option<String>,
    /// `fields`: output field name -> the input fields it is computed from.
    pub fields: BTreeMap<String, ColumnLineageField>,
    /// `dataset`: input fields that influence the whole output dataset (filters, join keys...).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dataset: Vec<InputField>,
    /// Keys this crate does not model.
    #[serde(flatten)]
    pub extra: FacetMap,
}

/// The lineage of one output field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ColumnLineageField {
    /// `inputFields`
    #[serde(rename = "inputFields")]
    pub input_fields: Vec<InputField>,
    /// Deprecated `transformationDescription`.
    #[serde(
        rename = "transformationDescription",
        skip_serializing_if = "Option::is_none"
    )]
    pub transformation_description: Option<String>,
    /// Deprecated `transformationType` (`IDENTITY` or anything else).
    #[serde(rename = "transformationType", skip_serializing_if = "Option::is_none")]
    pub transformation_type: Option<String>,
    /// Keys this crate does not model.
    #[serde(flatten)]
    pub extra: FacetMap,
}

/// An input field in column lineage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputField {
    /// Input dataset `namespace`.
    pub namespace: String,
    /// Input dataset `name`.
    pub name: String,
    /// Input `field`.
    pub field: String,
    /// `transformations` applied (empty when absent: see
    /// [`ColumnLineageField::transformations_of`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub transformations: Vec<Transformation>,
    /// Keys this crate does not model.
    #[serde(flatten)]
    pub extra: FacetMap,
}

/// `type` of a column-lineage transformation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransformationType {
    /// `DIRECT`: the output value is computed from the input value.
    Direct,
    /// `INDIRECT`: the input influences the output (filter, join, group by, sort...).
    Indirect,
    /// Any other spelling, kept as written; the walk treats it as not an identity.
    Other(String),
}

impl TransformationType {
    /// Parses `DIRECT`/`INDIRECT` ignoring ASCII case; anything else is kept as [`Self::Other`].
    pub fn parse(s: &str) -> TransformationType {
        if s.eq_ignore_ascii_case("DIRECT") {
            TransformationType::Direct
        } else if s.eq_ignore_ascii_case("INDIRECT") {
            TransformationType::Indirect
        } else {
            TransformationType::Other(s.to_owned())
        }
    }

    /// The spelling written to JSON.
    pub fn as_str(&self) -> &str {
        match self {
            TransformationType::Direct => "DIRECT",
            TransformationType::Indirect => "INDIRECT",
            TransformationType::Other(s) => s,
        }
    }
}

impl fmt::Display for TransformationType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for TransformationType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One transformation of an input field (`{type, subtype, description, masking}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transformation {
    /// `type`
    #[serde(rename = "type")]
    pub kind: TransformationType,
    /// `subtype`: IDENTITY, TRANSFORMATION, AGGREGATION, JOIN, FILTER, GROUP_BY, SORT, WINDOW,
    /// CONDITIONAL, ... kept as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subtype: Option<String>,
    /// `description`; lethe's SQL lineage marks opaque UDFs with a description starting
    /// `opaque:` (see [`Transformation::is_opaque`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `masking`: true when the transformation masks the value (hash, redaction...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub masking: Option<bool>,
    /// Keys this crate does not model.
    #[serde(flatten)]
    pub extra: FacetMap,
}

impl Transformation {
    /// A transformation of `kind` with `subtype`, no description, no masking flag.
    pub fn new(kind: TransformationType, subtype: impl Into<String>) -> Transformation {
        Transformation {
            kind,
            subtype: Some(subtype.into()),
            description: None,
            masking: None,
            extra: FacetMap::new(),
        }
    }

    /// DIRECT/`subtype` (IDENTITY, TRANSFORMATION, AGGREGATION).
    pub fn direct(subtype: impl Into<String>) -> Transformation {
        Transformation::new(TransformationType::Direct, subtype)
    }

    /// INDIRECT/`subtype` (JOIN, FILTER, GROUP_BY, SORT, WINDOW, CONDITIONAL).
    pub fn indirect(subtype: impl Into<String>) -> Transformation {
        Transformation::new(TransformationType::Indirect, subtype)
    }

    /// Sets `description`.
    pub fn with_description(mut self, description: impl Into<String>) -> Transformation {
        self.description = Some(description.into());
        self
    }

    /// Sets `masking`.
    pub fn with_masking(mut self, masking: bool) -> Transformation {
        self.masking = Some(masking);
        self
    }

    /// True for DIRECT/IDENTITY (ASCII case ignored) without `masking`: the output holds the
    /// input's values.
    pub fn is_identity(&self) -> bool {
        self.kind == TransformationType::Direct
            && self.masking != Some(true)
            && self
                .subtype
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("IDENTITY"))
    }

    /// True when the description starts with `opaque:` (ASCII case and leading blanks
    /// ignored): a step whose effect on values lineage cannot state (e.g. a UDF).
    pub fn is_opaque(&self) -> bool {
        self.description
            .as_deref()
            .is_some_and(is_opaque_description)
    }
}

/// True when `description` starts with `opaque:` (ASCII case and leading blanks ignored).
pub(crate) fn is_opaque_description(description: &str) -> bool {
    let d = description.trim_start().as_bytes();
    d.len() >= 7 && d[..7].eq_ignore_ascii_case(b"opaque:")
}

impl ColumnLineageField {
    /// The transformations from `input` to this output field: the input's own
    /// `transformations` when it lists any; otherwise the legacy field-level
    /// `transformationType` (`IDENTITY` -> DIRECT/IDENTITY, anything else or absent ->
    /// DIRECT/TRANSFORMATION) with `transformationDescription` as description.
    pub fn transformations_of<'a>(&self, input: &'a InputField) -> Cow<'a, [Transformation]> {
        if !input.transformations.is_empty() {
            return Cow::Borrowed(&input.transformations);
        }
        let identity = self
            .transformation_type
            .as_deref()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("IDENTITY"));
        let mut t = Transformation::direct(if identity {
            "IDENTITY"
        } else {
            "TRANSFORMATION"
        });
        t.description = self.transformation_description.clone();
        Cow::Owned(vec![t])
    }
}

// ---------------------------------------------------------------------------------------------
// Constructors for the events lethe writes.

impl RunEvent {
    /// A COMPLETE event of `job`'s run `run_id` at `event_time`, produced by `producer` (a URI
    /// naming the software, e.g. lethe's repository and version), with no datasets yet.
    pub fn complete(
        producer: impl Into<String>,
        job: Job,
        run_id: Uuid,
        event_time: DateTime<Utc>,
    ) -> RunEvent {
        RunEvent {
            event_type: Some(EventType::Complete),
            event_time: event_time.fixed_offset(),
            run: Run {
                run_id: run_id.to_string(),
                facets: FacetMap::new(),
                extra: FacetMap::new(),
            },
            job,
            inputs: Vec::new(),
            outputs: Vec::new(),
            producer: Some(producer.into()),
            schema_url: Some(RUN_EVENT_SCHEMA_URL.to_owned()),
            extra: FacetMap::new(),
        }
    }

    /// Adds an input dataset.
    pub fn with_input(mut self, input: InputDataset) -> RunEvent {
        self.inputs.push(input);
        self
    }

    /// Adds an output dataset.
    pub fn with_output(mut self, output: OutputDataset) -> RunEvent {
        self.outputs.push(output);
        self
    }

    /// The event as pretty-printed JSON (keys of facet maps sorted).
    pub fn to_json_pretty(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| Error::Serialize {
            message: e.to_string(),
        })
    }

    /// The event as one line of compact JSON (for JSON-lines files), without a newline.
    pub fn to_json_line(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::Serialize {
            message: e.to_string(),
        })
    }

    /// Reads one RunEvent from a JSON value. The error names the JSON path of the problem.
    pub fn from_json_value(value: &Value) -> Result<RunEvent> {
        RunEvent::from_json(value.clone())
    }

    /// Reads one RunEvent from a JSON value it takes (no copy of its strings).
    pub fn from_json(value: Value) -> Result<RunEvent> {
        decode_run_event(value).map_err(|e| Error::InvalidEvent {
            message: e.describe(),
        })
    }
}

/// Several events as a pretty-printed JSON array (one of the layouts
/// [`crate::parse_events`] reads).
pub fn events_to_json_pretty(events: &[RunEvent]) -> Result<String> {
    serde_json::to_string_pretty(events).map_err(|e| Error::Serialize {
        message: e.to_string(),
    })
}

impl Job {
    /// A job with no facets.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Job {
        Job {
            namespace: namespace.into(),
            name: name.into(),
            facets: FacetMap::new(),
            extra: FacetMap::new(),
        }
    }

    /// Adds a job facet `name` with `body` (an object), stamping `_producer` and `_schemaURL`.
    pub fn with_facet(
        mut self,
        name: impl Into<String>,
        producer: &str,
        schema_url: &str,
        body: Map<String, Value>,
    ) -> Job {
        self.facets
            .insert(name.into(), stamped(producer, schema_url, body));
        self
    }
}

fn stamped(producer: &str, schema_url: &str, mut body: Map<String, Value>) -> Value {
    body.insert("_producer".to_owned(), Value::String(producer.to_owned()));
    body.insert(
        "_schemaURL".to_owned(),
        Value::String(schema_url.to_owned()),
    );
    Value::Object(body)
}

impl InputDataset {
    /// An input dataset with no facets.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> InputDataset {
        InputDataset {
            namespace: namespace.into(),
            name: name.into(),
            facets: DatasetFacets::default(),
            input_facets: FacetMap::new(),
            extra: FacetMap::new(),
        }
    }

    /// Sets the `schema` facet.
    pub fn with_schema(mut self, schema: SchemaDatasetFacet) -> InputDataset {
        self.facets.schema = Some(schema);
        self
    }
}

impl OutputDataset {
    /// An output dataset with no facets (which the graph reads as "no column lineage").
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> OutputDataset {
        OutputDataset {
            namespace: namespace.into(),
            name: name.into(),
            facets: DatasetFacets::default(),
            output_facets: FacetMap::new(),
            extra: FacetMap::new(),
        }
    }

    /// Sets the `schema` facet.
    pub fn with_schema(mut self, schema: SchemaDatasetFacet) -> OutputDataset {
        self.facets.schema = Some(schema);
        self
    }

    /// Sets the `columnLineage` facet.
    pub fn with_column_lineage(mut self, lineage: ColumnLineageDatasetFacet) -> OutputDataset {
        self.facets.column_lineage = Some(lineage);
        self
    }
}

impl SchemaDatasetFacet {
    /// A `schema` facet stamped with `producer` and [`SCHEMA_FACET_SCHEMA_URL`].
    pub fn new(producer: impl Into<String>, fields: impl IntoIterator<Item = SchemaField>) -> Self {
        SchemaDatasetFacet {
            producer: Some(producer.into()),
            schema_url: Some(SCHEMA_FACET_SCHEMA_URL.to_owned()),
            fields: fields.into_iter().collect(),
            extra: FacetMap::new(),
        }
    }
}

impl SchemaField {
    /// A field with a name and a type.
    pub fn new(name: impl Into<String>, data_type: impl Into<String>) -> SchemaField {
        SchemaField {
            name: name.into(),
            data_type: Some(data_type.into()),
            description: None,
            fields: Vec::new(),
            extra: FacetMap::new(),
        }
    }
}

impl ColumnLineageDatasetFacet {
    /// An empty `columnLineage` facet stamped with `producer` and
    /// [`COLUMN_LINEAGE_FACET_SCHEMA_URL`].
    pub fn new(producer: impl Into<String>) -> Self {
        ColumnLineageDatasetFacet {
            producer: Some(producer.into()),
            schema_url: Some(COLUMN_LINEAGE_FACET_SCHEMA_URL.to_owned()),
            fields: BTreeMap::new(),
            dataset: Vec::new(),
            extra: FacetMap::new(),
        }
    }

    /// Adds `inputs` to the lineage of `output_field` (creating it if needed).
    pub fn with_field(
        mut self,
        output_field: impl Into<String>,
        inputs: impl IntoIterator<Item = InputField>,
    ) -> Self {
        self.fields
            .entry(output_field.into())
            .or_insert_with(|| ColumnLineageField {
                input_fields: Vec::new(),
                transformation_description: None,
                transformation_type: None,
                extra: FacetMap::new(),
            })
            .input_fields
            .extend(inputs);
        self
    }

    /// Adds an input that influences the whole dataset (the `dataset` list).
    pub fn with_dataset_input(mut self, input: InputField) -> Self {
        self.dataset.push(input);
        self
    }
}

impl InputField {
    /// An input field with its transformations.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        field: impl Into<String>,
        transformations: impl IntoIterator<Item = Transformation>,
    ) -> InputField {
        InputField {
            namespace: namespace.into(),
            name: name.into(),
            field: field.into(),
            transformations: transformations.into_iter().collect(),
            extra: FacetMap::new(),
        }
    }
}

fn write_time<S: Serializer>(t: &DateTime<FixedOffset>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

impl<'de> Deserialize<'de> for RunEvent {
    /// Reads through [`RunEvent::from_json_value`], so serde users get the same rules.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        decode_run_event(v).map_err(|e| {
            serde::de::Error::custom(format!("not an OpenLineage RunEvent: {}", e.describe()))
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding from serde_json::Value with JSON paths in errors and no values in messages.

enum Seg {
    Key(String),
    Index(usize),
}

enum Problem {
    Missing(&'static str),
    WrongType {
        expected: &'static str,
        found: &'static str,
    },
    Invalid(&'static str),
}

/// A decoding problem with its JSON path (stored innermost first).
pub(crate) struct DecodeError {
    path: Vec<Seg>,
    problem: Problem,
}

impl DecodeError {
    fn new(problem: Problem) -> DecodeError {
        DecodeError {
            path: Vec::new(),
            problem,
        }
    }

    fn at_key(mut self, key: &str) -> DecodeError {
        self.path.push(Seg::Key(key.to_owned()));
        self
    }

    fn at_index(mut self, i: usize) -> DecodeError {
        self.path.push(Seg::Index(i));
        self
    }

    fn path_string(&self, extra: Option<&str>) -> String {
        let mut p = String::new();
        for seg in self.path.iter().rev() {
            match seg {
                Seg::Key(k) => {
                    if !p.is_empty() {
                        p.push('.');
                    }
                    p.push_str(k);
                }
                Seg::Index(i) => p.push_str(&format!("[{i}]")),
            }
        }
        if let Some(k) = extra {
            if !p.is_empty() {
                p.push('.');
            }
            p.push_str(k);
        }
        p
    }

    /// A message such as "missing `job.name`" or "`inputs[0]` must be an object, found a string".
    pub(crate) fn describe(&self) -> String {
        match &self.problem {
            Problem::Missing(key) => format!("missing `{}`", self.path_string(Some(key))),
            Problem::WrongType { expected, found } if self.path.is_empty() => {
                format!("expected {expected}, found {found}")
            }
            Problem::WrongType { expected, found } => {
                format!(
                    "`{}` must be {expected}, found {found}",
                    self.path_string(None)
                )
            }
            Problem::Invalid(what) if self.path.is_empty() => (*what).to_owned(),
            Problem::Invalid(what) => format!("`{}` {what}", self.path_string(None)),
        }
    }
}

type Obj = Map<String, Value>;
type D<T> = std::result::Result<T, DecodeError>;

// The decoders take the JSON by value and move its strings and unknown objects into the model
// (no copies); whatever keys are left in an object after the known ones were taken are its
// unknown keys.

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn wrong(expected: &'static str, v: &Value) -> DecodeError {
    DecodeError::new(Problem::WrongType {
        expected,
        found: kind_of(v),
    })
}

fn object(v: Value) -> D<Obj> {
    match v {
        Value::Object(o) => Ok(o),
        other => Err(wrong("an object", &other)),
    }
}

/// Takes `key` out of `o`; an explicit `null` counts as absent.
fn take(o: &mut Obj, key: &str) -> Option<Value> {
    o.remove(key).filter(|v| !v.is_null())
}

fn string(v: Value) -> D<String> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(wrong("a string", &other)),
    }
}

fn req_str(o: &mut Obj, key: &'static str) -> D<String> {
    let v = o
        .remove(key)
        .ok_or_else(|| DecodeError::new(Problem::Missing(key)))?;
    string(v).map_err(|e| e.at_key(key))
}

fn opt_str(o: &mut Obj, key: &str) -> D<Option<String>> {
    take(o, key)
        .map(|v| string(v).map_err(|e| e.at_key(key)))
        .transpose()
}

fn opt_bool(o: &mut Obj, key: &str) -> D<Option<bool>> {
    take(o, key)
        .map(|v| {
            v.as_bool()
                .ok_or_else(|| wrong("a boolean", &v).at_key(key))
        })
        .transpose()
}

fn opt_map(o: &mut Obj, key: &str) -> D<FacetMap> {
    match take(o, key) {
        None => Ok(FacetMap::new()),
        Some(v) => Ok(rest(object(v).map_err(|e| e.at_key(key))?)),
    }
}

fn opt_list<T>(o: &mut Obj, key: &str, item: impl Fn(Value) -> D<T>) -> D<Vec<T>> {
    match take(o, key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| item(v).map_err(|e| e.at_index(i).at_key(key)))
            .collect(),
        Some(other) => Err(wrong("an array", &other).at_key(key)),
    }
}

/// The keys left in `o`.
fn rest(o: Obj) -> FacetMap {
    o.into_iter().collect()
}

fn decode_run_event(v: Value) -> D<RunEvent> {
    let mut o = object(v)?;
    // Name the likely confusion with the spec's other event kinds.
    if !o.contains_key("run") && o.contains_key("job") && !o.contains_key("dataset") {
        return Err(DecodeError::new(Problem::Invalid(
            "missing `run` (a JobEvent is not a RunEvent)",
        )));
    }
    if !o.contains_key("job") && o.contains_key("dataset") {
        return Err(DecodeError::new(Problem::Invalid(
            "missing `job` (a DatasetEvent is not a RunEvent)",
        )));
    }
    let job = o
        .remove("job")
        .ok_or_else(|| DecodeError::new(Problem::Missing("job")))?;
    let job = decode_job(job).map_err(|e| e.at_key("job"))?;
    let run = o
        .remove("run")
        .ok_or_else(|| DecodeError::new(Problem::Missing("run")))?;
    let run = decode_run(run).map_err(|e| e.at_key("run"))?;
    let time_text = req_str(&mut o, "eventTime")?;
    let event_time = DateTime::parse_from_rfc3339(time_text.trim()).map_err(|_| {
        DecodeError::new(Problem::Invalid(
            "is not an RFC 3339 date-time with a time zone",
        ))
        .at_key("eventTime")
    })?;
    let event_type = match opt_str(&mut o, "eventType")? {
        None => None,
        Some(s) => Some(EventType::parse(&s).ok_or_else(|| {
            DecodeError::new(Problem::Invalid(
                "must be one of START, RUNNING, COMPLETE, ABORT, FAIL, OTHER",
            ))
            .at_key("eventType")
        })?),
    };
    Ok(RunEvent {
        event_type,
        event_time,
        run,
        job,
        inputs: opt_list(&mut o, "inputs", decode_input)?,
        outputs: opt_list(&mut o, "outputs", decode_output)?,
        producer: opt_str(&mut o, "producer")?,
        schema_url: opt_str(&mut o, "schemaURL")?,
        extra: rest(o),
    })
}

fn decode_run(v: Value) -> D<Run> {
    let mut o = object(v)?;
    Ok(Run {
        run_id: req_str(&mut o, "runId")?,
        facets: opt_map(&mut o, "facets")?,
        extra: rest(o),
    })
}

fn decode_job(v: Value) -> D<Job> {
    let mut o = object(v)?;
    Ok(Job {
        namespace: req_str(&mut o, "namespace")?,
        name: req_str(&mut o, "name")?,
        facets: opt_map(&mut o, "facets")?,
        extra: rest(o),
    })
}

fn decode_input(v: Value) -> D<InputDataset> {
    let mut o = object(v)?;
    Ok(InputDataset {
        namespace: req_str(&mut o, "namespace")?,
        name: req_str(&mut o, "name")?,
        facets: decode_dataset_facets(&mut o)?,
        input_facets: opt_map(&mut o, "inputFacets")?,
        extra: rest(o),
    })
}

fn decode_output(v: Value) -> D<OutputDataset> {
    let mut o = object(v)?;
    Ok(OutputDataset {
        namespace: req_str(&mut o, "namespace")?,
        name: req_str(&mut o, "name")?,
        facets: decode_dataset_facets(&mut o)?,
        output_facets: opt_map(&mut o, "outputFacets")?,
        extra: rest(o),
    })
}

fn decode_dataset_facets(dataset: &mut Obj) -> D<DatasetFacets> {
    let Some(v) = take(dataset, "facets") else {
        return Ok(DatasetFacets::default());
    };
    let mut o = object(v).map_err(|e| e.at_key("facets"))?;
    let schema = take(&mut o, "schema")
        .map(|v| decode_schema(v).map_err(|e| e.at_key("schema").at_key("facets")))
        .transpose()?;
    let column_lineage = take(&mut o, "columnLineage")
        .map(|v| decode_column_lineage(v).map_err(|e| e.at_key("columnLineage").at_key("facets")))
        .transpose()?;
    Ok(DatasetFacets {
        schema,
        column_lineage,
        other: rest(o),
    })
}

fn decode_schema(v: Value) -> D<SchemaDatasetFacet> {
    let mut o = object(v)?;
    Ok(SchemaDatasetFacet {
        producer: opt_str(&mut o, "_producer")?,
        schema_url: opt_str(&mut o, "_schemaURL")?,
        fields: opt_list(&mut o, "fields", decode_schema_field)?,
        extra: rest(o),
    })
}

fn decode_schema_field(v: Value) -> D<SchemaField> {
    let mut o = object(v)?;
    Ok(SchemaField {
        name: req_str(&mut o, "name")?,
        data_type: opt_str(&mut o, "type")?,
        description: opt_str(&mut o, "description")?,
        fields: opt_list(&mut o, "fields", decode_schema_field)?,
        extra: rest(o),
    })
}

fn decode_column_lineage(v: Value) -> D<ColumnLineageDatasetFacet> {
    let mut o = object(v)?;
    let mut fields = BTreeMap::new();
    if let Some(fv) = take(&mut o, "fields") {
        for (name, lv) in object(fv).map_err(|e| e.at_key("fields"))? {
            let field = decode_lineage_field(lv).map_err(|e| e.at_key(&name).at_key("fields"))?;
            fields.insert(name, field);
        }
    }
    Ok(ColumnLineageDatasetFacet {
        producer: opt_str(&mut o, "_producer")?,
        schema_url: opt_str(&mut o, "_schemaURL")?,
        fields,
        dataset: opt_list(&mut o, "dataset", decode_input_field)?,
        extra: rest(o),
    })
}

fn decode_lineage_field(v: Value) -> D<ColumnLineageField> {
    let mut o = object(v)?;
    Ok(ColumnLineageField {
        input_fields: opt_list(&mut o, "inputFields", decode_input_field)?,
        transformation_description: opt_str(&mut o, "transformationDescription")?,
        transformation_type: opt_str(&mut o, "transformationType")?,
        extra: rest(o),
    })
}

fn decode_input_field(v: Value) -> D<InputField> {
    let mut o = object(v)?;
    Ok(InputField {
        namespace: req_str(&mut o, "namespace")?,
        name: req_str(&mut o, "name")?,
        field: req_str(&mut o, "field")?,
        transformations: opt_list(&mut o, "transformations", decode_transformation)?,
        extra: rest(o),
    })
}

fn decode_transformation(v: Value) -> D<Transformation> {
    let mut o = object(v)?;
    Ok(Transformation {
        kind: TransformationType::parse(&req_str(&mut o, "type")?),
        subtype: opt_str(&mut o, "subtype")?,
        description: opt_str(&mut o, "description")?,
        masking: opt_bool(&mut o, "masking")?,
        extra: rest(o),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn minimal() -> Value {
        json!({
            "eventType": "COMPLETE",
            "eventTime": "2025-03-01T10:00:00.123Z",
            "run": {"runId": "0195a1b2-0000-7000-8000-000000000001"},
            "job": {"namespace": "lethe", "name": "marketing.audience"},
            "producer": "https://example.invalid/lethe",
            "schemaURL": RUN_EVENT_SCHEMA_URL
        })
    }

    fn err_of(v: Value) -> String {
        match RunEvent::from_json_value(&v) {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn missing_job_is_named() {
        let mut v = minimal();
        v.as_object_mut().unwrap().remove("job");
        assert_eq!(err_of(v), "not an OpenLineage RunEvent: missing `job`");
    }

    #[test]
    fn nested_problems_name_their_path_and_never_the_value() {
        let mut v = minimal();
        v["outputs"] = json!([{"namespace": "n", "name": "t", "facets": {"columnLineage": {"fields": {
            "email": {"inputFields": [{"namespace": "n", "name": "s", "field": 42}]}}}}}]);
        let msg = err_of(v);
        assert_eq!(
            msg,
            "not an OpenLineage RunEvent: `outputs[0].facets.columnLineage.fields.email.inputFields[0].field` must be a string, found a number"
        );
        let mut v = minimal();
        v["eventTime"] = json!("jane.doe@example.com");
        let msg = err_of(v);
        assert!(msg.contains("`eventTime` is not an RFC 3339"), "{msg}");
        assert!(!msg.contains("jane"), "{msg}");
        let mut v = minimal();
        v["job"] = json!({"namespace": "n"});
        assert_eq!(err_of(v), "not an OpenLineage RunEvent: missing `job.name`");
    }

    #[test]
    fn other_event_kinds_and_non_objects_are_explained() {
        assert_eq!(
            err_of(json!([1])),
            "not an OpenLineage RunEvent: expected an object, found an array"
        );
        let mut v = minimal();
        v.as_object_mut().unwrap().remove("run");
        assert!(err_of(v).contains("JobEvent"));
        assert!(
            err_of(json!({"eventTime": "2025-01-01T00:00:00Z", "dataset": {}}))
                .contains("DatasetEvent")
        );
        let mut v = minimal();
        v["eventType"] = json!("DONE");
        assert!(err_of(v).contains("`eventType` must be one of"));
    }

    #[test]
    fn unknown_keys_and_facets_round_trip() {
        let mut v = minimal();
        v["inputs"] = json!([{"namespace": "s3://bucket", "name": "raw/x.csv",
            "facets": {"symlinks": {"_producer": "p", "identifiers": [{"name": "a"}]}},
            "inputFacets": {"dataQualityMetrics": {"rowCount": 3}}, "weird": true}]);
        v["run"]["facets"] = json!({"spark_version": {"spark-version": "3.5.1"}});
        v["futureKey"] = json!({"x": 1});
        let ev = RunEvent::from_json_value(&v).unwrap();
        assert!(ev.inputs[0].facets.other.contains_key("symlinks"));
        assert_eq!(ev.inputs[0].extra["weird"], json!(true));
        let back: Value = serde_json::from_str(&ev.to_json_pretty().unwrap()).unwrap();
        assert_eq!(back["futureKey"], v["futureKey"]);
        assert_eq!(back["inputs"], v["inputs"]);
        assert_eq!(back["run"]["facets"], v["run"]["facets"]);
        assert_eq!(back["eventTime"], json!("2025-03-01T10:00:00.123Z"));
        assert_eq!(RunEvent::from_json_value(&back).unwrap(), ev);
    }

    #[test]
    fn legacy_transformation_type_maps_to_direct() {
        let field = ColumnLineageField {
            input_fields: vec![InputField::new("n", "t", "a", [])],
            transformation_description: Some("identical".into()),
            transformation_type: Some("IDENTITY".into()),
            extra: FacetMap::new(),
        };
        let ts = field.transformations_of(&field.input_fields[0]);
        assert_eq!(ts.len(), 1);
        assert!(ts[0].is_identity());
        assert_eq!(ts[0].description.as_deref(), Some("identical"));
        let other = ColumnLineageField {
            transformation_type: Some("MASKED".into()),
            ..field.clone()
        };
        let ts = other.transformations_of(&other.input_fields[0]);
        assert_eq!(
            (ts[0].kind.as_str(), ts[0].subtype.as_deref()),
            ("DIRECT", Some("TRANSFORMATION"))
        );
        let none = ColumnLineageField {
            transformation_type: None,
            ..field.clone()
        };
        assert!(!none.transformations_of(&none.input_fields[0])[0].is_identity());
        // Listed transformations win over the legacy ones.
        let listed = InputField::new("n", "t", "a", [Transformation::indirect("FILTER")]);
        assert_eq!(
            field.transformations_of(&listed)[0].kind,
            TransformationType::Indirect
        );
    }

    #[test]
    fn constructed_facets_carry_producer_and_schema_url() {
        let ev = RunEvent::complete(
            "urn:lethe",
            Job::new("lethe", "j"),
            Uuid::nil(),
            DateTime::UNIX_EPOCH,
        )
        .with_input(
            InputDataset::new("lethe", "a").with_schema(SchemaDatasetFacet::new(
                "urn:lethe",
                [SchemaField::new("id", "long")],
            )),
        )
        .with_output(
            OutputDataset::new("lethe", "b")
                .with_schema(SchemaDatasetFacet::new(
                    "urn:lethe",
                    [SchemaField::new("id", "long")],
                ))
                .with_column_lineage(
                    ColumnLineageDatasetFacet::new("urn:lethe")
                        .with_field(
                            "id",
                            [InputField::new(
                                "lethe",
                                "a",
                                "id",
                                [Transformation::direct("IDENTITY")],
                            )],
                        )
                        .with_dataset_input(InputField::new(
                            "lethe",
                            "a",
                            "ok",
                            [Transformation::indirect("FILTER")],
                        )),
                ),
        );
        let v: Value = serde_json::from_str(&ev.to_json_pretty().unwrap()).unwrap();
        assert_eq!(v["eventType"], "COMPLETE");
        assert_eq!(v["schemaURL"], RUN_EVENT_SCHEMA_URL);
        assert_eq!(v["eventTime"], "1970-01-01T00:00:00Z");
        for facet in [
            &v["inputs"][0]["facets"]["schema"],
            &v["outputs"][0]["facets"]["schema"],
            &v["outputs"][0]["facets"]["columnLineage"],
        ] {
            assert_eq!(facet["_producer"], "urn:lethe");
            assert!(
                facet["_schemaURL"]
                    .as_str()
                    .unwrap()
                    .starts_with("https://openlineage.io/spec/facets/")
            );
        }
        assert_eq!(
            v["outputs"][0]["facets"]["columnLineage"]["fields"]["id"]["inputFields"][0]["transformations"]
                [0]["subtype"],
            "IDENTITY"
        );
        assert_eq!(
            v["outputs"][0]["facets"]["columnLineage"]["dataset"][0]["transformations"][0]["type"],
            "INDIRECT"
        );
        let job = Job::new("lethe", "j").with_facet(
            "sql",
            "urn:lethe",
            "https://openlineage.io/spec/facets/1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet",
            Map::new(),
        );
        assert_eq!(job.facets["sql"]["_producer"], "urn:lethe");
        assert_eq!(RunEvent::from_json_value(&v).unwrap(), ev);
    }

    #[test]
    fn opaque_descriptions() {
        assert!(is_opaque_description("opaque: udf normalize_email"));
        assert!(is_opaque_description("  OPAQUE:x"));
        assert!(!is_opaque_description("not opaque: x"));
        assert!(!is_opaque_description("opaq"));
    }
}
