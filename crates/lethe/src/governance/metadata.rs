//! `governance/metadata.toml`: what each column holds.
//!
//! ```toml
//! [tables."crm.learners"]
//! owner = "crm team"
//! source = "nightly export of the CRM application"   # loaded from outside: not produced by lineage
//! key = ["learner_id"]                               # the row key (IDs of rows a subject owns)
//! [tables."crm.learners".columns]
//! learner_id = { classification = "internal", identifies = "learner" }
//! email = "personal"
//! ```
//!
//! Classifications: `personal`, `sensitive`, `internal`, `public`. A column nobody classified is
//! treated as closed (fail-closed) by the access policy and by the generated metrics properties.
//!
//! Nested fields are classified by path, quoted: `"contact.email" = "personal"`,
//! `"addresses.element.street" = "personal"`, `"attributes.value" = "sensitive"`. An entry for
//! a struct, list or map classifies every field under it that has no entry of its own. `key`
//! may name a struct field too.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::tomlfile::{self, TomlFile};

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Classification {
    /// Identifies or describes a person.
    Personal,
    /// Special-category or financial data.
    Sensitive,
    /// Business data, not about a person.
    Internal,
    /// May be published.
    Public,
}

impl Classification {
    /// Whether manifests must not keep its values (personal and sensitive).
    pub fn is_protected(self) -> bool {
        matches!(self, Classification::Personal | Classification::Sensitive)
    }
}

impl std::fmt::Display for Classification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Classification::Personal => "personal",
            Classification::Sensitive => "sensitive",
            Classification::Internal => "internal",
            Classification::Public => "public",
        })
    }
}

/// A column's entry: a bare classification or a table with more.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ColumnEntry {
    /// `email = "personal"`.
    Short(Classification),
    /// `learner_id = { classification = "internal", identifies = "learner" }`.
    Full(ColumnMeta),
}

/// By the entry's shape, so that an error says what is wrong in it (an unknown
/// classification, an unknown key of the table) rather than that no shape matched.
impl<'de> Deserialize<'de> for ColumnEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        match toml::Value::deserialize(d)? {
            v @ toml::Value::String(_) => Classification::deserialize(v)
                .map(ColumnEntry::Short)
                .map_err(D::Error::custom),
            v @ toml::Value::Table(_) => ColumnMeta::deserialize(v)
                .map(ColumnEntry::Full)
                .map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "a column's entry is a classification (\"personal\") or a table ({{ classification = \"internal\", identifies = \"learner\" }}), not {}",
                other.type_str()
            ))),
        }
    }
}

/// A column's metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnMeta {
    /// Its classification.
    pub classification: Classification,
    /// The privacy subject whose identifier this column holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifies: Option<String>,
    /// A derived identifier: the column holds `from`'s values transformed by a pattern
    /// (`derived = { from = "customer_id", pattern = "a-{id}#*" }`), see
    /// [`crate::governance::identifiers`]. Only with `identifies`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<Derived>,
    /// A free-text note for reviewers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How a derived identifier is made from another identifier's values: a deterministic
/// transform of the value (`sha256`, `md5`, `lower`...), then a pattern around it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Derived {
    /// The identifier column whose values it embeds: the subject's root identifier column (or
    /// a mapped identifier column), by column name.
    pub from: String,
    /// `{id}` with literal text around it, and `*` for any text at one end:
    /// `a-{id}` (exact), `a-{id}#*` (prefix), `*/{id}` (suffix). Default `{id}`: the
    /// (transformed) value itself.
    #[serde(default = "whole_value", skip_serializing_if = "is_whole_value")]
    pub pattern: String,
    /// A deterministic transform applied to the value's text before the pattern: `sha256`,
    /// `sha1`, `md5` (lowercase hex digests), `lower`, `upper`, or `hmac_sha256` (keyed: the
    /// key comes from the environment variable `key_env`). See
    /// [`crate::governance::identifiers::Transform`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<String>,
    /// `hmac_sha256`: the environment variable holding the key (never the key itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_env: Option<String>,
}

fn whole_value() -> String {
    crate::governance::identifiers::ID.to_string()
}

fn is_whole_value(p: &String) -> bool {
    p == crate::governance::identifiers::ID
}

impl Derived {
    /// The derivation as written in one line: `sha256`, `a-{id}#*`, `lower then u:{id}`.
    pub fn describe(&self) -> String {
        match (&self.transform, is_whole_value(&self.pattern)) {
            (Some(t), true) => t.clone(),
            (Some(t), false) => format!("{t} then {}", self.pattern),
            (None, _) => self.pattern.clone(),
        }
    }
}

impl ColumnEntry {
    /// The derived-identifier transformation, if the column holds one.
    pub fn derived(&self) -> Option<&Derived> {
        match self {
            ColumnEntry::Short(_) => None,
            ColumnEntry::Full(m) => m.derived.as_ref(),
        }
    }

    /// The classification.
    pub fn classification(&self) -> Classification {
        match self {
            ColumnEntry::Short(c) => *c,
            ColumnEntry::Full(m) => m.classification,
        }
    }

    /// The subject this column identifies, if declared.
    pub fn identifies(&self) -> Option<&str> {
        match self {
            ColumnEntry::Short(_) => None,
            ColumnEntry::Full(m) => m.identifies.as_deref(),
        }
    }
}

/// A table's metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableMeta {
    /// Who owns it (a team or role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Where it comes from when no lineage produces it (a load from outside the warehouse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Its row key columns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key: Vec<String>,
    /// Column classifications.
    #[serde(default)]
    pub columns: BTreeMap<String, ColumnEntry>,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// Tables by dotted name.
    #[serde(default)]
    pub tables: BTreeMap<String, TableMeta>,
}

/// `metadata.toml`, loaded.
pub type MetadataFile = TomlFile<Metadata>;

impl MetadataFile {
    /// Loads the file; a missing file is empty.
    pub fn load(path: &Path) -> Result<MetadataFile> {
        if !path.exists() {
            return Ok(TomlFile {
                path: path.to_path_buf(),
                text: String::new(),
                value: Metadata::default(),
            });
        }
        tomlfile::load(path)
    }

    /// Parses the text of the file at `path` (errors name file, line and key).
    pub fn parse(path: &Path, text: &str) -> Result<MetadataFile> {
        Ok(TomlFile {
            path: path.to_path_buf(),
            text: text.to_string(),
            value: tomlfile::parse(path, text)?,
        })
    }

    /// A table's metadata.
    pub fn table(&self, table: &str) -> Option<&TableMeta> {
        self.value.tables.get(table)
    }

    /// A column's classification: its own entry, or (for a nested field) the entry of the
    /// nearest enclosing struct, list or map classified as a whole. Paths are matched by full
    /// name (`addresses.element.street`) and by short name (`addresses.street`).
    pub fn classification(&self, table: &str, column: &str) -> Option<Classification> {
        self.entry(table, column).map(ColumnEntry::classification)
    }

    /// A column's entry, as [`Self::classification`] finds it.
    pub fn entry(&self, table: &str, column: &str) -> Option<&ColumnEntry> {
        let cols = &self.table(table)?.columns;
        crate::governance::paths::self_and_parents(column).find_map(|p| {
            cols.get(p)
                .or_else(|| cols.get(&crate::governance::paths::short_name(p)))
        })
    }
}

/// Renders metadata as TOML.
pub fn render(m: &Metadata) -> Result<String> {
    toml::to_string_pretty(m).map_err(|e| Error::Internal(format!("rendering metadata: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(columns: &str) -> String {
        let text =
            format!("[tables.\"lms.t\"]\nowner = \"lms\"\n[tables.\"lms.t\".columns]\n{columns}\n");
        MetadataFile::parse(Path::new("metadata.toml"), &text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_malformed_column_entry_says_what_is_wrong_in_it() {
        let e = error("contact = { classification = \"confidential\" }");
        assert!(
            e.contains("metadata.toml:4") && e.contains("unknown variant `confidential`"),
            "{e}"
        );
        let e = error("contact = { classification = \"personal\", personal = \"email\" }");
        assert!(e.contains("unknown field `personal`"), "{e}");
        let e = error("contact = \"secret\"");
        assert!(e.contains("unknown variant `secret`"), "{e}");
        let e = error("contact = 3");
        assert!(
            e.contains("a column's entry is a classification") && e.contains("not integer"),
            "{e}"
        );
        assert!(e.contains("columns.contact"), "{e}");
        let ok = "[tables.\"lms.t\"]\nowner = \"lms\"\n[tables.\"lms.t\".columns]\na = \"personal\"\nb = { classification = \"internal\", identifies = \"learner\" }\n";
        let m = MetadataFile::parse(Path::new("metadata.toml"), ok).unwrap();
        assert_eq!(
            m.classification("lms.t", "a"),
            Some(Classification::Personal)
        );
        assert_eq!(
            m.entry("lms.t", "b").and_then(|e| match e {
                ColumnEntry::Full(c) => c.identifies.clone(),
                ColumnEntry::Short(_) => None,
            }),
            Some("learner".to_string())
        );
    }
}
