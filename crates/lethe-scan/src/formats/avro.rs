//! Avro object container files: generic reading of every record with `apache-avro`, block by
//! block through the checking reader [`super::avro_guard`].
//!
//! Guarantees:
//! - every string, bytes, fixed, enum symbol, uuid and map key is searched for value
//!   prefixes, as are the file's user metadata values;
//! - a record field named like an ID column holding an equal int/long/string is an ID hit;
//! - Iceberg manifests (metadata `schema` + `partition-spec`): `data_file.lower_bounds` and
//!   `upper_bounds` are decoded with the type of their field id in the `schema` metadata
//!   (int/date: i32 LE; long/time/timestamp*: i64 LE; string: UTF-8; uuid/fixed/binary:
//!   searched as bytes; boolean/float/double/decimal: skipped) and compared with the IDs of
//!   the column of the same name and searched for value prefixes -> `ManifestBound`, whatever
//!   the entry's status (DELETED entries included); partition tuple values likewise;
//! - Iceberg manifest lists: partition field summary bounds searched as text ->
//!   `ManifestListBound`;
//! - other strings of manifests and manifest lists -> `ManifestString`, of other Avro ->
//!   `AvroValue`.
//!
//! Parsed header JSON is cached by its exact bytes ([`super::avro_cache`]): the writer
//! schema by the guard, a manifest's `schema` + `partition-spec` here.
//!
//! Does not: compare manifest-list partition summary bounds with IDs (they carry no type),
//! or decode decimal bounds.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;

use apache_avro::types::Value;
use serde_json::Value as Json;

use super::avro_cache::{self, Caches};
use super::avro_guard::Guarded;
use crate::report::{FileFormat, Hits, Place};

/// Deepest nesting walked.
const MAX_DEPTH: usize = 200;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Generic,
    Manifest,
    ManifestList,
}

/// An Iceberg field: name and primitive type (`"nested"` for structs/lists/maps).
struct Field {
    name: String,
    ty: String,
}

/// A partition field of the manifest's partition spec.
struct PartitionField {
    source_name: Option<String>,
    identity: bool,
}

/// What a manifest's `schema` and `partition-spec` metadata say, parsed (cached by their
/// exact bytes, [`super::avro_cache`]).
#[derive(Default)]
pub(crate) struct ManifestSchema {
    /// Field id -> name and type.
    fields: HashMap<i64, Field>,
    /// Partition field name -> its source.
    partition: HashMap<String, PartitionField>,
}

impl ManifestSchema {
    /// Parse a manifest's `schema` metadata and, if present and valid JSON, its
    /// `partition-spec`.
    fn parse(schema: &[u8], spec: Option<&[u8]>) -> Result<Self, String> {
        let schema: Json = serde_json::from_slice(schema).map_err(|e| {
            format!(
                "manifest `schema` metadata: {}",
                crate::formats::json::describe(&e)
            )
        })?;
        let mut fields = HashMap::new();
        collect_fields(&schema, "", &mut fields, 0);
        if fields.is_empty() {
            return Err("manifest `schema` metadata has no fields".into());
        }
        let mut partition = HashMap::new();
        if let Some(spec) = spec
            && let Ok(spec) = serde_json::from_slice::<Json>(spec)
        {
            collect_partition(&spec, &fields, &mut partition);
        }
        Ok(ManifestSchema { fields, partition })
    }

    /// No fields.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.partition.is_empty()
    }
}

struct Walker<'h, 't> {
    hits: &'h mut Hits<'t>,
    kind: Kind,
    schema: Arc<ManifestSchema>,
    record: u64,
    status: &'static str,
}

/// Read an Avro container from `r`; `format` is set to what the file turned out to be.
pub(crate) fn scan_avro(
    r: &mut dyn Read,
    hits: &mut Hits,
    format: &mut FileFormat,
) -> Result<(), String> {
    scan_avro_with(r, hits, format, avro_cache::shared())
}

/// [`scan_avro`] with the header caches `caches`.
fn scan_avro_with(
    r: &mut dyn Read,
    hits: &mut Hits,
    format: &mut FileFormat,
    caches: &Caches,
) -> Result<(), String> {
    let mut guarded = Guarded::with_cache(r, &caches.writer)?;
    let metadata = guarded.user_metadata();
    let mut kind = if metadata.contains_key("schema")
        && (metadata.contains_key("partition-spec") || metadata.contains_key("partition-spec-id"))
    {
        Kind::Manifest
    } else if metadata.contains_key("snapshot-id") && !metadata.contains_key("schema") {
        Kind::ManifestList
    } else {
        Kind::Generic
    };
    let schema = if kind == Kind::Manifest {
        let table = &metadata["schema"];
        let spec = metadata.get("partition-spec").map(Vec::as_slice);
        // Key: the schema's length, the schema, then the spec if any.
        let mut key = Vec::with_capacity(9 + table.len() + spec.map_or(0, <[u8]>::len));
        key.extend_from_slice(&(table.len() as u64).to_le_bytes());
        key.extend_from_slice(table);
        if let Some(spec) = spec {
            key.push(1);
            key.extend_from_slice(spec);
        }
        avro_cache::get_or_parse(&caches.manifest, &key, || {
            ManifestSchema::parse(table, spec)
        })?
    } else {
        Arc::default()
    };
    let mut walker = Walker {
        hits,
        kind,
        schema,
        record: 0,
        status: "",
    };
    let mut keys: Vec<&String> = metadata.keys().collect();
    keys.sort();
    for key in keys {
        let place = walker.string_place();
        let group = format!("metadata `{key}`");
        walker
            .hits
            .search(place, &metadata[key], &group, &|| group.clone());
    }
    let mut i = 0u64;
    while let Some(block) = guarded
        .next_block()
        .map_err(|e| format!("record {i}: {e}"))?
    {
        let mut data = block.data.as_slice();
        for _ in 0..block.count {
            let before = data.len();
            let record = guarded
                .decode(&mut data)
                .map_err(|e| format!("record {i}: {e}"))?;
            if before != 0 && before == data.len() {
                // As apache_avro::Reader: a record of no bytes in a block with bytes left.
                return Err(format!(
                    "record {i}: decoded from no bytes, with {before} bytes of its block left"
                ));
            }
            if i == 0 && kind == Kind::Generic {
                kind = detect_from_record(&record);
                walker.kind = kind;
            }
            walker.record = i;
            walker.status = entry_status(&record);
            let mut path = String::new();
            walker.walk(&record, "", &mut path, 0)?;
            i += 1;
        }
    }
    *format = match kind {
        Kind::Generic => FileFormat::Avro,
        Kind::Manifest => FileFormat::IcebergManifest,
        Kind::ManifestList => FileFormat::IcebergManifestList,
    };
    Ok(())
}

fn record_field<'v>(v: &'v Value, name: &str) -> Option<&'v Value> {
    match v {
        Value::Record(fields) => fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| unwrap_union(v)),
        _ => None,
    }
}

fn unwrap_union(v: &Value) -> &Value {
    let mut v = v;
    while let Value::Union(_, inner) = v {
        v = inner;
    }
    v
}

fn detect_from_record(v: &Value) -> Kind {
    if record_field(v, "data_file").is_some() && record_field(v, "status").is_some() {
        Kind::Manifest
    } else if record_field(v, "manifest_path").is_some() {
        Kind::ManifestList
    } else {
        Kind::Generic
    }
}

fn entry_status(v: &Value) -> &'static str {
    match record_field(v, "status") {
        Some(Value::Int(0)) => "EXISTING",
        Some(Value::Int(1)) => "ADDED",
        Some(Value::Int(2)) => "DELETED",
        _ => "",
    }
}

/// Collect field id -> (name, type) from an Iceberg schema JSON. List elements and map
/// keys/values take the name of their list/map.
fn collect_fields(ty: &Json, name: &str, out: &mut HashMap<i64, Field>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let Json::Object(o) = ty else { return };
    let add = |id: Option<&Json>, name: &str, t: Option<&Json>, out: &mut HashMap<i64, Field>| {
        let Some(id) = id.and_then(Json::as_i64) else {
            return;
        };
        let Some(t) = t else { return };
        let ty = match t {
            Json::String(s) => s.clone(),
            _ => "nested".to_string(),
        };
        out.insert(
            id,
            Field {
                name: name.to_string(),
                ty,
            },
        );
        collect_fields(t, name, out, depth + 1);
    };
    match o.get("type").and_then(Json::as_str) {
        Some("struct") => {
            if let Some(Json::Array(fields)) = o.get("fields") {
                for f in fields {
                    let fname = f.get("name").and_then(Json::as_str).unwrap_or("");
                    add(f.get("id"), fname, f.get("type"), out);
                }
            }
        }
        Some("list") => add(o.get("element-id"), name, o.get("element"), out),
        Some("map") => {
            add(o.get("key-id"), name, o.get("key"), out);
            add(o.get("value-id"), name, o.get("value"), out);
        }
        _ => {}
    }
}

fn collect_partition(
    spec: &Json,
    fields: &HashMap<i64, Field>,
    out: &mut HashMap<String, PartitionField>,
) {
    let list = match spec {
        Json::Array(a) => a,
        Json::Object(o) => match o.get("fields") {
            Some(Json::Array(a)) => a,
            _ => return,
        },
        _ => return,
    };
    for f in list {
        let Some(name) = f.get("name").and_then(Json::as_str) else {
            continue;
        };
        let source = f
            .get("source-id")
            .and_then(Json::as_i64)
            .and_then(|id| fields.get(&id))
            .map(|f| f.name.clone());
        let identity = f.get("transform").and_then(Json::as_str) == Some("identity");
        out.insert(
            name.to_string(),
            PartitionField {
                source_name: source,
                identity,
            },
        );
    }
}

impl Walker<'_, '_> {
    fn string_place(&self) -> Place {
        match self.kind {
            Kind::Generic => Place::AvroValue,
            Kind::Manifest | Kind::ManifestList => Place::ManifestString,
        }
    }

    fn detail(&self, path: &str) -> String {
        let path = if path.is_empty() { "(record)" } else { path };
        if self.status.is_empty() {
            format!("record {}, field `{path}`", self.record)
        } else {
            format!("entry {} ({}), field `{path}`", self.record, self.status)
        }
    }

    fn group(&self, path: &str) -> String {
        if self.status.is_empty() {
            path.to_string()
        } else {
            format!("{path} ({})", self.status)
        }
    }

    fn walk(
        &mut self,
        v: &Value,
        field: &str,
        path: &mut String,
        depth: usize,
    ) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "record {}: nesting deeper than {MAX_DEPTH}",
                self.record
            ));
        }
        let place = self.string_place();
        match v {
            Value::Null
            | Value::Boolean(_)
            | Value::Float(_)
            | Value::Double(_)
            | Value::Decimal(_)
            | Value::BigDecimal(_)
            | Value::Duration(_) => {}
            Value::Int(i) | Value::Date(i) | Value::TimeMillis(i) => {
                self.int_id(place, field, path, i64::from(*i))
            }
            Value::Long(i)
            | Value::TimeMicros(i)
            | Value::TimestampMillis(i)
            | Value::TimestampMicros(i)
            | Value::TimestampNanos(i)
            | Value::LocalTimestampMillis(i)
            | Value::LocalTimestampMicros(i)
            | Value::LocalTimestampNanos(i) => self.int_id(place, field, path, *i),
            Value::String(s) | Value::Enum(_, s) => self.bytes(place, field, path, s.as_bytes()),
            Value::Bytes(b) | Value::Fixed(_, b) => self.bytes(place, field, path, b),
            Value::Uuid(u) => self.bytes(place, field, path, u.to_string().as_bytes()),
            Value::Union(_, inner) => self.walk(inner, field, path, depth + 1)?,
            Value::Array(items) => {
                for item in items {
                    self.walk(item, field, path, depth + 1)?;
                }
            }
            Value::Map(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for k in keys {
                    self.bytes(place, "", path, k.as_bytes());
                    self.walk(&map[k], field, path, depth + 1)?;
                }
            }
            Value::Record(fields) => {
                for (name, value) in fields {
                    let len = path.len();
                    if self.kind == Kind::Manifest
                        && path == "data_file"
                        && (name == "lower_bounds" || name == "upper_bounds")
                    {
                        self.bounds(name, value);
                        continue;
                    }
                    if self.kind == Kind::Manifest && path == "data_file" && name == "partition" {
                        self.partition(value);
                        continue;
                    }
                    if self.kind == Kind::ManifestList
                        && path == "partitions"
                        && (name == "lower_bound" || name == "upper_bound")
                    {
                        if let Value::Bytes(b) = unwrap_union(value) {
                            let group = format!("partitions.{name}");
                            let detail = format!("manifest {}, partitions.{name}", self.record);
                            self.hits
                                .search(Place::ManifestListBound, b, &group, &|| detail.clone());
                        }
                        continue;
                    }
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(name);
                    let r = self.walk(value, name, path, depth + 1);
                    path.truncate(len);
                    r?;
                }
            }
        }
        Ok(())
    }

    fn int_id(&mut self, place: Place, field: &str, path: &str, v: i64) {
        if field.is_empty() {
            return;
        }
        if let Some(col) = self.hits.traces.id_column(field) {
            let owners = col.int(v).to_vec();
            if !owners.is_empty() {
                let group = self.group(path);
                let detail = self.detail(path);
                self.hits.ids(place, &owners, &group, &|| detail.clone());
            }
        }
    }

    fn bytes(&mut self, place: Place, field: &str, path: &str, b: &[u8]) {
        let traces = self.hits.traces;
        let mut found = Vec::new();
        traces.search(b, |o| found.push(o));
        let owners = match traces.id_column(field) {
            Some(col) if !field.is_empty() => col.bytes(b),
            _ => &[],
        };
        if found.is_empty() && owners.is_empty() {
            return;
        }
        let group = self.group(path);
        let detail = self.detail(path);
        for o in found {
            self.hits.value(place, o, &group, &|| detail.clone());
        }
        self.hits.ids(place, owners, &group, &|| detail.clone());
    }

    /// `data_file.lower_bounds` / `upper_bounds`: array of {key: field id, value: bytes}.
    fn bounds(&mut self, which: &str, v: &Value) {
        let Value::Array(items) = unwrap_union(v) else {
            if let Value::Map(m) = unwrap_union(v) {
                // Not Iceberg's encoding, but search whatever is there.
                for (k, item) in m {
                    if let Value::Bytes(b) = unwrap_union(item) {
                        let id = k.parse::<i64>().ok();
                        self.bound(which, id, b);
                    }
                }
            }
            return;
        };
        for item in items {
            let id = match record_field(item, "key") {
                Some(Value::Int(i)) => Some(i64::from(*i)),
                Some(Value::Long(i)) => Some(*i),
                _ => None,
            };
            if let Some(Value::Bytes(b)) = record_field(item, "value") {
                self.bound(which, id, b);
            }
        }
    }

    fn bound(&mut self, which: &str, id: Option<i64>, b: &[u8]) {
        let field = id.and_then(|id| self.schema.fields.get(&id));
        let name = field.map(|f| f.name.clone()).unwrap_or_default();
        let ty = field.map(|f| f.ty.as_str()).unwrap_or("");
        let id_text = id.map(|i| i.to_string()).unwrap_or_else(|| "?".into());
        let group = format!(
            "data_file.{which} field id {id_text} (`{name}`) ({})",
            self.status
        );
        let detail = format!(
            "entry {} ({}), data_file.{which}, field id {id_text} (`{name}`)",
            self.record, self.status
        );
        let col = if name.is_empty() {
            None
        } else {
            self.hits.traces.id_column(&name)
        };
        let place = Place::ManifestBound;
        match ty {
            "int" | "date" => {
                if let (Some(col), Ok(a)) = (col, <[u8; 4]>::try_from(b)) {
                    let owners = col.int(i64::from(i32::from_le_bytes(a))).to_vec();
                    self.hits.ids(place, &owners, &group, &|| detail.clone());
                }
            }
            t if t == "long" || t == "time" || t.starts_with("timestamp") => {
                if let (Some(col), Ok(a)) = (col, <[u8; 8]>::try_from(b)) {
                    let owners = col.int(i64::from_le_bytes(a)).to_vec();
                    self.hits.ids(place, &owners, &group, &|| detail.clone());
                }
            }
            "boolean" | "float" | "double" => {}
            t if t.starts_with("decimal") => {}
            _ => {
                // string, uuid, fixed, binary, and fields missing from the schema.
                self.hits.search(place, b, &group, &|| detail.clone());
                if let Some(col) = col {
                    let owners = col.bytes(b).to_vec();
                    self.hits.ids(place, &owners, &group, &|| detail.clone());
                }
            }
        }
    }

    /// `data_file.partition`: a record of partition values.
    fn partition(&mut self, v: &Value) {
        let Value::Record(fields) = unwrap_union(v) else {
            return;
        };
        for (pname, pv) in fields {
            let pv = unwrap_union(pv);
            let group = format!("data_file.partition.{pname} ({})", self.status);
            let detail = format!(
                "entry {} ({}), data_file.partition.{pname}",
                self.record, self.status
            );
            let mut names = vec![pname.clone()];
            if let Some(pf) = self.schema.partition.get(pname)
                && pf.identity
                && let Some(s) = &pf.source_name
                && !s.eq_ignore_ascii_case(pname)
            {
                names.push(s.clone());
            }
            let place = Place::ManifestBound;
            match pv {
                Value::String(s) => self
                    .hits
                    .search(place, s.as_bytes(), &group, &|| detail.clone()),
                Value::Bytes(b) | Value::Fixed(_, b) => {
                    self.hits.search(place, b, &group, &|| detail.clone())
                }
                _ => {}
            }
            for name in &names {
                let Some(col) = self.hits.traces.id_column(name) else {
                    continue;
                };
                let owners = match pv {
                    Value::Int(i) | Value::Date(i) => col.int(i64::from(*i)).to_vec(),
                    Value::Long(i) | Value::TimestampMicros(i) | Value::TimeMicros(i) => {
                        col.int(*i).to_vec()
                    }
                    Value::String(s) => col.text(s).to_vec(),
                    Value::Bytes(b) => col.bytes(b).to_vec(),
                    _ => Vec::new(),
                };
                self.hits.ids(place, &owners, &group, &|| detail.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use apache_avro::types::Value as Avro;
    use apache_avro::{Codec, DeflateSettings, ZstandardSettings};

    use super::*;
    use crate::report::{Hit, TraceKind};
    use crate::traces::{IdTrace, IdValue, SubjectTraces, TraceSet, ValueTrace};

    const EMAIL: &str = "alexa590@post.example";

    fn traces() -> TraceSet {
        let subject = SubjectTraces {
            label: "s".into(),
            ids: vec![IdTrace {
                column: "learner_id".into(),
                values: vec![IdValue::Int(3590)],
            }],
            values: vec![ValueTrace {
                kind: "email".into(),
                value: EMAIL.into(),
            }],
        };
        TraceSet::new(&[subject], 15).unwrap()
    }

    fn codecs() -> [Codec; 4] {
        [
            Codec::Null,
            Codec::Deflate(DeflateSettings::default()),
            Codec::Snappy,
            Codec::Zstandard(ZstandardSettings::default()),
        ]
    }

    /// A manifest's writer schema whose partition field is `part` (same length for every
    /// `part` used, so schemas differ only inside).
    fn manifest_writer_schema(part: &str) -> String {
        format!(
            r#"{{"type":"record","name":"manifest_entry","fields":[
 {{"name":"status","type":"int","field-id":0}},
 {{"name":"data_file","type":{{"type":"record","name":"r2","fields":[
   {{"name":"file_path","type":"string","field-id":100}},
   {{"name":"partition","type":{{"type":"record","name":"r102","fields":[
      {{"name":"{part}","type":["null","long"],"default":null,"field-id":1000}}]}},"field-id":102}},
   {{"name":"lower_bounds","type":["null",{{"type":"array","items":{{"type":"record","name":"k126_v127",
      "fields":[{{"name":"key","type":"int","field-id":126}},{{"name":"value","type":"bytes","field-id":127}}]}},
      "logicalType":"map"}}],"default":null,"field-id":125}}]}},"field-id":2}}]}}"#
        )
    }

    /// An Iceberg table schema whose field 1 has type `ty` ("long" or "date": same length).
    fn table_schema(ty: &str) -> String {
        format!(
            r#"{{"type":"struct","schema-id":0,"fields":[{{"id":1,"name":"learner_id","required":true,"type":"{ty}"}},{{"id":2,"name":"email","required":false,"type":"string"}}]}}"#
        )
    }

    /// A manifest of `entries` entries, one block each, the subject's in entry 1.
    fn manifest(part: &str, ty: &str, codec: Codec, entries: i64) -> Vec<u8> {
        let schema = apache_avro::Schema::parse_str(&manifest_writer_schema(part)).unwrap();
        let mut w = apache_avro::Writer::with_codec(&schema, Vec::new(), codec);
        w.add_user_metadata("schema".into(), table_schema(ty))
            .unwrap();
        w.add_user_metadata(
            "partition-spec".into(),
            format!(
                r#"[{{"name":"{part}","transform":"identity","source-id":1,"field-id":1000}}]"#
            ),
        )
        .unwrap();
        w.add_user_metadata("partition-spec-id".into(), "0")
            .unwrap();
        for e in 0..entries {
            let learner = if e == 1 { 3590i64 } else { 10_000 + e };
            let path = if e == 1 {
                format!("s3://b/t/data/email={EMAIL}/0.parquet")
            } else {
                format!("s3://b/t/data/{e}.parquet")
            };
            let entry = Avro::Record(vec![
                ("status".into(), Avro::Int(1)),
                (
                    "data_file".into(),
                    Avro::Record(vec![
                        ("file_path".into(), Avro::String(path)),
                        (
                            "partition".into(),
                            Avro::Record(vec![(
                                part.into(),
                                Avro::Union(1, Box::new(Avro::Long(learner))),
                            )]),
                        ),
                        (
                            "lower_bounds".into(),
                            Avro::Union(
                                1,
                                Box::new(Avro::Array(vec![Avro::Record(vec![
                                    ("key".into(), Avro::Int(1)),
                                    ("value".into(), Avro::Bytes(learner.to_le_bytes().to_vec())),
                                ])])),
                            ),
                        ),
                    ]),
                ),
            ]);
            w.append(entry).unwrap();
            w.flush().unwrap();
        }
        w.into_inner().unwrap()
    }

    fn manifest_list(codec: Codec) -> Vec<u8> {
        let schema = apache_avro::Schema::parse_str(
            r#"{"type":"record","name":"manifest_file","fields":[
 {"name":"manifest_path","type":"string","field-id":500},
 {"name":"partitions","type":["null",{"type":"array","items":{"type":"record","name":"r508","fields":[
    {"name":"lower_bound","type":["null","bytes"],"default":null,"field-id":510}]},"element-id":508}],
  "default":null,"field-id":507}]}"#,
        )
        .unwrap();
        let mut w = apache_avro::Writer::with_codec(&schema, Vec::new(), codec);
        w.add_user_metadata("snapshot-id".into(), "1").unwrap();
        for path in ["m0.avro", "m1.avro"] {
            w.append(Avro::Record(vec![
                ("manifest_path".into(), Avro::String(path.into())),
                (
                    "partitions".into(),
                    Avro::Union(
                        1,
                        Box::new(Avro::Array(vec![Avro::Record(vec![(
                            "lower_bound".into(),
                            Avro::Union(1, Box::new(Avro::Bytes(EMAIL.as_bytes().to_vec()))),
                        )])])),
                    ),
                ),
            ]))
            .unwrap();
            w.flush().unwrap();
        }
        w.into_inner().unwrap()
    }

    fn generic(codec: Codec) -> Vec<u8> {
        let schema = apache_avro::Schema::parse_str(
            r#"{"type":"record","name":"event","fields":[{"name":"learner_id","type":"long"},{"name":"note","type":{"type":"map","values":"string"}}]}"#,
        )
        .unwrap();
        let mut w = apache_avro::Writer::with_codec(&schema, Vec::new(), codec);
        w.add_user_metadata("origin".into(), EMAIL).unwrap();
        for id in [1i64, 3590, 2] {
            let note = HashMap::from([("k".to_string(), Avro::String(format!("n{id}")))]);
            w.append(Avro::Record(vec![
                ("learner_id".into(), Avro::Long(id)),
                ("note".into(), Avro::Map(note)),
            ]))
            .unwrap();
        }
        w.into_inner().unwrap()
    }

    type Outcome = (Result<(), String>, FileFormat, Vec<Hit>, u64);

    fn scan(bytes: &[u8], traces: &TraceSet, caches: &Caches) -> Outcome {
        let mut hits = Hits::new(traces, false);
        let mut format = FileFormat::Unknown;
        let r = scan_avro_with(&mut &bytes[..], &mut hits, &mut format, caches);
        let (hits, omitted) = hits.finish();
        (r, format, hits, omitted)
    }

    fn disabled() -> Caches {
        Caches::new(0, 0)
    }

    /// An ID hit in `data_file.lower_bounds`.
    fn has_bound_id(o: &Outcome) -> bool {
        o.2.iter().any(|h| {
            h.place == Place::ManifestBound
                && matches!(h.trace, TraceKind::Id { .. })
                && h.detail.contains("lower_bounds")
        })
    }

    /// Where the header ends (after its sync marker, which ends the file too).
    fn header_end(bytes: &[u8]) -> usize {
        let marker = apache_avro::read_marker(bytes);
        bytes.windows(16).position(|w| w == marker).unwrap() + 16
    }

    #[test]
    fn cached_scan_finds_what_an_uncached_scan_finds() {
        let traces = traces();
        let mut files = Vec::new();
        for codec in codecs() {
            // Same-length schemas with a common prefix: partition field, field 1's type.
            for (part, ty) in [
                ("learner_id", "long"),
                ("learner_ix", "long"),
                ("learner_id", "date"),
                ("learner_ix", "date"),
            ] {
                files.push(manifest(part, ty, codec, 3));
            }
            files.push(manifest_list(codec));
            files.push(generic(codec));
        }
        let caches = Caches::new(avro_cache::MAX_ENTRIES, avro_cache::MAX_KEY_BYTES);
        for round in 0..3 {
            for (n, f) in files.iter().enumerate() {
                let cached = scan(f, &traces, &caches);
                let uncached = scan(f, &traces, &disabled());
                assert_eq!(cached, uncached, "file {n}, round {round}");
                assert_eq!(cached.0, Ok(()), "file {n}");
                assert!(!cached.2.is_empty(), "file {n}: no hits");
            }
        }
        // The schemas' differences show: field 1 as `long` decodes the 8-byte bound.
        let a = scan(&files[0], &traces, &caches);
        let b = scan(&files[2], &traces, &caches);
        assert!(has_bound_id(&a) && !has_bound_id(&b));
        assert_eq!(a.1, FileFormat::IcebergManifest);
        assert_eq!(
            scan(&files[4], &traces, &caches).1,
            FileFormat::IcebergManifestList
        );
        assert_eq!(scan(&files[5], &traces, &caches).1, FileFormat::Avro);
        // Every distinct schema was parsed once, and found again after.
        let w = caches.writer.lock().unwrap();
        assert_eq!(w.size().0, 4);
        assert!(w.hits >= 3 * files.len() as u64 - 4, "{} hits", w.hits);
        let m = caches.manifest.lock().unwrap();
        assert_eq!(m.size().0, 4);
    }

    #[test]
    fn bad_header_after_a_good_one_fails_as_uncached_and_caches_nothing() {
        let traces = traces();
        let caches = Caches::new(avro_cache::MAX_ENTRIES, avro_cache::MAX_KEY_BYTES);
        let good = manifest("learner_id", "long", Codec::Null, 3);
        let first = scan(&good, &traces, &caches);
        assert_eq!(first.0, Ok(()));
        let end = header_end(&good);
        let patch = |from: &[u8], to: &[u8]| {
            let mut b = good.clone();
            let i = b.windows(from.len()).position(|w| w == from).unwrap();
            b[i..i + to.len()].copy_from_slice(to);
            b
        };
        let mut wrong_sync = good.clone();
        wrong_sync[end + 5] ^= 0xff; // first block's data or sync: past the header
        let last = wrong_sync.len() - 1;
        wrong_sync[last] ^= 0xff; // last block's sync marker
        let bad = [
            ("header cut in its sync marker", good[..end - 3].to_vec()),
            (
                "unsupported codec",
                patch(b"avro.codec\x08null", b"avro.codec\x08nulx"),
            ),
            (
                "writer schema not JSON",
                patch(b"{\"type\":\"record\"", b"{\"type\":\"record'"),
            ),
            (
                "writer schema invalid",
                patch(b"\"type\":\"int\"", b"\"type\":\"inx\""),
            ),
            (
                "table schema not JSON",
                patch(b"{\"type\":\"struct\"", b"{\"type\":\"struct'"),
            ),
            ("block sync marker", wrong_sync),
        ];
        let sizes = |c: &Caches| {
            (
                c.writer.lock().unwrap().size(),
                c.manifest.lock().unwrap().size(),
            )
        };
        let before = sizes(&caches);
        for (what, bytes) in &bad {
            let cached = scan(bytes, &traces, &caches);
            let uncached = scan(bytes, &traces, &disabled());
            assert!(cached.0.is_err(), "{what}: {:?}", cached.0);
            assert_eq!(cached, uncached, "{what}");
            assert_eq!(sizes(&caches), before, "{what}: cached");
        }
        assert_eq!(scan(&good, &traces, &caches), first);
    }

    #[test]
    fn every_codec_decodes_as_apache_avro_reader() {
        for codec in codecs() {
            for bytes in [
                manifest("learner_id", "long", codec, 4),
                manifest_list(codec),
                generic(codec),
            ] {
                let caches = disabled();
                let mut g = Guarded::with_cache(&bytes[..], &caches.writer).unwrap();
                let mut ours = Vec::new();
                let mut blocks = 0;
                while let Some(b) = g.next_block().unwrap() {
                    let mut data = b.data.as_slice();
                    for _ in 0..b.count {
                        ours.push(g.decode(&mut data).unwrap());
                    }
                    blocks += 1;
                }
                let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
                assert_eq!(g.user_metadata(), reader.user_metadata(), "{codec:?}");
                let theirs: Vec<Avro> = reader.map(Result::unwrap).collect();
                assert_eq!(ours, theirs, "{codec:?}");
                assert!(blocks >= 1 && !ours.is_empty());
            }
        }
    }

    #[test]
    fn records_after_an_empty_block_are_read() {
        let traces = traces();
        let good = manifest("learner_id", "long", Codec::Null, 3);
        let end = header_end(&good);
        let marker = apache_avro::read_marker(&good);
        let mut bytes = good[..end].to_vec();
        bytes.extend_from_slice(&[0, 0]); // zero records, zero bytes
        bytes.extend_from_slice(&marker);
        bytes.extend_from_slice(&good[end..]);
        let with_empty = scan(&bytes, &traces, &disabled());
        assert_eq!(with_empty, scan(&good, &traces, &disabled()));
        assert!(has_bound_id(&with_empty));
    }

    #[test]
    fn input_ending_inside_a_block_header_is_an_error() {
        let traces = traces();
        let good = generic(Codec::Null);
        let end = header_end(&good);
        // A count of 3 (one byte) then a size varint cut after its first byte.
        let mut bytes = good[..end].to_vec();
        bytes.extend_from_slice(&[0x06, 0x80]);
        let r = scan(&bytes, &traces, &disabled()).0;
        assert_eq!(r, Err("record 0: Avro block 0: truncated".into()));
        // Ending right after the header is a clean end of an empty file.
        assert_eq!(scan(&good[..end], &traces, &disabled()).0, Ok(()));
    }

    #[test]
    fn snappy_checksum_is_checked() {
        let traces = traces();
        let good = generic(Codec::Snappy);
        let mut bytes = good.clone();
        let crc_last = bytes.len() - 17; // the CRC's last byte, before the sync marker
        bytes[crc_last] ^= 0x01;
        let r = scan(&bytes, &traces, &disabled()).0.unwrap_err();
        assert!(r.contains("CRC-32"), "{r}");
        assert_eq!(scan(&good, &traces, &disabled()).0, Ok(()));
    }

    #[test]
    fn record_from_no_bytes_in_a_nonempty_block_is_an_error_as_in_apache_avro() {
        // Records of type null decode from no bytes: a block with bytes left is refused.
        let schema = apache_avro::Schema::parse_str(r#""null""#).unwrap();
        let mut w = apache_avro::Writer::new(&schema, Vec::new());
        w.append(Avro::Null).unwrap();
        let good = w.into_inner().unwrap();
        let end = header_end(&good);
        let marker = apache_avro::read_marker(&good);
        let mut bytes = good[..end].to_vec();
        bytes.extend_from_slice(&[0x02, 0x02, 0x00]); // 1 record, 1 byte
        bytes.extend_from_slice(&marker);
        let traces = traces();
        assert_eq!(scan(&good, &traces, &disabled()).0, Ok(()));
        let r = scan(&bytes, &traces, &disabled()).0.unwrap_err();
        assert!(r.starts_with("record 0: decoded from no bytes"), "{r}");
        assert!(
            apache_avro::Reader::new(&bytes[..])
                .unwrap()
                .any(|r| r.is_err())
        );
    }
}
