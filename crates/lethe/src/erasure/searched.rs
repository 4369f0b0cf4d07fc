//! What the proof searched for, so that an attestation never claims more.
//!
//! The proof scan ([`crate::erasure::prove`]) searches files for a request's traces only: the
//! subject's IDs by column and the identifying values its case file holds. A column
//! `metadata.toml` classifies `personal` or `sensitive` (top-level or nested; a struct, list or
//! map classified whole classifies every field under it) in a table the erasure changed
//! (DELETE, REWRITE, RECOMPUTE) is accounted for when it is
//! - an identifier of the subject (its values are ID traces: a column the case holds IDs of,
//!   or one `metadata.toml` says identifies the subject), or
//! - an identifying value (the root table's `values` as read before the erasure, an erased
//!   column of a REWRITE), or
//! - declared in `subjects.toml` `not_identifying` with a reason (a decision a person reviews).
//!
//! Any other such column holds personal data the scan was not looking for: copies of it could
//! remain anywhere and the scan would not see them. [`Searched::remaining`] names those
//! columns, and the attestation's physical verdict is then INCOMPLETE (and the case file's
//! values are kept) until they are traces or declared.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::erasure::case::CaseFile;
use crate::erasure::plan::Action;
use crate::error::Result;
use crate::governance::Governance;
use crate::governance::paths::{self_and_parents, short_name};
use crate::workspace::Workspace;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::nested::{self, FieldPath};

/// What the proof searched for.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Searched {
    /// The kinds of trace searched for (`id patient_id`, `value contact.email`), never a value.
    pub traces: Vec<String>,
    /// Per table the erasure changed: its personal and sensitive columns by how they were
    /// accounted for.
    pub tables: BTreeMap<String, ColumnsSearched>,
    /// The subject's root table (where `values` may name columns), for the advice.
    #[serde(skip)]
    pub root_table: Option<String>,
}

/// One table's personal and sensitive columns.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ColumnsSearched {
    /// Every column (leaf field) classified personal or sensitive.
    pub personal: Vec<String>,
    /// Identifiers of the subject: searched for as IDs.
    pub identifiers: Vec<String>,
    /// Identifying values: searched for as value prefixes.
    pub values: Vec<String>,
    /// Declared in subjects.toml `not_identifying`.
    pub not_identifying: Vec<String>,
    /// None of those: not searched for.
    pub not_traces: Vec<String>,
}

impl Searched {
    /// Whether every personal and sensitive column is accounted for.
    pub fn is_complete(&self) -> bool {
        self.tables.values().all(|t| t.not_traces.is_empty())
    }

    /// What wasn't searched for, in words (one line per table).
    pub fn remaining(&self) -> Vec<String> {
        self.tables
            .iter()
            .filter(|(_, t)| !t.not_traces.is_empty())
            .map(|(name, t)| {
                let searched = t.identifiers.len() + t.values.len();
                let declared = if t.not_identifying.is_empty() {
                    String::new()
                } else {
                    format!(" ({} declared not identifying)", t.not_identifying.len())
                };
                let verb = if t.not_traces.len() == 1 {
                    "was not a trace"
                } else {
                    "were not traces"
                };
                // Advice that names a key accepting these columns: `values` takes the root
                // table's columns only.
                let advice = if self.root_table.as_deref() == Some(name.as_str()) {
                    "add them to the subject's `values` in subjects.toml, or declare them in its `not_identifying` with a reason".to_string()
                } else {
                    format!(
                        "in subjects.toml, declare them as the subject's `mapped` identifiers, read through a table that holds both the root identifier and the column (e.g. mapped = [{{ column = \"{}\", via = \"{name}\" }}]), or in its `not_identifying` (as \"{name}.{}\") with a reason",
                        short_name(&t.not_traces[0]),
                        t.not_traces[0]
                    )
                };
                format!(
                    "searched for {searched} of {} personal columns of {name}{declared}: {} {verb}; {advice}",
                    t.personal.len(),
                    and_list(&t.not_traces),
                )
            })
            .collect()
    }
}

fn and_list(v: &[String]) -> String {
    match v {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// A step of an erasure as far as the accounting needs it.
#[derive(Debug, Clone)]
pub struct Changed<'a> {
    /// The table.
    pub table: &'a str,
    /// Its action.
    pub action: Action,
    /// The column that selected the subject's rows.
    pub column: Option<&'a str>,
}

/// Accounts for the personal columns of every table `steps` changed, for `case`.
pub async fn searched(
    ws: &Workspace,
    gov: &Governance,
    case: &CaseFile,
    steps: &[Changed<'_>],
) -> Result<Searched> {
    let mut traces: BTreeSet<String> = case.ids.keys().map(|c| format!("id {c}")).collect();
    traces.extend(case.values.iter().map(|v| format!("value {}", v.kind)));
    let root_table = gov
        .subjects
        .get(&case.subject)
        .ok()
        .and_then(|s| s.root().ok())
        .map(|(t, _)| t);
    for (t, cols) in &case.value_columns {
        for c in cols {
            traces.insert(if Some(t) == root_table.as_ref() {
                format!("value {c}")
            } else {
                format!("value {t}.{c} (erased)")
            });
        }
    }
    let mut out = Searched {
        traces: traces.into_iter().collect(),
        tables: BTreeMap::new(),
        root_table: root_table.clone(),
    };
    let subject = gov.subjects.get(&case.subject)?;
    let id_names: BTreeSet<String> = subject
        .identifiers
        .iter()
        .filter_map(|q| q.rsplit_once('.').map(|(_, c)| c.to_string()))
        .chain(subject.mapped.iter().map(|m| m.column.clone()))
        .collect();
    let mut seen = BTreeSet::new();
    for s in steps {
        if !matches!(
            s.action,
            Action::Delete | Action::Rewrite | Action::Recompute
        ) || !seen.insert(s.table)
        {
            continue;
        }
        let t = match ws.warehouse.load(&TableName::parse(s.table)?).await {
            Ok(t) => t,
            Err(lethe_iceberg::Error::NoSuchTable(_)) => continue,
            Err(e) => return Err(e.into()),
        };
        let schema = t.metadata.current_schema().clone();
        let value_paths: Vec<FieldPath> = case
            .value_columns
            .get(s.table)
            .into_iter()
            .flatten()
            .filter_map(|c| nested::resolve(&schema, c).ok())
            .collect();
        let mut cs = ColumnsSearched::default();
        for leaf in nested::field_paths(&schema)
            .into_iter()
            .filter(|p| p.is_leaf())
        {
            let name = &leaf.name;
            if !gov
                .metadata
                .classification(s.table, name)
                .is_some_and(|c| c.is_protected())
            {
                continue;
            }
            cs.personal.push(name.clone());
            let identifies = gov
                .metadata
                .table(s.table)
                .and_then(|m| {
                    m.columns
                        .get(name)
                        .or_else(|| m.columns.get(&short_name(name)))
                })
                .and_then(|e| e.identifies())
                == Some(case.subject.as_str());
            let is_id = identifies
                || s.column == Some(name.as_str())
                || case.ids.contains_key(name)
                || (!leaf.repeated && id_names.contains(name));
            if is_id {
                cs.identifiers.push(name.clone());
            } else if value_paths.iter().any(|p| leaf.is_under(p)) {
                cs.values.push(name.clone());
            } else if self_and_parents(name).any(|p| {
                subject
                    .not_identifying
                    .contains_key(&format!("{}.{p}", s.table))
            }) {
                cs.not_identifying.push(name.clone());
            } else {
                cs.not_traces.push(name.clone());
            }
        }
        if !cs.personal.is_empty() {
            out.tables.insert(s.table.to_string(), cs);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_names_the_columns_that_were_not_traces() {
        let mut s = Searched::default();
        s.tables.insert(
            "registry.patients".into(),
            ColumnsSearched {
                personal: vec![
                    "patient_id".into(),
                    "full_name".into(),
                    "contact.email".into(),
                    "contact.phone".into(),
                ],
                identifiers: vec!["patient_id".into()],
                values: vec!["full_name".into()],
                not_identifying: vec![],
                not_traces: vec!["contact.email".into(), "contact.phone".into()],
            },
        );
        assert!(!s.is_complete());
        let r = s.remaining();
        assert_eq!(r.len(), 1);
        assert!(
            r[0].starts_with("searched for 2 of 4 personal columns of registry.patients: contact.email and contact.phone were not traces"),
            "{}",
            r[0]
        );
        s.tables
            .get_mut("registry.patients")
            .unwrap()
            .not_traces
            .clear();
        assert!(s.is_complete() && s.remaining().is_empty());
    }
}
