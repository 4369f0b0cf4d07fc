//! The demo lakehouse schema as empty in-memory tables, and assertion helpers.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::catalog::MemorySchemaProvider;
use datafusion::datasource::MemTable;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use lethe_sql::{ColumnLineage, InputColumn, LineageKind, Subtype, column_lineage};

pub const NAMESPACES: [&str; 5] = ["crm", "learning", "analytics", "marketing", "ai"];

fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, None)
}

fn table(columns: &[(&str, DataType)]) -> DfResult<Arc<MemTable>> {
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(name, data_type)| Field::new(*name, data_type.clone(), true))
            .collect::<Vec<_>>(),
    ));
    Ok(Arc::new(MemTable::try_new(schema, vec![vec![]])?))
}

/// A session with the demo namespaces and tables (no rows: lineage needs only schemas).
pub fn session() -> DfResult<SessionContext> {
    use DataType::{Boolean, Date32, Float64, Int32, Int64, Utf8};
    let ctx = SessionContext::new();
    let catalog = ctx
        .catalog("datafusion")
        .ok_or_else(|| datafusion::error::DataFusionError::Plan("no default catalog".into()))?;
    for namespace in NAMESPACES {
        catalog.register_schema(namespace, Arc::new(MemorySchemaProvider::new()))?;
    }
    ctx.register_table(
        "crm.learners",
        table(&[
            ("learner_id", Int64),
            ("full_name", Utf8),
            ("email", Utf8),
            ("phone", Utf8),
            ("street_address", Utf8),
            ("city", Utf8),
            ("date_of_birth", Date32),
            ("notes", Utf8),
            ("status", Utf8),
            ("marketing_consent", Boolean),
            ("ai_training_consent", Boolean),
            ("signed_up_at", timestamp()),
        ])?,
    )?;
    ctx.register_table(
        "learning.courses",
        table(&[
            ("course_id", Int64),
            ("instructor_id", Int64),
            ("title", Utf8),
            ("category", Utf8),
            ("price", Float64),
        ])?,
    )?;
    ctx.register_table(
        "learning.enrollments",
        table(&[
            ("enrollment_id", Int64),
            ("learner_id", Int64),
            ("course_id", Int64),
            ("enrolled_at", timestamp()),
            ("completed_at", timestamp()),
        ])?,
    )?;
    ctx.register_table(
        "learning.events",
        table(&[
            ("event_id", Int64),
            ("learner_id", Int64),
            ("course_id", Int64),
            ("kind", Utf8),
            ("ip_address", Utf8),
            ("user_agent", Utf8),
            ("occurred_at", timestamp()),
        ])?,
    )?;
    ctx.register_table(
        "learning.reviews",
        table(&[
            ("review_id", Int64),
            ("learner_id", Int64),
            ("course_id", Int64),
            ("rating", Int32),
            ("text", Utf8),
        ])?,
    )?;
    Ok(ctx)
}

/// The unoptimized plan of `sql` (statements are planned, not executed).
pub async fn plan(ctx: &SessionContext, sql: &str) -> LogicalPlan {
    match ctx.state().create_logical_plan(sql).await {
        Ok(plan) => plan,
        Err(e) => panic!("planning failed: {e}\n{sql}"),
    }
}

/// The plan after DataFusion's analyzer and optimizer.
pub fn optimized(ctx: &SessionContext, plan: &LogicalPlan) -> LogicalPlan {
    match ctx.state().optimize(plan) {
        Ok(plan) => plan,
        Err(e) => panic!("optimizing failed: {e}"),
    }
}

/// Lineage of the unoptimized plan of `sql`.
pub async fn lineage_unoptimized(ctx: &SessionContext, sql: &str) -> ColumnLineage {
    let plan = plan(ctx, sql).await;
    match column_lineage(&plan) {
        Ok(lineage) => lineage,
        Err(e) => panic!("lineage failed: {e}\n{plan}"),
    }
}

/// Lineage of `sql`, checked to be the same for the unoptimized and the optimized plan.
pub async fn lineage(ctx: &SessionContext, sql: &str) -> ColumnLineage {
    let plan = plan(ctx, sql).await;
    let unoptimized = match column_lineage(&plan) {
        Ok(lineage) => lineage,
        Err(e) => panic!("lineage failed: {e}\n{plan}"),
    };
    let optimized_plan = optimized(ctx, &plan);
    let optimized = match column_lineage(&optimized_plan) {
        Ok(lineage) => lineage,
        Err(e) => panic!("lineage of the optimized plan failed: {e}\n{optimized_plan}"),
    };
    assert_eq!(
        unoptimized, optimized,
        "optimized plan gives another lineage\nunoptimized:\n{plan}\noptimized:\n{optimized_plan}"
    );
    unoptimized
}

pub fn direct(table: &str, column: &str, subtype: Subtype) -> InputColumn {
    InputColumn {
        table: table.into(),
        column: column.into(),
        kind: LineageKind::Direct,
        subtype,
        description: None,
    }
}

pub fn indirect(table: &str, column: &str, subtype: Subtype) -> InputColumn {
    InputColumn {
        table: table.into(),
        column: column.into(),
        kind: LineageKind::Indirect,
        subtype,
        description: None,
    }
}

pub fn opaque(mut input: InputColumn, reason: &str) -> InputColumn {
    input.description = Some(format!("opaque: {reason}"));
    input
}

/// The inputs of output `name`; panics with the whole lineage if there is no such output.
pub fn inputs<'a>(lineage: &'a ColumnLineage, name: &str) -> &'a [InputColumn] {
    match lineage.output(name) {
        Some(output) => &output.inputs,
        None => panic!("no output {name} in {lineage:#?}"),
    }
}

/// Asserts the exact inputs of output `name`: `own` followed by the dataset-wide INDIRECT
/// inputs (merged and sorted as the crate promises).
pub fn assert_output(lineage: &ColumnLineage, name: &str, own: &[InputColumn]) {
    let mut expected_direct: Vec<InputColumn> = own
        .iter()
        .filter(|i| i.kind == LineageKind::Direct)
        .cloned()
        .collect();
    expected_direct.sort_by(|a, b| (&a.table, &a.column).cmp(&(&b.table, &b.column)));
    let mut expected_indirect: Vec<InputColumn> = own
        .iter()
        .filter(|i| i.kind == LineageKind::Indirect)
        .chain(lineage.dataset_indirect.iter())
        .cloned()
        .collect();
    expected_indirect
        .sort_by(|a, b| (&a.table, &a.column, a.subtype).cmp(&(&b.table, &b.column, b.subtype)));
    expected_indirect
        .dedup_by(|a, b| (&a.table, &a.column, a.subtype) == (&b.table, &b.column, b.subtype));
    expected_direct.extend(expected_indirect);
    assert_eq!(
        inputs(lineage, name),
        expected_direct.as_slice(),
        "inputs of output {name}"
    );
}
