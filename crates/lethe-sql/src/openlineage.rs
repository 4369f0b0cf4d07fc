//! Rendering [`ColumnLineage`] as an OpenLineage `columnLineage` dataset facet (spec
//! version 1-2-0: per-input `transformations` and the dataset-wide `dataset` list).
//!
//! Guarantees: deterministic output (fields and inputs sorted by name, transformations in
//! [`ColumnLineage`]'s order: DIRECT first); an input used several ways appears once with
//! several transformations; opaque inputs keep their `opaque: …` description.
//! Not done here: the rest of the RunEvent (run, job, input/output datasets), which belongs
//! to the caller; `masking` is always `false` because lineage from a plan cannot tell
//! whether a function masks its input.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::lineage::{ColumnLineage, InputColumn};

/// `_schemaURL` of the facet this module produces.
pub const COLUMN_LINEAGE_FACET_SCHEMA_URL: &str = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet";

/// The `columnLineage` dataset facet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnLineageFacet {
    /// URI identifying the producer of this metadata.
    #[serde(rename = "_producer")]
    pub producer: String,
    /// The facet's JSON schema.
    #[serde(rename = "_schemaURL")]
    pub schema_url: String,
    /// Output field name -> its inputs.
    pub fields: BTreeMap<String, FieldLineage>,
    /// Inputs that affect the whole dataset (filters, joins, grouping, sorting).
    pub dataset: Vec<InputField>,
}

/// Lineage of one output field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldLineage {
    /// The input fields it is derived from or depends on.
    #[serde(rename = "inputFields")]
    pub input_fields: Vec<InputField>,
}

/// One input field and how it is used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputField {
    /// The input dataset's namespace.
    pub namespace: String,
    /// The input dataset's name (`ns.table`).
    pub name: String,
    /// The input field.
    pub field: String,
    /// How the field is used; at least one.
    pub transformations: Vec<Transformation>,
}

/// One use of an input field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transformation {
    /// `DIRECT` or `INDIRECT`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `IDENTITY`, `TRANSFORMATION`, `AGGREGATION`, `JOIN`, `FILTER`, `GROUP_BY`, `SORT`,
    /// `WINDOW` or `CONDITIONAL`.
    pub subtype: String,
    /// `opaque: udf <name>` when the input went through a user-defined function.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub description: Option<String>,
    /// Whether the transformation masks the input; always `false` here (unknown).
    pub masking: bool,
}

/// Groups inputs by (table, column), keeping each one's transformations in input order.
fn input_fields<'a>(
    namespace: &str,
    inputs: impl IntoIterator<Item = &'a InputColumn>,
) -> Vec<InputField> {
    let mut grouped: BTreeMap<(&str, &str), Vec<Transformation>> = BTreeMap::new();
    for input in inputs {
        let transformation = Transformation {
            kind: input.kind.as_str().to_owned(),
            subtype: input.subtype.as_str().to_owned(),
            description: input.description.clone(),
            masking: false,
        };
        let entry = grouped
            .entry((input.table.as_str(), input.column.as_str()))
            .or_default();
        if !entry.contains(&transformation) {
            entry.push(transformation);
        }
    }
    grouped
        .into_iter()
        .map(|((table, column), transformations)| InputField {
            namespace: namespace.to_owned(),
            name: table.to_owned(),
            field: column.to_owned(),
            transformations,
        })
        .collect()
}

/// The `columnLineage` facet of `lineage`, with every input dataset in `namespace`.
/// Output columns that share a name are merged into one field.
pub fn column_lineage_facet(
    lineage: &ColumnLineage,
    namespace: &str,
    producer: &str,
) -> ColumnLineageFacet {
    let mut by_name: BTreeMap<&str, Vec<&InputColumn>> = BTreeMap::new();
    for output in &lineage.outputs {
        by_name
            .entry(output.name.as_str())
            .or_default()
            .extend(output.inputs.iter());
    }
    ColumnLineageFacet {
        producer: producer.to_owned(),
        schema_url: COLUMN_LINEAGE_FACET_SCHEMA_URL.to_owned(),
        fields: by_name
            .into_iter()
            .map(|(name, inputs)| {
                (
                    name.to_owned(),
                    FieldLineage {
                        input_fields: input_fields(namespace, inputs),
                    },
                )
            })
            .collect(),
        dataset: input_fields(namespace, &lineage.dataset_indirect),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lineage::{LineageKind, OutputColumn, Subtype};

    fn input(table: &str, column: &str, kind: LineageKind, subtype: Subtype) -> InputColumn {
        InputColumn {
            table: table.into(),
            column: column.into(),
            kind,
            subtype,
            description: None,
        }
    }

    #[test]
    fn groups_transformations_per_input_field() {
        let filter = input(
            "crm.learners",
            "status",
            LineageKind::Indirect,
            Subtype::Filter,
        );
        let lineage = ColumnLineage {
            tables: vec!["crm.learners".into()],
            outputs: vec![OutputColumn {
                name: "status".into(),
                inputs: vec![
                    input(
                        "crm.learners",
                        "status",
                        LineageKind::Direct,
                        Subtype::Identity,
                    ),
                    filter.clone(),
                ],
            }],
            dataset_indirect: vec![filter],
            opaque: vec![],
        };
        let facet = column_lineage_facet(&lineage, "lethe://warehouse", "https://lethe");
        let json = serde_json::to_value(&facet).unwrap_or_default();
        assert_eq!(
            json["_schemaURL"],
            serde_json::json!(COLUMN_LINEAGE_FACET_SCHEMA_URL)
        );
        let field = &json["fields"]["status"]["inputFields"];
        assert_eq!(field.as_array().map(Vec::len), Some(1));
        assert_eq!(field[0]["name"], "crm.learners");
        assert_eq!(field[0]["namespace"], "lethe://warehouse");
        assert_eq!(
            field[0]["transformations"],
            serde_json::json!([
                {"type": "DIRECT", "subtype": "IDENTITY", "masking": false},
                {"type": "INDIRECT", "subtype": "FILTER", "masking": false}
            ])
        );
        assert_eq!(json["dataset"][0]["field"], "status");
        let back: ColumnLineageFacet =
            serde_json::from_value(json).unwrap_or_else(|e| panic!("round trip: {e}"));
        assert_eq!(back, facet);
    }
}
