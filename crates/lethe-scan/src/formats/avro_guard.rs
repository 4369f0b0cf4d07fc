//! A checking reader of Avro object containers in front of `apache-avro`: it parses the
//! container itself (header, then block by block), decompresses each block and walks it
//! against the writer schema, and only then hands the block's records to `apache-avro` to
//! decode. It exists because `apache-avro` reserves memory for an array/map from the count
//! found in the data (up to 512M items), so a few crafted bytes could make it allocate tens
//! of gigabytes and abort the process, and a self-recursive schema could recurse without end.
//!
//! Guarantees, before a block reaches `apache-avro`: every length fits in the block; an array
//! or map count is at most the bytes left, unless its items can be empty (then at most
//! [`MAX_EMPTY_ITEMS`]); at most [`MAX_ITEMS`] items per block; nesting at most
//! [`MAX_DEPTH`]; decompressed blocks at most [`MAX_BLOCK`] bytes; header metadata bounded.
//!
//! What `apache_avro::Reader` checked is checked here as it did: the magic; metadata keys
//! are UTF-8; the writer schema parses (`Schema::parse`) and its names resolve; every block's
//! sync marker equals the header's; blocks decompress as `apache-avro` decompresses them
//! (deflate: raw inflate by `miniz_oxide` to the stream's end; snappy: with its big-endian
//! CRC-32 of the decompressed bytes; zstandard); a record that decodes from no bytes while
//! its block has bytes left is an error. User metadata are the keys not starting with
//! `avro.`. Records are decoded with the parsed writer schema and its resolved names, as the
//! `Reader` decoded them; bytes after a block's last record are ignored, as there.
//!
//! The parsed writer schema (checker's form and `apache-avro`'s) is cached by the exact bytes
//! of `avro.schema` ([`super::avro_cache`]): the files of a warehouse share a few.
//!
//! Unlike `apache_avro::Reader` (and like the Avro specification and its Java reader): a
//! block of zero records does not end the file (the `Reader` stopped there, leaving later
//! blocks unread), and input that ends inside a block's record count or size is an error
//! (the `Reader` took it as a clean end).
//!
//! Does not: check values against logical types (apache-avro does), or support codecs other
//! than null, deflate, snappy and zstandard (apache-avro as built here supports no others).

use std::collections::HashMap;
use std::io::{self, Read};
use std::sync::Arc;

use apache_avro::GenericSingleObjectReader;
use apache_avro::headers::HeaderBuilder;
use apache_avro::types::Value;
use serde_json::Value as Json;

use super::avro_cache::{self, Shared};

/// Largest block, compressed or decompressed.
pub(crate) const MAX_BLOCK: u64 = 256 << 20;
/// Most items of possibly-empty type in one array block.
pub(crate) const MAX_EMPTY_ITEMS: u64 = 1 << 20;
/// Most array/map items (and records) in one container block.
pub(crate) const MAX_ITEMS: u64 = 16 << 20;
/// Deepest nesting of a value.
pub(crate) const MAX_DEPTH: usize = 64;
const MAX_META_ENTRIES: i64 = 10_000;
const MAX_META_BYTES: u64 = 64 << 20;

#[derive(Clone, Debug)]
enum Mini {
    Null,
    Bool,
    Varint,
    Float,
    Double,
    Bytes,
    Fixed(usize),
    Array(Box<Mini>),
    Map(Box<Mini>),
    Union(Vec<Mini>),
    Record(Vec<Mini>),
    Ref(String),
}

#[derive(Clone, Copy)]
enum Codec {
    Null,
    Deflate,
    Snappy,
    Zstd,
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// A container's writer schema, parsed: the checker's form and `apache-avro`'s decoder.
pub(crate) struct WriterSchema {
    schema: Mini,
    names: HashMap<String, Mini>,
    decoder: GenericSingleObjectReader,
}

/// No single-object header: [`GenericSingleObjectReader`] then decodes bare records with the
/// schema whose names it resolved once.
struct NoHeader;

impl HeaderBuilder for NoHeader {
    fn build_header(&self) -> Vec<u8> {
        Vec::new()
    }
}

impl WriterSchema {
    /// Parse `avro.schema`: checker's form first (its errors first), then, if `codec` is
    /// supported, `apache-avro`'s, as the header was checked before.
    fn parse(bytes: &[u8], codec: &Result<Codec, String>) -> Result<Self, String> {
        let json: Json = serde_json::from_slice(bytes)
            .map_err(|e| format!("Avro header: avro.schema: {}", super::json::describe(&e)))?;
        check_names(&json, 0)?;
        let mut names = HashMap::new();
        let schema = parse(&json, "", &mut names, 0)?;
        if let Err(e) = codec {
            return Err(e.clone());
        }
        let parsed =
            apache_avro::Schema::parse(&json).map_err(|e| format!("invalid Avro header: {e}"))?;
        let decoder = GenericSingleObjectReader::new_with_header_builder(parsed, NoHeader)
            .map_err(|e| format!("invalid Avro header: {e}"))?;
        Ok(WriterSchema {
            schema,
            names,
            decoder,
        })
    }
}

/// One checked, decompressed block: its record count and bytes.
pub(crate) struct Block {
    /// Records in the block (each checked against the writer schema).
    pub(crate) count: u64,
    /// The block's decompressed bytes.
    pub(crate) data: Vec<u8>,
}

/// The checking reader. Construct with [`Guarded::with_cache`], then take blocks with
/// [`Guarded::next_block`] and decode their records with [`Guarded::decode`].
pub(crate) struct Guarded<R> {
    inner: R,
    schema: Arc<WriterSchema>,
    user_metadata: HashMap<String, Vec<u8>>,
    codec: Codec,
    sync: [u8; 16],
    block: u64,
    done: bool,
}

impl<R: Read> Guarded<R> {
    /// Read and check the header; the writer schema is taken from or added to `cache`.
    pub(crate) fn with_cache(mut inner: R, cache: &Shared<WriterSchema>) -> Result<Self, String> {
        let mut magic = [0u8; 4];
        inner
            .read_exact(&mut magic)
            .map_err(|e| format!("Avro header: {e}"))?;
        if &magic != b"Obj\x01" {
            return Err("not an Avro object container".into());
        }
        let mut meta: HashMap<String, Vec<u8>> = HashMap::new();
        let mut total = 0u64;
        loop {
            let count = read_long(&mut inner).map_err(|e| format!("Avro header: {e}"))?;
            if count == 0 {
                break;
            }
            let count = if count < 0 {
                read_long(&mut inner).map_err(|e| format!("Avro header: {e}"))?;
                count
                    .checked_neg()
                    .ok_or("Avro header: bad metadata count")?
            } else {
                count
            };
            if count > MAX_META_ENTRIES || meta.len() as i64 + count > MAX_META_ENTRIES {
                return Err(format!(
                    "Avro header: more than {MAX_META_ENTRIES} metadata entries"
                ));
            }
            for _ in 0..count {
                let key =
                    read_bytes(&mut inner, &mut total).map_err(|e| format!("Avro header: {e}"))?;
                let value =
                    read_bytes(&mut inner, &mut total).map_err(|e| format!("Avro header: {e}"))?;
                let key = String::from_utf8(key)
                    .map_err(|_| "Avro header: a metadata key is not UTF-8".to_string())?;
                meta.insert(key, value);
            }
        }
        let mut sync = [0u8; 16];
        inner
            .read_exact(&mut sync)
            .map_err(|e| format!("Avro header: sync marker: {e}"))?;
        let codec = match meta.get("avro.codec").map(|c| c.as_slice()) {
            None | Some(b"null") => Ok(Codec::Null),
            Some(b"deflate") => Ok(Codec::Deflate),
            Some(b"snappy") => Ok(Codec::Snappy),
            Some(b"zstandard") => Ok(Codec::Zstd),
            Some(_) => Err("Avro header: unsupported codec".to_string()),
        };
        let schema_json = meta
            .get("avro.schema")
            .ok_or("Avro header: no avro.schema")?;
        let schema = avro_cache::get_or_parse(cache, schema_json, || {
            WriterSchema::parse(schema_json, &codec)
        })?;
        let codec = codec?;
        meta.retain(|k, _| !k.starts_with("avro."));
        Ok(Guarded {
            inner,
            schema,
            user_metadata: meta,
            codec,
            sync,
            block: 0,
            done: false,
        })
    }

    /// The header's metadata except the `avro.*` keys.
    pub(crate) fn user_metadata(&self) -> &HashMap<String, Vec<u8>> {
        &self.user_metadata
    }

    /// Decode the next record of a block's bytes (advancing `data`) with the writer schema.
    pub(crate) fn decode(&self, data: &mut &[u8]) -> Result<Value, apache_avro::Error> {
        self.schema.decoder.read_value(data)
    }

    /// Read, check and decompress the next block; `None` at a clean end of input.
    pub(crate) fn next_block(&mut self) -> io::Result<Option<Block>> {
        if self.done {
            return Ok(None);
        }
        let mut first = [0u8; 1];
        loop {
            match self.inner.read(&mut first) {
                Ok(0) => {
                    self.done = true;
                    return Ok(None);
                }
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let block = self.block;
        let truncated = |e: io::Error| match e.kind() {
            io::ErrorKind::UnexpectedEof => bad(format!("Avro block {block}: truncated")),
            _ => e,
        };
        let count = read_long(&mut (&first[..]).chain(&mut self.inner)).map_err(truncated)?;
        let size = read_long(&mut self.inner).map_err(truncated)?;
        if count < 0 || size < 0 {
            return Err(bad(format!("Avro block {block}: negative count or size")));
        }
        let (count, size) = (count as u64, size as u64);
        if size > MAX_BLOCK {
            return Err(bad(format!(
                "Avro block {block}: {size} bytes is larger than {MAX_BLOCK}"
            )));
        }
        if count > MAX_ITEMS {
            return Err(bad(format!(
                "Avro block {block}: more than {MAX_ITEMS} records"
            )));
        }
        let mut payload = Vec::new();
        (&mut self.inner).take(size).read_to_end(&mut payload)?;
        if payload.len() as u64 != size {
            return Err(bad(format!("Avro block {block}: truncated")));
        }
        let mut sync = [0u8; 16];
        self.inner
            .read_exact(&mut sync)
            .map_err(|e| bad(format!("Avro block {block}: sync marker: {e}")))?;
        if sync != self.sync {
            return Err(bad(format!(
                "Avro block {block}: sync marker does not match the header"
            )));
        }
        let data = match self.codec {
            Codec::Null => payload,
            codec => {
                decompress(codec, &payload).map_err(|e| bad(format!("Avro block {block}: {e}")))?
            }
        };
        let (schema, names) = (&self.schema.schema, &self.schema.names);
        let mut pos = 0usize;
        let mut items = 0u64;
        for r in 0..count {
            if data.len() == pos && !may_be_empty(schema, names, 0) {
                return Err(bad(format!(
                    "Avro block {block}: record {r} of {count} is missing"
                )));
            }
            skip(schema, names, &data, &mut pos, 0, &mut items)
                .map_err(|e| bad(format!("Avro block {block}, record {r}: {e}")))?;
        }
        self.block += 1;
        Ok(Some(Block { count, data }))
    }
}

/// Walk one value of type `s` in `d` from `pos`, checking every length and count.
fn skip(
    s: &Mini,
    names: &HashMap<String, Mini>,
    d: &[u8],
    pos: &mut usize,
    depth: usize,
    items: &mut u64,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("nesting deeper than {MAX_DEPTH}"));
    }
    let left = |pos: usize| d.len().saturating_sub(pos);
    match s {
        Mini::Null => {}
        Mini::Bool => take(d, pos, 1)?,
        Mini::Varint => {
            varint(d, pos)?;
        }
        Mini::Float => take(d, pos, 4)?,
        Mini::Double => take(d, pos, 8)?,
        Mini::Bytes => {
            let n = varint(d, pos)?;
            let n = usize::try_from(n).map_err(|_| "negative length".to_string())?;
            take(d, pos, n)?;
        }
        Mini::Fixed(n) => take(d, pos, *n)?,
        Mini::Union(branches) => {
            let i = varint(d, pos)?;
            let b = usize::try_from(i)
                .ok()
                .and_then(|i| branches.get(i))
                .ok_or("union index out of range")?;
            skip(b, names, d, pos, depth + 1, items)?;
        }
        Mini::Record(fields) => {
            for f in fields {
                skip(f, names, d, pos, depth + 1, items)?;
            }
        }
        Mini::Ref(name) => {
            let t = names.get(name).ok_or("reference to an unknown type")?;
            skip(t, names, d, pos, depth + 1, items)?;
        }
        Mini::Array(item) | Mini::Map(item) => {
            let is_map = matches!(s, Mini::Map(_));
            let empty = !is_map && may_be_empty(item, names, 0);
            loop {
                let count = varint(d, pos)?;
                if count == 0 {
                    break;
                }
                let count = if count < 0 {
                    varint(d, pos)?;
                    count.checked_neg().ok_or("bad item count")?
                } else {
                    count
                } as u64;
                if empty {
                    if count > MAX_EMPTY_ITEMS {
                        return Err(format!("more than {MAX_EMPTY_ITEMS} empty items"));
                    }
                } else if count > left(*pos) as u64 {
                    return Err("item count larger than the bytes left".into());
                }
                *items += count;
                if *items > MAX_ITEMS {
                    return Err(format!("more than {MAX_ITEMS} items"));
                }
                for _ in 0..count {
                    if is_map {
                        skip(&Mini::Bytes, names, d, pos, depth + 1, items)?;
                    }
                    skip(item, names, d, pos, depth + 1, items)?;
                }
            }
        }
    }
    Ok(())
}

/// Can a value of this type be encoded in zero bytes?
fn may_be_empty(s: &Mini, names: &HashMap<String, Mini>, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return true;
    }
    match s {
        Mini::Null => true,
        Mini::Fixed(0) => true,
        Mini::Record(fields) => fields.iter().all(|f| may_be_empty(f, names, depth + 1)),
        Mini::Ref(n) => names
            .get(n)
            .is_none_or(|t| may_be_empty(t, names, depth + 1)),
        _ => false,
    }
}

fn take(d: &[u8], pos: &mut usize, n: usize) -> Result<(), String> {
    match pos.checked_add(n) {
        Some(end) if end <= d.len() => {
            *pos = end;
            Ok(())
        }
        _ => Err("value runs past the end of its block".into()),
    }
}

/// Zigzag varint from a slice.
fn varint(d: &[u8], pos: &mut usize) -> Result<i64, String> {
    let mut v = 0u64;
    for j in 0..10 {
        let b = *d.get(*pos).ok_or("value runs past the end of its block")?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << (j * 7);
        if b & 0x80 == 0 {
            return Ok(((v >> 1) as i64) ^ -((v & 1) as i64));
        }
    }
    Err("varint longer than 10 bytes".into())
}

/// Zigzag varint from a stream.
fn read_long(r: &mut dyn Read) -> io::Result<i64> {
    let mut v = 0u64;
    for j in 0..10 {
        let mut b = [0u8; 1];
        r.read_exact(&mut b)?;
        v |= u64::from(b[0] & 0x7f) << (j * 7);
        if b[0] & 0x80 == 0 {
            return Ok(((v >> 1) as i64) ^ -((v & 1) as i64));
        }
    }
    Err(bad("varint longer than 10 bytes"))
}

fn read_bytes(r: &mut dyn Read, total: &mut u64) -> io::Result<Vec<u8>> {
    let n = read_long(r)?;
    let n = u64::try_from(n).map_err(|_| bad("negative length"))?;
    *total += n;
    if *total > MAX_META_BYTES {
        return Err(bad(format!("metadata larger than {MAX_META_BYTES} bytes")));
    }
    let mut v = Vec::new();
    r.take(n).read_to_end(&mut v)?;
    if v.len() as u64 != n {
        return Err(bad("truncated"));
    }
    Ok(v)
}

/// Decompress a block as `apache-avro` does, with the output bounded by [`MAX_BLOCK`].
fn decompress(codec: Codec, raw: &[u8]) -> Result<Vec<u8>, String> {
    let too_large = || format!("decompressed block larger than {MAX_BLOCK} bytes");
    match codec {
        Codec::Null => Ok(raw.to_vec()),
        // apache-avro: `miniz_oxide::inflate::decompress_to_vec` (raw deflate, to the end of
        // the stream).
        Codec::Deflate => {
            use miniz_oxide::inflate::{TINFLStatus, decompress_to_vec_with_limit};
            decompress_to_vec_with_limit(raw, MAX_BLOCK as usize).map_err(|e| match e.status {
                TINFLStatus::HasMoreOutput => too_large(),
                s => format!("deflate: {s:?}"),
            })
        }
        Codec::Zstd => {
            let mut d = zstd::stream::read::Decoder::new(raw).map_err(|e| format!("zstd: {e}"))?;
            let mut v = Vec::new();
            (&mut d)
                .take(MAX_BLOCK + 1)
                .read_to_end(&mut v)
                .map_err(|e| format!("decompression: {e}"))?;
            if v.len() as u64 > MAX_BLOCK {
                return Err(too_large());
            }
            Ok(v)
        }
        Codec::Snappy => {
            let (body, crc) = raw
                .len()
                .checked_sub(4)
                .map(|n| raw.split_at(n))
                .ok_or("snappy block shorter than its checksum")?;
            let n = snap::raw::decompress_len(body).map_err(|e| format!("snappy: {e}"))?;
            if n as u64 > MAX_BLOCK {
                return Err(too_large());
            }
            let v = snap::raw::Decoder::new()
                .decompress_vec(body)
                .map_err(|e| format!("snappy: {e}"))?;
            let expected = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
            if crc32fast::hash(&v) != expected {
                return Err("snappy: the block's CRC-32 does not match its bytes".into());
            }
            Ok(v)
        }
    }
}

/// An Avro name or full name: dot-separated parts of `[A-Za-z_][A-Za-z0-9_]*`.
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|p| {
            let mut c = p.chars();
            c.next()
                .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
                && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// Check every name, type name, alias and namespace in a schema: `apache-avro` unwraps its
/// name parsing in several places and would panic on an invalid one.
fn check_names(j: &Json, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err("Avro schema nested too deep".into());
    }
    let name_ok = |v: Option<&Json>| match v {
        Some(Json::String(s)) if !valid_name(s) => Err("Avro schema: invalid name".to_string()),
        _ => Ok(()),
    };
    match j {
        Json::String(s) if !valid_name(s) => Err("Avro schema: invalid type name".into()),
        Json::Array(items) => items.iter().try_for_each(|i| check_names(i, depth + 1)),
        Json::Object(o) => {
            name_ok(o.get("name"))?;
            if let Some(Json::String(ns)) = o.get("namespace")
                && !ns.is_empty()
                && !valid_name(ns)
            {
                return Err("Avro schema: invalid namespace".into());
            }
            if let Some(Json::Array(aliases)) = o.get("aliases") {
                aliases.iter().try_for_each(|a| name_ok(Some(a)))?;
            }
            for key in ["type", "items", "values"] {
                if let Some(t) = o.get(key) {
                    check_names(t, depth + 1)?;
                }
            }
            if let Some(Json::Array(fields)) = o.get("fields") {
                for f in fields {
                    name_ok(f.get("name"))?;
                    if let Some(Json::Array(aliases)) = f.get("aliases") {
                        aliases.iter().try_for_each(|a| name_ok(Some(a)))?;
                    }
                    if let Some(t) = f.get("type") {
                        check_names(t, depth + 1)?;
                    }
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn primitive(s: &str) -> Option<Mini> {
    Some(match s {
        "null" => Mini::Null,
        "boolean" => Mini::Bool,
        "int" | "long" => Mini::Varint,
        "float" => Mini::Float,
        "double" => Mini::Double,
        "bytes" | "string" => Mini::Bytes,
        _ => return None,
    })
}

fn full_name(name: &str, ns: &str) -> String {
    if name.contains('.') || ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}.{name}")
    }
}

fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

fn register(names: &mut HashMap<String, Mini>, full: &str, t: Mini) {
    names.insert(short(full).to_string(), t.clone());
    names.insert(full.to_string(), t);
}

/// Parse a schema (JSON) into the checker's form. Named types are registered under their
/// full and short names; references resolve at walk time.
fn parse(
    j: &Json,
    ns: &str,
    names: &mut HashMap<String, Mini>,
    depth: usize,
) -> Result<Mini, String> {
    if depth > MAX_DEPTH {
        return Err("Avro schema nested too deep".into());
    }
    match j {
        Json::String(s) => Ok(primitive(s).unwrap_or_else(|| {
            let full = full_name(s, ns);
            if names.contains_key(&full) {
                Mini::Ref(full)
            } else {
                Mini::Ref(short(s).to_string())
            }
        })),
        Json::Array(branches) => Ok(Mini::Union(
            branches
                .iter()
                .map(|b| parse(b, ns, names, depth + 1))
                .collect::<Result<_, _>>()?,
        )),
        Json::Object(o) => {
            let name = o.get("name").and_then(Json::as_str).unwrap_or("");
            let own_ns = o.get("namespace").and_then(Json::as_str).unwrap_or(ns);
            let full = full_name(name, own_ns);
            let inner_ns = match full.rfind('.') {
                Some(i) => full[..i].to_string(),
                None => own_ns.to_string(),
            };
            match o.get("type") {
                Some(Json::String(t)) => match t.as_str() {
                    "record" | "error" => {
                        // Register a placeholder first so self-references resolve.
                        register(names, &full, Mini::Record(Vec::new()));
                        let fields = match o.get("fields") {
                            Some(Json::Array(f)) => f,
                            _ => return Err("Avro schema: record without fields".into()),
                        };
                        let mut out = Vec::new();
                        for f in fields {
                            let t = f.get("type").ok_or("Avro schema: field without type")?;
                            out.push(parse(t, &inner_ns, names, depth + 1)?);
                        }
                        let rec = Mini::Record(out);
                        register(names, &full, rec.clone());
                        Ok(rec)
                    }
                    "enum" => {
                        register(names, &full, Mini::Varint);
                        Ok(Mini::Varint)
                    }
                    "fixed" => {
                        let size = o
                            .get("size")
                            .and_then(Json::as_u64)
                            .ok_or("Avro schema: fixed without size")?;
                        let size = usize::try_from(size)
                            .map_err(|_| "Avro schema: fixed too large".to_string())?;
                        register(names, &full, Mini::Fixed(size));
                        Ok(Mini::Fixed(size))
                    }
                    "array" => {
                        let items = o.get("items").ok_or("Avro schema: array without items")?;
                        Ok(Mini::Array(Box::new(parse(items, ns, names, depth + 1)?)))
                    }
                    "map" => {
                        let values = o.get("values").ok_or("Avro schema: map without values")?;
                        Ok(Mini::Map(Box::new(parse(values, ns, names, depth + 1)?)))
                    }
                    other => parse(&Json::String(other.to_string()), ns, names, depth + 1),
                },
                Some(t) => parse(t, ns, names, depth + 1),
                None => Err("Avro schema: object without type".into()),
            }
        }
        _ => Err("Avro schema: not a type".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guard of `bytes`, with the process's writer schema cache.
    fn guard(bytes: &[u8]) -> Result<Guarded<&[u8]>, String> {
        Guarded::with_cache(bytes, &avro_cache::shared().writer)
    }

    /// Every block of `g` until the end or the first error.
    fn blocks(g: &mut Guarded<&[u8]>) -> io::Result<Vec<Block>> {
        let mut out = Vec::new();
        while let Some(b) = g.next_block()? {
            out.push(b);
        }
        Ok(out)
    }

    fn container(schema: &str, meta_count_raw: &[u8], block: &[u8]) -> Vec<u8> {
        let mut out = b"Obj\x01".to_vec();
        out.extend_from_slice(meta_count_raw);
        let key = b"avro.schema";
        out.push((key.len() * 2) as u8);
        out.extend_from_slice(key);
        let mut n = Vec::new();
        let mut v = (schema.len() as u64) << 1;
        loop {
            if v < 0x80 {
                n.push(v as u8);
                break;
            }
            n.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        out.extend_from_slice(&n);
        out.extend_from_slice(schema.as_bytes());
        out.push(0);
        out.extend_from_slice(&[7u8; 16]);
        out.extend_from_slice(block);
        out.extend_from_slice(&[7u8; 16]);
        out
    }

    #[test]
    fn huge_metadata_count_is_refused_before_allocation() {
        // Count 0x7fff_ffff entries in the header map (regression: fuzz OOM in apache-avro).
        let mut bytes = b"Obj\x01".to_vec();
        bytes.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]);
        assert!(guard(bytes.as_slice()).is_err());
    }

    #[test]
    fn huge_array_count_is_refused() {
        let schema = r#"{"type":"record","name":"r","fields":[{"name":"a","type":{"type":"array","items":"long"}}]}"#;
        // 1 record, 6 bytes: array count 2^30, then nothing.
        let block = [0x02, 0x0c, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00];
        let bytes = container(schema, &[0x02], &block);
        let mut g = guard(bytes.as_slice()).unwrap();
        assert!(blocks(&mut g).is_err());
    }

    #[test]
    fn self_recursive_record_is_bounded() {
        let schema = r#"{"type":"record","name":"r","fields":[{"name":"next","type":"r"}]}"#;
        let block = [0x02, 0x00];
        let bytes = container(schema, &[0x02], &block);
        let mut g = guard(bytes.as_slice()).unwrap();
        let err = blocks(&mut g).err().expect("refused");
        assert!(err.to_string().contains("deeper"), "{err}");
    }

    #[test]
    fn invalid_names_are_refused_before_apache_avro_sees_them() {
        for schema in [
            r#"{"type":"record","name":"bad name","fields":[]}"#,
            r#"{"type":"record","name":"r","fields":[{"name":"f","type":{"type":"fixed","size":1,"name":"1x"}}]}"#,
            r#"{"type":"x y"}"#,
            r#"{"type":"record","name":"r","aliases":["a-b"],"fields":[]}"#,
        ] {
            let bytes = container(schema, &[0x02], &[0x00, 0x00]);
            assert!(guard(bytes.as_slice()).is_err(), "{schema}");
        }
        assert!(valid_name("a.b_c.D1"));
        assert!(!valid_name("a..b") && !valid_name("") && !valid_name("é"));
    }

    #[test]
    fn valid_block_passes_through_unchanged() {
        let schema = r#"{"type":"record","name":"r","fields":[{"name":"s","type":"string"},{"name":"m","type":{"type":"map","values":"int"}}]}"#;
        // 1 record, 8 bytes: "hi", map {"k": 1}.
        let block = [0x02, 0x10, 0x04, b'h', b'i', 0x02, 0x02, b'k', 0x02, 0x00];
        let bytes = container(schema, &[0x02], &block);
        let mut g = guard(bytes.as_slice()).unwrap();
        let out = blocks(&mut g).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].count, out[0].data.as_slice()), (1, &block[2..]));
    }
}
