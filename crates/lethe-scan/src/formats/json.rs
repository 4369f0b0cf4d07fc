//! JSON documents (Iceberg table metadata, any `.json`) and JSON lines.
//!
//! Guarantees: a document must parse with `serde_json` or the file is unreadable; every
//! string, keys included, is searched for value prefixes; an object key equal to an ID
//! column (case-insensitive) with an exactly equal value (number or string, or an array of
//! them) is an ID hit. JSON lines: each non-empty line must parse.
//!
//! Does not: look inside strings that themselves hold JSON or base64 (they are searched as
//! text, which finds embedded JSON values but not encoded ones).

use std::io::{BufRead, BufReader, Read};

use serde_json::Value;

use crate::report::{Hits, Place};

/// Longest JSON line accepted (bytes).
const MAX_LINE: u64 = 256 << 20;

/// Describe a serde_json error by category and position only (never quoting input).
pub(crate) fn describe(e: &serde_json::Error) -> String {
    format!(
        "invalid JSON ({:?} error) at line {} column {}",
        e.classify(),
        e.line(),
        e.column()
    )
}

/// Outcome of trying a buffer as one JSON document.
pub(crate) enum Doc {
    /// Parsed and searched.
    Done,
    /// Several values one after another: read as JSON lines instead.
    Lines,
}

/// Parse `bytes` as one JSON document and search it.
pub(crate) fn scan_document(bytes: &[u8], hits: &mut Hits, place: Place) -> Result<Doc, String> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => {
            let mut pointer = String::new();
            walk(&v, hits, place, &mut pointer, None, None);
            Ok(Doc::Done)
        }
        Err(e) if e.to_string().starts_with("trailing characters") => Ok(Doc::Lines),
        Err(e) => Err(describe(&e)),
    }
}

/// Read JSON lines from `r`.
pub(crate) fn scan_lines(r: &mut dyn Read, hits: &mut Hits, place: Place) -> Result<(), String> {
    let mut reader = BufReader::with_capacity(1 << 16, r);
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        number += 1;
        let n = (&mut reader)
            .take(MAX_LINE + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("read error at line {number}: {e}"))?;
        if n == 0 {
            break;
        }
        if line.len() as u64 > MAX_LINE {
            return Err(format!("line {number} is longer than {MAX_LINE} bytes"));
        }
        let text = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let v: Value =
            serde_json::from_slice(text).map_err(|e| format!("line {number}: {}", describe(&e)))?;
        let mut pointer = String::new();
        walk(&v, hits, place, &mut pointer, None, Some(number));
    }
    Ok(())
}

/// Search a parsed JSON value. `key` is the nearest enclosing object key.
pub(crate) fn walk(
    v: &Value,
    hits: &mut Hits,
    place: Place,
    pointer: &mut String,
    key: Option<&str>,
    line: Option<u64>,
) {
    let detail = |pointer: &str| {
        let p = if pointer.is_empty() { "/" } else { pointer };
        match line {
            Some(l) => format!("line {l}, {p}"),
            None => p.to_string(),
        }
    };
    match v {
        Value::Null | Value::Bool(_) => {}
        Value::Number(n) => {
            if let Some(col) = key.and_then(|k| hits.traces.id_column(k)) {
                let owners = match n.as_i64() {
                    Some(i) => col.int(i),
                    None => col.text(&n.to_string()),
                };
                if !owners.is_empty() {
                    let group: &str = pointer;
                    hits.ids(place, owners, group, &|| detail(group));
                }
            }
        }
        Value::String(s) => {
            let group: &str = pointer;
            hits.search(place, s.as_bytes(), group, &|| detail(group));
            if let Some(col) = key.and_then(|k| hits.traces.id_column(k)) {
                hits.ids(place, col.text(s), group, &|| detail(group));
            }
        }
        Value::Array(items) => {
            let len = pointer.len();
            for (i, item) in items.iter().enumerate() {
                pointer.push('/');
                pointer.push_str(&i.to_string());
                walk(item, hits, place, pointer, key, line);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            let len = pointer.len();
            for (k, item) in map {
                let shown = if hits.mentions(k) {
                    "*".to_string()
                } else {
                    escape(k)
                };
                pointer.push('/');
                pointer.push_str(&shown);
                let group: &str = pointer;
                hits.search(place, k.as_bytes(), group, &|| {
                    format!("key of {}", detail(group))
                });
                walk(item, hits, place, pointer, Some(k), line);
                pointer.truncate(len);
            }
        }
    }
}

/// JSON-pointer escape, cut to 64 characters.
fn escape(k: &str) -> String {
    let mut s: String = k.chars().take(64).collect();
    if s.contains('~') || s.contains('/') {
        s = s.replace('~', "~0").replace('/', "~1");
    }
    s
}
