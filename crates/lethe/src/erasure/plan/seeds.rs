//! The planner's first stage: the columns the lineage walk starts from.
//!
//! Declared identifier columns by name (subjects.toml `identifiers`; top-level columns and
//! struct fields such as `subject.patient_id`), columns classified in
//! metadata.toml as identifying the subject (a derived identifier with its own label), and
//! mapped identifiers in their mapping table.

use std::collections::{BTreeMap, BTreeSet};

use lethe_lineage::Seed;

use super::Inventory;
use crate::error::Result;
use crate::governance::Governance;
use crate::governance::identifiers::{declared, derived_sources};
use crate::governance::paths::split_qualified;
use crate::governance::subjects::{Subject, split_column};

/// The seeds of a plan, and how each came in.
pub(super) struct Seeded {
    /// The walk's seeds.
    pub seeds: Vec<Seed>,
    /// Per table, its declared columns in catalog order: (column, label, why).
    pub declared: BTreeMap<String, Vec<(String, String, String)>>,
    /// Why each seeded (table, column) is in the plan, in words.
    pub seed_via: BTreeMap<(String, String), String>,
}

/// Finds every seed column of `subject` in the inventory. A mapped identifier whose column is
/// not in the catalog is an error at subjects.toml's `mapped`.
pub(super) fn seed(
    inv: &Inventory,
    gov: &Governance,
    subject_name: &str,
    subject: &Subject,
    root_column: &str,
) -> Result<Seeded> {
    // Identifier names: the column part of each `namespace.table.column` (a struct field's
    // path when the table is in the catalog).
    let id_names: BTreeSet<String> = subject
        .identifiers
        .iter()
        .map(
            |c| match split_qualified(c, |t| inv.tables.contains_key(t)) {
                Some((_, path)) => Ok(path),
                None => split_column(c).map(|(_, c)| c),
            },
        )
        .collect::<Result<_>>()?;
    let derived_cols = declared(gov, subject_name, &derived_sources(subject)?)?;
    let mut out = Seeded {
        seeds: Vec::new(),
        declared: BTreeMap::new(),
        seed_via: BTreeMap::new(),
    };
    for (table, info) in &inv.tables {
        let columns = info
            .columns
            .iter()
            .map(|(c, _)| c)
            .chain(info.struct_fields.iter());
        for col in columns {
            let by_name = id_names.contains(col);
            let by_class = gov
                .metadata
                .table(table)
                .and_then(|t| t.columns.get(col))
                .and_then(|c| c.identifies())
                == Some(subject_name);
            if !(by_name || by_class) {
                continue;
            }
            // A derived identifier (metadata.toml `derived`) has values of its own, resolved
            // through its pattern (crate::governance::identifiers).
            let derived = (!by_name)
                .then(|| {
                    derived_cols
                        .iter()
                        .find(|d| &d.table == table && &d.column == col)
                })
                .flatten();
            // A declared identifier column holds the root identifier's values, whatever its
            // name (`referred.patient_id`).
            let label = if by_name {
                root_column.to_string()
            } else if let Some(d) = derived {
                d.label.clone()
            } else {
                root_column.to_string()
            };
            out.seeds
                .push(Seed::new(table.clone(), col.clone(), label.clone()));
            let via = if by_name {
                format!("declared identifier column `{col}` (subjects.toml)")
            } else if let Some(d) = derived {
                format!(
                    "column `{col}` derived from {} as `{}` (metadata.toml)",
                    d.from,
                    d.how()
                )
            } else {
                format!("column `{col}` classified as identifying {subject_name} (metadata.toml)")
            };
            out.seed_via
                .insert((table.clone(), col.clone()), via.clone());
            out.declared
                .entry(table.clone())
                .or_default()
                .push((col.clone(), label, via));
        }
    }
    for m in &subject.mapped {
        if !inv.has_column(&m.via, &m.column) {
            return Err(gov.subjects.error_at(
                &format!("{subject_name}.mapped"),
                format!("{}.{} is not a column of a catalog table", m.via, m.column),
            ));
        }
        out.seeds
            .push(Seed::new(m.via.clone(), m.column.clone(), m.column.clone()));
    }
    Ok(out)
}
