//! Avro object container files: generic reading of every record with `apache-avro`.
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
