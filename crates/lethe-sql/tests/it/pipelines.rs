//! The demo's four pipelines, exactly as the lead runs them.
//!
//! Besides the explicit assertions, each pipeline's full lineage is compared with a golden
//! JSON file in `tests/golden/`; run with `LETHE_BLESS=1` to regenerate them after an
//! intended change, and review the diff.

use std::path::PathBuf;

use lethe_sql::Subtype::{Aggregation, Filter, GroupBy, Identity, Join};
use lethe_sql::{ColumnLineage, LineageKind};

use crate::fixtures::{assert_output, direct, indirect, lineage, session};

pub const MARKETING_AUDIENCE: &str = "\
SELECT l.learner_id, l.full_name, l.email, count(e.course_id) AS courses_enrolled, max(e.enrolled_at) AS last_enrolled_at
FROM crm.learners l JOIN learning.enrollments e ON e.learner_id = l.learner_id
WHERE l.marketing_consent = true AND l.status = 'active'
GROUP BY l.learner_id, l.full_name, l.email";

pub const LEARNER_ACTIVITY: &str = "\
SELECT l.learner_id, count(ev.event_id) AS events, count(DISTINCT ev.course_id) AS courses,
       min(ev.occurred_at) AS first_seen, max(ev.occurred_at) AS last_seen
FROM crm.learners l LEFT JOIN learning.events ev ON ev.learner_id = l.learner_id
GROUP BY l.learner_id";

pub const COURSE_PERFORMANCE: &str = "\
SELECT c.course_id, c.title, count(DISTINCT e.learner_id) AS learners, count(e.enrollment_id) AS enrollments,
       avg(r.rating) AS avg_rating, count(r.review_id) AS reviews
FROM learning.courses c
LEFT JOIN learning.enrollments e ON e.course_id = c.course_id
LEFT JOIN learning.reviews r ON r.course_id = c.course_id AND r.learner_id = e.learner_id
GROUP BY c.course_id, c.title";

pub const REVIEW_CORPUS: &str = "\
SELECT r.review_id, r.text FROM learning.reviews r JOIN crm.learners l ON l.learner_id = r.learner_id
WHERE l.ai_training_consent = true";

const L: &str = "crm.learners";
const C: &str = "learning.courses";
const E: &str = "learning.enrollments";
const EV: &str = "learning.events";
const R: &str = "learning.reviews";

fn output_names(lineage: &ColumnLineage) -> Vec<&str> {
    lineage.outputs.iter().map(|o| o.name.as_str()).collect()
}

/// Compares `lineage` with `tests/golden/<name>.json` (rewrites it under LETHE_BLESS=1).
fn assert_golden(name: &str, lineage: &ColumnLineage) {
    // The manifest folder at run time: a binary reused from another checkout's build still
    // compares with this checkout's files.
    let manifest =
        std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
    let path: PathBuf = [
        manifest.as_str(),
        "tests",
        "golden",
        &format!("{name}.json"),
    ]
    .iter()
    .collect();
    let actual = match serde_json::to_string_pretty(lineage) {
        Ok(json) => json + "\n",
        Err(e) => panic!("serialize: {e}"),
    };
    if std::env::var_os("LETHE_BLESS").is_some() {
        if let Err(e) = std::fs::write(&path, &actual) {
            panic!("write {}: {e}", path.display());
        }
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "read {} (run with LETHE_BLESS=1 to create): {e}",
            path.display()
        )
    });
    assert_eq!(
        actual,
        expected,
        "{name}: lineage differs from {}",
        path.display()
    );
    let parsed: ColumnLineage =
        serde_json::from_str(&expected).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()));
    assert_eq!(&parsed, lineage, "golden file round-trips");
}

#[tokio::test]
async fn marketing_audience() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(&ctx, MARKETING_AUDIENCE).await;
    assert_eq!(lineage.tables, vec![L, E]);
    assert!(lineage.opaque.is_empty());
    assert_eq!(
        output_names(&lineage),
        vec![
            "learner_id",
            "full_name",
            "email",
            "courses_enrolled",
            "last_enrolled_at"
        ]
    );
    assert_eq!(
        lineage.dataset_indirect,
        vec![
            indirect(L, "email", GroupBy),
            indirect(L, "full_name", GroupBy),
            indirect(L, "learner_id", Join),
            indirect(L, "learner_id", GroupBy),
            indirect(L, "marketing_consent", Filter),
            indirect(L, "status", Filter),
            indirect(E, "learner_id", Join),
        ]
    );
    assert_output(&lineage, "learner_id", &[direct(L, "learner_id", Identity)]);
    assert_output(&lineage, "full_name", &[direct(L, "full_name", Identity)]);
    assert_output(&lineage, "email", &[direct(L, "email", Identity)]);
    assert_output(
        &lineage,
        "courses_enrolled",
        &[direct(E, "course_id", Aggregation)],
    );
    assert_output(
        &lineage,
        "last_enrolled_at",
        &[direct(E, "enrolled_at", Aggregation)],
    );
    // Every output carries the consent filter, DIRECT inputs come first.
    for output in &lineage.outputs {
        assert!(
            output
                .inputs
                .contains(&indirect(L, "marketing_consent", Filter))
        );
        let first_indirect = output
            .inputs
            .iter()
            .position(|i| i.kind == LineageKind::Indirect);
        assert!(
            output.inputs[..first_indirect.unwrap_or(0)]
                .iter()
                .all(|i| i.kind == LineageKind::Direct)
        );
    }
    assert_golden("marketing_audience", &lineage);
    Ok(())
}

#[tokio::test]
async fn learner_activity() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(&ctx, LEARNER_ACTIVITY).await;
    assert_eq!(lineage.tables, vec![L, EV]);
    assert_eq!(
        output_names(&lineage),
        vec!["learner_id", "events", "courses", "first_seen", "last_seen"]
    );
    assert_eq!(
        lineage.dataset_indirect,
        vec![
            indirect(L, "learner_id", Join),
            indirect(L, "learner_id", GroupBy),
            indirect(EV, "learner_id", Join),
        ]
    );
    assert_output(&lineage, "learner_id", &[direct(L, "learner_id", Identity)]);
    assert_output(&lineage, "events", &[direct(EV, "event_id", Aggregation)]);
    // count(DISTINCT …) is an aggregation too.
    assert_output(&lineage, "courses", &[direct(EV, "course_id", Aggregation)]);
    assert_output(
        &lineage,
        "first_seen",
        &[direct(EV, "occurred_at", Aggregation)],
    );
    assert_output(
        &lineage,
        "last_seen",
        &[direct(EV, "occurred_at", Aggregation)],
    );
    assert_golden("learner_activity", &lineage);
    Ok(())
}

#[tokio::test]
async fn course_performance() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(&ctx, COURSE_PERFORMANCE).await;
    assert_eq!(lineage.tables, vec![C, E, R]);
    assert_eq!(
        output_names(&lineage),
        vec![
            "course_id",
            "title",
            "learners",
            "enrollments",
            "avg_rating",
            "reviews"
        ]
    );
    assert_eq!(
        lineage.dataset_indirect,
        vec![
            indirect(C, "course_id", Join),
            indirect(C, "course_id", GroupBy),
            indirect(C, "title", GroupBy),
            indirect(E, "course_id", Join),
            indirect(E, "learner_id", Join),
            indirect(R, "course_id", Join),
            indirect(R, "learner_id", Join),
        ]
    );
    assert_output(&lineage, "course_id", &[direct(C, "course_id", Identity)]);
    assert_output(&lineage, "title", &[direct(C, "title", Identity)]);
    assert_output(
        &lineage,
        "learners",
        &[direct(E, "learner_id", Aggregation)],
    );
    assert_output(
        &lineage,
        "enrollments",
        &[direct(E, "enrollment_id", Aggregation)],
    );
    // avg over an INT column goes through a coercion cast; still an aggregation.
    assert_output(&lineage, "avg_rating", &[direct(R, "rating", Aggregation)]);
    assert_output(&lineage, "reviews", &[direct(R, "review_id", Aggregation)]);
    assert_golden("course_performance", &lineage);
    Ok(())
}

#[tokio::test]
async fn review_corpus() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(&ctx, REVIEW_CORPUS).await;
    assert_eq!(lineage.tables, vec![L, R]);
    assert_eq!(output_names(&lineage), vec!["review_id", "text"]);
    assert_eq!(
        lineage.dataset_indirect,
        vec![
            indirect(L, "ai_training_consent", Filter),
            indirect(L, "learner_id", Join),
            indirect(R, "learner_id", Join),
        ]
    );
    assert_output(&lineage, "review_id", &[direct(R, "review_id", Identity)]);
    assert_output(&lineage, "text", &[direct(R, "text", Identity)]);
    assert_golden("review_corpus", &lineage);
    Ok(())
}

#[tokio::test]
async fn insert_into_target_reports_the_target_columns() -> datafusion::error::Result<()> {
    let ctx = session()?;
    ctx.sql("CREATE TABLE ai.review_corpus (review_id BIGINT, text VARCHAR)")
        .await?;
    let insert = format!("INSERT INTO ai.review_corpus {REVIEW_CORPUS}");
    let via_insert = lineage(&ctx, &insert).await;
    let plain = lineage(&ctx, REVIEW_CORPUS).await;
    assert_eq!(via_insert, plain);
    Ok(())
}
