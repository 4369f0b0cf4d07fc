//! `governance/policy.toml`: who may read what through `lethe query --as PRINCIPAL`, and where
//! consent lives.
//!
//! ```toml
//! [consent]                                   # consent states (see crate::access::consent)
//! table = "consent.records"
//! subject = "learner"
//! [consent.purposes]
//! marketing = "crm.learners.marketing_consent"   # the attribute derived from the current state
//!
//! [principals]
//! "marketing-1" = { role = "marketing" }
//! analyst_gb = { role = "analysts", attributes = { country = "GB" } }
//!
//! [roles.analysts]
//! tables = ["crm.*", "learning.*"]            # what the role may read: exact names, ns.*, *
//! unclassified = "deny"                       # the default; only a privacy role says "allow"
//! [roles.analysts.masks]                      # by classification (metadata.toml)
//! identifier = "pseudonym"                    # columns that identify a subject
//! personal = "null"
//! sensitive = "null"
//! internal = "clear"
//! public = "clear"
//! [roles.analysts.columns."crm.learners"]     # per-column overrides
//! date_of_birth = "year"
//! city = { prefix = 3 }
//! [roles.analysts.row_filters]                # SQL boolean expressions over the raw table
//! "crm.learners" = "status <> 'suspended'"    # `$name` is the principal's attribute `name`
//! ```
//!
//! Restricted subjects (a restriction request, [`crate::requests`]): their rows are left out
//! of every table a role reads, unless the role says `restricted = "show"` (the privacy
//! role, which handles the dispute). The default is `"hide"`.
//!
//! Masks: `clear`; `null`; `pseudonym` (HMAC-SHA256 of the value's text under the pseudonym
//! key, first 16 hex characters: the same value gives the same pseudonym in every table, so
//! joins still work); `year` (a date or timestamp's year); `{ prefix = N }` (a string's first N
//! characters, e.g. a postcode's area).
//!
//! Guarantees (fail-closed):
//! - A missing policy file refuses every principal; an unknown principal and a principal with
//!   no role are refused; a table no pattern of the role grants is refused.
//! - A classification the role's `masks` doesn't name is masked `null`.
//! - A table with any column nobody classified in `metadata.toml` is refused to every role
//!   except one with `unclassified = "allow"` (the privacy role), which reads such columns
//!   clear.
//! - [`Policy::check`] validates the file against the catalog before any query runs: every
//!   table and column it names exists, every mask fits its column's type, every row filter
//!   parses against its table as a boolean expression, every principal's role exists. A policy
//!   that doesn't match the catalog refuses every query, naming file, line and key.
//!
//! Not guaranteed: row filters see only their own table (no subqueries); principals are
//! trusted as given (authentication is the job of whatever runs `lethe query`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow::datatypes::{DataType, Schema as ArrowSchema};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::{Expr, ExprSchemable};
use datafusion::prelude::SessionContext;
use secrecy::{ExposeSecret, SecretBox};
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::governance::metadata::Classification;
use crate::keys::KeySource;
use crate::tomlfile::{self, TomlFile};

/// The policy's file name in the governance folder.
pub const POLICY_FILE: &str = "policy.toml";
/// The environment variable holding the pseudonym key.
pub const KEY_ENV: &str = "LETHE_PSEUDONYM_KEY";
/// The environment variable naming a file that holds the pseudonym key.
pub const KEY_FILE_ENV: &str = "LETHE_PSEUDONYM_KEY_FILE";
/// The key file lethe falls back to, in the state folder.
pub const DEFAULT_KEY_FILE: &str = "pseudonym.key";

/// How a column is shown to a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mask {
    /// As stored.
    Clear,
    /// Always null (the column keeps its type).
    Null,
    /// HMAC-SHA256 of the value's text under the pseudonym key, first 16 hex characters.
    Pseudonym,
    /// The year of a date or timestamp.
    Year,
    /// A string's first N characters.
    Prefix(u32),
}

impl std::fmt::Display for Mask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mask::Clear => f.write_str("clear"),
            Mask::Null => f.write_str("null"),
            Mask::Pseudonym => f.write_str("pseudonym"),
            Mask::Year => f.write_str("year"),
            Mask::Prefix(n) => write!(f, "prefix {n}"),
        }
    }
}

impl Serialize for Mask {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Mask {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Prefix {
            prefix: u32,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Name(String),
            Prefix(Prefix),
        }
        let bad = || {
            serde::de::Error::custom(
                "a mask is \"clear\", \"null\", \"pseudonym\", \"year\" or { prefix = N }",
            )
        };
        match Raw::deserialize(d).map_err(|_| bad())? {
            Raw::Name(n) => match n.as_str() {
                "clear" => Ok(Mask::Clear),
                "null" => Ok(Mask::Null),
                "pseudonym" => Ok(Mask::Pseudonym),
                "year" => Ok(Mask::Year),
                _ => Err(bad()),
            },
            Raw::Prefix(p) if p.prefix > 0 => Ok(Mask::Prefix(p.prefix)),
            Raw::Prefix(_) => Err(serde::de::Error::custom(
                "a prefix keeps at least 1 character",
            )),
        }
    }
}

/// Where consent lives and which attributes are derived from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsentConfig {
    /// The Iceberg table of consent records (`consent.records`).
    pub table: String,
    /// Whose consent (a subject of subjects.toml); its root identifier names the ID column.
    pub subject: String,
    /// Purpose -> the boolean attribute derived from its current state
    /// (`namespace.table.column`).
    #[serde(default)]
    pub purposes: BTreeMap<String, String>,
}

/// A principal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Principal {
    /// Its role (a principal without one is refused).
    #[serde(default)]
    pub role: Option<String>,
    /// Attributes row filters read as `$name` (typed as text).
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
}

/// Whether a role may read tables with unclassified columns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unclassified {
    /// Refused (the default).
    #[default]
    Deny,
    /// Read clear (the privacy role).
    Allow,
}

/// Whether a role sees the rows of subjects under a restriction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Restricted {
    /// Left out (the default).
    #[default]
    Hide,
    /// Shown (the privacy role, which handles the dispute).
    Show,
}

/// Masks by classification. A classification left out is masked `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassMasks {
    /// Columns that identify a subject (`identifies` in metadata.toml, or a subject's root
    /// identifier column by name), whatever their classification.
    pub identifier: Option<Mask>,
    /// `personal` columns.
    pub personal: Option<Mask>,
    /// `sensitive` columns.
    pub sensitive: Option<Mask>,
    /// `internal` columns.
    pub internal: Option<Mask>,
    /// `public` columns.
    pub public: Option<Mask>,
}

/// A role.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Role {
    /// Table patterns the role may read: `ns.table`, `ns.*`, `*`.
    #[serde(default)]
    pub tables: Vec<String>,
    /// Tables with unclassified columns: deny (default) or allow.
    #[serde(default)]
    pub unclassified: Unclassified,
    /// Masks by classification.
    #[serde(default)]
    pub masks: ClassMasks,
    /// Per-table, per-column mask overrides.
    #[serde(default)]
    pub columns: BTreeMap<String, BTreeMap<String, Mask>>,
    /// Per-table row filters: SQL boolean expressions over the table's stored columns.
    #[serde(default)]
    pub row_filters: BTreeMap<String, String>,
    /// Rows of restricted subjects: hide (default) or show.
    #[serde(default)]
    pub restricted: Restricted,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyDoc {
    /// Consent.
    #[serde(default)]
    pub consent: Option<ConsentConfig>,
    /// Principals by name.
    #[serde(default)]
    pub principals: BTreeMap<String, Principal>,
    /// Roles by name.
    #[serde(default)]
    pub roles: BTreeMap<String, Role>,
}

/// `policy.toml`, loaded.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The file.
    pub file: TomlFile<PolicyDoc>,
}

/// A principal resolved to its role.
#[derive(Debug, Clone)]
pub struct Resolved<'a> {
    /// The principal's name.
    pub principal: &'a str,
    /// The role's name.
    pub role_name: &'a str,
    /// The role.
    pub role: &'a Role,
    /// The principal's attributes.
    pub attributes: &'a BTreeMap<String, String>,
}

/// What a role sees of one table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableAccess {
    /// The table.
    pub table: String,
    /// The row filter's text, if the role has one for the table.
    pub row_filter: Option<String>,
    /// Every column with its mask, in schema order.
    pub columns: Vec<(String, Mask)>,
}

impl TableAccess {
    /// The rules applied, for the audit log: the row filter and every column not shown clear.
    pub fn rules(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.row_filter.is_some() {
            out.push(format!("row_filter {}", self.table));
        }
        for (c, m) in &self.columns {
            if *m != Mask::Clear {
                out.push(format!("mask {}.{c}: {m}", self.table));
            }
        }
        out
    }
}

/// Whether `table` (`ns.table`) matches a pattern (`ns.table`, `ns.*`, `*`).
pub fn pattern_matches(pattern: &str, table: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.strip_suffix(".*") {
        Some(ns) => table
            .rsplit_once('.')
            .is_some_and(|(table_ns, _)| table_ns == ns),
        None => pattern == table,
    }
}

impl Policy {
    /// The policy file of a governance folder.
    pub fn path_in(governance: &Path) -> PathBuf {
        governance.join(POLICY_FILE)
    }

    /// Loads `policy.toml` from the governance folder. A missing file is an error: without a
    /// policy nobody may query.
    pub fn load(governance: &Path) -> Result<Policy> {
        let path = Self::path_in(governance);
        if !path.exists() {
            return Err(Error::invalid(format!(
                "no access policy at {}: lethe query refuses every principal without one",
                path.display()
            )));
        }
        Ok(Policy {
            file: tomlfile::load(&path)?,
        })
    }

    /// Parses a policy from text (tests, `lethe policy check` on a draft).
    pub fn parse(path: &Path, text: &str) -> Result<Policy> {
        Ok(Policy {
            file: TomlFile {
                path: path.to_path_buf(),
                text: text.to_string(),
                value: tomlfile::parse(path, text)?,
            },
        })
    }

    /// The parsed document.
    pub fn doc(&self) -> &PolicyDoc {
        &self.file.value
    }

    /// The consent section; an error when there is none.
    pub fn consent(&self) -> Result<&ConsentConfig> {
        self.doc().consent.as_ref().ok_or_else(|| {
            Error::invalid(format!(
                "{} has no [consent] section (table, subject, purposes)",
                self.file.path.display()
            ))
        })
    }

    /// Resolves a principal to its role; the reason of a refusal otherwise.
    pub fn resolve(&self, principal: &str) -> std::result::Result<Resolved<'_>, String> {
        let (name, p) = self
            .doc()
            .principals
            .get_key_value(principal)
            .ok_or_else(|| {
                format!(
                    "unknown principal `{principal}`: {} names no such principal",
                    self.file.path.display()
                )
            })?;
        let role_name = p
            .role
            .as_deref()
            .filter(|r| !r.is_empty())
            .ok_or_else(|| format!("principal `{principal}` is in no role"))?;
        let (role_name, role) =
            self.doc().roles.get_key_value(role_name).ok_or_else(|| {
                format!("principal `{principal}` has the unknown role `{role_name}`")
            })?;
        Ok(Resolved {
            principal: name,
            role_name,
            role,
            attributes: &p.attributes,
        })
    }

    /// What `role` sees of `table`, whose columns are `columns` (top-level, with their Arrow
    /// types); the reason of a refusal otherwise (not granted, or unclassified columns for a
    /// role that may not read them).
    ///
    /// A nested column (struct, list, map) is masked by its fields: each field gets its mask as
    /// a column would (a per-column override by its path, `identifier`, its classification or
    /// its nearest classified parent's); the column is shown clear when every field is clear,
    /// and null whole otherwise (fail-closed: no field is shown that a mask would change).
    pub fn access(
        &self,
        r: &Resolved<'_>,
        table: &str,
        columns: &[(String, DataType)],
        gov: &Governance,
    ) -> std::result::Result<TableAccess, String> {
        let role = r.role;
        if !role.tables.iter().any(|p| pattern_matches(p, table)) {
            return Err(format!(
                "role `{}` may not read `{table}` (no pattern in roles.{}.tables grants it)",
                r.role_name, r.role_name
            ));
        }
        // Every column by its leaves (a top-level primitive column is its own leaf).
        let leaves: Vec<(String, Vec<String>)> = columns
            .iter()
            .map(|(c, t)| {
                let mut l = Vec::new();
                leaf_paths(c, t, &mut l);
                (c.clone(), l.into_iter().map(|(p, _)| p).collect())
            })
            .collect();
        let unclassified: Vec<&str> = leaves
            .iter()
            .flat_map(|(_, l)| l.iter())
            .filter(|c| gov.metadata.classification(table, c).is_none())
            .map(String::as_str)
            .collect();
        if !unclassified.is_empty() && role.unclassified != Unclassified::Allow {
            return Err(format!(
                "`{table}` has columns nobody classified in metadata.toml ({}): only a role with unclassified = \"allow\" may read it",
                unclassified.join(", ")
            ));
        }
        let all: Vec<String> = leaves.iter().flat_map(|(_, l)| l.clone()).collect();
        let identifiers = identifier_columns(gov, table, &all);
        let overrides = role.columns.get(table);
        let mask_of = |c: &String| -> Mask {
            if let Some(m) = overrides.and_then(|o| o.get(c)) {
                *m
            } else if identifiers.contains(c) && role.masks.identifier.is_some() {
                role.masks.identifier.unwrap_or(Mask::Null)
            } else {
                match gov.metadata.classification(table, c) {
                    Some(Classification::Personal) => role.masks.personal,
                    Some(Classification::Sensitive) => role.masks.sensitive,
                    Some(Classification::Internal) => role.masks.internal,
                    Some(Classification::Public) => role.masks.public,
                    // Only reachable with unclassified = "allow".
                    None => Some(Mask::Clear),
                }
                .unwrap_or(Mask::Null)
            }
        };
        let out = leaves
            .iter()
            .map(|(c, l)| {
                let mask = match (overrides.and_then(|o| o.get(c)), l.as_slice()) {
                    (Some(m), _) => *m,
                    (None, [only]) if only == c => mask_of(c),
                    (None, l) => {
                        if l.iter().all(|f| mask_of(f) == Mask::Clear) {
                            Mask::Clear
                        } else {
                            Mask::Null
                        }
                    }
                };
                (c.clone(), mask)
            })
            .collect();
        Ok(TableAccess {
            table: table.to_string(),
            row_filter: role.row_filters.get(table).cloned(),
            columns: out,
        })
    }

    /// Checks the policy against the catalog (`tables`: every table's schema as DataFusion
    /// sees it) and the governance files. Errors name the file, line and key.
    pub fn check(&self, tables: &BTreeMap<String, ArrowSchema>, gov: &Governance) -> Result<()> {
        let f = &self.file;
        let doc = self.doc();
        if let Some(c) = &doc.consent {
            if lethe_iceberg::catalog::TableName::parse(&c.table).is_err() {
                return Err(f.error_at(
                    "consent.table",
                    format!("`{}` is not a table name", c.table),
                ));
            }
            if !gov.subjects.value.contains_key(&c.subject) {
                return Err(f.error_at(
                    "consent.subject",
                    format!("unknown subject `{}` (see subjects.toml)", c.subject),
                ));
            }
            for (purpose, attr) in &c.purposes {
                let key = format!("consent.purposes.{purpose}");
                let (t, col) = crate::governance::subjects::split_column(attr)
                    .map_err(|e| f.error_at(&key, e.to_string()))?;
                let schema = tables
                    .get(&t)
                    .ok_or_else(|| f.error_at(&key, format!("unknown table `{t}`")))?;
                let field = schema
                    .field_with_name(&col)
                    .map_err(|_| f.error_at(&key, format!("table `{t}` has no column `{col}`")))?;
                if field.data_type() != &DataType::Boolean {
                    return Err(f.error_at(
                        &key,
                        format!("`{attr}` is {}, not a boolean", field.data_type()),
                    ));
                }
            }
        }
        for (name, p) in &doc.principals {
            if let Some(r) = &p.role
                && !r.is_empty()
                && !doc.roles.contains_key(r)
            {
                return Err(f.error_at(
                    &format!("principals.{name}.role"),
                    format!("unknown role `{r}`"),
                ));
            }
        }
        for (rname, role) in &doc.roles {
            for (i, pat) in role.tables.iter().enumerate() {
                if !tables.keys().any(|t| pattern_matches(pat, t)) {
                    return Err(f.error_at(
                        &format!("roles.{rname}.tables"),
                        format!("entry {}: `{pat}` matches no table in the catalog", i + 1),
                    ));
                }
            }
            for (t, cols) in &role.columns {
                let key = format!("roles.{rname}.columns.\"{t}\"");
                let schema = tables
                    .get(t)
                    .ok_or_else(|| f.error_at(&key, format!("unknown table `{t}`")))?;
                let mut paths = Vec::new();
                for field in schema.fields() {
                    all_paths(field.name(), field.data_type(), &mut paths);
                }
                for (c, m) in cols {
                    let at = if c.contains('.') {
                        format!("{key}.\"{c}\"")
                    } else {
                        format!("{key}.{c}")
                    };
                    let Some((_, ty)) = paths.iter().find(|(p, _)| p == c) else {
                        let near = lethe_iceberg::nested::nearest_name(
                            paths.iter().map(|(p, _)| p.as_str()),
                            c,
                        );
                        return Err(f.error_at(
                            &at,
                            match near {
                                Some(n) => format!(
                                    "table `{t}` has no column `{c}` (the nearest is `{n}`)"
                                ),
                                None => format!("table `{t}` has no column `{c}`"),
                            },
                        ));
                    };
                    mask_fits(*m, ty).map_err(|e| f.error_at(&at, e))?;
                }
            }
            for (t, text) in &role.row_filters {
                let key = format!("roles.{rname}.row_filters.\"{t}\"");
                let schema = tables
                    .get(t)
                    .ok_or_else(|| f.error_at(&key, format!("unknown table `{t}`")))?;
                if !role.tables.iter().any(|p| pattern_matches(p, t)) {
                    return Err(f.error_at(
                        &key,
                        format!("role `{rname}` may not read `{t}`: a row filter for it applies to nothing"),
                    ));
                }
                let df = DFSchema::try_from_qualified_schema(t.as_str(), schema)
                    .map_err(|e| Error::Internal(e.to_string()))?;
                row_filter_expr(text, &df, None).map_err(|e| f.error_at(&key, e))?;
            }
            for (class, m) in [
                ("identifier", role.masks.identifier),
                ("personal", role.masks.personal),
                ("sensitive", role.masks.sensitive),
                ("internal", role.masks.internal),
                ("public", role.masks.public),
            ] {
                if matches!(m, Some(Mask::Year | Mask::Prefix(_))) {
                    return Err(f.error_at(
                        &format!("roles.{rname}.masks.{class}"),
                        "year and prefix depend on a column's type: set them per column in roles.<role>.columns",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Every path of an Arrow column, as Iceberg names them (`contact`, `contact.email`,
/// `addresses.element`, `attributes.key`, `attributes.value`), with its type.
fn all_paths(name: &str, t: &DataType, out: &mut Vec<(String, DataType)>) {
    out.push((name.to_string(), t.clone()));
    match t {
        DataType::Struct(fs) => {
            for f in fs {
                all_paths(&format!("{name}.{}", f.name()), f.data_type(), out);
            }
        }
        DataType::List(f) | DataType::LargeList(f) => {
            all_paths(&format!("{name}.element"), f.data_type(), out)
        }
        DataType::Map(entries, _) => {
            if let DataType::Struct(kv) = entries.data_type() {
                for (f, part) in kv.iter().zip(["key", "value"]) {
                    all_paths(&format!("{name}.{part}"), f.data_type(), out);
                }
            }
        }
        _ => {}
    }
}

/// The leaf paths of an Arrow column (itself, when it is not nested).
fn leaf_paths(name: &str, t: &DataType, out: &mut Vec<(String, DataType)>) {
    let mut all = Vec::new();
    all_paths(name, t, &mut all);
    out.extend(all.into_iter().filter(|(_, t)| {
        !matches!(
            t,
            DataType::Struct(_) | DataType::List(_) | DataType::LargeList(_) | DataType::Map(..)
        )
    }));
}

/// Columns of `table` that identify some subject: classified `identifies = ...`, or named as a
/// subject's root identifier.
pub fn identifier_columns(gov: &Governance, table: &str, columns: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for s in gov.subjects.value.keys() {
        for c in crate::governance::identifiers::identifier_columns(gov, s, table, columns) {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// Whether a mask can apply to a column of type `t`.
pub fn mask_fits(m: Mask, t: &DataType) -> std::result::Result<(), String> {
    match m {
        Mask::Year
            if !(matches!(
                t,
                DataType::Date32 | DataType::Date64 | DataType::Timestamp(..)
            )) =>
        {
            Err(format!("year applies to dates and timestamps, not {t}"))
        }
        Mask::Prefix(_)
            if !matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) =>
        {
            Err(format!("prefix applies to strings, not {t}"))
        }
        _ => Ok(()),
    }
}

/// Parses a row filter against its table's schema, binding `$name` placeholders to the
/// principal's attributes (as typed text literals, never spliced into SQL). With `attributes`
/// None (checking the file) placeholders are bound to a dummy text. The result must be boolean.
pub fn row_filter_expr(
    text: &str,
    schema: &DFSchema,
    attributes: Option<&BTreeMap<String, String>>,
) -> std::result::Result<Expr, String> {
    let ctx = SessionContext::new();
    let expr = ctx
        .parse_sql_expr(text, schema)
        .map_err(|e| format!("the row filter doesn't parse against the table: {e}"))?;
    let mut missing: Option<String> = None;
    let bound = expr
        .transform_up(|e| {
            if let Expr::Placeholder(p) = &e {
                let name = p.id.trim_start_matches('$').to_string();
                let value = match attributes {
                    None => Some(String::from("x")),
                    Some(a) => a.get(&name).cloned(),
                };
                return Ok(match value {
                    Some(v) => Transformed::yes(Expr::Literal(ScalarValue::Utf8(Some(v)), None)),
                    None => {
                        missing.get_or_insert(name);
                        Transformed::no(e)
                    }
                });
            }
            Ok(Transformed::no(e))
        })
        .map_err(|e| e.to_string())?
        .data;
    if let Some(m) = missing {
        return Err(format!(
            "the principal has no attribute `{m}` that the row filter reads as ${m}"
        ));
    }
    match bound.get_type(schema) {
        Ok(DataType::Boolean) => Ok(bound),
        Ok(t) => Err(format!("the row filter is {t}, not a boolean expression")),
        Err(e) => Err(format!("the row filter doesn't type-check: {e}")),
    }
}

/// The pseudonym key. Its Debug output never shows the key, and nothing in lethe prints it.
pub struct PseudonymKey(SecretBox<Vec<u8>>);

impl std::fmt::Debug for PseudonymKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PseudonymKey(<redacted>)")
    }
}

const KEY_SOURCE: KeySource = KeySource {
    what: "pseudonym",
    env: KEY_ENV,
    file_env: KEY_FILE_ENV,
};

impl PseudonymKey {
    /// A key from bytes (at least 16).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<PseudonymKey> {
        KEY_SOURCE.key(bytes).map(PseudonymKey)
    }

    /// The key from `LETHE_PSEUDONYM_KEY`, else the file `LETHE_PSEUDONYM_KEY_FILE` names, else
    /// `state/pseudonym.key` when it exists. Errors name the variable or file, never a byte of
    /// the key.
    pub fn load(state: &Path) -> Result<PseudonymKey> {
        let fallback = state.join(DEFAULT_KEY_FILE);
        match KEY_SOURCE.load(fallback.exists().then_some(fallback))? {
            Some(key) => Ok(PseudonymKey(key)),
            None => Err(Error::Refused(format!(
                "no pseudonym key: set {KEY_ENV} or {KEY_FILE_ENV} (or write {}); the policy pseudonymises columns this principal reads",
                state.join(DEFAULT_KEY_FILE).display()
            ))),
        }
    }

    /// The key's bytes (only the pseudonym function reads them).
    pub(crate) fn expose(&self) -> &[u8] {
        self.0.expose_secret()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Field;

    const DRAFT: &str = r#"
[principals]
alice = { role = "analysts", attributes = { country = "GB" } }
nobody = {}

[roles.analysts]
tables = ["crm.*"]
[roles.analysts.masks]
identifier = "pseudonym"
personal = "null"
internal = "clear"
[roles.analysts.columns."crm.people"]
postcode = { prefix = 3 }
[roles.analysts.row_filters]
"crm.people" = "country = $country"
"#;

    fn typed(names: &[&str]) -> Vec<(String, DataType)> {
        names
            .iter()
            .map(|n| (n.to_string(), DataType::Utf8))
            .collect()
    }

    fn schemas() -> BTreeMap<String, ArrowSchema> {
        let mut m = BTreeMap::new();
        m.insert(
            "crm.people".to_string(),
            ArrowSchema::new(vec![
                Field::new("person_id", DataType::Int64, false),
                Field::new("postcode", DataType::Utf8, true),
                Field::new("country", DataType::Utf8, true),
                Field::new("born", DataType::Date32, true),
            ]),
        );
        m
    }

    fn gov(dir: &Path) -> Governance {
        std::fs::write(
            dir.join("metadata.toml"),
            "[tables.\"crm.people\".columns]\nperson_id = { classification = \"internal\", identifies = \"person\" }\npostcode = \"personal\"\ncountry = \"internal\"\nborn = \"personal\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("subjects.toml"),
            "[person]\nidentifiers = [\"crm.people.person_id\"]\n",
        )
        .unwrap();
        Governance::load(dir).unwrap()
    }

    fn policy(text: &str) -> Policy {
        Policy::parse(Path::new("governance/policy.toml"), text).unwrap()
    }

    #[test]
    fn masks_follow_classification_identifiers_and_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let g = gov(dir.path());
        let p = policy(DRAFT);
        p.check(&schemas(), &g).unwrap();
        let r = p.resolve("alice").unwrap();
        let cols = typed(&["person_id", "postcode", "country", "born"]);
        let a = p.access(&r, "crm.people", &cols, &g).unwrap();
        assert_eq!(
            a.columns,
            vec![
                ("person_id".to_string(), Mask::Pseudonym),
                ("postcode".to_string(), Mask::Prefix(3)),
                ("country".to_string(), Mask::Clear),
                // personal, named null; a classification left out would be null too
                ("born".to_string(), Mask::Null),
            ]
        );
        assert_eq!(a.row_filter.as_deref(), Some("country = $country"));
        assert!(a.rules().contains(&"row_filter crm.people".to_string()));
    }

    #[test]
    fn a_nested_column_is_clear_only_when_every_field_is() {
        let dir = tempfile::tempdir().unwrap();
        gov(dir.path());
        std::fs::write(
            dir.path().join("metadata.toml"),
            "[tables.\"crm.people\".columns]\nperson_id = { classification = \"internal\", identifies = \"person\" }\n\"contact.email\" = \"personal\"\n\"contact.lang\" = \"internal\"\nprefs = \"internal\"\n",
        )
        .unwrap();
        let g = Governance::load(dir.path()).unwrap();
        let contact = DataType::Struct(
            vec![
                Field::new("email", DataType::Utf8, true),
                Field::new("lang", DataType::Utf8, true),
            ]
            .into(),
        );
        let prefs = DataType::List(std::sync::Arc::new(Field::new(
            "element",
            DataType::Utf8,
            true,
        )));
        let cols = vec![
            ("person_id".to_string(), DataType::Int64),
            ("contact".to_string(), contact.clone()),
            ("prefs".to_string(), prefs),
        ];
        let p = policy(DRAFT);
        let r = p.resolve("alice").unwrap();
        let a = p.access(&r, "crm.people", &cols, &g).unwrap();
        assert_eq!(a.columns[1], ("contact".to_string(), Mask::Null));
        assert_eq!(a.columns[2], ("prefs".to_string(), Mask::Clear));
        // An override by path clears the personal field: then the struct is clear.
        let open = policy(&DRAFT.replace(
            "postcode = { prefix = 3 }",
            "postcode = { prefix = 3 }\n\"contact.email\" = \"clear\"",
        ));
        let r = open.resolve("alice").unwrap();
        let a = open.access(&r, "crm.people", &cols, &g).unwrap();
        assert_eq!(a.columns[1], ("contact".to_string(), Mask::Clear));
        // A field nobody classified closes the table.
        let cols = vec![(
            "contact".to_string(),
            DataType::Struct(vec![Field::new("fax", DataType::Utf8, true)].into()),
        )];
        let err = p.access(&r, "crm.people", &cols, &g).unwrap_err();
        assert!(err.contains("contact.fax"), "{err}");
        // check() resolves nested overrides and names the nearest path of a misspelt one.
        let mut tables = schemas();
        let mut fields: Vec<Field> = tables["crm.people"]
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new("contact", contact, true));
        tables.insert("crm.people".into(), ArrowSchema::new(fields));
        open.check(&tables, &g).unwrap();
        let bad =
            policy(&DRAFT.replace("postcode = { prefix = 3 }", "\"contact.emial\" = \"clear\""));
        let e = bad.check(&tables, &g).unwrap_err().to_string();
        assert!(e.contains("the nearest is `contact.email`"), "{e}");
    }

    #[test]
    fn unknown_principal_no_role_unknown_role_and_ungranted_table_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let g = gov(dir.path());
        let p = policy(&DRAFT.replace("nobody = {}", "nobody = {}\nbob = { role = \"ghosts\" }"));
        assert!(
            p.resolve("mallory")
                .unwrap_err()
                .contains("unknown principal")
        );
        assert!(p.resolve("nobody").unwrap_err().contains("in no role"));
        assert!(p.resolve("bob").unwrap_err().contains("unknown role"));
        let r = p.resolve("alice").unwrap();
        let err = p.access(&r, "billing.payments", &[], &g).unwrap_err();
        assert!(err.contains("may not read"), "{err}");
    }

    #[test]
    fn unclassified_columns_close_the_table_except_for_allow() {
        let dir = tempfile::tempdir().unwrap();
        let g = gov(dir.path());
        let p = policy(DRAFT);
        let r = p.resolve("alice").unwrap();
        let cols = typed(&["person_id", "shoe_size"]);
        let err = p.access(&r, "crm.people", &cols, &g).unwrap_err();
        assert!(err.contains("shoe_size"), "{err}");
        let open = policy(&DRAFT.replace(
            "tables = [\"crm.*\"]",
            "tables = [\"crm.*\"]\nunclassified = \"allow\"",
        ));
        let r = open.resolve("alice").unwrap();
        let a = open.access(&r, "crm.people", &cols, &g).unwrap();
        assert_eq!(a.columns[1], ("shoe_size".to_string(), Mask::Clear));
    }

    #[test]
    fn check_names_unknown_tables_and_columns_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let g = gov(dir.path());
        let p = policy(&DRAFT.replace("postcode = { prefix = 3 }", "zipcode = { prefix = 3 }"));
        let err = p.check(&schemas(), &g).unwrap_err().to_string();
        assert!(err.starts_with("governance/policy.toml:13:"), "{err}");
        assert!(err.contains("no column `zipcode`"), "{err}");

        let p = policy(&DRAFT.replace("\"crm.people\" = \"country", "\"crm.ghosts\" = \"country"));
        let err = p.check(&schemas(), &g).unwrap_err().to_string();
        assert!(err.contains("unknown table `crm.ghosts`"), "{err}");

        let p = policy(&DRAFT.replace("country = $country", "continent = $country"));
        let err = p.check(&schemas(), &g).unwrap_err().to_string();
        assert!(
            err.contains("row_filters") && err.contains("continent"),
            "{err}"
        );

        let p = policy(&DRAFT.replace("country = $country", "country"));
        let err = p.check(&schemas(), &g).unwrap_err().to_string();
        assert!(err.contains("not a boolean"), "{err}");

        let p = policy(&DRAFT.replace("tables = [\"crm.*\"]", "tables = [\"hr.*\"]"));
        let err = p.check(&schemas(), &g).unwrap_err().to_string();
        assert!(err.contains("matches no table"), "{err}");

        let p = policy(&DRAFT.replace("postcode = { prefix = 3 }", "born = { prefix = 3 }"));
        let err = p.check(&schemas(), &g).unwrap_err().to_string();
        assert!(err.contains("prefix applies to strings"), "{err}");

        let err = Policy::parse(
            Path::new("p.toml"),
            "[roles.a.masks]\npersonal = \"scramble\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("p.toml:2:"), "{err}");

        let p = policy(&DRAFT.replace("nobody = {}", "nobody = {}\nbob = { role = \"ghosts\" }"));
        let err = p.check(&schemas(), &g).unwrap_err().to_string();
        assert!(err.contains("unknown role `ghosts`"), "{err}");
    }

    #[test]
    fn placeholders_bind_attributes_as_literals() {
        let s = schemas();
        let df = DFSchema::try_from_qualified_schema("crm.people", &s["crm.people"]).unwrap();
        let mut attrs = BTreeMap::new();
        attrs.insert("country".to_string(), "GB' OR 1=1 --".to_string());
        let e = row_filter_expr("country = $country", &df, Some(&attrs)).unwrap();
        // One comparison with one literal: the attribute can't change the expression's shape.
        let shown = e.to_string();
        assert!(shown.contains("Utf8(\"GB' OR 1=1 --\")"), "{shown}");
        let err = row_filter_expr("country = $region", &df, Some(&attrs)).unwrap_err();
        assert!(err.contains("no attribute `region`"), "{err}");
    }

    #[test]
    fn patterns() {
        assert!(pattern_matches("*", "a.b"));
        assert!(pattern_matches("crm.*", "crm.learners"));
        assert!(!pattern_matches("crm.*", "crmx.learners"));
        assert!(!pattern_matches("crm.*", "consent.records"));
        assert!(pattern_matches("crm.learners", "crm.learners"));
        assert!(!pattern_matches("crm.learners", "crm.learners2"));
    }

    #[test]
    fn key_debug_is_redacted_and_short_keys_refused() {
        let k = PseudonymKey::from_bytes(b"0123456789abcdef0123".to_vec()).unwrap();
        assert_eq!(format!("{k:?}"), "PseudonymKey(<redacted>)");
        assert!(PseudonymKey::from_bytes(b"short".to_vec()).is_err());
    }
}
