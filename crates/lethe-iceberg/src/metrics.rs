//! Column metrics modes and bound truncation, as Iceberg Java applies them.
//!
//! A table chooses per column what its manifests keep, with `write.metadata.metrics.default`
//! and `write.metadata.metrics.column.<name>`: `none` (nothing), `counts` (value, null and NaN
//! counts), `truncate(n)` (counts and bounds cut to n), `full` (counts and whole bounds). The
//! default is `truncate(16)`; as in Java, when no default is set only the first
//! `write.metadata.metrics.max-inferred-column-defaults` (100) columns get it and the rest
//! `none`.
//!
//! Truncation follows Java's `UnicodeUtil`/`BinaryUtil`: a lower bound is cut to n code points
//! (bytes for binary); an upper bound is cut and its last code point (byte) incremented — the
//! surrogate range is skipped, a code point that can't be incremented is dropped and the one
//! before it incremented instead, and when none can be the upper bound is dropped.

use std::collections::HashMap;

use iceberg::spec::{NestedFieldRef, Schema};

use crate::error::{Error, Result};

/// The property naming the default mode.
pub const DEFAULT_MODE_PROPERTY: &str = "write.metadata.metrics.default";
/// The prefix of per-column mode properties.
pub const COLUMN_MODE_PREFIX: &str = "write.metadata.metrics.column.";
/// How many columns get the inferred default when no default is set.
pub const MAX_INFERRED_PROPERTY: &str = "write.metadata.metrics.max-inferred-column-defaults";
/// Iceberg's default truncation length.
pub const DEFAULT_TRUNCATE: usize = 16;

/// What a manifest keeps about one column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsMode {
    /// Nothing.
    None,
    /// Value, null and NaN counts.
    Counts,
    /// Counts, and bounds truncated to n (code points for strings, bytes for binary).
    Truncate(usize),
    /// Counts and whole bounds.
    Full,
}

impl MetricsMode {
    /// Parses `none`, `counts`, `full` or `truncate(n)` (case-insensitive, as Java).
    pub fn parse(s: &str) -> Result<MetricsMode> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "none" => Ok(MetricsMode::None),
            "counts" => Ok(MetricsMode::Counts),
            "full" => Ok(MetricsMode::Full),
            _ => {
                let n = t
                    .strip_prefix("truncate(")
                    .and_then(|r| r.strip_suffix(')'))
                    .and_then(|n| n.trim().parse::<usize>().ok())
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "`{s}` is not a metrics mode: use none, counts, truncate(n) or full"
                        ))
                    })?;
                if n == 0 {
                    return Err(Error::invalid("truncate length must be positive"));
                }
                Ok(MetricsMode::Truncate(n))
            }
        }
    }

    /// Whether counts are kept.
    pub fn keeps_counts(self) -> bool {
        !matches!(self, MetricsMode::None)
    }

    /// Whether bounds are kept.
    pub fn keeps_bounds(self) -> bool {
        matches!(self, MetricsMode::Truncate(_) | MetricsMode::Full)
    }
}

impl std::fmt::Display for MetricsMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetricsMode::None => write!(f, "none"),
            MetricsMode::Counts => write!(f, "counts"),
            MetricsMode::Truncate(n) => write!(f, "truncate({n})"),
            MetricsMode::Full => write!(f, "full"),
        }
    }
}

/// The metrics mode of every field of a schema, by field id, from table properties.
#[derive(Debug, Clone)]
pub struct MetricsConfig {
    modes: HashMap<i32, MetricsMode>,
}

impl MetricsConfig {
    /// Resolves the modes for `schema` from `properties`. Per-column keys use the column's full
    /// dotted name in the current schema (as Java and PyIceberg do).
    pub fn from_properties(schema: &Schema, properties: &HashMap<String, String>) -> Result<Self> {
        let explicit_default = properties
            .get(DEFAULT_MODE_PROPERTY)
            .map(|s| MetricsMode::parse(s))
            .transpose()?;
        let max_inferred = properties
            .get(MAX_INFERRED_PROPERTY)
            .map(|s| {
                s.trim().parse::<usize>().map_err(|_| {
                    Error::invalid(format!("{MAX_INFERRED_PROPERTY} = `{s}` is not a number"))
                })
            })
            .transpose()?
            .unwrap_or(100);
        let mut modes = HashMap::new();
        let leaves = primitive_leaves(schema);
        for (i, (name, field)) in leaves.iter().enumerate() {
            let default = match explicit_default {
                Some(m) => m,
                None if i < max_inferred => MetricsMode::Truncate(DEFAULT_TRUNCATE),
                None => MetricsMode::None,
            };
            let mode = match properties.get(&format!("{COLUMN_MODE_PREFIX}{name}")) {
                Some(s) => MetricsMode::parse(s)
                    .map_err(|e| Error::invalid(format!("{COLUMN_MODE_PREFIX}{name}: {e}")))?,
                None => default,
            };
            modes.insert(field.id, mode);
        }
        Ok(MetricsConfig { modes })
    }

    /// The mode of a field id (`none` for fields the schema doesn't have).
    pub fn mode(&self, field_id: i32) -> MetricsMode {
        self.modes
            .get(&field_id)
            .copied()
            .unwrap_or(MetricsMode::None)
    }
}

/// Every primitive field of a schema, with its full dotted name, in schema order: struct
/// fields, list elements and map keys and values included (`contact.email`,
/// `addresses.element.street`, `attributes.value`: the names Java and PyIceberg look
/// `write.metadata.metrics.column.*` up by). Fields inside a list or a map get counts but never
/// bounds (as in Java), see [`crate::writer`].
pub fn primitive_leaves(schema: &Schema) -> Vec<(String, NestedFieldRef)> {
    crate::nested::field_paths(schema)
        .into_iter()
        .filter(|p| p.is_leaf())
        .map(|p| (p.name, p.field))
        .collect()
}

/// Cuts a string to at most `n` code points (a lower bound).
pub fn truncate_lower_str(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((idx, _)) => &s[..idx],
        None => s,
    }
}

/// The smallest string greater than every string starting with the first `n` code points of
/// `s`, or `s` itself when it has at most `n`; None when no such bound exists.
pub fn truncate_upper_str(s: &str, n: usize) -> Option<String> {
    if s.chars().count() <= n {
        return Some(s.to_string());
    }
    let mut chars: Vec<char> = s.chars().take(n).collect();
    while let Some(last) = chars.pop() {
        if let Some(next) = next_char(last) {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

fn next_char(c: char) -> Option<char> {
    let mut v = c as u32 + 1;
    if (0xD800..=0xDFFF).contains(&v) {
        v = 0xE000;
    }
    char::from_u32(v)
}

/// Cuts bytes to at most `n` (a lower bound).
pub fn truncate_lower_bytes(b: &[u8], n: usize) -> &[u8] {
    &b[..b.len().min(n)]
}

/// The smallest byte string greater than every string starting with the first `n` bytes of
/// `b`, or `b` itself when it has at most `n`; None when every byte is 0xFF.
pub fn truncate_upper_bytes(b: &[u8], n: usize) -> Option<Vec<u8>> {
    if b.len() <= n {
        return Some(b.to_vec());
    }
    let mut out = b[..n].to_vec();
    while let Some(last) = out.pop() {
        if last < 0xFF {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{NestedField, PrimitiveType, Type};

    #[test]
    fn parse_modes() {
        assert_eq!(MetricsMode::parse("none").unwrap(), MetricsMode::None);
        assert_eq!(MetricsMode::parse("Counts").unwrap(), MetricsMode::Counts);
        assert_eq!(
            MetricsMode::parse("truncate(16)").unwrap(),
            MetricsMode::Truncate(16)
        );
        assert_eq!(MetricsMode::parse("full").unwrap(), MetricsMode::Full);
        assert!(MetricsMode::parse("truncate(x)").is_err());
        assert!(MetricsMode::parse("truncate(0)").is_err());
        assert!(MetricsMode::parse("some").is_err());
    }

    #[test]
    fn lower_bound_is_cut_to_code_points() {
        assert_eq!(
            truncate_lower_str("ALEXA590@POST.EXAMPLE", 16),
            "ALEXA590@POST.EX"
        );
        assert_eq!(truncate_lower_str("short", 16), "short");
        // Multi-byte characters count as one code point each, and the cut never splits one.
        assert_eq!(truncate_lower_str("ÅÅÅ日本語🙂🙂", 5), "ÅÅÅ日本");
        assert_eq!(truncate_lower_str("a🙂b", 2), "a🙂");
    }

    #[test]
    fn upper_bound_is_cut_and_incremented() {
        assert_eq!(
            truncate_upper_str("zofia.haase@example.net", 16).as_deref(),
            Some("zofia.haase@exan")
        );
        assert_eq!(truncate_upper_str("abc", 16).as_deref(), Some("abc"));
        // Multi-byte: the 3rd code point é (U+00E9) becomes ê (U+00EA).
        assert_eq!(truncate_upper_str("ééééé", 3).as_deref(), Some("ééê"));
        // A 4-byte code point increments to the next one.
        assert_eq!(truncate_upper_str("a🙂🙂", 2).as_deref(), Some("a🙃"));
    }

    #[test]
    fn upper_bound_skips_surrogates_and_maximal_code_points() {
        // U+D7FF + 1 is a surrogate: the next valid code point is U+E000.
        assert_eq!(
            truncate_upper_str("a\u{D7FF}zz", 2).as_deref(),
            Some("a\u{E000}")
        );
        // The maximal code point can't be incremented: it is dropped and the one before raised.
        assert_eq!(
            truncate_upper_str("ab\u{10FFFF}zz", 3).as_deref(),
            Some("ac")
        );
        // Nothing can be incremented: no upper bound.
        assert_eq!(truncate_upper_str("\u{10FFFF}\u{10FFFF}z", 2), None);
    }

    #[test]
    fn binary_truncation() {
        assert_eq!(truncate_lower_bytes(&[1, 2, 3], 2), &[1, 2]);
        assert_eq!(truncate_upper_bytes(&[1, 2, 3], 2), Some(vec![1, 3]));
        assert_eq!(truncate_upper_bytes(&[1, 0xFF, 3], 2), Some(vec![2]));
        assert_eq!(truncate_upper_bytes(&[0xFF, 0xFF, 3], 2), None);
        assert_eq!(truncate_upper_bytes(&[1, 2], 2), Some(vec![1, 2]));
    }

    #[test]
    fn modes_from_properties() {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "email", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(3, "notes", Type::Primitive(PrimitiveType::String)).into(),
            ])
            .build()
            .unwrap();
        let mut props = HashMap::new();
        props.insert(
            "write.metadata.metrics.column.email".to_string(),
            "none".to_string(),
        );
        let c = MetricsConfig::from_properties(&schema, &props).unwrap();
        assert_eq!(c.mode(1), MetricsMode::Truncate(16));
        assert_eq!(c.mode(2), MetricsMode::None);
        props.insert(DEFAULT_MODE_PROPERTY.to_string(), "counts".to_string());
        let c = MetricsConfig::from_properties(&schema, &props).unwrap();
        assert_eq!(c.mode(3), MetricsMode::Counts);
        props.insert(MAX_INFERRED_PROPERTY.into(), "1".into());
        props.remove(DEFAULT_MODE_PROPERTY);
        let c = MetricsConfig::from_properties(&schema, &props).unwrap();
        assert_eq!(c.mode(1), MetricsMode::Truncate(16));
        assert_eq!(c.mode(3), MetricsMode::None, "beyond the inferred limit");
        props.insert("write.metadata.metrics.column.notes".into(), "bogus".into());
        assert!(MetricsConfig::from_properties(&schema, &props).is_err());
    }
}
