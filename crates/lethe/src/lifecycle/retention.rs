//! Retention by rule for a given day.
//!
//! Each rule of `governance/retention.toml` selects the rows whose `counted_from` is before
//! `day - keep_days` (and, with `only_when`, in the given state). The day is always passed in;
//! nothing here reads the clock, so the same day deletes the same rows and a second run for the
//! same day deletes nothing and commits nothing. Every rule is checked against the catalog
//! before any is applied (a rule naming an unknown table or a column that isn't a date stops
//! the run with nothing committed), then rules are applied one at a time, each commit recording
//! `retention-rule` (the table) and `retention-day` in its snapshot summary.

use chrono::NaiveDate;
use iceberg::spec::{PrimitiveType, Type};
use serde::Serialize;

use crate::error::Result;
use crate::governance::retention::{RetentionFile, Rule};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::{RowRewrite, count_rows, dry_run, rewrite_rows};
use lethe_iceberg::table::Warehouse;

/// A rule's state on a day.
#[derive(Debug, Clone, Serialize)]
pub struct RuleDue {
    /// The table.
    pub table: String,
    /// The rule, in words.
    pub rule: String,
    /// The first day kept.
    pub cutoff: NaiveDate,
    /// Rows due.
    pub rows_due: u64,
    /// Rows in the table.
    pub rows_in_table: u64,
}

/// What applying a rule did.
#[derive(Debug, Clone, Serialize)]
pub struct RuleApplied {
    /// The table.
    pub table: String,
    /// Rows deleted (or, in a dry run, that would be).
    pub rows_deleted: u64,
    /// Files rewritten.
    pub files_rewritten: usize,
    /// Files dropped whole.
    pub files_dropped: usize,
    /// The snapshot committed (None: nothing to delete, or a dry run).
    pub snapshot_id: Option<i64>,
}

/// Checks the day retention runs for against `today` (the caller's clock): a day after today
/// is refused for `apply`, which would delete rows before their rule ends; a report (`due`,
/// or `apply` as a dry run) may look ahead when `look_ahead` says so explicitly. The rules
/// still take the day they are given, never the clock.
pub fn check_day(day: NaiveDate, today: NaiveDate, changes: bool, look_ahead: bool) -> Result<()> {
    if day <= today {
        return Ok(());
    }
    if changes {
        return Err(crate::Error::invalid(format!(
            "--day {day} is after today ({today}, UTC): applying retention for a future day would delete rows before their rule ends; nothing was changed (a dry run may look ahead: --dry-run --look-ahead)"
        )));
    }
    if !look_ahead {
        return Err(crate::Error::invalid(format!(
            "--day {day} is after today ({today}, UTC): pass --look-ahead to report what the rules make due on a future day"
        )));
    }
    Ok(())
}

/// Describes a rule in words.
pub fn describe(rule: &Rule) -> String {
    let mut s = format!("kept {} days from {}", rule.keep_days, rule.counted_from);
    if let Some(w) = &rule.only_when {
        s.push_str(&format!(", once {} is {}", w.column, w.equals));
    }
    s
}

/// Checks every rule against the catalog: the table exists, `counted_from` is a date or
/// timestamp column, `only_when` names a text column.
pub async fn check_rules(wh: &Warehouse, file: &RetentionFile) -> Result<()> {
    for (table, rule) in &file.value.tables {
        let key = format!("tables.\"{table}\"");
        let name = TableName::parse(table).map_err(|e| file.error_at(&key, e.to_string()))?;
        let t = match wh.load(&name).await {
            Ok(t) => t,
            Err(lethe_iceberg::Error::NoSuchTable(_)) => {
                return Err(file.error_at(
                    &key,
                    format!("the rule names table `{table}`, which is not in the catalog"),
                ));
            }
            Err(e) => return Err(e.into()),
        };
        let schema = t.metadata.current_schema();
        match schema
            .field_by_name(&rule.counted_from)
            .map(|f| f.field_type.as_ref().clone())
        {
            None => {
                return Err(file.error_at(
                    &format!("{key}.counted_from"),
                    format!("table `{table}` has no column `{}`", rule.counted_from),
                ));
            }
            Some(Type::Primitive(
                PrimitiveType::Date | PrimitiveType::Timestamp | PrimitiveType::Timestamptz,
            )) => {}
            Some(other) => {
                return Err(file.error_at(
                    &format!("{key}.counted_from"),
                    format!(
                        "column `{table}.{}` is {other}, not a date or timestamp",
                        rule.counted_from
                    ),
                ));
            }
        }
        if let Some(w) = &rule.only_when {
            match schema
                .field_by_name(&w.column)
                .map(|f| f.field_type.as_ref().clone())
            {
                Some(Type::Primitive(PrimitiveType::String)) => {}
                Some(other) => {
                    return Err(file.error_at(
                        &format!("{key}.only_when"),
                        format!(
                            "column `{table}.{}` is {other}; only_when compares text",
                            w.column
                        ),
                    ));
                }
                None => {
                    return Err(file.error_at(
                        &format!("{key}.only_when"),
                        format!("table `{table}` has no column `{}`", w.column),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Rows due per rule on `day`.
pub async fn due(wh: &Warehouse, file: &RetentionFile, day: NaiveDate) -> Result<Vec<RuleDue>> {
    check_rules(wh, file).await?;
    let mut out = Vec::new();
    for (table, rule) in &file.value.tables {
        let t = wh.load(&TableName::parse(table)?).await?;
        let (rows_due, rows_in_table) = count_rows(wh, &t, &rule.due(day)).await?;
        out.push(RuleDue {
            table: table.clone(),
            rule: describe(rule),
            cutoff: rule.cutoff(day),
            rows_due,
            rows_in_table,
        });
    }
    Ok(out)
}

/// Applies every rule for `day` (or reports what it would do, with `dry`).
pub async fn apply(
    wh: &Warehouse,
    file: &RetentionFile,
    day: NaiveDate,
    dry: bool,
) -> Result<Vec<RuleApplied>> {
    check_rules(wh, file).await?;
    if !dry {
        // Every table before any rule commits: one lethe may not change stops the whole run.
        for table in file.value.tables.keys() {
            wh.check_changeable(&wh.load(&TableName::parse(table)?).await?)?;
        }
    }
    let mut out = Vec::new();
    for (table, rule) in &file.value.tables {
        let name = TableName::parse(table)?;
        let spec = RowRewrite::delete(rule.due(day))
            .with_summary("retention-rule", table.clone())
            .with_summary("retention-day", day.to_string());
        let r = if dry {
            dry_run(wh, &name, &spec).await?
        } else {
            rewrite_rows(wh, &name, &spec).await?
        };
        out.push(RuleApplied {
            table: table.clone(),
            rows_deleted: r.rows_matched,
            files_rewritten: r.files_rewritten.len(),
            files_dropped: r.files_dropped.len(),
            snapshot_id: r.snapshot_id,
        });
    }
    Ok(out)
}
