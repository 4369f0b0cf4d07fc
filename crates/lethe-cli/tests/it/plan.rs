//! Issue 4: EXPLAIN ERASURE — the plan, unresolved lineage, temporal edges, blockers, bad
//! input.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use iceberg::spec::{FormatVersion, NestedField, PrimitiveType, Schema, Type};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::commit::{SetProperties, commit};
use lethe_iceberg::ops::rewrite::select_rows;
use lethe_iceberg::predicate::{CmpOp, Predicate, Value};
use lethe_lineage::{
    ColumnLineageDatasetFacet, InputDataset, InputField, Job, OutputDataset, RunEvent,
    Transformation,
};

use crate::common::Demo;

fn explain_json(demo: &Demo, subject: &str, code: i32) -> serde_json::Value {
    serde_json::from_str(&demo.lethe_ok(&["explain", "--subject", subject, "--json"], code))
        .unwrap()
}

fn steps(plan: &serde_json::Value) -> BTreeMap<String, serde_json::Value> {
    plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["table"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_demo_plan_for_learner_3590_has_ten_steps() {
    let demo = Demo::new().await;
    let plan = explain_json(&demo, "learner=3590", 0);
    let s = steps(&plan);
    assert_eq!(s.len(), 11, "{:#?}", s.keys()); // ten, and consent.records (DELETE)
    assert_eq!(s["consent.records"]["action"], "DELETE");
    let action = |t: &str| s[t]["action"].as_str().unwrap().to_string();
    let column = |t: &str| s[t]["column"].as_str().unwrap_or("").to_string();
    assert_eq!(action("billing.payments"), "REWRITE");
    assert_eq!(
        s["billing.payments"]["erase_columns"],
        serde_json::json!(["card_number"])
    );
    assert!(
        s["billing.payments"]["reason"]
            .as_str()
            .unwrap()
            .contains("legal obligation to keep payment records")
    );
    for t in [
        "crm.learners",
        "learning.enrollments",
        "learning.events",
        "learning.reviews",
        "support.tickets",
    ] {
        assert_eq!(
            (action(t), column(t)),
            ("DELETE".into(), "learner_id".into()),
            "{t}"
        );
        assert_eq!(s[t]["values"], serde_json::json!(["3590"]), "{t}");
    }
    assert_eq!(action("analytics.course_performance"), "RECOMPUTE");
    assert_eq!(
        s["analytics.course_performance"]["pipeline"],
        "course_performance"
    );
    for t in ["analytics.learner_activity", "marketing.audience"] {
        assert_eq!(
            (action(t), column(t)),
            ("DELETE".into(), "learner_id".into()),
            "{t}"
        );
        assert!(
            s[t]["via"]
                .as_str()
                .unwrap()
                .starts_with("crm.learners.learner_id ->"),
            "{t} is found by lineage: {}",
            s[t]["via"]
        );
        assert!(s[t]["evidence"].as_str().unwrap().starts_with("lineage/"));
    }
    assert_eq!(
        (action("ai.review_corpus"), column("ai.review_corpus")),
        ("DELETE".into(), "review_id".into())
    );
    assert!(
        s["ai.review_corpus"]["via"].as_str().unwrap().starts_with(
            "learning.reviews.review_id -> ai.review_corpus.review_id (DIRECT/IDENTITY)"
        )
    );
    // The review_id values were resolved from the learner's reviews.
    let t = demo
        .ws
        .warehouse
        .load_str("learning.reviews")
        .await
        .unwrap();
    let rows = select_rows(
        &demo.ws.warehouse,
        &t,
        &Predicate::eq("learner_id", Value::Int(3590)),
    )
    .await
    .unwrap();
    let ids = lethe::governance::identifiers::column_values(&rows, "review_id").unwrap();
    let shown: Vec<String> = ids.iter().map(|v| v.to_string()).collect();
    assert_eq!(s["ai.review_corpus"]["values"], serde_json::json!(shown));
    assert_eq!(plan["coverage"]["discovered"], 11);
    assert_eq!(plan["coverage"]["unresolved"], 0);
    assert_eq!(plan["coverage"]["percent"], 100.0);
    assert_eq!(plan["verdict"], "COMPLETE");
    // Sources come before the tables derived from them.
    let order: Vec<&str> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["table"].as_str().unwrap())
        .collect();
    let pos = |t: &str| order.iter().position(|x| *x == t).unwrap();
    assert!(pos("learning.reviews") < pos("ai.review_corpus"));
    assert!(pos("crm.learners") < pos("marketing.audience"));
    // Explain changes nothing; DOT output draws the subgraph.
    let dot = demo.lethe_ok(
        &["explain", "--subject", "learner=3590", "--format", "dot"],
        0,
    );
    assert!(
        dot.starts_with("digraph") && dot.contains("ai.review_corpus"),
        "{dot}"
    );
}

async fn create(demo: &Demo, table: &str, cols: &[&str]) {
    let fields = cols
        .iter()
        .enumerate()
        .map(|(i, c)| {
            NestedField::optional(
                i as i32 + 1,
                *c,
                Type::Primitive(if c.ends_with("_id") {
                    PrimitiveType::Long
                } else {
                    PrimitiveType::String
                }),
            )
            .into()
        })
        .collect::<Vec<_>>();
    let schema = Schema::builder().with_fields(fields).build().unwrap();
    demo.ws
        .warehouse
        .create_table(
            &TableName::parse(table).unwrap(),
            schema,
            None,
            None,
            HashMap::new(),
            FormatVersion::V2,
        )
        .await
        .unwrap();
}

fn write_event(demo: &Demo, file: &str, ev: &RunEvent) {
    std::fs::write(
        demo.dir.join("lineage").join(file),
        ev.to_json_pretty().unwrap(),
    )
    .unwrap();
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_column_lineage_or_a_udf_makes_the_plan_incomplete() {
    let demo = Demo::new().await;
    let ns = demo.ws.lineage_namespace();
    create(&demo, "support.digest", &["summary"]).await;
    create(&demo, "ai.embeddings", &["review_id", "vector"]).await;
    create(&demo, "exports.adhoc", &["email"]).await;
    // A job that sends lineage without the columnLineage facet.
    write_event(
        &demo,
        "digest.json",
        &RunEvent::complete(
            "https://example.org/digest-job",
            Job::new("support", "digest"),
            uuid_v4(),
            at("2026-09-01T00:00:00Z"),
        )
        .with_input(InputDataset::new(ns.clone(), "support.tickets"))
        .with_output(OutputDataset::new(ns.clone(), "support.digest")),
    );
    // A job whose lineage marks a UDF as opaque.
    let facet = ColumnLineageDatasetFacet::new("https://example.org/embed").with_field(
        "vector",
        [InputField::new(
            ns.clone(),
            "learning.reviews",
            "text",
            [Transformation::direct("TRANSFORMATION").with_description("opaque: udf embed_text")],
        )],
    );
    write_event(
        &demo,
        "embed.json",
        &RunEvent::complete(
            "https://example.org/embed",
            Job::new("ml", "embed"),
            uuid_v4(),
            at("2026-09-01T00:00:00Z"),
        )
        .with_input(InputDataset::new(ns.clone(), "learning.reviews"))
        .with_output(OutputDataset::new(ns.clone(), "ai.embeddings").with_column_lineage(facet)),
    );
    let plan = explain_json(&demo, "learner=3590", 1);
    assert_eq!(plan["verdict"], "INCOMPLETE");
    let s = steps(&plan);
    assert_eq!(s["support.digest"]["action"], "UNRESOLVED");
    assert!(
        s["support.digest"]["reason"]
            .as_str()
            .unwrap()
            .contains("support/digest"),
        "{}",
        s["support.digest"]["reason"]
    );
    assert!(
        s["support.digest"]["reason"]
            .as_str()
            .unwrap()
            .contains("no column lineage")
    );
    assert_eq!(s["ai.embeddings"]["action"], "UNRESOLVED");
    assert!(
        s["ai.embeddings"]["reason"]
            .as_str()
            .unwrap()
            .contains("opaque"),
        "{}",
        s["ai.embeddings"]["reason"]
    );
    assert_eq!(plan["coverage"]["unresolved"], 2);
    assert!(plan["coverage"]["percent"].as_f64().unwrap() < 100.0);
    // A table written with no event at all is unaccounted for.
    let out = demo.lethe(&["lineage", "unaccounted", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let list: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(list.contains(&"exports.adhoc".to_string()), "{list:?}");
    assert!(
        !list.contains(&"crm.learners".to_string()),
        "declared sources are accounted for"
    );
    assert!(
        !list.contains(&"support.digest".to_string()),
        "a job produces it"
    );
}

fn uuid_v4() -> uuid::Uuid {
    uuid::Uuid::new_v4()
}

/// Two versions of a pipeline: the second drops an edge. The dropped edge is used for a
/// learner whose data predates the change, not for one who arrived after.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_edge_counts_only_for_subjects_who_predate_it() {
    let demo = Demo::new().await;
    let ns = demo.ws.lineage_namespace();
    create(&demo, "marketing.contacts", &["contact_ref", "segment"]).await;
    let change = at("2025-06-01T00:00:00Z");
    let v1 = ColumnLineageDatasetFacet::new("https://example.org/contacts")
        .with_field(
            "contact_ref",
            [InputField::new(
                ns.clone(),
                "crm.learners",
                "learner_id",
                [Transformation::direct("IDENTITY")],
            )],
        )
        .with_field(
            "segment",
            [InputField::new(
                ns.clone(),
                "crm.learners",
                "city",
                [Transformation::direct("TRANSFORMATION")],
            )],
        );
    let v2 = ColumnLineageDatasetFacet::new("https://example.org/contacts").with_field(
        "segment",
        [InputField::new(
            ns.clone(),
            "learning.courses",
            "category",
            [Transformation::direct("TRANSFORMATION")],
        )],
    );
    for (file, time, facet, input) in [
        (
            "contacts-v1.json",
            "2024-03-01T00:00:00Z",
            v1,
            "crm.learners",
        ),
        (
            "contacts-v2.json",
            "2025-06-01T00:00:00Z",
            v2,
            "learning.courses",
        ),
    ] {
        write_event(
            &demo,
            file,
            &RunEvent::complete(
                "https://example.org/contacts",
                Job::new("crm", "contacts"),
                uuid_v4(),
                at(time),
            )
            .with_input(InputDataset::new(ns.clone(), input))
            .with_output(
                OutputDataset::new(ns.clone(), "marketing.contacts").with_column_lineage(facet),
            ),
        );
    }
    // Two learners: one who signed up before the change, one after.
    let t = demo.ws.warehouse.load_str("crm.learners").await.unwrap();
    let micros = change.timestamp_micros();
    let pick = |rows: Vec<arrow::array::RecordBatch>| -> i64 {
        let b = &rows[0];
        arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(
            b.column_by_name("learner_id").unwrap().as_ref(),
        )
        .value(0)
    };
    let ts = Value::Timestamp(
        chrono::DateTime::from_timestamp_micros(micros)
            .unwrap()
            .naive_utc(),
    );
    let early = pick(
        select_rows(
            &demo.ws.warehouse,
            &t,
            &Predicate::cmp("signed_up_at", CmpOp::Lt, ts.clone()),
        )
        .await
        .unwrap(),
    );
    let late = pick(
        select_rows(
            &demo.ws.warehouse,
            &t,
            &Predicate::cmp("signed_up_at", CmpOp::GtEq, ts),
        )
        .await
        .unwrap(),
    );
    let early_plan = steps(&explain_json(&demo, &format!("learner={early}"), 0));
    assert_eq!(
        early_plan["marketing.contacts"]["action"], "DELETE",
        "the v1 edge applies to a learner from before the change"
    );
    assert_eq!(early_plan["marketing.contacts"]["column"], "contact_ref");
    assert!(
        early_plan["marketing.contacts"]["via"]
            .as_str()
            .unwrap()
            .contains("crm.learners.learner_id -> marketing.contacts.contact_ref")
    );
    assert_eq!(
        early_plan["marketing.contacts"]["evidence"],
        "lineage/contacts-v1.json"
    );
    let late_plan = steps(&explain_json(&demo, &format!("learner={late}"), 0));
    assert!(
        !late_plan.contains_key("marketing.contacts"),
        "the dropped edge must not be used for a learner who arrived after it: {:?}",
        late_plan.get("marketing.contacts")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn blockers_are_listed_for_every_table() {
    let demo = Demo::new().await;
    let wh = &demo.ws.warehouse;
    for (t, k, v) in [
        ("crm.learners", "gc.enabled", "false"),
        (
            "learning.events",
            "history.expire.min-snapshots-to-keep",
            "3",
        ),
    ] {
        let mut a = SetProperties::default();
        a.set.insert(k.into(), v.into());
        commit(wh, &TableName::parse(t).unwrap(), &mut a)
            .await
            .unwrap();
    }
    let plan = explain_json(&demo, "learner=3590", 1);
    assert_eq!(plan["verdict"], "BLOCKED");
    let blocked = plan["blocked"].as_object().unwrap();
    assert_eq!(blocked.len(), 2, "{blocked:?}");
    assert!(
        blocked["crm.learners"][0]
            .as_str()
            .unwrap()
            .contains("gc.enabled=false")
    );
    assert!(
        blocked["learning.events"][0]
            .as_str()
            .unwrap()
            .contains("min-snapshots-to-keep=3")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_names_the_input() {
    let demo = Demo::new().await;
    let err = |args: &[&str]| {
        let out = demo.lethe(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = err(&["explain", "--subject", "customer=1"]);
    assert!(
        e.contains("unknown subject `customer`") && e.contains("learner"),
        "{e}"
    );
    let e = err(&["explain", "--subject", "learner=abc"]);
    assert!(e.contains("learner_id holds whole numbers"), "{e}");
    let e = err(&["explain", "--subject", "3590"]);
    assert!(e.contains("NAME=ID"), "{e}");
    std::fs::write(
        demo.dir.join("lineage/broken.json"),
        "{\"eventType\": \"COMPLETE\", \"eventTime\": \"2026-01-01T00:00:00Z\"}",
    )
    .unwrap();
    let e = err(&["explain", "--subject", "learner=3590"]);
    assert!(e.contains("broken.json") && e.contains("job"), "{e}");
}
