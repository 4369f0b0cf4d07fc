//! `governance/holds.toml`: legal holds — standing instructions to preserve records that may
//! become evidence (a live tribunal, a regulator's retention duty), which override erasure.
//!
//! ```toml
//! [holds."tribunal-2026-118"]
//! requests = ["erasure-0001"]          # the requests it holds, by request ID
//! references = ["ACME-DSR-17"]         # ... or by the controller's reference
//! tables = ["billing.payments", "support.tickets"]
//! basis = "Employment tribunal claim 2026/118: records relevant to the claim are preserved."
//! decided_by = "legal team"            # a role, never a person's name
//! until = "2027-03-31"                 # the last day it holds (a review date at the latest)
//! ```
//!
//! Reviewed config, like the exceptions in `retention.toml`: whether a hold applies, to what
//! and for how long is the legal team's decision, never the code's. A hold with no basis, no
//! deciding role or no end is refused at load, naming the file, line and key; so is one that
//! names no request and no reference, or nothing to hold. Tables are checked against the
//! catalog when an erasure is planned.
//!
//! An erasure plan marks the steps of a held table as HELD with the hold's basis and carries
//! out the rest; on a day after `until` (or once the hold is removed from this file) rerunning
//! the request finishes the held steps.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::tomlfile::{self, TomlFile};

/// One legal hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hold {
    /// Requests it holds, by request ID.
    #[serde(default)]
    pub requests: Vec<String>,
    /// Requests it holds, by the controller's reference.
    #[serde(default)]
    pub references: Vec<String>,
    /// Tables it covers (`ns.table`).
    #[serde(default)]
    pub tables: Vec<String>,
    /// Registered stores it covers (`governance/stores.toml`).
    #[serde(default)]
    pub stores: Vec<String>,
    /// Why: the legal team's words, as the recipient will read them. Required.
    #[serde(default)]
    pub basis: String,
    /// Who decided: a role. Required.
    #[serde(default)]
    pub decided_by: String,
    /// The last day it holds. Required.
    #[serde(default)]
    pub until: Option<NaiveDate>,
}

impl Hold {
    /// Whether it names request `id` (by ID, or by its controller's `reference`).
    pub fn names(&self, id: &str, reference: Option<&str>) -> bool {
        self.requests.iter().any(|r| r == id)
            || reference.is_some_and(|x| self.references.iter().any(|r| r == x))
    }

    /// Whether it is in force on `day` (through its `until` day).
    pub fn in_force(&self, day: NaiveDate) -> bool {
        self.until.is_some_and(|u| day <= u)
    }
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldsDoc {
    /// Holds by name.
    #[serde(default)]
    pub holds: BTreeMap<String, Hold>,
}

/// `holds.toml`, loaded.
pub type HoldsFile = TomlFile<HoldsDoc>;

/// A hold that applies to a request: its name and the hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Applying<'a> {
    /// The hold's name.
    pub name: &'a str,
    /// The hold.
    pub hold: &'a Hold,
}

impl HoldsFile {
    /// Loads and checks the file; a missing file holds nothing. See [`HoldsFile::parse`].
    pub fn load(path: &Path) -> Result<HoldsFile> {
        if !path.exists() {
            return Ok(TomlFile {
                path: path.to_path_buf(),
                text: String::new(),
                value: HoldsDoc::default(),
            });
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| crate::Error::io(path.display().to_string(), e))?;
        HoldsFile::parse(path, &text)
    }

    /// Parses and checks the text of the file at `path` (errors name file, line and key).
    pub fn parse(path: &Path, text: &str) -> Result<HoldsFile> {
        let f = TomlFile {
            path: path.to_path_buf(),
            text: text.to_string(),
            value: tomlfile::parse::<HoldsDoc>(path, text)?,
        };
        for (name, h) in &f.value.holds {
            let key = format!("holds.{}", tomlfile::quoted(name));
            if h.basis.trim().is_empty() {
                return Err(f.error_at(
                    &format!("{key}.basis"),
                    format!("hold `{name}` has no basis: the legal team must state why the records are preserved (the recipient reads it)"),
                ));
            }
            if h.decided_by.trim().is_empty() {
                return Err(f.error_at(
                    &format!("{key}.decided_by"),
                    format!(
                        "hold `{name}` doesn't say who decided (a role, such as \"legal team\")"
                    ),
                ));
            }
            if h.until.is_none() {
                return Err(f.error_at(
                    &format!("{key}.until"),
                    format!("hold `{name}` has no end: give the last day it holds (until = \"YYYY-MM-DD\"), a review date at the latest"),
                ));
            }
            if h.requests.is_empty() && h.references.is_empty() {
                return Err(f.error_at(
                    &key,
                    format!("hold `{name}` names no request: list requests = [...] or references = [...]"),
                ));
            }
            if h.tables.is_empty() && h.stores.is_empty() {
                return Err(f.error_at(
                    &key,
                    format!(
                        "hold `{name}` covers nothing: list the tables (and stores) it preserves"
                    ),
                ));
            }
            for (i, t) in h.tables.iter().enumerate() {
                if lethe_iceberg::catalog::TableName::parse(t).is_err() {
                    return Err(f.error_at(
                        &format!("{key}.tables"),
                        format!("entry {}: `{t}` is not a table name (ns.table)", i + 1),
                    ));
                }
            }
        }
        Ok(f)
    }

    /// The holds naming request `id` (or its `reference`), in force or not.
    pub fn for_request(&self, id: &str, reference: Option<&str>) -> Vec<Applying<'_>> {
        self.value
            .holds
            .iter()
            .filter(|(_, h)| h.names(id, reference))
            .map(|(name, hold)| Applying { name, hold })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<HoldsFile> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("holds.toml");
        std::fs::write(&p, text).unwrap();
        HoldsFile::load(&p)
    }

    const GOOD: &str = "[holds.\"t-1\"]\nrequests = [\"erasure-0001\"]\ntables = [\"billing.payments\"]\nbasis = \"tribunal\"\ndecided_by = \"legal team\"\nuntil = \"2027-03-31\"\n";

    /// A hold's name holding a quote is named as the file spells it (`holds."a\"b"`), at its
    /// own line: the key was `holds."a"b".decided_by`, not a TOML key, and placed at line 1.
    #[test]
    fn a_name_with_a_quote_is_named_as_written() {
        let text = "# holds\n\n[holds.\"a\\\"b\"]\nbasis = \"x\"\n";
        let e = HoldsFile::parse(Path::new("holds.toml"), text)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(r#"holds.toml:3: holds."a\"b".decided_by: "#),
            "{e}"
        );
    }

    #[test]
    fn a_hold_applies_by_request_or_reference_through_its_last_day() {
        let f = load(&GOOD.replace(
            "requests = [\"erasure-0001\"]",
            "requests = [\"erasure-0001\"]\nreferences = [\"ACME-17\"]",
        ))
        .unwrap();
        assert_eq!(f.for_request("erasure-0001", None).len(), 1);
        assert_eq!(f.for_request("erasure-0002", Some("ACME-17")).len(), 1);
        assert!(f.for_request("erasure-0002", Some("ACME-18")).is_empty());
        let h = f.for_request("erasure-0001", None)[0].hold;
        let d = |s| crate::governance::retention::parse_day(s).unwrap();
        assert!(h.in_force(d("2027-03-31")));
        assert!(!h.in_force(d("2027-04-01")));
    }

    #[test]
    fn a_hold_without_basis_or_end_is_refused_with_its_line() {
        let e = load(&GOOD.replace("basis = \"tribunal\"\n", ""))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("holds.toml:1:") && e.contains("has no basis"),
            "{e}"
        );
        let e = load(&GOOD.replace("until = \"2027-03-31\"\n", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no end"), "{e}");
        let e = load(&GOOD.replace("2027-03-31", "soon"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds.toml:6:"), "{e}");
        let e = load(&GOOD.replace("requests = [\"erasure-0001\"]\n", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("names no request"), "{e}");
        let e = load(&GOOD.replace("billing.payments", "payments"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a table name"), "{e}");
    }
}
