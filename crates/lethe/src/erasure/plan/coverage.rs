//! The planner's last stage: how much of the plan is resolved, which tables' own settings
//! block the erasure, and the verdict.

use std::collections::BTreeMap;

use super::{Action, Coverage, Step, Verdict};

/// Counts steps by kind; the percentage is (resolved + exempt) / discovered, one decimal.
pub(super) fn coverage(steps: &[Step]) -> Coverage {
    let mut coverage = Coverage {
        discovered: steps.len(),
        ..Default::default()
    };
    for s in steps {
        match s.action {
            Action::Delete | Action::Recompute => coverage.resolved += 1,
            Action::Rewrite | Action::NoAction => coverage.exempt += 1,
            Action::Unresolved => coverage.unresolved += 1,
        }
    }
    coverage.percent = if coverage.discovered == 0 {
        100.0
    } else {
        ((coverage.resolved + coverage.exempt) as f64 * 1000.0 / coverage.discovered as f64).round()
            / 10.0
    };
    coverage
}

/// Tables the plan changes whose settings would keep the subject, with the reasons.
pub(super) fn blocked(steps: &[Step]) -> BTreeMap<String, Vec<String>> {
    steps
        .iter()
        .filter(|s| {
            matches!(
                s.action,
                Action::Delete | Action::Rewrite | Action::Recompute
            ) && !s.blockers.is_empty()
        })
        .map(|s| (s.table.clone(), s.blockers.clone()))
        .collect()
}

/// INCOMPLETE when any step is unresolved, else BLOCKED when any table is, else COMPLETE.
pub(super) fn verdict(coverage: &Coverage, blocked: &BTreeMap<String, Vec<String>>) -> Verdict {
    if coverage.unresolved > 0 {
        Verdict::Incomplete
    } else if !blocked.is_empty() {
        Verdict::Blocked
    } else {
        Verdict::Complete
    }
}
