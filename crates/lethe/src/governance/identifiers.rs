//! Identifiers as the governance files declare them: which columns of a table identify a
//! subject ([`identifier_columns`]), their values read from rows ([`column_values`],
//! [`id_strings`]), and derived identifiers.
//!
//! Derived identifiers are columns that hold another identifier's values transformed, such as a
//! `session_id` built as `'a-' || customer_id || '#' || n`.
//!
//! `metadata.toml` records the transformation with the column:
//!
//! ```toml
//! session_id = { classification = "personal", identifies = "customer", derived = { from = "customer_id", pattern = "a-{id}#*" } }
//! ```
//!
//! A pattern is `{id}` with literal text around it, and at most one `*` at one end:
//! - `a-{id}` — exact: the value is `a-` followed by the identifier;
//! - `a-{id}#*` — prefix: the value starts with `a-<id>#` (the literal text after `{id}` is
//!   required, so that identifier 11 never selects `a-113#2`);
//! - `*/{id}` — suffix: the value ends with `/<id>` (likewise with literal text before `{id}`).
//!
//! The planner seeds a derived column with its own label ([`label`]); before anything is
//! deleted, [`resolve`] reads the rows whose column matches the pattern for the subject's
//! identifier values (a typed [`Predicate::StartsWith`] / [`Predicate::EndsWith`] /
//! [`Predicate::In`], never SQL text) and returns the exact values found. From there a derived
//! identifier is like a mapped one: rows are deleted by `column IN (values)`, the values are
//! traces for the proof scan, and lineage copies of the column carry the same label.
//!
//! A derived identifier may also be a deterministic transform of the source value that lethe
//! recomputes ([`Transform`]): `derived = { from = "email", transform = "sha256" }` (the
//! lowercase hex SHA-256 of the value's text), `md5`, `sha1`, `lower`, `upper`, and
//! `hmac_sha256` with `key_env` naming the variable that holds the key. The transform is
//! applied first, then the pattern (`transform = "lower", pattern = "u:{id}"`). The values of
//! such a column are computed from the source values, not searched for: seed 003's
//! "SHA256(customer_id) stays fully addressable".
//!
//! Not supported: a pattern with `*` at both ends (`*{id}*` selects too much to erase by), and
//! identifiers embedded without literal text between them and the wildcard; transforms lethe
//! can't recompute (a salted hash whose salt it doesn't have): declare no `derived` for those,
//! and the plan keeps the table RECOMPUTE or UNRESOLVED.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::governance::subjects::Subject;
use iceberg::spec::{PrimitiveType, Type};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::select_rows;
use lethe_iceberg::predicate::{Predicate, Value};
use lethe_iceberg::table::Warehouse;

/// The placeholder for the identifier in a pattern.
pub const ID: &str = "{id}";

/// Where the pattern allows any text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// No wildcard: `before{id}after` is the whole value.
    Exact,
    /// `before{id}after*`: any text follows.
    Prefix,
    /// `*before{id}after`: any text precedes.
    Suffix,
}

/// A parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pattern {
    /// Literal text before the identifier.
    pub before: String,
    /// Literal text after the identifier.
    pub after: String,
    /// Where any text is allowed.
    pub shape: Shape,
}

impl Pattern {
    /// Parses `a-{id}`, `a-{id}#*` or `*/{id}`.
    pub fn parse(s: &str) -> Result<Pattern> {
        let bad = |why: &str| {
            Error::invalid(format!(
                "derived pattern `{s}`: {why}; write e.g. `a-{{id}}` (exact), `a-{{id}}#*` (prefix) or `*/{{id}}` (suffix)"
            ))
        };
        if s.matches(ID).count() != 1 {
            return Err(bad("it must hold {id} exactly once"));
        }
        let (mut before, mut after) = s
            .split_once(ID)
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .ok_or_else(|| bad("no {id}"))?;
        let lead = before.starts_with('*');
        let trail = after.ends_with('*');
        let shape = match (lead, trail) {
            (false, false) => Shape::Exact,
            (false, true) => Shape::Prefix,
            (true, false) => Shape::Suffix,
            (true, true) => return Err(bad("`*` at both ends selects too much to erase by")),
        };
        if lead {
            before.remove(0);
        }
        if trail {
            after.pop();
        }
        if before.contains('*') || after.contains('*') {
            return Err(bad(
                "`*` is allowed only as the first or the last character",
            ));
        }
        match shape {
            Shape::Prefix if after.is_empty() => {
                return Err(bad(
                    "literal text is needed between {id} and `*`, or identifier 11 would select 113",
                ));
            }
            Shape::Suffix if before.is_empty() => {
                return Err(bad(
                    "literal text is needed between `*` and {id}, or identifier 13 would select 113",
                ));
            }
            _ => {}
        }
        Ok(Pattern {
            before,
            after,
            shape,
        })
    }

    /// The pattern as written.
    pub fn render(&self) -> String {
        match self.shape {
            Shape::Exact => format!("{}{ID}{}", self.before, self.after),
            Shape::Prefix => format!("{}{ID}{}*", self.before, self.after),
            Shape::Suffix => format!("*{}{ID}{}", self.before, self.after),
        }
    }

    /// The literal text an identifier becomes: the whole value (exact), its prefix or suffix.
    pub fn apply(&self, id: &str) -> String {
        format!("{}{id}{}", self.before, self.after)
    }

    /// The predicate selecting the rows whose `column` holds one of `ids` transformed.
    pub fn predicate(&self, column: &str, ids: &[String]) -> Predicate {
        let lits: Vec<String> = ids.iter().map(|i| self.apply(i)).collect();
        self.predicate_of(column, lits)
    }

    /// The predicate selecting the rows whose `column` holds one of `lits` (already made by
    /// [`Pattern::apply`]) in this pattern's shape.
    pub fn predicate_of(&self, column: &str, lits: Vec<String>) -> Predicate {
        match self.shape {
            Shape::Exact => Predicate::is_in(column, lits.into_iter().map(Value::Str).collect()),
            Shape::Prefix => Predicate::StartsWith {
                column: column.to_string(),
                prefixes: lits,
            },
            Shape::Suffix => Predicate::EndsWith {
                column: column.to_string(),
                suffixes: lits,
            },
        }
    }

    /// Whether `value` is `id` transformed by this pattern.
    pub fn matches(&self, value: &str, id: &str) -> bool {
        self.matches_literal(value, &self.apply(id))
    }

    /// Whether `value` holds `lit` (made by [`Pattern::apply`]) in this pattern's shape.
    pub fn matches_literal(&self, value: &str, lit: &str) -> bool {
        match self.shape {
            Shape::Exact => value == lit,
            Shape::Prefix => value.starts_with(lit),
            Shape::Suffix => value.ends_with(lit),
        }
    }
}

/// A deterministic transform of an identifier's text that lethe recomputes: hex digests are
/// lowercase, as SQL engines print them (Spark's `sha2(x, 256)`, PostgreSQL's `md5(x)`,
/// `encode(sha256(x::bytea), 'hex')`); an integer is transformed as its decimal text.
#[derive(Clone)]
pub enum Transform {
    /// SHA-256, lowercase hex.
    Sha256,
    /// SHA-1, lowercase hex.
    Sha1,
    /// MD5, lowercase hex.
    Md5,
    /// Lowercased (Unicode).
    Lower,
    /// Uppercased (Unicode).
    Upper,
    /// HMAC-SHA256 under a key from the environment, lowercase hex.
    HmacSha256(std::sync::Arc<secrecy::SecretSlice<u8>>),
}

impl std::fmt::Debug for Transform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Transform {
    /// The transform `name`; `key_env` names the variable holding an HMAC's key.
    pub fn parse(name: &str, key_env: Option<&str>) -> Result<Transform> {
        Ok(match name {
            "sha256" => Transform::Sha256,
            "sha1" => Transform::Sha1,
            "md5" => Transform::Md5,
            "lower" => Transform::Lower,
            "upper" => Transform::Upper,
            "hmac_sha256" => {
                let var = key_env.ok_or_else(|| {
                    Error::invalid(
                        "`hmac_sha256` needs `key_env`: the environment variable that holds the key",
                    )
                })?;
                let key = std::env::var(var).map_err(|_| {
                    Error::invalid(format!(
                        "`hmac_sha256`: the environment variable {var} (key_env) is not set; without the key lethe can't recompute the column"
                    ))
                })?;
                Transform::HmacSha256(std::sync::Arc::new(secrecy::SecretSlice::from(
                    key.into_bytes(),
                )))
            }
            other => {
                return Err(Error::invalid(format!(
                    "unknown transform `{other}` (use sha256, sha1, md5, lower, upper or hmac_sha256)"
                )));
            }
        })
    }

    /// Its name as written.
    pub fn name(&self) -> &'static str {
        match self {
            Transform::Sha256 => "sha256",
            Transform::Sha1 => "sha1",
            Transform::Md5 => "md5",
            Transform::Lower => "lower",
            Transform::Upper => "upper",
            Transform::HmacSha256(_) => "hmac_sha256",
        }
    }

    /// The transformed text of `v`.
    pub fn apply(&self, v: &str) -> String {
        use sha2::Digest;
        match self {
            Transform::Sha256 => hex::encode(sha2::Sha256::digest(v.as_bytes())),
            Transform::Sha1 => hex::encode(sha1::Sha1::digest(v.as_bytes())),
            Transform::Md5 => hex::encode(md5::Md5::digest(v.as_bytes())),
            Transform::Lower => v.to_lowercase(),
            Transform::Upper => v.to_uppercase(),
            Transform::HmacSha256(key) => {
                use hmac::{KeyInit, Mac};
                use secrecy::ExposeSecret;
                let mut m =
                    <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key.expose_secret())
                        .expect("HMAC takes a key of any length");
                m.update(v.as_bytes());
                hex::encode(m.finalize().into_bytes())
            }
        }
    }
}

/// The plan label of a derived identifier's values.
pub fn label(table: &str, column: &str) -> String {
    format!("{table}.{column} (derived)")
}

/// A derived identifier declared in metadata.toml for a subject.
#[derive(Debug, Clone)]
pub struct DerivedColumn {
    /// The table.
    pub table: String,
    /// The column.
    pub column: String,
    /// The label whose values it embeds (the root identifier column, or a mapped identifier).
    pub from: String,
    /// The transform applied to the source value first, if any.
    pub transform: Option<Transform>,
    /// The pattern around the (transformed) value.
    pub pattern: Pattern,
    /// Its plan label.
    pub label: String,
}

impl DerivedColumn {
    /// The literal text source value `id` becomes: the whole value (exact), or its prefix or
    /// suffix.
    pub fn literal(&self, id: &str) -> String {
        match &self.transform {
            Some(t) => self.pattern.apply(&t.apply(id)),
            None => self.pattern.apply(id),
        }
    }

    /// The predicate selecting the rows whose column holds one of `ids` derived.
    pub fn predicate(&self, ids: &[String]) -> Predicate {
        self.pattern
            .predicate_of(&self.column, ids.iter().map(|i| self.literal(i)).collect())
    }

    /// Whether `value` is derived from `id`.
    pub fn matches(&self, value: &str, id: &str) -> bool {
        self.pattern.matches_literal(value, &self.literal(id))
    }

    /// How it is derived, as written: `a-{id}#*`, `sha256`, `lower then u:{id}`.
    pub fn how(&self) -> String {
        match &self.transform {
            Some(t) if self.pattern.render() == ID => t.name().to_string(),
            Some(t) => format!("{} then {}", t.name(), self.pattern.render()),
            None => self.pattern.render(),
        }
    }
}

/// Every derived identifier metadata.toml declares for `subject`; a pattern that doesn't
/// parse, or a `from` that names none of `sources` (the labels whose values the plan knows:
/// the root identifier column and mapped identifier columns), is an error at its line.
pub fn declared(gov: &Governance, subject: &str, sources: &[String]) -> Result<Vec<DerivedColumn>> {
    let mut out = Vec::new();
    for (table, meta) in &gov.metadata.value.tables {
        for (column, entry) in &meta.columns {
            let Some(d) = entry.derived() else { continue };
            let key = format!("tables.\"{table}\".columns.{column}");
            if entry.identifies() != Some(subject) {
                if entry.identifies().is_none() {
                    return Err(gov.metadata.error_at(
                        &key,
                        "`derived` needs `identifies`: name the subject whose identifier it derives from",
                    ));
                }
                continue;
            }
            let pattern = Pattern::parse(&d.pattern)
                .map_err(|e| gov.metadata.error_at(&key, e.to_string()))?;
            let transform = d
                .transform
                .as_deref()
                .map(|t| Transform::parse(t, d.key_env.as_deref()))
                .transpose()
                .map_err(|e| gov.metadata.error_at(&key, e.to_string()))?;
            if !sources.iter().any(|s| s == &d.from) {
                return Err(gov.metadata.error_at(
                    &key,
                    format!(
                        "derived from `{}`, which is not an identifier of {subject} (use one of: {})",
                        d.from,
                        sources.join(", ")
                    ),
                ));
            }
            out.push(DerivedColumn {
                table: table.clone(),
                column: column.clone(),
                from: d.from.clone(),
                transform,
                pattern,
                label: label(table, column),
            });
        }
    }
    Ok(out)
}

fn text(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The distinct values of `d`'s column that embed one of `sources`, each with the source value
/// it embeds. Reads only the rows the pattern selects. Before an erasure, never after it.
pub async fn resolve(
    wh: &Warehouse,
    d: &DerivedColumn,
    sources: &[Value],
) -> Result<Vec<(Value, Value)>> {
    if sources.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = sources.iter().map(text).collect();
    if d.transform.is_some() && d.pattern.shape == Shape::Exact {
        // Computed, not searched for: every value the column would hold for the subject.
        let mut seen = HashSet::new();
        return Ok(ids
            .iter()
            .zip(sources)
            .filter_map(|(id, src)| {
                let v = d.literal(id);
                seen.insert(v.clone()).then(|| (Value::Str(v), src.clone()))
            })
            .collect());
    }
    let t = wh.load(&TableName::parse(&d.table)?).await?;
    let rows = select_rows(wh, &t, &d.predicate(&ids)).await?;
    // Which source a value embeds: look up its literal part for each distinct literal length.
    let mut by_lit: HashMap<String, usize> = HashMap::new();
    let mut lens: Vec<usize> = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let lit = d.literal(id);
        if !lens.contains(&lit.len()) {
            lens.push(lit.len());
        }
        by_lit.insert(lit, i);
    }
    let mut seen: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    for b in &rows {
        let c = column_array(b, &d.column)
            .ok_or_else(|| Error::Internal(format!("no column {} in rows read", d.column)))?;
        let c = arrow::compute::cast(&c, &DataType::Utf8)?;
        let s = c.as_string::<i32>();
        for i in 0..s.len() {
            if !s.is_valid(i) {
                continue;
            }
            let v = s.value(i);
            let owner = lens.iter().find_map(|n| {
                let part = match d.pattern.shape {
                    Shape::Exact | Shape::Prefix => v.get(..*n),
                    Shape::Suffix => v.len().checked_sub(*n).and_then(|k| v.get(k..)),
                }?;
                by_lit.get(part).copied()
            });
            if let Some(o) = owner
                && seen.insert(v.to_string())
            {
                out.push((Value::Str(v.to_string()), sources[o].clone()));
            }
        }
    }
    Ok(out)
}

/// The values of every derived identifier in `labels`, resolved from `sources` (label ->
/// values): by label, the source label and (derived value, source value) pairs.
pub async fn resolve_labels(
    wh: &Warehouse,
    gov: &Governance,
    subject: &str,
    labels: &HashSet<String>,
    sources: &BTreeMap<String, Vec<Value>>,
) -> Result<BTreeMap<String, (String, Vec<(Value, Value)>)>> {
    let names: Vec<String> = sources.keys().cloned().collect();
    let mut out = BTreeMap::new();
    for d in declared(gov, subject, &names)? {
        if !labels.contains(&d.label) {
            continue;
        }
        let src = sources.get(&d.from).cloned().unwrap_or_default();
        out.insert(
            d.label.clone(),
            (d.from.clone(), resolve(wh, &d, &src).await?),
        );
    }
    Ok(out)
}

/// The identifier columns of a subject kind: its root identifier names and columns
/// metadata.toml classifies as identifying it.
pub fn identifier_columns(
    gov: &crate::governance::Governance,
    subject: &str,
    table: &str,
    columns: &[String],
) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(s) = gov.subjects.get(subject) else {
        return out;
    };
    let names: BTreeSet<String> = s
        .identifiers
        .iter()
        .filter_map(|c| {
            crate::governance::subjects::split_column(c)
                .ok()
                .map(|(_, c)| c)
        })
        .collect();
    for c in columns {
        let classified = gov
            .metadata
            .table(table)
            .and_then(|t| t.columns.get(c))
            .and_then(|e| e.identifies())
            == Some(subject);
        if names.contains(c) || classified {
            out.push(c.clone());
        }
    }
    out
}

/// The values of an identifier column as text (as the register hashes them).
pub fn id_strings(b: &arrow::array::RecordBatch, column: &str) -> Result<Vec<Option<String>>> {
    use arrow::array::{Array, AsArray};
    let c =
        column_array(b, column).ok_or_else(|| Error::invalid(format!("no column `{column}`")))?;
    let c = arrow::compute::cast(&c, &arrow::datatypes::DataType::Utf8)?;
    let s = c.as_string::<i32>();
    Ok((0..s.len())
        .map(|i| s.is_valid(i).then(|| s.value(i).to_string()))
        .collect())
}

/// The labels a derived identifier may be derived from: the root identifier column and the
/// mapped identifier columns (their values are resolved first).
pub fn derived_sources(subject: &Subject) -> Result<Vec<String>> {
    let (_, root) = subject.root()?;
    let mut out = vec![root];
    out.extend(subject.mapped.iter().map(|m| m.column.clone()));
    Ok(out)
}

/// Distinct non-null values of a column, as predicate values.
pub fn column_values(batches: &[arrow::array::RecordBatch], column: &str) -> Result<Vec<Value>> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::DataType;
    let mut out: Vec<Value> = Vec::new();
    let mut seen = BTreeSet::new();
    for b in batches {
        let c = column_array(b, column)
            .ok_or_else(|| Error::invalid(format!("no column `{column}`")))?;
        let c = &c;
        match c.data_type() {
            DataType::Int64 | DataType::Int32 => {
                let c = arrow::compute::cast(c, &DataType::Int64)?;
                for v in c
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .iter()
                    .flatten()
                {
                    if seen.insert(v.to_string()) {
                        out.push(Value::Int(v));
                    }
                }
            }
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                let c = arrow::compute::cast(c, &DataType::Utf8)?;
                let s = c.as_string::<i32>();
                for i in 0..s.len() {
                    if s.is_valid(i) && seen.insert(s.value(i).to_string()) {
                        out.push(Value::Str(s.value(i).to_string()));
                    }
                }
            }
            other => {
                return Err(Error::Unsupported {
                    table: String::new(),
                    feature: format!("identifier column `{column}` of type {other}"),
                    detail: "identifiers are whole numbers or text".into(),
                });
            }
        }
    }
    Ok(out)
}

/// The array of a column of rows read in a table's current schema: a top-level column, or a
/// struct field by its dotted path (`contact.email`, with its parents' nulls).
pub fn column_array(b: &arrow::array::RecordBatch, column: &str) -> Option<arrow::array::ArrayRef> {
    b.column_by_name(column)
        .cloned()
        .or_else(|| lethe_iceberg::nested::struct_field(b, column))
}

/// Per row of `b` (rows read in `schema`, the table's current schema), the values at `path`
/// as text: every element of a list, every value of a map, and, when `path` names a struct,
/// list or map, every field under it (map keys only when named). Whole numbers are left out:
/// they are IDs, not identifying values.
pub fn path_texts(
    b: &arrow::array::RecordBatch,
    schema: &iceberg::spec::Schema,
    path: &str,
) -> Result<Vec<Vec<String>>> {
    let target = lethe_iceberg::nested::resolve(schema, path)?;
    let mut out = vec![Vec::new(); b.num_rows()];
    for p in lethe_iceberg::nested::field_paths(schema) {
        let named = p.id() == target.id();
        if !p.is_leaf() || !p.is_under(&target) || (p.map_key && !named) {
            continue;
        }
        if matches!(
            p.field.field_type.as_ref(),
            Type::Primitive(PrimitiveType::Int | PrimitiveType::Long)
        ) {
            continue;
        }
        let l = lethe_iceberg::nested::leaf(b.column(p.column), &p.steps)?;
        for (row, vals) in l.texts_by_row(b.num_rows())?.into_iter().enumerate() {
            out[row].extend(vals);
        }
    }
    Ok(out)
}

/// Per row of `b`, how many values `path` holds (a list's elements, a map's values, every
/// field under a struct).
pub fn path_value_counts(
    b: &arrow::array::RecordBatch,
    schema: &iceberg::spec::Schema,
    path: &str,
) -> Result<Vec<u64>> {
    let target = lethe_iceberg::nested::resolve(schema, path)?;
    let mut out = vec![0u64; b.num_rows()];
    for p in lethe_iceberg::nested::field_paths(schema) {
        if !p.is_leaf() || !p.is_under(&target) || (p.map_key && p.id() != target.id()) {
            continue;
        }
        let l = lethe_iceberg::nested::leaf(b.column(p.column), &p.steps)?;
        for (row, _) in l.present() {
            out[row] += 1;
        }
    }
    Ok(out)
}

/// Whether a column type can hold identifiers.
pub fn identifier_type(t: &Type) -> bool {
    matches!(
        t,
        Type::Primitive(PrimitiveType::Long | PrimitiveType::Int | PrimitiveType::String)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_parse_and_render() {
        for s in ["a-{id}", "a-{id}#*", "*/{id}", "{id}", "{id}@x"] {
            assert_eq!(Pattern::parse(s).unwrap().render(), s);
        }
        let p = Pattern::parse("a-{id}#*").unwrap();
        assert_eq!(p.shape, Shape::Prefix);
        assert!(p.matches("a-CGB0000113#3", "CGB0000113"));
        assert!(!p.matches("a-CGB00001130#3", "CGB0000113"));
        assert!(!p.matches("b-CGB0000113#3", "CGB0000113"));
    }

    #[test]
    fn transforms_are_recomputed_as_sql_engines_print_them() {
        assert_eq!(
            Transform::Sha256.apply("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            Transform::Md5.apply("abc"),
            "900150983cd24fb0d6963f7d28e17f72"
        );
        assert_eq!(
            Transform::Sha1.apply("abc"),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            Transform::Lower.apply("Ada.LOVE@Example.ORG"),
            "ada.love@example.org"
        );
        assert_eq!(Transform::Upper.apply("cgb0000113"), "CGB0000113");
        // RFC 4231-style check against a published HMAC-SHA256 vector.
        let key = Transform::HmacSha256(std::sync::Arc::new(secrecy::SecretSlice::from(
            b"key".to_vec(),
        )));
        assert_eq!(
            key.apply("The quick brown fox jumps over the lazy dog"),
            "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
        );
        assert_eq!(
            format!("{key:?}"),
            "hmac_sha256",
            "Debug never shows the key"
        );
        assert!(Transform::parse("crc32", None).is_err());
        let e = Transform::parse("hmac_sha256", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("key_env"), "{e}");
    }

    #[test]
    fn a_transform_then_a_pattern_selects_exactly_the_subjects_values() {
        let d = DerivedColumn {
            table: "web.users".into(),
            column: "login".into(),
            from: "email".into(),
            transform: Some(Transform::Lower),
            pattern: Pattern::parse("u:{id}").unwrap(),
            label: label("web.users", "login"),
        };
        assert_eq!(d.literal("Ada@X.org"), "u:ada@x.org");
        assert!(d.matches("u:ada@x.org", "ADA@x.org"));
        assert!(!d.matches("u:ada@x.orgx", "ada@x.org"));
        assert_eq!(d.how(), "lower then u:{id}");
        let h = DerivedColumn {
            transform: Some(Transform::Sha256),
            pattern: Pattern::parse(ID).unwrap(),
            ..d
        };
        assert_eq!(h.how(), "sha256");
        let p = h.predicate(&["abc".into()]);
        assert_eq!(
            p,
            Predicate::is_in(
                "login",
                vec![Value::Str(
                    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".into()
                )]
            )
        );
    }

    #[test]
    fn ambiguous_patterns_are_refused() {
        for s in [
            "a-{id}*", "*{id}", "*{id}*", "a", "{id}{id}", "a*{id}", "x{id}*y",
        ] {
            assert!(Pattern::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn predicates_select_only_the_subjects_rows() {
        use arrow::array::{RecordBatch, StringArray};
        use std::sync::Arc;
        let b = RecordBatch::try_from_iter(vec![(
            "session_id",
            Arc::new(StringArray::from(vec![
                Some("a-11#1"),
                Some("a-113#1"),
                Some("a-11#22"),
                None,
                Some("xa-11#1"),
            ])) as arrow::array::ArrayRef,
        )])
        .unwrap();
        let p = Pattern::parse("a-{id}#*")
            .unwrap()
            .predicate("session_id", &["11".into()]);
        let sel: Vec<bool> = p.evaluate(&b).unwrap().iter().map(|v| v.unwrap()).collect();
        assert_eq!(sel, vec![true, false, true, false, false]);
        let p = Pattern::parse("*a-{id}#1")
            .unwrap()
            .predicate("session_id", &["11".into()]);
        let sel: Vec<bool> = p.evaluate(&b).unwrap().iter().map(|v| v.unwrap()).collect();
        assert_eq!(sel, vec![true, false, false, false, true]);
    }
}
