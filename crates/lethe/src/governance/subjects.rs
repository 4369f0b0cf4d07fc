//! `governance/subjects.toml`: the privacy subjects an erasure can address.
//!
//! ```toml
//! [learner]
//! identifiers = ["crm.learners.learner_id"]      # root identifier column(s): table.column
//! mapped = [{ column = "email", via = "crm.learners" }]   # identifiers resolved through a mapping
//! values = ["email", "phone", "full_name", "street_address"]   # identifying values (root table) the proof scan searches
//! first_seen = "signed_up_at"                   # when the subject's first record was made
//! [learner.drill]                              # IDs reserved for the erasure drill's synthetic subject
//! from = 990000000
//! to = 990000999
//! step_budget_seconds = 300                     # a system taking longer fails the drill
//! [learner.no_action]
//! "learning.courses" = "the course catalogue holds no learner data"
//! [learner.not_identifying]                     # personal columns the proof needn't search for
//! "learning.events.user_agent" = "a browser's user agent is shared by many learners"
//! ```
//!
//! Columns may be nested paths: `values = ["contact.email", "addresses.element.street",
//! "attributes.value"]` (every list element, every map value; a struct, list or map named whole
//! means every field under it). The root identifier is a top-level column; further identifiers
//! and mapped columns may be struct fields. See [`crate::governance::paths`].
//!
//! The proof scan searches for the subject's IDs and identifying values only. Every column
//! `metadata.toml` classifies personal or sensitive in a table the plan changes must be one of
//! those (an identifier, a value, or an erased column of a REWRITE) or be declared in
//! `not_identifying` with a reason; otherwise the attestation says what wasn't searched for
//! and is not COMPLETE.
//!
//! `--subject learner=3590` addresses one subject; its ID must parse as the root identifier
//! column's type.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::tomlfile::{self, TomlFile};

/// A mapped identifier: `column` holds the subject's values as found in table `via`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapped {
    /// The column name (in `via` and wherever it is copied).
    pub column: String,
    /// The table that maps the root identifier to this column.
    pub via: String,
}

/// A privacy subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    /// Root identifier columns, `namespace.table.column`.
    pub identifiers: Vec<String>,
    /// Further identifiers, resolved through a mapping table.
    #[serde(default)]
    pub mapped: Vec<Mapped>,
    /// Identifying value columns of the root table (nested paths too), searched by the proof
    /// scan.
    #[serde(default)]
    pub values: Vec<String>,
    /// A date or timestamp column of the root table: when the subject's first record was made.
    /// Lineage edges that ended before it are not used for this subject. Without it, every
    /// edge ever observed is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen: Option<String>,
    /// Tables declared free of this subject's data, with the justification.
    #[serde(default)]
    pub no_action: BTreeMap<String, String>,
    /// Personal or sensitive columns (`namespace.table.column`, nested paths too) declared not
    /// to identify this subject, with the reason: the proof needn't search for their values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_identifying: BTreeMap<String, String>,
    /// The identifier range reserved for the erasure drill's synthetic subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drill: Option<DrillRange>,
}

/// IDs no real subject will ever have, for the erasure drill (`lethe drill`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrillRange {
    /// The first reserved ID.
    pub from: i64,
    /// The last reserved ID.
    pub to: i64,
    /// A system (table) whose drill time grows past this fails the drill.
    #[serde(default = "default_budget")]
    pub step_budget_seconds: f64,
}

fn default_budget() -> f64 {
    300.0
}

impl Subject {
    /// The root identifier: (table, column) of the first entry.
    pub fn root(&self) -> Result<(String, String)> {
        let first = self
            .identifiers
            .first()
            .ok_or_else(|| Error::invalid("the subject has no identifiers"))?;
        split_column(first)
    }
}

/// Splits `ns.table.column` into (`ns.table`, `column`).
pub fn split_column(s: &str) -> Result<(String, String)> {
    match s.rsplit_once('.') {
        Some((t, c)) if t.contains('.') && !c.is_empty() => Ok((t.to_string(), c.to_string())),
        _ => Err(Error::invalid(format!(
            "`{s}` is not a column: write namespace.table.column (e.g. crm.learners.learner_id)"
        ))),
    }
}

/// `subjects.toml`, loaded.
pub type SubjectsFile = TomlFile<BTreeMap<String, Subject>>;

/// The longest a drill's step may be budgeted: a week, in seconds.
pub const MAX_STEP_BUDGET_SECONDS: f64 = 7.0 * 86_400.0;

impl SubjectsFile {
    /// Loads and checks the file; a missing file has no subjects. See [`SubjectsFile::parse`].
    pub fn load(path: &Path) -> Result<SubjectsFile> {
        if !path.exists() {
            return Ok(TomlFile {
                path: path.to_path_buf(),
                text: String::new(),
                value: BTreeMap::new(),
            });
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| crate::Error::io(path.display().to_string(), e))?;
        SubjectsFile::parse(path, &text)
    }

    /// Parses and checks the text of the file at `path`: every subject has identifier columns
    /// written `namespace.table.column`; a drill's range is `0 <= from <= to` and its step
    /// budget a number of seconds between 0 and a week. Errors name file, line and key.
    pub fn parse(path: &Path, text: &str) -> Result<SubjectsFile> {
        let f = TomlFile {
            path: path.to_path_buf(),
            text: text.to_string(),
            value: tomlfile::parse::<BTreeMap<String, Subject>>(path, text)?,
        };
        for (name, s) in &f.value {
            if s.identifiers.is_empty() {
                return Err(f.error_at(
                    &tomlfile::key(&[name, "identifiers"]),
                    "a subject needs at least one identifier column",
                ));
            }
            if let Some(d) = &s.drill {
                if d.from > d.to || d.from < 0 {
                    return Err(f.error_at(
                        &tomlfile::key(&[name, "drill"]),
                        "the drill's range needs 0 <= from <= to",
                    ));
                }
                let b = d.step_budget_seconds;
                if !(b > 0.0 && b <= MAX_STEP_BUDGET_SECONDS) {
                    return Err(f.error_at(
                        &tomlfile::key(&[name, "drill", "step_budget_seconds"]),
                        format!(
                            "{b} is out of range: more than 0 and at most {MAX_STEP_BUDGET_SECONDS} seconds (a week)"
                        ),
                    ));
                }
            }
            for (i, id) in s.identifiers.iter().enumerate() {
                split_column(id).map_err(|e| {
                    f.error_at(
                        &tomlfile::key(&[name, "identifiers"]),
                        format!("entry {}: {e}", i + 1),
                    )
                })?;
            }
        }
        Ok(f)
    }

    /// A subject by name; an unknown name lists the known ones.
    pub fn get(&self, name: &str) -> Result<&Subject> {
        self.value.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.value.keys().map(String::as_str).collect();
            Error::invalid(format!(
                "unknown subject `{name}` (subjects in {}: {})",
                self.path.display(),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ))
        })
    }
}

/// A `--subject NAME=ID` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectRef {
    /// The subject's name in subjects.toml.
    pub subject: String,
    /// The ID as typed.
    pub id: String,
}

impl SubjectRef {
    /// Parses `learner=3590`.
    pub fn parse(s: &str) -> Result<SubjectRef> {
        match s.split_once('=') {
            Some((n, id)) if !n.trim().is_empty() && !id.trim().is_empty() => Ok(SubjectRef {
                subject: n.trim().to_string(),
                id: id.trim().to_string(),
            }),
            _ => Err(Error::invalid(
                "a subject is written NAME=ID, e.g. --subject learner=3590".to_string(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[learner]\nidentifiers = [\"crm.learners.learner_id\"]\n[learner.drill]\nfrom = 900000\nto = 900099\n";

    /// Issue 44 (item 5): a drill budget that is not a number of seconds in range (NaN never
    /// fails a comparison, so the budget check would go quiet) is refused with its line.
    #[test]
    fn a_drill_budget_out_of_range_is_refused_with_its_line() {
        let p = Path::new("governance/subjects.toml");
        assert!(SubjectsFile::parse(p, BASE).is_ok());
        for v in ["nan", "-1.0", "0.0", "inf", "1e300"] {
            let e = SubjectsFile::parse(p, &format!("{BASE}step_budget_seconds = {v}\n"))
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("governance/subjects.toml:6: learner.drill.step_budget_seconds: ")
                    && e.contains("out of range"),
                "{v}: {e}"
            );
        }
    }
}
