//! Columns as the governance files name them: top-level columns and paths into nested ones.
//!
//! Wherever a governance file names a column it may name a struct field (`contact.email`), a
//! list element's field (`addresses.element.street`) or a map's values (`attributes.value`),
//! in Iceberg's own names ([`lethe_iceberg::nested`]). A qualified reference
//! (`registry.patients.contact.email`, in `subjects.toml`) is split at the longest prefix that
//! is a catalog table.
//!
//! [`check`] resolves every path of `metadata.toml` (columns, keys), `retention.toml`
//! (exceptions' `erase_columns`) and `subjects.toml` (identifiers, mapped, values, first_seen,
//! not_identifying) against the catalog's schemas by field id, before anything reads or
//! changes a table. A path that resolves nowhere is an error at its file, line and key, naming
//! the nearest existing path. A classification may stay under a name the field had in an
//! earlier schema (it is found by field id); everything that reads or changes rows must name a
//! field of the current schema.

use std::collections::BTreeMap;

use iceberg::spec::{Schema, SchemaRef};
use lethe_iceberg::nested::{self, FieldPath};

use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::governance::subjects::Subject;

/// A table's schemas: the current one first, then the earlier ones.
pub type Schemas = BTreeMap<String, Vec<SchemaRef>>;

/// Splits `ns.table.path` at the longest prefix `is_table` knows (at least one part left for
/// the path); None when no prefix is a table.
pub fn split_qualified(s: &str, is_table: impl Fn(&str) -> bool) -> Option<(String, String)> {
    let parts: Vec<&str> = s.split('.').collect();
    (2..parts.len())
        .rev()
        .map(|n| (parts[..n].join("."), parts[n..].join(".")))
        .find(|(t, _)| is_table(t))
}

/// `path` with list `element` steps left out (`addresses.element.street` ->
/// `addresses.street`): the short name Iceberg also accepts.
pub fn short_name(path: &str) -> String {
    path.split('.')
        .filter(|p| *p != "element")
        .collect::<Vec<_>>()
        .join(".")
}

/// `path`, then each enclosing path: `addresses.element.street`, `addresses.element`,
/// `addresses`.
pub fn self_and_parents(path: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(path);
    std::iter::from_fn(move || {
        let cur = next?;
        next = cur.rsplit_once('.').map(|(p, _)| p);
        Some(cur)
    })
}

fn no_field(table: &str, path: &str, schema: &Schema) -> String {
    match nested::nearest(schema, path) {
        Some(n) => format!("table `{table}` has no column `{path}` (the nearest is `{n}`)"),
        None => format!("table `{table}` has no column `{path}` (it has no columns)"),
    }
}

/// Resolves `path` in the current schema of `table`; the message names the nearest path.
pub fn resolve_current(
    schemas: &Schemas,
    table: &str,
    path: &str,
) -> std::result::Result<FieldPath, String> {
    let current = schemas
        .get(table)
        .and_then(|s| s.first())
        .ok_or_else(|| format!("`{table}` is not a table of the catalog"))?;
    nested::resolve(current, path).map_err(|_| no_field(table, path, current))
}

/// Whether `path` names a field of any schema `table` has had.
fn resolves_in_history(schemas: &Schemas, table: &str, path: &str) -> bool {
    schemas
        .get(table)
        .is_some_and(|all| all.iter().any(|s| nested::resolve(s, path).is_ok()))
}

/// Every catalog table's schemas (current first), for [`check`].
pub async fn catalog_schemas(wh: &lethe_iceberg::table::Warehouse) -> Result<Schemas> {
    let mut out = Schemas::new();
    for name in wh.tables().await? {
        let t = wh.load(&name).await?;
        let current = t.metadata.current_schema().clone();
        let mut all = vec![current.clone()];
        all.extend(
            t.metadata
                .schemas_iter()
                .filter(|s| s.schema_id() != current.schema_id())
                .cloned(),
        );
        out.insert(name.to_string(), all);
    }
    Ok(out)
}

/// Checks every path the governance files name against `schemas` (every catalog table's
/// schemas). Tables the catalog doesn't have are left to the checks that name them (a
/// metadata.toml section for a table not created yet is allowed).
pub fn check(gov: &Governance, schemas: &Schemas) -> Result<()> {
    check_metadata(gov, schemas)?;
    check_exceptions(gov, schemas)?;
    for (name, s) in &gov.subjects.value {
        check_subject(gov, schemas, name, s)?;
    }
    Ok(())
}

fn check_metadata(gov: &Governance, schemas: &Schemas) -> Result<()> {
    let f = &gov.metadata;
    for (table, meta) in &f.value.tables {
        let Some(all) = schemas.get(table) else {
            continue;
        };
        let current = &all[0];
        for c in meta.columns.keys() {
            if !resolves_in_history(schemas, table, c) {
                return Err(f.error_at(
                    &format!("tables.\"{table}\".columns.\"{c}\""),
                    no_field(table, c, current),
                ));
            }
        }
        for k in &meta.key {
            let key = format!("tables.\"{table}\".key");
            let p = resolve_current(schemas, table, k).map_err(|m| f.error_at(&key, m))?;
            if p.repeated || !p.is_leaf() {
                return Err(f.error_at(
                    &key,
                    format!(
                        "`{k}` can't be a row key: a key is a column with one value per row (a top-level column or a struct field)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_exceptions(gov: &Governance, schemas: &Schemas) -> Result<()> {
    let f = &gov.retention;
    for (table, ex) in &f.value.erasure.exceptions {
        if !schemas.contains_key(table) {
            continue;
        }
        let key = format!("erasure.exceptions.\"{table}\".erase_columns");
        for (i, c) in ex.erase_columns.iter().enumerate() {
            let p = resolve_current(schemas, table, c)
                .map_err(|m| f.error_at(&key, format!("entry {}: {m}", i + 1)))?;
            if p.field.required || p.map_key {
                return Err(f.error_at(
                    &key,
                    format!(
                        "entry {}: `{table}.{c}` is required and can't be set to null",
                        i + 1
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_subject(gov: &Governance, schemas: &Schemas, name: &str, s: &Subject) -> Result<()> {
    let f = &gov.subjects;
    let is_table = |t: &str| schemas.contains_key(t);
    // Identifiers select rows: one value per row.
    let one_per_row = |key: &str, table: &str, path: &str| -> Result<()> {
        let p = resolve_current(schemas, table, path).map_err(|m| f.error_at(key, m))?;
        if p.repeated || !p.is_leaf() {
            return Err(f.error_at(
                key,
                format!(
                    "`{table}.{path}` can't identify rows: an identifier is a column with one value per row (a top-level column or a struct field)"
                ),
            ));
        }
        Ok(())
    };
    for (i, id) in s.identifiers.iter().enumerate() {
        let key = format!("{name}.identifiers");
        let Some((table, path)) = split_qualified(id, is_table) else {
            continue;
        };
        if i == 0 && path.contains('.') {
            return Err(f.error_at(
                &key,
                format!(
                    "entry 1: the root identifier `{id}` must be a top-level column; list a struct field as a further identifier"
                ),
            ));
        }
        one_per_row(&key, &table, &path).map_err(|e| prefix_entry(e, i))?;
    }
    for (i, m) in s.mapped.iter().enumerate() {
        if is_table(&m.via) {
            one_per_row(&format!("{name}.mapped"), &m.via, &m.column)
                .map_err(|e| prefix_entry(e, i))?;
        }
    }
    let (root_table, _) = s.root()?;
    if is_table(&root_table) {
        for (i, v) in s.values.iter().enumerate() {
            resolve_current(schemas, &root_table, v).map_err(|m| {
                f.error_at(&format!("{name}.values"), format!("entry {}: {m}", i + 1))
            })?;
        }
        if let Some(c) = &s.first_seen {
            one_per_row(&format!("{name}.first_seen"), &root_table, c)?;
        }
    }
    for q in s.not_identifying.keys() {
        let key = format!("{name}.not_identifying.\"{q}\"");
        let Some((table, path)) = split_qualified(q, is_table) else {
            return Err(f.error_at(
                &key,
                format!("`{q}` names no column of a catalog table: write namespace.table.column"),
            ));
        };
        resolve_current(schemas, &table, &path).map_err(|m| f.error_at(&key, m))?;
    }
    Ok(())
}

fn prefix_entry(e: Error, i: usize) -> Error {
    match e {
        Error::Config {
            file,
            line,
            key,
            message,
        } => Error::Config {
            file,
            line,
            key,
            message: format!("entry {}: {message}", i + 1),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{ListType, NestedField, PrimitiveType, StructType, Type};
    use std::sync::Arc;

    fn schemas() -> Schemas {
        let s = |id, n: &str| {
            Arc::new(NestedField::optional(
                id,
                n,
                Type::Primitive(PrimitiveType::String),
            ))
        };
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "patient_id", Type::Primitive(PrimitiveType::String))
                    .into(),
                NestedField::optional(
                    2,
                    "contact",
                    Type::Struct(StructType::new(vec![s(4, "email"), s(5, "ref")])),
                )
                .into(),
                NestedField::optional(
                    3,
                    "addresses",
                    Type::List(ListType::new(Arc::new(NestedField::list_element(
                        6,
                        Type::Struct(StructType::new(vec![s(7, "street")])),
                        false,
                    )))),
                )
                .into(),
            ])
            .build()
            .unwrap();
        [("registry.patients".to_string(), vec![Arc::new(schema)])].into()
    }

    fn gov(subjects: &str, metadata: &str) -> (tempfile::TempDir, Governance) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("subjects.toml"), subjects).unwrap();
        std::fs::write(dir.path().join("metadata.toml"), metadata).unwrap();
        let g = Governance::load(dir.path()).unwrap();
        (dir, g)
    }

    #[test]
    fn nested_paths_are_checked_with_the_nearest_named() {
        let ok = "[p]\nidentifiers = [\"registry.patients.patient_id\", \"registry.patients.contact.ref\"]\nvalues = [\"contact.email\", \"addresses.element.street\", \"addresses\"]\n[p.not_identifying]\n\"registry.patients.addresses.street\" = \"short name\"\n";
        let meta = "[tables.\"registry.patients\"]\nkey = [\"patient_id\"]\n[tables.\"registry.patients\".columns]\n\"contact.email\" = \"personal\"\naddresses = \"personal\"\n";
        let (_d, g) = gov(ok, meta);
        check(&g, &schemas()).unwrap();
        for (subjects, metadata, want) in [
            (
                ok.replace("\"contact.email\", \"addr", "\"contact.emial\", \"addr"),
                meta.to_string(),
                "subjects.toml:3: p.values: entry 1: table `registry.patients` has no column `contact.emial` (the nearest is `contact.email`)",
            ),
            (
                ok.to_string(),
                meta.replace("\"contact.email\" =", "\"contact.mail\" ="),
                "metadata.toml:4: tables.\"registry.patients\".columns.\"contact.mail\": table `registry.patients` has no column `contact.mail` (the nearest is `contact.email`)",
            ),
            (
                ok.replace(
                    "registry.patients.contact.ref",
                    "registry.patients.addresses.element.street",
                ),
                meta.to_string(),
                "entry 2: `registry.patients.addresses.element.street` can't identify rows",
            ),
            (
                ok.replace(
                    "registry.patients.patient_id",
                    "registry.patients.contact.email",
                ),
                meta.to_string(),
                "the root identifier `registry.patients.contact.email` must be a top-level column",
            ),
            (
                ok.to_string(),
                meta.replace(
                    "key = [\"patient_id\"]",
                    "key = [\"addresses.element.street\"]",
                ),
                "can't be a row key",
            ),
        ] {
            let (_d, g) = gov(&subjects, &metadata);
            let e = check(&g, &schemas()).unwrap_err().to_string();
            assert!(e.contains(want), "{e}\nwanted: {want}");
        }
        // A classification of a list covers the fields under it, by full and short name.
        assert_eq!(
            g.metadata
                .classification("registry.patients", "addresses.element.street"),
            Some(crate::governance::metadata::Classification::Personal)
        );
        assert_eq!(
            g.metadata
                .classification("registry.patients", "contact.ref"),
            None
        );
    }

    #[test]
    fn qualified_references_split_at_the_longest_table() {
        let tables = ["registry.patients", "a.b.c"];
        let is = |t: &str| tables.contains(&t);
        assert_eq!(
            split_qualified("registry.patients.contact.email", is),
            Some(("registry.patients".into(), "contact.email".into()))
        );
        assert_eq!(
            split_qualified("a.b.c.d", is),
            Some(("a.b.c".into(), "d".into()))
        );
        assert_eq!(split_qualified("registry.patients", is), None);
        assert_eq!(split_qualified("x.y.z", is), None);
        assert_eq!(short_name("addresses.element.street"), "addresses.street");
        assert_eq!(
            self_and_parents("a.element.b").collect::<Vec<_>>(),
            vec!["a.element.b", "a.element", "a"]
        );
    }
}
