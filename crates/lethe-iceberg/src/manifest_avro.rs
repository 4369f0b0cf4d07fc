//! Reading a manifest's entries with its Avro header parsed once per distinct header.
//!
//! The iceberg crate's `Manifest::parse_avro` parses each manifest's Avro header twice (the
//! writer schema's JSON, `Schema::parse` with its name checks, name resolution), parses the
//! Iceberg schema and partition spec its metadata holds, builds the reader schema for the
//! partition type, and resolves every record against it. The files of a table share a few
//! headers (they differ only when the schema or the partition spec changed), and an erasure
//! reads every manifest of every snapshot of every table it changes: that parsing was a
//! quarter of an erasure's CPU. Here the header's parts are parsed once per distinct bytes
//! ([`Parsed`], a bounded cache), the writer schema once per distinct `avro.schema` (the
//! tables of a warehouse share it unless their partition types differ), and each record is
//! decoded with the parsed writer schema and turned into a [`ManifestEntry`] by the rules the
//! iceberg crate applies to the resolved record:
//!
//! - fields are taken by name; format v1 manifests have no `content` (data), no
//!   `equality_ids` and none of the format v3 fields, and their entries' sequence numbers are
//!   0 (the crate's `ManifestEntryV1`); a v1 entry's `snapshot_id` is required;
//! - counts (`column_sizes`, `value_counts`, …) skip negative values; bounds are decoded with
//!   the type of the field (the schema's or a reserved metadata column's) and skipped for a
//!   field neither has; a bound on a non-primitive field is an error;
//! - partition values are converted as the crate's `RawLiteral` converts them (an int read as
//!   a long or a date, a long as an int when it fits, a date, a time or a timestamp, a float
//!   as a double, a double as a float without precision loss, bytes as binary, fixed, a
//!   16-byte UUID or a decimal of exactly its precision's width); a partition field the file
//!   doesn't have is null;
//! - the container is read as `apache_avro::Reader` reads it: magic, metadata, sync marker,
//!   then blocks until the input ends or a block has no records, each block's marker equal to
//!   the header's, decompressed by its codec.
//!
//! Where the crate could not read a manifest (a partition value of a type its literals can't
//! take, such as a UUID written as an Avro `uuid`), this reads it. Debug builds read every
//! manifest both ways and assert that the entries are equal wherever the crate reads it
//! (every test does), so a difference in the rules shows up in the test suite.
//!
//! Manifests with key metadata (encrypted) are not read here: the caller hands them to the
//! crate.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};

use apache_avro::headers::HeaderBuilder;
use apache_avro::types::Value;
use apache_avro::{Codec, GenericSingleObjectReader, Schema as AvroSchema};
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, Datum, FormatVersion, Literal, ManifestEntry,
    ManifestMetadata, ManifestStatus, PrimitiveType, Schema, Struct, StructType, Type,
};

use crate::error::{Error, Result};
use crate::parsed_cache::ParsedCache;

/// Distinct headers kept (least recently inserted dropped first).
const MAX_HEADERS: usize = 64;
/// Bytes of header keys kept at most (the metadata of a wide table's schema is large).
const MAX_KEY_BYTES: usize = 8 << 20;

/// A header's parsed parts.
struct Parsed {
    /// The writer schema with its names resolved once.
    reader: Arc<GenericSingleObjectReader>,
    /// The manifest's Iceberg metadata (schema, partition spec, format version, content).
    metadata: ManifestMetadata,
    /// The partition spec's type under that schema.
    partition_type: StructType,
}

/// A header builder for [`GenericSingleObjectReader`] that expects no header: container
/// records are plain datums.
struct NoHeader;

impl HeaderBuilder for NoHeader {
    fn build_header(&self) -> Vec<u8> {
        Vec::new()
    }
}

/// Parsed headers, keyed by all of a header's metadata.
fn headers() -> &'static Mutex<ParsedCache<Parsed>> {
    static CACHE: OnceLock<Mutex<ParsedCache<Parsed>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(ParsedCache::new(MAX_HEADERS, MAX_KEY_BYTES)))
}

/// Readers of writer schemas, keyed by the `avro.schema` JSON: the tables of a warehouse
/// differ in their Iceberg schemas (the header's other metadata) far more often than in
/// their manifests' Avro schema, which changes only with the partition type.
fn readers() -> &'static Mutex<ParsedCache<GenericSingleObjectReader>> {
    static CACHE: OnceLock<Mutex<ParsedCache<GenericSingleObjectReader>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(ParsedCache::new(MAX_HEADERS, MAX_KEY_BYTES)))
}

fn invalid(path: &str, what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("manifest {path}: {what}"))
}

/// A zig-zag varint long, as Avro writes block counts and sizes. `None` at the end of input.
fn read_long(bytes: &[u8], pos: &mut usize) -> std::result::Result<Option<i64>, &'static str> {
    let mut value: u64 = 0;
    let mut shift = 0;
    let start = *pos;
    loop {
        let Some(&b) = bytes.get(*pos) else {
            return if *pos == start {
                Ok(None)
            } else {
                Err("the input ends inside a number")
            };
        };
        *pos += 1;
        if shift >= 64 {
            return Err("a number is longer than ten bytes");
        }
        value |= u64::from(b & 0x7F) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
    }
    Ok(Some(((value >> 1) as i64) ^ -((value & 1) as i64)))
}

/// The entries of the manifest whose bytes are `bytes` (read from `path`), sequence numbers
/// and snapshot ids as stored (not inherited from the manifest list).
pub(crate) fn read_entries(path: &str, bytes: &[u8]) -> Result<Vec<ManifestEntry>> {
    if bytes.len() < 4 || bytes[..4] != [b'O', b'b', b'j', 1] {
        return Err(invalid(path, "not an Avro object container (bad magic)"));
    }
    let mut rest = &bytes[4..];
    let meta =
        match apache_avro::from_avro_datum(&AvroSchema::map(AvroSchema::Bytes), &mut rest, None) {
            Ok(Value::Map(m)) => m,
            Ok(_) => return Err(invalid(path, "the Avro header holds no metadata map")),
            Err(e) => return Err(invalid(path, format!("the Avro header: {e}"))),
        };
    if rest.len() < 16 {
        return Err(invalid(path, "the Avro header ends before its sync marker"));
    }
    let sync: [u8; 16] = rest[..16].try_into().expect("16 bytes");
    let mut pos = bytes.len() - rest.len() + 16;
    let mut raw: Vec<(&str, &[u8])> = Vec::with_capacity(meta.len());
    for (k, v) in &meta {
        match v {
            Value::Bytes(b) => raw.push((k.as_str(), b.as_slice())),
            _ => return Err(invalid(path, format!("Avro metadata `{k}` is not bytes"))),
        }
    }
    raw.sort_unstable();
    let codec = match raw.iter().find(|(k, _)| *k == "avro.codec") {
        None => Codec::Null,
        Some((_, v)) => {
            let name =
                std::str::from_utf8(v).map_err(|_| invalid(path, "avro.codec is not UTF-8"))?;
            Codec::from_str(name)
                .map_err(|_| invalid(path, format!("unsupported Avro codec `{name}`")))?
        }
    };
    let parsed = parsed_header(path, &raw)?;

    let mut entries = Vec::new();
    let mut block = Vec::new();
    loop {
        let count = match read_long(bytes, &mut pos).map_err(|e| invalid(path, e))? {
            None => break,
            Some(c) => c,
        };
        let size = read_long(bytes, &mut pos)
            .map_err(|e| invalid(path, e))?
            .ok_or_else(|| invalid(path, "the input ends inside a block header"))?;
        let size = usize::try_from(size).map_err(|_| invalid(path, "a negative block size"))?;
        let end = pos
            .checked_add(size)
            .filter(|&e| e + 16 <= bytes.len())
            .ok_or_else(|| invalid(path, "a block runs past the end of the file"))?;
        block.clear();
        block.extend_from_slice(&bytes[pos..end]);
        if bytes[end..end + 16] != sync {
            return Err(invalid(
                path,
                "a block's sync marker differs from the header's",
            ));
        }
        pos = end + 16;
        codec
            .decompress(&mut block)
            .map_err(|e| invalid(path, format!("decompressing a block: {e}")))?;
        // apache_avro's reader ends at a block of no records; so does this.
        if count <= 0 {
            break;
        }
        let mut data: &[u8] = &block;
        for _ in 0..count {
            let before = data.len();
            let value = parsed
                .reader
                .read_value(&mut data)
                .map_err(|e| invalid(path, format!("decoding an entry: {e}")))?;
            if before != 0 && before == data.len() {
                return Err(invalid(path, "an entry decoded from no bytes"));
            }
            entries.push(entry(path, &parsed, value)?);
        }
    }
    Ok(entries)
}

/// The header's parsed parts, from the cache or parsed now. `raw` is the header's metadata,
/// sorted by key: the cache key is all of it.
fn parsed_header(path: &str, raw: &[(&str, &[u8])]) -> Result<Arc<Parsed>> {
    let mut key = Vec::new();
    for (k, v) in raw {
        key.extend_from_slice(&(k.len() as u64).to_le_bytes());
        key.extend_from_slice(k.as_bytes());
        key.extend_from_slice(&(v.len() as u64).to_le_bytes());
        key.extend_from_slice(v);
    }
    if let Some(p) = headers().lock().expect("lock").get(&key) {
        return Ok(p);
    }
    let schema_json = raw
        .iter()
        .find(|(k, _)| *k == "avro.schema")
        .map(|(_, v)| *v)
        .ok_or_else(|| invalid(path, "the Avro header has no avro.schema"))?;
    let reader = schema_reader(path, schema_json)?;
    let user: HashMap<String, Vec<u8>> = raw
        .iter()
        .filter(|(k, _)| !k.starts_with("avro."))
        .map(|(k, v)| (k.to_string(), v.to_vec()))
        .collect();
    let metadata = ManifestMetadata::parse(&user)?;
    let partition_type = metadata.partition_spec.partition_type(&metadata.schema)?;
    let parsed = Arc::new(Parsed {
        reader,
        metadata,
        partition_type,
    });
    headers().lock().expect("lock").insert(key, parsed.clone());
    Ok(parsed)
}

/// The reader of the writer schema `schema_json`, from the cache or parsed now.
fn schema_reader(path: &str, schema_json: &[u8]) -> Result<Arc<GenericSingleObjectReader>> {
    if let Some(r) = readers().lock().expect("lock").get(schema_json) {
        return Ok(r);
    }
    let json: serde_json::Value = serde_json::from_slice(schema_json)
        .map_err(|e| invalid(path, format!("avro.schema is not JSON: {e}")))?;
    let writer =
        AvroSchema::parse(&json).map_err(|e| invalid(path, format!("avro.schema: {e}")))?;
    let reader = Arc::new(
        GenericSingleObjectReader::new_with_header_builder(writer, NoHeader)
            .map_err(|e| invalid(path, format!("avro.schema: {e}")))?,
    );
    readers()
        .lock()
        .expect("lock")
        .insert(schema_json.to_vec(), reader.clone());
    Ok(reader)
}

/// A record's field by name, a union's value unwrapped; `None` when absent or null.
fn field<'a>(record: &'a [(String, Value)], name: &str) -> Option<&'a Value> {
    let v = record.iter().find(|(n, _)| n == name).map(|(_, v)| v)?;
    let v = match v {
        Value::Union(_, inner) => inner.as_ref(),
        other => other,
    };
    (!matches!(v, Value::Null)).then_some(v)
}

fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(i64::from(*i)),
        Value::Long(l) => Some(*l),
        _ => None,
    }
}

fn as_i32(v: &Value) -> Option<i32> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

/// An optional array field of `df`, each element converted by `conv`; `bad(name)` when the
/// field or an element has another type.
fn list_opt<T>(
    df: &[(String, Value)],
    name: &str,
    conv: fn(&Value) -> Option<T>,
    bad: &dyn Fn(&str) -> Error,
) -> Result<Option<Vec<T>>> {
    match field(df, name) {
        None => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| conv(v).ok_or_else(|| bad(name)))
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(_) => Err(bad(name)),
    }
}

fn bytes_of(v: &Value) -> Option<&[u8]> {
    match v {
        Value::Bytes(b) | Value::Fixed(_, b) => Some(b),
        _ => None,
    }
}

fn items(v: Option<&Value>) -> Option<&[Value]> {
    match v {
        Some(Value::Array(a)) => Some(a),
        _ => None,
    }
}

/// One decoded record as the entry the iceberg crate would make of it.
fn entry(path: &str, parsed: &Parsed, value: Value) -> Result<ManifestEntry> {
    let Value::Record(rec) = value else {
        return Err(invalid(path, "an entry is not a record"));
    };
    let v1 = parsed.metadata.format_version == FormatVersion::V1;
    let req = |name: &str| {
        field(&rec, name).ok_or_else(|| invalid(path, format!("an entry has no {name}")))
    };
    let status =
        as_i32(req("status")?).ok_or_else(|| invalid(path, "an entry's status is not an int"))?;
    let status = ManifestStatus::try_from(status)?;
    let long_opt = |name: &str| -> Result<Option<i64>> {
        match field(&rec, name) {
            None => Ok(None),
            Some(v) => as_i64(v)
                .map(Some)
                .ok_or_else(|| invalid(path, format!("an entry's {name} is not a long"))),
        }
    };
    let (snapshot_id, sequence_number, file_sequence_number) = if v1 {
        let id = as_i64(req("snapshot_id")?)
            .ok_or_else(|| invalid(path, "an entry's snapshot_id is not a long"))?;
        (Some(id), Some(0), Some(0))
    } else {
        (
            long_opt("snapshot_id")?,
            long_opt("sequence_number")?,
            long_opt("file_sequence_number")?,
        )
    };
    let Some(Value::Record(df)) = field(&rec, "data_file") else {
        return Err(invalid(path, "an entry has no data_file record"));
    };
    Ok(ManifestEntry {
        status,
        snapshot_id,
        sequence_number,
        file_sequence_number,
        data_file: data_file(path, parsed, df, v1)?,
    })
}

fn data_file(
    path: &str,
    parsed: &Parsed,
    df: &[(String, Value)],
    v1: bool,
) -> Result<iceberg::spec::DataFile> {
    let bad = |name: &str| invalid(path, format!("a data_file's {name} has the wrong type"));
    let req = |name: &str| {
        field(df, name).ok_or_else(|| invalid(path, format!("a data_file has no {name}")))
    };
    let long_opt = |name: &str| -> Result<Option<i64>> {
        match field(df, name) {
            None => Ok(None),
            Some(v) => as_i64(v).map(Some).ok_or_else(|| bad(name)),
        }
    };
    let content = if v1 {
        DataContentType::Data
    } else {
        match field(df, "content") {
            None => DataContentType::Data,
            Some(v) => DataContentType::try_from(as_i32(v).ok_or_else(|| bad("content"))?)?,
        }
    };
    let file_path = match req("file_path")? {
        Value::String(s) => s.clone(),
        _ => return Err(bad("file_path")),
    };
    let file_format = match req("file_format")? {
        Value::String(s) => DataFileFormat::from_str(s)?,
        _ => return Err(bad("file_format")),
    };
    let count = |name: &str| -> Result<u64> {
        u64::try_from(as_i64(req(name)?).ok_or_else(|| bad(name))?)
            .map_err(|_| invalid(path, format!("a data_file's {name} is negative")))
    };
    let record_count = count("record_count")?;
    let file_size_in_bytes = count("file_size_in_bytes")?;
    // A map the spec keys by field id, written as an array of `{key, value}` records.
    let pairs = |name: &str| -> Result<Vec<(i32, &Value)>> {
        let Some(list) = items(field(df, name)) else {
            return match field(df, name) {
                None => Ok(Vec::new()),
                Some(_) => Err(bad(name)),
            };
        };
        list.iter()
            .map(|item| {
                let Value::Record(kv) = item else {
                    return Err(bad(name));
                };
                let k = field(kv, "key").and_then(as_i32).ok_or_else(|| bad(name))?;
                Ok((k, field(kv, "value").ok_or_else(|| bad(name))?))
            })
            .collect()
    };
    let counts = |name: &str| -> Result<HashMap<i32, u64>> {
        let mut m = HashMap::new();
        for (k, v) in pairs(name)? {
            let v = as_i64(v).ok_or_else(|| bad(name))?;
            // Counts are never negative: a negative one is skipped, as the crate does.
            if let Ok(v) = u64::try_from(v) {
                m.insert(k, v);
            }
        }
        Ok(m)
    };
    let schema: &Schema = &parsed.metadata.schema;
    let bounds = |name: &str| -> Result<HashMap<i32, Datum>> {
        let mut m = HashMap::new();
        for (k, v) in pairs(name)? {
            let v = bytes_of(v).ok_or_else(|| bad(name))?;
            let found = schema
                .field_by_id(k)
                .or_else(|| iceberg::metadata_columns::get_metadata_field(k).ok());
            // A bound of a field neither the schema nor the reserved columns know (a dropped
            // column) is skipped, as the crate does.
            let Some(f) = found else { continue };
            let t = f.field_type.as_primitive_type().ok_or_else(|| {
                invalid(path, format!("field {} is not a primitive type", f.name))
            })?;
            m.insert(k, Datum::try_from_bytes(v, t.clone())?);
        }
        Ok(m)
    };
    let partition = match field(df, "partition") {
        None => Struct::empty(),
        Some(Value::Record(p)) => partition(path, &parsed.partition_type, p)?,
        Some(_) => return Err(bad("partition")),
    };
    let mut b = DataFileBuilder::default();
    b.content(content)
        .file_path(file_path)
        .file_format(file_format)
        .partition(partition)
        .record_count(record_count)
        .file_size_in_bytes(file_size_in_bytes)
        .column_sizes(counts("column_sizes")?)
        .value_counts(counts("value_counts")?)
        .null_value_counts(counts("null_value_counts")?)
        .nan_value_counts(counts("nan_value_counts")?)
        .lower_bounds(bounds("lower_bounds")?)
        .upper_bounds(bounds("upper_bounds")?)
        .key_metadata(match field(df, "key_metadata") {
            None => None,
            Some(v) => Some(bytes_of(v).ok_or_else(|| bad("key_metadata"))?.to_vec()),
        })
        .split_offsets(list_opt(df, "split_offsets", as_i64, &bad)?)
        .partition_spec_id(parsed.metadata.partition_spec.spec_id());
    if !v1 {
        b.equality_ids(list_opt(df, "equality_ids", as_i32, &bad)?)
            .first_row_id(long_opt("first_row_id")?)
            .referenced_data_file(match field(df, "referenced_data_file") {
                None => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return Err(bad("referenced_data_file")),
            })
            .content_offset(long_opt("content_offset")?)
            .content_size_in_bytes(long_opt("content_size_in_bytes")?);
    }
    match field(df, "sort_order_id") {
        None => {}
        Some(v) => {
            b.sort_order_id(as_i32(v).ok_or_else(|| bad("sort_order_id"))?);
        }
    }
    b.build()
        .map_err(|e| invalid(path, format!("a data_file: {e}")))
}

/// A partition record as the partition type's struct, field by field by name (a field the
/// record lacks is null).
fn partition(path: &str, ty: &StructType, rec: &[(String, Value)]) -> Result<Struct> {
    let mut values = Vec::with_capacity(ty.fields().len());
    for f in ty.fields() {
        let v = match field(rec, &f.name) {
            None => None,
            Some(v) => Some(literal(v, &f.field_type).ok_or_else(|| {
                invalid(
                    path,
                    format!(
                        "partition value of `{}` can't be read as {}",
                        f.name, f.field_type
                    ),
                )
            })?),
        };
        values.push(v);
    }
    Ok(Struct::from_iter(values))
}

/// An Avro value as a literal of `ty`, as the crate's `RawLiteral` converts it (`None` where
/// it can't).
fn literal(v: &Value, ty: &Type) -> Option<Literal> {
    let Type::Primitive(p) = ty else { return None };
    let int = match v {
        Value::Int(i) | Value::Date(i) | Value::TimeMillis(i) => Some(i64::from(*i)),
        Value::Long(l)
        | Value::TimeMicros(l)
        | Value::TimestampMillis(l)
        | Value::TimestampMicros(l)
        | Value::TimestampNanos(l)
        | Value::LocalTimestampMillis(l)
        | Value::LocalTimestampMicros(l)
        | Value::LocalTimestampNanos(l) => Some(*l),
        _ => None,
    };
    let narrow = matches!(v, Value::Int(_) | Value::Date(_) | Value::TimeMillis(_));
    if let Some(i) = int {
        return match p {
            PrimitiveType::Int => i32::try_from(i).ok().map(Literal::int),
            PrimitiveType::Date => i32::try_from(i).ok().map(Literal::date),
            PrimitiveType::Long => Some(Literal::long(i)),
            // An int is read as an int, a long or a date only.
            PrimitiveType::Time if !narrow => Some(Literal::time(i)),
            PrimitiveType::Timestamp if !narrow => Some(Literal::timestamp(i)),
            PrimitiveType::Timestamptz if !narrow => Some(Literal::timestamptz(i)),
            _ => None,
        };
    }
    match (v, p) {
        (Value::Boolean(b), _) => Some(Literal::bool(*b)),
        (Value::Float(f), PrimitiveType::Float) => Some(Literal::float(*f)),
        (Value::Float(f), PrimitiveType::Double) => Some(Literal::double(f64::from(*f))),
        (Value::Double(d), PrimitiveType::Double) => Some(Literal::double(*d)),
        (Value::Double(d), PrimitiveType::Float) => {
            let f = *d as f32;
            if f.is_finite() && (f64::from(f) - d).abs() > f64::from(f32::EPSILON) {
                None
            } else {
                Some(Literal::float(f))
            }
        }
        (Value::String(s), PrimitiveType::String) => Some(Literal::string(s.clone())),
        (Value::Uuid(u), PrimitiveType::Uuid) => Some(Literal::uuid(*u)),
        (Value::Decimal(d), PrimitiveType::Decimal { .. }) => {
            let b: Vec<u8> = d.try_into().ok()?;
            decimal(&b, p)
        }
        (v, _) => {
            let b = bytes_of(v)?;
            match p {
                PrimitiveType::Binary => Some(Literal::binary(b.to_vec())),
                PrimitiveType::Fixed(n) => {
                    (b.len() as u64 == *n).then(|| Literal::fixed(b.to_vec()))
                }
                PrimitiveType::Uuid => {
                    let a: [u8; 16] = b.try_into().ok()?;
                    Some(Literal::uuid(uuid::Uuid::from_bytes(a)))
                }
                PrimitiveType::Decimal { .. } => decimal(b, p),
                _ => None,
            }
        }
    }
}

/// A decimal's big-endian two's-complement bytes, exactly as wide as its precision needs.
fn decimal(b: &[u8], p: &PrimitiveType) -> Option<Literal> {
    let PrimitiveType::Decimal { precision, .. } = p else {
        return None;
    };
    let width = Type::decimal_required_bytes(*precision).ok()? as usize;
    if b.len() != width || width > 16 {
        return None;
    }
    let fill = if b.first().is_some_and(|x| x & 0x80 != 0) {
        0xFF
    } else {
        0
    };
    let mut padded = [fill; 16];
    padded[16 - width..].copy_from_slice(b);
    Some(Literal::decimal(i128::from_be_bytes(padded)))
}
