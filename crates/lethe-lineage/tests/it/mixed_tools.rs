//! Lineage from three tools about one warehouse, walked for one subject. The DOT of the walk is
//! compared with `tests/golden/mixed_tools.dot`; run with `LETHE_BLESS=1` to rewrite it.

use chrono::{TimeZone, Utc};
use lethe_lineage::{
    ColumnLineageDatasetFacet, InputDataset, InputField, Job, LineageGraph, OutputDataset,
    RunEvent, Seed, Transformation, Via, Window, parse_events, to_dot, walk,
};
use uuid::Uuid;

/// dbt: JSON lines, a START (ignored) and a COMPLETE with a run facet lethe does not know.
const DBT: &str = r#"{"eventType":"START","eventTime":"2025-02-01T01:00:00Z","producer":"https://github.com/OpenLineage/OpenLineage/tree/1.30.0/integration/dbt","schemaURL":"https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent","run":{"runId":"01950000-0000-7000-8000-00000000d001"},"job":{"namespace":"dbt","name":"shop.orders_by_customer"},"inputs":[],"outputs":[]}
{"eventType":"COMPLETE","eventTime":"2025-02-01T01:05:00Z","producer":"https://github.com/OpenLineage/OpenLineage/tree/1.30.0/integration/dbt","schemaURL":"https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent","run":{"runId":"01950000-0000-7000-8000-00000000d001","facets":{"dbt_version":{"_producer":"p","_schemaURL":"s","version":"1.9.0"}}},"job":{"namespace":"dbt","name":"shop.orders_by_customer"},"inputs":[{"namespace":"postgres://warehouse:5432","name":"warehouse.raw.orders"},{"namespace":"postgres://warehouse:5432","name":"warehouse.raw.customers"}],"outputs":[{"namespace":"postgres://warehouse:5432","name":"warehouse.analytics.orders_by_customer","facets":{"columnLineage":{"_producer":"p","_schemaURL":"https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet","fields":{"customer_id":{"inputFields":[{"namespace":"postgres://warehouse:5432","name":"warehouse.raw.customers","field":"customer_id","transformations":[{"type":"DIRECT","subtype":"IDENTITY","description":"","masking":false}]}]},"order_count":{"inputFields":[{"namespace":"postgres://warehouse:5432","name":"warehouse.raw.orders","field":"order_id","transformations":[{"type":"DIRECT","subtype":"AGGREGATION","description":"count(order_id)","masking":false}]}]}},"dataset":[{"namespace":"postgres://warehouse:5432","name":"warehouse.raw.orders","field":"customer_id","transformations":[{"type":"INDIRECT","subtype":"JOIN","description":"","masking":false}]}]}}}]}
"#;

/// Spark: an array; legacy column lineage (transformationType only) and an input read from a
/// landing path the catalog does not know.
const SPARK: &str = r#"[
  {
    "eventType": "COMPLETE",
    "eventTime": "2025-02-02T03:00:00.000+01:00",
    "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.18.0/integration/spark",
    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    "run": {"runId": "01950000-0000-7000-8000-00000000a001",
            "facets": {"spark_properties": {"_producer": "p", "_schemaURL": "s", "properties": {"spark.app.name": "enrich"}}}},
    "job": {"namespace": "spark", "name": "enrich_customers",
            "facets": {"jobType": {"_producer": "p", "_schemaURL": "s", "processingType": "BATCH", "integration": "SPARK", "jobType": "SQL_JOB"}}},
    "inputs": [
      {"namespace": "iceberg://warehouse", "name": "raw.customers"},
      {"namespace": "s3://landing", "name": "partners/2025-02-01.csv"}
    ],
    "outputs": [
      {"namespace": "iceberg://warehouse", "name": "crm.customers_enriched",
       "facets": {"columnLineage": {"_producer": "p", "_schemaURL": "s", "fields": {
          "customer_id": {"inputFields": [{"namespace": "iceberg://warehouse", "name": "raw.customers", "field": "customer_id"}],
                          "transformationDescription": "identical", "transformationType": "IDENTITY"},
          "segment": {"inputFields": [{"namespace": "s3://landing", "name": "partners/2025-02-01.csv", "field": "segment"}],
                      "transformationDescription": "lower(segment)", "transformationType": "TRANSFORMATION"}}},
          "lifecycleStateChange": {"_producer": "p", "_schemaURL": "s", "lifecycleStateChange": "OVERWRITE"}}}
    ]
  }
]"#;

fn resolver(ns: &str, name: &str) -> Option<String> {
    match ns {
        "postgres://warehouse:5432" => name.strip_prefix("warehouse.").map(str::to_owned),
        "iceberg://warehouse" | "lethe" => Some(name.to_owned()),
        _ => None,
    }
}

fn keys(ds: &str) -> Vec<String> {
    match ds {
        "raw.orders" => vec!["order_id".into()],
        "raw.customers" | "analytics.orders_by_customer" | "crm.customers_enriched" => {
            vec!["customer_id".into()]
        }
        _ => Vec::new(),
    }
}

/// lethe's own event for a mart it rebuilds, written with the constructors.
fn lethe_event() -> RunEvent {
    let p = "https://example.invalid/lethe";
    RunEvent::complete(
        p,
        Job::new("lethe", "mart.customer_scores"),
        Uuid::from_u128(0x1e7e),
        Utc.with_ymd_and_hms(2025, 2, 3, 4, 0, 0).unwrap(),
    )
    .with_input(InputDataset::new("lethe", "analytics.orders_by_customer"))
    .with_output(
        OutputDataset::new("lethe", "mart.customer_scores").with_column_lineage(
            ColumnLineageDatasetFacet::new(p)
                .with_field(
                    "customer_id",
                    [InputField::new(
                        "lethe",
                        "analytics.orders_by_customer",
                        "customer_id",
                        [Transformation::direct("IDENTITY")],
                    )],
                )
                .with_field(
                    "score",
                    [InputField::new(
                        "lethe",
                        "analytics.orders_by_customer",
                        "order_count",
                        [Transformation::direct("TRANSFORMATION")
                            .with_description("opaque: udf score()")],
                    )],
                ),
        ),
    )
}

#[test]
fn mixed_tools_end_to_end() {
    let lethe_json = lethe_event().to_json_pretty().unwrap();
    let mut events = Vec::new();
    for (file, text) in [
        ("lineage/dbt.jsonl", DBT),
        ("lineage/spark.json", SPARK),
        ("lineage/lethe.json", lethe_json.as_str()),
    ] {
        for e in parse_events(file, text.as_bytes()).unwrap() {
            events.push((file, e));
        }
    }
    assert_eq!(events.len(), 4);
    let graph = LineageGraph::build(events.iter().map(|(f, e)| (*f, e)), resolver).unwrap();
    assert_eq!(graph.stats().ignored_events, 1);
    assert_eq!(graph.stats().runs, 3);
    assert_eq!(graph.stats().external_datasets, 1);
    let enriched = graph.dataset_id("crm.customers_enriched").unwrap();
    assert_eq!(
        graph.producers(enriched, Window::ALL)[0].to_string(),
        "spark/enrich_customers"
    );
    let produced: Vec<&str> = graph
        .produced_datasets(Window::ALL)
        .into_iter()
        .map(|d| graph.dataset_name(d))
        .collect();
    assert_eq!(
        produced,
        [
            "analytics.orders_by_customer",
            "crm.customers_enriched",
            "mart.customer_scores"
        ]
    );

    let seeds = [
        Seed::new("raw.customers", "customer_id", "customer_id"),
        Seed::new("raw.orders", "customer_id", "customer_id"),
    ];
    let w = walk(
        &graph,
        Utc.with_ymd_and_hms(2024, 6, 1, 0, 0, 0).unwrap(),
        &seeds,
        keys,
    );

    // dbt's identity copy carries the subject's ids; the legacy Spark IDENTITY too.
    for ds in [
        "analytics.orders_by_customer",
        "crm.customers_enriched",
        "mart.customer_scores",
    ] {
        let d = w.dataset(ds).unwrap();
        assert!(
            d.labels().any(|l| l.field == "customer_id"
                && l.label == "customer_id"
                && matches!(l.via, Via::Edge(_))),
            "{ds}: {:?}",
            d.labels().collect::<Vec<_>>()
        );
    }
    // Spark read a landing path: unresolved. lethe's opaque UDF: unresolved.
    let r: Vec<String> = w
        .dataset("crm.customers_enriched")
        .unwrap()
        .unresolved()
        .map(|r| r.to_string())
        .collect();
    assert_eq!(
        r,
        [
            "job spark/enrich_customers (evidence lineage/spark.json): reads external dataset s3://landing/partners/2025-02-01.csv"
        ]
    );
    let r: Vec<String> = w
        .dataset("mart.customer_scores")
        .unwrap()
        .unresolved()
        .map(|r| r.to_string())
        .collect();
    assert_eq!(
        r,
        [
            "job lethe/mart.customer_scores (evidence lineage/lethe.json): opaque transformation analytics.orders_by_customer.order_count -> score (opaque: udf score())"
        ]
    );
    assert!(w.dataset("s3://landing/partners/2025-02-01.csv").is_none());

    let dot = to_dot(&w);
    // The manifest folder at run time: a binary reused from another checkout's build still
    // compares with this checkout's golden file.
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
    let golden = manifest.join("tests/golden/mixed_tools.dot");
    if std::env::var_os("LETHE_BLESS").is_some() {
        std::fs::write(&golden, &dot).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_default();
    assert_eq!(
        dot,
        expected,
        "DOT differs from {}; rerun with LETHE_BLESS=1 if the change is intended",
        golden.display()
    );
}
