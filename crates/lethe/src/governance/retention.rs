//! `governance/retention.toml`: retention rules, legal exceptions to erasure, snapshot and
//! statistics settings, and the sweep's minimum file age.
//!
//! ```toml
//! [tables."learning.events"]
//! keep_days = 365
//! counted_from = "occurred_at"               # a date or timestamp column
//! only_when = { column = "status", equals = "closed" }   # optional
//!
//! [erasure.exceptions."billing.payments"]
//! reason = "..."                 # required: the legal team's words
//! decided_by = "legal team"      # a role, never a person
//! erase_columns = ["card_number"]
//!
//! [snapshots]                    # history.expire.* generated for every table
//! max_snapshot_age_hours = 120
//! min_snapshots_to_keep = 1
//! grace_seconds = 0              # how long an erasure keeps the snapshots it replaced
//! history = "refuse"             # what an erasure does where a table keeps history: refuse
//!                                # (default), or "rewrite" (a twin without the subject for
//!                                # every kept snapshot; needs `reason`)
//! [snapshots.tables."finance.ledger"]   # per table (wins over the default above)
//! history = "rewrite"
//! reason = "the quarter's reports are reproduced from tag q3_close"
//! decided_by = "finance controller"
//!
//! [statistics]
//! protected = "none"             # metrics mode for personal, sensitive and unclassified columns
//!
//! [sweep]
//! min_file_age_hours = 72        # as Iceberg Java's orphan removal
//! ```
//!
//! A rule's cutoff is computed from a day the caller passes, never from the clock: rows whose
//! `counted_from` is before `day - keep_days` are due.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{Duration, NaiveDate};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::tomlfile::{self, TomlFile};
use lethe_iceberg::metrics::MetricsMode;
use lethe_iceberg::predicate::{CmpOp, Predicate, Value};

/// One retention rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// How many days rows are kept.
    pub keep_days: u32,
    /// The date or timestamp column the time counts from.
    pub counted_from: String,
    /// Only rows in this state are due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_when: Option<OnlyWhen>,
}

/// A state condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnlyWhen {
    /// The column.
    pub column: String,
    /// The value it must equal (text).
    pub equals: String,
}

/// A legal exception to erasure for one table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exception {
    /// Why: the legal team's words. Required.
    #[serde(default)]
    pub reason: String,
    /// Who decided: a role, never a person's name.
    #[serde(default)]
    pub decided_by: String,
    /// Columns erased at once; an empty list keeps the whole row.
    #[serde(default)]
    pub erase_columns: Vec<String>,
}

/// The erasure section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Erasure {
    /// Exceptions by table.
    #[serde(default)]
    pub exceptions: BTreeMap<String, Exception>,
}

/// What an erasure does where a table keeps history the subject's rows are in: a tag or a
/// branch, or `main`'s older snapshots that `min-snapshots-to-keep` keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryPolicy {
    /// Refuse before changing anything, naming the table and what keeps its history.
    #[default]
    Refuse,
    /// Write a twin of every kept snapshot without the subject, point every ref at its twin,
    /// expire the originals ([`lethe_iceberg::ops::twins`]).
    Rewrite,
}

/// One table's history decision (`[snapshots.tables."ns.table"]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableHistory {
    /// `refuse` or `rewrite`.
    pub history: HistoryPolicy,
    /// Why (required with `rewrite`): the history kept and why it must stay readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who decided (a role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
}

/// A decision to rewrite a table's kept history, as an erasure applies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryDecision {
    /// Why.
    pub reason: String,
    /// Who decided, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
}

/// The snapshots section: what `history.expire.*` properties every table gets, and what an
/// erasure does where a table keeps history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshots {
    /// `history.expire.max-snapshot-age-ms`, in hours.
    #[serde(default = "default_age_hours")]
    pub max_snapshot_age_hours: u64,
    /// `history.expire.min-snapshots-to-keep`.
    #[serde(default = "default_min_snapshots")]
    pub min_snapshots_to_keep: u32,
    /// For every table: `refuse` (default) or `rewrite`.
    #[serde(default)]
    pub history: HistoryPolicy,
    /// Why (required with `history = "rewrite"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who decided (a role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// Per table, over the default.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tables: BTreeMap<String, TableHistory>,
    /// Seconds an erasure keeps a snapshot it replaced — and the files it references — after
    /// a newer commit superseded it, before expiring it (default 0: at once; at most
    /// [`MAX_GRACE_SECONDS`]). Other writers' operations still in flight started from it:
    /// PyIceberg's commit retry validates from its starting snapshot ("Cannot find starting
    /// snapshot" once it is expired) and a delete reads its files. With a grace the erasure
    /// finishes with the expiry pending until the grace ends (journal, attestation), and
    /// `lethe verify` (or a rerun) expires them then; the sweep then also keeps unreferenced
    /// files younger than the grace whatever its minimum age.
    #[serde(default)]
    pub grace_seconds: u64,
}

fn default_age_hours() -> u64 {
    120
}

fn default_min_snapshots() -> u32 {
    1
}

/// The longest grace `[snapshots] grace_seconds` may give (an hour): it is for operations in
/// flight, which take seconds to minutes; longer would keep the subject's rows in time travel
/// for no writer's sake.
pub const MAX_GRACE_SECONDS: u64 = 3600;

impl Default for Snapshots {
    fn default() -> Self {
        Snapshots {
            max_snapshot_age_hours: default_age_hours(),
            min_snapshots_to_keep: default_min_snapshots(),
            history: HistoryPolicy::Refuse,
            reason: None,
            decided_by: None,
            tables: BTreeMap::new(),
            grace_seconds: 0,
        }
    }
}

impl Snapshots {
    /// The decision to rewrite `table`'s kept history, if retention.toml records one (a
    /// table's own entry wins over the default).
    pub fn rewrite_of(&self, table: &str) -> Option<HistoryDecision> {
        let (policy, reason, decided_by) = match self.tables.get(table) {
            Some(t) => (t.history, &t.reason, &t.decided_by),
            None => (self.history, &self.reason, &self.decided_by),
        };
        (policy == HistoryPolicy::Rewrite).then(|| HistoryDecision {
            reason: reason.clone().unwrap_or_default(),
            decided_by: decided_by.clone(),
        })
    }
}

/// The statistics section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statistics {
    /// The metrics mode for personal, sensitive and unclassified columns: `none` or `counts`.
    pub protected: String,
}

impl Default for Statistics {
    fn default() -> Self {
        Statistics {
            protected: "none".into(),
        }
    }
}

/// The sweep section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// Files younger than this are never removed.
    pub min_file_age_hours: u64,
}

impl Default for Sweep {
    fn default() -> Self {
        Sweep {
            min_file_age_hours: 72,
        }
    }
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    /// Rules by table.
    #[serde(default)]
    pub tables: BTreeMap<String, Rule>,
    /// Erasure exceptions.
    #[serde(default)]
    pub erasure: Erasure,
    /// Snapshot settings.
    #[serde(default)]
    pub snapshots: Snapshots,
    /// Statistics settings.
    #[serde(default)]
    pub statistics: Statistics,
    /// Sweep settings.
    #[serde(default)]
    pub sweep: Sweep,
}

/// `retention.toml`, loaded.
pub type RetentionFile = TomlFile<Retention>;

/// The most days a rule keeps rows, and the most hours of the snapshot and sweep settings:
/// 100 years ([`lethe_iceberg::clock::MAX_DAYS`]). Past it a cutoff leaves the calendar and an
/// age in milliseconds leaves the integers.
pub const MAX_DAYS: i64 = lethe_iceberg::clock::MAX_DAYS;

impl RetentionFile {
    /// Loads and checks the file on its own (no catalog needed); a missing file is empty. See
    /// [`RetentionFile::parse`].
    pub fn load(path: &Path) -> Result<RetentionFile> {
        if !path.exists() {
            return Ok(TomlFile {
                path: path.to_path_buf(),
                text: String::new(),
                value: Retention::default(),
            });
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| Error::io(path.display().to_string(), e))?;
        RetentionFile::parse(path, &text)
    }

    /// Parses and checks the text of the file at `path`: every exception has a reason and a
    /// role, and is for a table a rule ends; the statistics mode is `none` or `counts`; every
    /// count of days and hours is within range ([`MAX_DAYS`]). Errors name file, line and key.
    pub fn parse(path: &Path, text: &str) -> Result<RetentionFile> {
        let f = TomlFile {
            path: path.to_path_buf(),
            text: text.to_string(),
            value: tomlfile::parse::<Retention>(path, text)?,
        };
        f.check_ranges()?;
        for (table, ex) in &f.value.erasure.exceptions {
            let key = format!("erasure.exceptions.{}", tomlfile::quoted(table));
            if ex.reason.trim().is_empty() {
                return Err(f.error_at(
                    &format!("{key}.reason"),
                    format!("the exception for `{table}` has no reason: the legal team must record why the rows are kept"),
                ));
            }
            if ex.decided_by.trim().is_empty() {
                return Err(f.error_at(
                    &format!("{key}.decided_by"),
                    format!("the exception for `{table}` doesn't say who decided (a role, such as \"legal team\")"),
                ));
            }
            if !f.value.tables.contains_key(table) {
                return Err(f.error_at(
                    &key,
                    format!("the exception for `{table}` keeps rows that no retention rule ever ends: add a rule in [tables.\"{table}\"]"),
                ));
            }
        }
        let snaps = &f.value.snapshots;
        if snaps.history == HistoryPolicy::Rewrite
            && snaps.reason.as_deref().is_none_or(|r| r.trim().is_empty())
        {
            return Err(f.error_at(
                "snapshots.history",
                "history = \"rewrite\" needs a `reason`: why the tables' history is kept and must stay readable",
            ));
        }
        for (table, t) in &snaps.tables {
            if t.history == HistoryPolicy::Rewrite
                && t.reason.as_deref().is_none_or(|r| r.trim().is_empty())
            {
                return Err(f.error_at(
                    &format!("snapshots.tables.{}.history", tomlfile::quoted(table)),
                    format!("history = \"rewrite\" for `{table}` needs a `reason`: why its history is kept and must stay readable"),
                ));
            }
        }
        if f.value.snapshots.grace_seconds > MAX_GRACE_SECONDS {
            return Err(f.error_at(
                "snapshots.grace_seconds",
                format!(
                    "{} seconds is longer than the {MAX_GRACE_SECONDS} a grace may last: it keeps the snapshots an erasure replaced for other writers' operations in flight (seconds to minutes)",
                    f.value.snapshots.grace_seconds
                ),
            ));
        }
        match MetricsMode::parse(&f.value.statistics.protected) {
            Ok(MetricsMode::None | MetricsMode::Counts) => {}
            _ => {
                return Err(f.error_at(
                    "statistics.protected",
                    format!("`{}` must be none or counts: bounds of protected columns are personal values", f.value.statistics.protected),
                ));
            }
        }
        Ok(f)
    }

    /// How long an erasure keeps the snapshots it replaced (`[snapshots] grace_seconds`).
    pub fn grace(&self) -> Duration {
        Duration::seconds(self.value.snapshots.grace_seconds.min(MAX_GRACE_SECONDS) as i64)
    }

    /// Every count of days, hours and snapshots within its range.
    fn check_ranges(&self) -> Result<()> {
        let hours = MAX_DAYS as u64 * 24;
        for (table, rule) in &self.value.tables {
            if i64::from(rule.keep_days) > MAX_DAYS {
                return Err(self.error_at(
                    &format!("tables.{}.keep_days", tomlfile::quoted(table)),
                    format!(
                        "{} is out of range: at most {MAX_DAYS} days (100 years)",
                        rule.keep_days
                    ),
                ));
            }
        }
        let s = &self.value.snapshots;
        if s.max_snapshot_age_hours > hours {
            return Err(self.error_at(
                "snapshots.max_snapshot_age_hours",
                format!(
                    "{} is out of range: at most {hours} hours (100 years)",
                    s.max_snapshot_age_hours
                ),
            ));
        }
        if s.min_snapshots_to_keep == 0 || s.min_snapshots_to_keep > i32::MAX as u32 {
            return Err(self.error_at(
                "snapshots.min_snapshots_to_keep",
                format!(
                    "{} is out of range: between 1 and {} (Iceberg reads it as an int)",
                    s.min_snapshots_to_keep,
                    i32::MAX
                ),
            ));
        }
        if self.value.sweep.min_file_age_hours > hours {
            return Err(self.error_at(
                "sweep.min_file_age_hours",
                format!(
                    "{} is out of range: at most {hours} hours (100 years)",
                    self.value.sweep.min_file_age_hours
                ),
            ));
        }
        Ok(())
    }

    /// The minimum age of a file before a sweep may remove it (in range: checked at load; a
    /// value built past [`MAX_DAYS`] is held at it, never wrapped to a negative age).
    pub fn min_file_age(&self) -> Duration {
        let hours = i64::try_from(self.value.sweep.min_file_age_hours)
            .unwrap_or(i64::MAX)
            .min(MAX_DAYS * 24);
        Duration::hours(hours)
    }
}

impl Rule {
    /// The first day kept on `day`: rows counted from before it are due.
    pub fn cutoff(&self, day: NaiveDate) -> NaiveDate {
        // keep_days is at most MAX_DAYS (checked at load); held there for rules built by hand.
        let days = i64::from(self.keep_days).min(MAX_DAYS);
        day.checked_sub_signed(Duration::days(days))
            .unwrap_or(NaiveDate::MIN)
    }

    /// The predicate selecting the rows due on `day`.
    pub fn due(&self, day: NaiveDate) -> Predicate {
        let p = Predicate::cmp(
            self.counted_from.clone(),
            CmpOp::Lt,
            Value::Date(self.cutoff(day)),
        );
        match &self.only_when {
            Some(w) => p.and(Predicate::eq(
                w.column.clone(),
                Value::Str(w.equals.clone()),
            )),
            None => p,
        }
    }
}

/// Parses a `--day` argument (YYYY-MM-DD).
pub fn parse_day(s: &str) -> Result<NaiveDate> {
    NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d").map_err(|_| {
        Error::invalid(format!(
            "`{s}` is not a day: write YYYY-MM-DD, e.g. 2026-10-01"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<RetentionFile> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("retention.toml");
        std::fs::write(&p, text).unwrap();
        RetentionFile::load(&p)
    }

    #[test]
    fn cutoff_counts_back_from_the_given_day() {
        let r = Rule {
            keep_days: 365,
            counted_from: "occurred_at".into(),
            only_when: None,
        };
        assert_eq!(
            r.cutoff(parse_day("2026-10-01").unwrap()),
            parse_day("2025-10-01").unwrap()
        );
    }

    #[test]
    fn exception_without_reason_is_refused_with_its_line() {
        let e = load("[tables.\"b.p\"]\nkeep_days = 1\ncounted_from = \"d\"\n[erasure.exceptions.\"b.p\"]\ndecided_by = \"legal team\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("retention.toml:4:"), "{e}");
        assert!(e.contains("has no reason"), "{e}");
    }

    #[test]
    fn exception_for_a_table_no_rule_ends_is_refused() {
        let e =
            load("[erasure.exceptions.\"b.p\"]\nreason = \"tax\"\ndecided_by = \"legal team\"\n")
                .unwrap_err()
                .to_string();
        assert!(e.contains("no retention rule ever ends"), "{e}");
        assert!(e.contains("retention.toml:1:"), "{e}");
    }

    #[test]
    fn protected_statistics_must_keep_no_values() {
        let e = load("[statistics]\nprotected = \"full\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("statistics.protected"), "{e}");
    }

    /// Issue 44 (item 5): counts past their range are refused with file, line and key, never a
    /// panic, and never a negative minimum file age.
    #[test]
    fn numbers_out_of_range_are_refused_with_their_line() {
        let cases = [
            (
                "[tables.\"a.b\"]\ncounted_from = \"d\"\nkeep_days = 4000000000\n",
                "retention.toml:3: tables.\"a.b\".keep_days: 4000000000 is out of range",
            ),
            (
                "[snapshots]\nmax_snapshot_age_hours = 18446744073709551615\nmin_snapshots_to_keep = 1\n",
                "retention.toml:2: snapshots.max_snapshot_age_hours:",
            ),
            (
                "[snapshots]\nmax_snapshot_age_hours = 1\nmin_snapshots_to_keep = 4294967295\n",
                "retention.toml:3: snapshots.min_snapshots_to_keep:",
            ),
            (
                "[snapshots]\nmax_snapshot_age_hours = 1\nmin_snapshots_to_keep = 0\n",
                "retention.toml:3: snapshots.min_snapshots_to_keep:",
            ),
            (
                "[sweep]\nmin_file_age_hours = 9223372036854775808\n",
                "retention.toml:2: sweep.min_file_age_hours: 9223372036854775808 is out of range",
            ),
        ];
        for (text, want) in cases {
            let e = load(text).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        let f = load("[sweep]\nmin_file_age_hours = 876600\n").unwrap();
        assert_eq!(f.min_file_age(), Duration::hours(876_600));
        let far = Rule {
            keep_days: u32::MAX,
            counted_from: "d".into(),
            only_when: None,
        };
        assert!(far.cutoff(parse_day("2026-10-01").unwrap()) < parse_day("1927-01-01").unwrap());
    }

    #[test]
    fn a_history_rewrite_needs_its_reason_and_a_tables_entry_wins() {
        let e = load("[snapshots]\nhistory = \"rewrite\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("retention.toml:2:") && e.contains("needs a `reason`"),
            "{e}"
        );
        let e = load("[snapshots.tables.\"f.l\"]\nhistory = \"rewrite\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("snapshots.tables.\"f.l\".history"), "{e}");
        let f = load("[snapshots]\nhistory = \"rewrite\"\nreason = \"reports\"\n[snapshots.tables.\"f.l\"]\nhistory = \"refuse\"\n").unwrap();
        let s = &f.value.snapshots;
        assert_eq!(
            s.min_snapshots_to_keep, 1,
            "defaults stay when only `history` is given"
        );
        assert_eq!(s.rewrite_of("a.b").unwrap().reason, "reports");
        assert!(s.rewrite_of("f.l").is_none());
        assert!(load("[snapshots]\nhistory = \"keep\"\n").is_err());
    }

    #[test]
    fn a_grace_is_seconds_to_minutes() {
        let ok = load("[snapshots]\nmax_snapshot_age_hours = 120\nmin_snapshots_to_keep = 1\ngrace_seconds = 30\n").unwrap();
        assert_eq!(ok.grace(), Duration::seconds(30));
        assert_eq!(load("").unwrap().grace(), Duration::zero(), "default 0");
        let e = load("[snapshots]\nmax_snapshot_age_hours = 120\nmin_snapshots_to_keep = 1\ngrace_seconds = 86400\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("retention.toml:4:") && e.contains("snapshots.grace_seconds"),
            "{e}"
        );
    }

    #[test]
    fn bad_day_is_refused() {
        assert!(parse_day("yesterday").is_err());
        assert!(parse_day("2026-13-01").is_err());
    }
}
