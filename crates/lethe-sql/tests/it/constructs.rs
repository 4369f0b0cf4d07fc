//! One test per SQL construct: how each maps to OpenLineage subtypes.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::as_string_array;
use datafusion::logical_expr::{ColumnarValue, Expr, LogicalPlanBuilder, Volatility, create_udf};
use datafusion::prelude::{SessionContext, col, lit};
use lethe_sql::Subtype::{
    Aggregation, Conditional, Filter, GroupBy, Identity, Join, Sort, Transformation, Window,
};
use lethe_sql::{Error, column_lineage};

use crate::fixtures::{
    assert_output, direct, indirect, inputs, lineage, lineage_unoptimized, opaque, optimized, plan,
    session,
};

const L: &str = "crm.learners";
const C: &str = "learning.courses";
const E: &str = "learning.enrollments";
const EV: &str = "learning.events";
const R: &str = "learning.reviews";

/// Registers `name(Utf8) -> Utf8`, an identity function as far as data goes; lineage must
/// not know that.
fn register_string_udf(ctx: &SessionContext, name: &str) {
    let udf = create_udf(
        name,
        vec![DataType::Utf8],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let strings: StringArray = match arrays.first() {
                Some(array) => as_string_array(array)?.iter().collect(),
                None => StringArray::from(Vec::<Option<String>>::new()),
            };
            Ok(ColumnarValue::Array(Arc::new(strings) as ArrayRef))
        }),
    );
    ctx.register_udf(udf);
}

#[tokio::test]
async fn case_results_are_transformations_and_conditions_conditional()
-> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT learner_id, CASE WHEN status = 'active' THEN email ELSE phone END AS contact \
         FROM crm.learners",
    )
    .await;
    assert!(lineage.dataset_indirect.is_empty());
    assert_output(&lineage, "learner_id", &[direct(L, "learner_id", Identity)]);
    assert_output(
        &lineage,
        "contact",
        &[
            direct(L, "email", Transformation),
            direct(L, "phone", Transformation),
            indirect(L, "status", Conditional),
        ],
    );
    Ok(())
}

#[tokio::test]
async fn simple_case_operand_is_conditional() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT CASE status WHEN 'active' THEN full_name END AS shown FROM crm.learners",
    )
    .await;
    assert_output(
        &lineage,
        "shown",
        &[
            direct(L, "full_name", Transformation),
            indirect(L, "status", Conditional),
        ],
    );
    Ok(())
}

#[tokio::test]
async fn cast_is_a_transformation() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT CAST(learner_id AS VARCHAR) AS learner_key, \
                CAST(date_of_birth AS TIMESTAMP) AS born, learner_id \
         FROM crm.learners",
    )
    .await;
    assert_output(
        &lineage,
        "learner_key",
        &[direct(L, "learner_id", Transformation)],
    );
    assert_output(
        &lineage,
        "born",
        &[direct(L, "date_of_birth", Transformation)],
    );
    assert_output(&lineage, "learner_id", &[direct(L, "learner_id", Identity)]);
    Ok(())
}

#[tokio::test]
async fn cast_between_storage_types_of_one_logical_type_keeps_identity()
-> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT arrow_cast(email, 'Utf8View') AS email, arrow_cast(email, 'LargeUtf8') AS wide, \
                CAST(date_of_birth AS VARCHAR) AS born_text \
         FROM crm.learners",
    )
    .await;
    assert_output(&lineage, "email", &[direct(L, "email", Identity)]);
    assert_output(&lineage, "wide", &[direct(L, "email", Identity)]);
    assert_output(
        &lineage,
        "born_text",
        &[direct(L, "date_of_birth", Transformation)],
    );
    Ok(())
}

#[tokio::test]
async fn functions_and_arithmetic_are_transformations() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT upper(full_name) || ' <' || email || '>' AS label, price * 1.2 AS gross \
         FROM crm.learners, learning.courses",
    )
    .await;
    assert_output(
        &lineage,
        "label",
        &[
            direct(L, "email", Transformation),
            direct(L, "full_name", Transformation),
        ],
    );
    assert_output(&lineage, "gross", &[direct(C, "price", Transformation)]);
    assert!(lineage.opaque.is_empty(), "built-ins are not opaque");
    Ok(())
}

#[tokio::test]
async fn coalesce_arguments_select_the_value() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT coalesce(phone, email) AS contact FROM crm.learners",
    )
    .await;
    assert_output(
        &lineage,
        "contact",
        &[
            direct(L, "email", Transformation),
            direct(L, "phone", Transformation),
            indirect(L, "phone", Conditional),
        ],
    );
    Ok(())
}

#[tokio::test]
async fn window_keys_are_window_inputs_of_their_column_only() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT e.learner_id, \
                row_number() OVER (PARTITION BY e.learner_id ORDER BY e.enrolled_at) AS nth, \
                lag(e.course_id) OVER (PARTITION BY e.learner_id ORDER BY e.enrolled_at) AS previous_course, \
                sum(e.enrollment_id) OVER (PARTITION BY e.course_id) AS running \
         FROM learning.enrollments e",
    )
    .await;
    assert!(lineage.dataset_indirect.is_empty());
    assert_output(&lineage, "learner_id", &[direct(E, "learner_id", Identity)]);
    assert_output(
        &lineage,
        "nth",
        &[
            indirect(E, "enrolled_at", Window),
            indirect(E, "learner_id", Window),
        ],
    );
    assert_output(
        &lineage,
        "previous_course",
        &[
            direct(E, "course_id", Transformation),
            indirect(E, "enrolled_at", Window),
            indirect(E, "learner_id", Window),
        ],
    );
    assert_output(
        &lineage,
        "running",
        &[
            direct(E, "enrollment_id", Aggregation),
            indirect(E, "course_id", Window),
        ],
    );
    Ok(())
}

#[tokio::test]
async fn order_by_is_a_dataset_wide_sort() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT full_name FROM crm.learners ORDER BY signed_up_at DESC, learner_id LIMIT 10",
    )
    .await;
    assert_eq!(
        lineage.dataset_indirect,
        vec![
            indirect(L, "learner_id", Sort),
            indirect(L, "signed_up_at", Sort),
        ]
    );
    assert_output(&lineage, "full_name", &[direct(L, "full_name", Identity)]);
    Ok(())
}

#[tokio::test]
async fn ctes_resolve_to_base_tables() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "WITH active AS (SELECT learner_id, email FROM crm.learners WHERE status = 'active'), \
              enrolled AS (SELECT a.learner_id, a.email, e.course_id \
                           FROM active a JOIN learning.enrollments e ON e.learner_id = a.learner_id) \
         SELECT email AS contact, course_id FROM enrolled",
    )
    .await;
    assert_eq!(lineage.tables, vec![L, E]);
    assert_eq!(
        lineage.dataset_indirect,
        vec![
            indirect(L, "learner_id", Join),
            indirect(L, "status", Filter),
            indirect(E, "learner_id", Join),
        ]
    );
    assert_output(&lineage, "contact", &[direct(L, "email", Identity)]);
    assert_output(&lineage, "course_id", &[direct(E, "course_id", Identity)]);
    Ok(())
}

#[tokio::test]
async fn union_all_merges_branches_by_position() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT learner_id AS person_id, email AS contact FROM crm.learners \
         UNION ALL \
         SELECT learner_id, ip_address FROM learning.events WHERE kind = 'login'",
    )
    .await;
    assert_eq!(lineage.tables, vec![L, EV]);
    assert_eq!(lineage.dataset_indirect, vec![indirect(EV, "kind", Filter)]);
    assert_output(
        &lineage,
        "person_id",
        &[
            direct(L, "learner_id", Identity),
            direct(EV, "learner_id", Identity),
        ],
    );
    assert_output(
        &lineage,
        "contact",
        &[
            direct(L, "email", Identity),
            direct(EV, "ip_address", Identity),
        ],
    );
    Ok(())
}

#[tokio::test]
async fn union_distinct_groups_by_every_column() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT learner_id FROM crm.learners UNION SELECT learner_id FROM learning.reviews",
    )
    .await;
    assert_eq!(
        lineage.dataset_indirect,
        vec![
            indirect(L, "learner_id", GroupBy),
            indirect(R, "learner_id", GroupBy),
        ]
    );
    assert_output(
        &lineage,
        "learner_id",
        &[
            direct(L, "learner_id", Identity),
            direct(R, "learner_id", Identity),
        ],
    );
    Ok(())
}

#[tokio::test]
async fn in_subquery_is_a_filter_on_everything_it_reads() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT learner_id, full_name FROM crm.learners \
         WHERE learner_id IN (SELECT learner_id FROM learning.enrollments WHERE completed_at IS NOT NULL)",
    )
    .await;
    assert_eq!(lineage.tables, vec![L, E]);
    assert_eq!(
        lineage.dataset_indirect,
        vec![
            indirect(L, "learner_id", Filter),
            indirect(E, "completed_at", Filter),
            indirect(E, "learner_id", Filter),
        ]
    );
    assert_output(&lineage, "learner_id", &[direct(L, "learner_id", Identity)]);
    assert_output(&lineage, "full_name", &[direct(L, "full_name", Identity)]);
    Ok(())
}

#[tokio::test]
async fn correlated_exists_is_a_filter() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT l.email FROM crm.learners l \
         WHERE NOT EXISTS (SELECT 1 FROM learning.reviews r \
                           WHERE r.learner_id = l.learner_id AND r.rating < 2)",
    )
    .await;
    assert_eq!(lineage.tables, vec![L, R]);
    assert_eq!(
        lineage.dataset_indirect,
        vec![
            indirect(L, "learner_id", Filter),
            indirect(R, "learner_id", Filter),
            indirect(R, "rating", Filter),
        ]
    );
    assert_output(&lineage, "email", &[direct(L, "email", Identity)]);
    Ok(())
}

#[tokio::test]
async fn scalar_subquery_value_is_direct() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT learner_id, (SELECT max(price) FROM learning.courses WHERE category = 'data') AS top_price \
         FROM crm.learners",
    )
    .await;
    assert_eq!(lineage.tables, vec![L, C]);
    assert_eq!(
        lineage.dataset_indirect,
        vec![indirect(C, "category", Filter)]
    );
    assert_output(&lineage, "top_price", &[direct(C, "price", Aggregation)]);
    Ok(())
}

#[tokio::test]
async fn correlated_scalar_subquery_value_is_direct_in_both_plans() -> datafusion::error::Result<()>
{
    // Decorrelation turns the correlation predicate into a join key (and a group key of
    // the subquery), so only the DIRECT part is the same for both plans; the unoptimized
    // plan reports the correlation columns as FILTER.
    let ctx = session()?;
    let sql = "SELECT l.learner_id, \
                      (SELECT max(e.enrolled_at) FROM learning.enrollments e \
                       WHERE e.learner_id = l.learner_id) AS last_enrolled_at \
               FROM crm.learners l";
    let unoptimized = lineage_unoptimized(&ctx, sql).await;
    assert_eq!(
        unoptimized.dataset_indirect,
        vec![
            indirect(L, "learner_id", Filter),
            indirect(E, "learner_id", Filter)
        ]
    );
    assert_output(
        &unoptimized,
        "last_enrolled_at",
        &[direct(E, "enrolled_at", Aggregation)],
    );
    let optimized = column_lineage(&optimized(&ctx, &plan(&ctx, sql).await))
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    for (a, b) in unoptimized.outputs.iter().zip(&optimized.outputs) {
        assert_eq!(
            a.direct().collect::<Vec<_>>(),
            b.direct().collect::<Vec<_>>()
        );
    }
    for column in [(L, "learner_id"), (E, "learner_id")] {
        assert!(
            optimized
                .dataset_indirect
                .iter()
                .any(|i| (i.table.as_str(), i.column.as_str()) == column)
        );
    }
    Ok(())
}

#[tokio::test]
async fn distinct_on_groups_by_its_keys() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT DISTINCT ON (learner_id) learner_id, course_id FROM learning.enrollments \
         ORDER BY learner_id, enrolled_at DESC",
    )
    .await;
    assert_eq!(
        lineage.dataset_indirect,
        vec![
            indirect(E, "learner_id", GroupBy),
            indirect(E, "learner_id", Sort)
        ]
    );
    let course = inputs(&lineage, "course_id");
    assert_eq!(course[0], direct(E, "course_id", Aggregation));
    assert!(course.contains(&indirect(E, "enrolled_at", Sort)));
    Ok(())
}

#[tokio::test]
async fn unnest_elements_are_transformations() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT learner_id, unnest(make_array(email, phone)) AS contact FROM crm.learners",
    )
    .await;
    assert_output(&lineage, "learner_id", &[direct(L, "learner_id", Identity)]);
    assert_output(
        &lineage,
        "contact",
        &[
            direct(L, "email", Transformation),
            direct(L, "phone", Transformation),
        ],
    );
    Ok(())
}

#[tokio::test]
async fn values_contribute_no_columns() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT l.email, v.label FROM crm.learners l \
         JOIN (VALUES ('active', 'A'), ('paused', 'P')) AS v(status, label) ON v.status = l.status",
    )
    .await;
    assert_eq!(lineage.tables, vec![L]);
    assert_eq!(lineage.dataset_indirect, vec![indirect(L, "status", Join)]);
    assert_output(&lineage, "email", &[direct(L, "email", Identity)]);
    assert_output(&lineage, "label", &[]);
    Ok(())
}

#[tokio::test]
async fn having_and_aggregate_filter_clause_are_filters() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT course_id, count(review_id) FILTER (WHERE rating >= 4) AS good \
         FROM learning.reviews GROUP BY course_id HAVING avg(rating) > 3",
    )
    .await;
    assert_eq!(
        lineage.dataset_indirect,
        vec![
            indirect(R, "course_id", GroupBy),
            indirect(R, "rating", Filter)
        ]
    );
    assert_output(
        &lineage,
        "good",
        &[
            direct(R, "review_id", Aggregation),
            indirect(R, "rating", Filter),
        ],
    );
    Ok(())
}

#[tokio::test]
async fn rollup_keys_pass_through_and_group() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT city, status, count(learner_id) AS n FROM crm.learners GROUP BY ROLLUP (city, status)",
    )
    .await;
    assert_eq!(
        lineage.dataset_indirect,
        vec![indirect(L, "city", GroupBy), indirect(L, "status", GroupBy)]
    );
    assert_output(&lineage, "city", &[direct(L, "city", Identity)]);
    assert_output(&lineage, "n", &[direct(L, "learner_id", Aggregation)]);
    Ok(())
}

#[tokio::test]
async fn user_defined_function_is_opaque() -> datafusion::error::Result<()> {
    let ctx = session()?;
    register_string_udf(&ctx, "my_hash");
    let lineage = lineage(
        &ctx,
        "SELECT learner_id, my_hash(email) AS email_hash FROM crm.learners \
         WHERE my_hash(phone) <> ''",
    )
    .await;
    assert_eq!(lineage.opaque, vec!["udf my_hash"]);
    assert!(!lineage.is_resolved());
    assert_eq!(
        lineage.dataset_indirect,
        vec![opaque(indirect(L, "phone", Filter), "udf my_hash")]
    );
    let email_hash = inputs(&lineage, "email_hash");
    assert_eq!(
        email_hash[0],
        opaque(direct(L, "email", Transformation), "udf my_hash")
    );
    assert!(email_hash[0].is_opaque());
    // A column next to the UDF is not tainted by it.
    assert_eq!(
        inputs(&lineage, "learner_id")[0],
        direct(L, "learner_id", Identity)
    );
    assert!(!inputs(&lineage, "learner_id")[0].is_opaque());
    Ok(())
}

#[tokio::test]
async fn udf_shadowing_a_builtin_name_is_still_opaque() -> datafusion::error::Result<()> {
    let ctx = session()?;
    register_string_udf(&ctx, "upper");
    let lineage = lineage(&ctx, "SELECT upper(email) AS shout FROM crm.learners").await;
    assert_eq!(lineage.opaque, vec!["udf upper"]);
    assert_output(
        &lineage,
        "shout",
        &[opaque(direct(L, "email", Transformation), "udf upper")],
    );
    Ok(())
}

#[tokio::test]
async fn views_expand_to_their_base_tables() -> datafusion::error::Result<()> {
    let ctx = session()?;
    ctx.sql(
        "CREATE VIEW crm.active_learners AS \
         SELECT learner_id, email FROM crm.learners WHERE status = 'active'",
    )
    .await?;
    let lineage = lineage(&ctx, "SELECT email FROM crm.active_learners").await;
    assert_eq!(lineage.tables, vec![L]);
    assert_eq!(
        lineage.dataset_indirect,
        vec![indirect(L, "status", Filter)]
    );
    assert_output(&lineage, "email", &[direct(L, "email", Identity)]);
    Ok(())
}

#[tokio::test]
async fn recursive_cte_is_solved_to_a_fixed_point() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "WITH RECURSIVE r AS ( \
             SELECT learner_id AS x, email AS who FROM crm.learners \
             UNION ALL \
             SELECT x + 1, who FROM r WHERE x < 10) \
         SELECT x, who FROM r",
    )
    .await;
    assert_eq!(lineage.tables, vec![L]);
    assert_eq!(
        lineage.dataset_indirect,
        vec![indirect(L, "learner_id", Filter)]
    );
    // x is the learner id in the first round and computed from it afterwards.
    assert_output(&lineage, "x", &[direct(L, "learner_id", Transformation)]);
    assert_output(&lineage, "who", &[direct(L, "email", Identity)]);
    Ok(())
}

#[tokio::test]
async fn catalog_prefix_is_dropped_from_table_names() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(&ctx, "SELECT email FROM datafusion.crm.learners").await;
    assert_eq!(lineage.tables, vec![L]);
    assert_output(&lineage, "email", &[direct(L, "email", Identity)]);
    Ok(())
}

#[tokio::test]
async fn self_join_sources_merge() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let lineage = lineage(
        &ctx,
        "SELECT a.email, b.email AS other FROM crm.learners a JOIN crm.learners b ON a.city = b.city",
    )
    .await;
    assert_eq!(lineage.tables, vec![L]);
    assert_eq!(lineage.dataset_indirect, vec![indirect(L, "city", Join)]);
    assert_output(&lineage, "other", &[direct(L, "email", Identity)]);
    Ok(())
}

#[tokio::test]
async fn statements_other_than_queries_are_errors() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let explain = plan(&ctx, "EXPLAIN SELECT email FROM crm.learners").await;
    match column_lineage(&explain) {
        Err(Error::UnsupportedPlan { node }) => assert_eq!(node, "Explain"),
        other => panic!("expected UnsupportedPlan, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn errors_never_show_literal_values() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let explain = plan(
        &ctx,
        "EXPLAIN SELECT email FROM crm.learners WHERE email = 'jane@example.com'",
    )
    .await;
    let error = match column_lineage(&explain) {
        Err(e) => e,
        Ok(_) => panic!("EXPLAIN has no lineage"),
    };
    assert!(!format!("{error} {error:?}").contains("jane"));
    Ok(())
}

#[tokio::test]
async fn deep_nesting_is_an_error_not_a_crash() -> datafusion::error::Result<()> {
    let ctx = session()?;
    let scan = ctx.table("crm.learners").await?.into_unoptimized_plan();
    let mut deep = col("learner_id");
    // Deeper than the analysis allows (256 levels).
    for _ in 0..300 {
        deep = Expr::Negative(Box::new(deep));
    }
    let too_deep = LogicalPlanBuilder::from(scan.clone())
        .project(vec![deep.alias("x")])?
        .build()?;
    assert!(matches!(
        column_lineage(&too_deep),
        Err(Error::TooDeep { .. })
    ));
    // Long operator chains are flattened, not nested.
    let mut chain = col("learner_id").eq(lit(0_i64));
    for i in 1..2_000_i64 {
        chain = chain.or(col("learner_id").eq(lit(i)));
    }
    let wide = LogicalPlanBuilder::from(scan).filter(chain)?.build()?;
    let lineage = column_lineage(&wide)
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    assert_eq!(
        lineage.dataset_indirect,
        vec![indirect(L, "learner_id", Filter)]
    );
    Ok(())
}

#[tokio::test]
async fn optimized_plan_needs_no_special_input() -> datafusion::error::Result<()> {
    // The optimizer pushes the WHERE below the join; the answer must not move.
    let ctx = session()?;
    let sql = "SELECT r.text FROM learning.reviews r JOIN crm.learners l ON l.learner_id = r.learner_id \
               WHERE l.ai_training_consent AND r.rating > 3";
    let unoptimized = plan(&ctx, sql).await;
    let optimized = optimized(&ctx, &unoptimized);
    let a = column_lineage(&unoptimized)
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    let b = column_lineage(&optimized)
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    assert_eq!(a, b);
    assert!(a.dataset_indirect.contains(&indirect(R, "rating", Filter)));
    Ok(())
}
