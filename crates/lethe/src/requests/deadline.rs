//! A request's clock: one month from receipt (GDPR Art. 12(3)), extendable by at most two
//! more months with a reason. Every function takes the day it is given, never the clock.

use chrono::{Months, NaiveDate};

use crate::error::{Error, Result};

/// The months a controller has to answer a request, counted from receipt.
pub const MONTHS_ALLOWED: u32 = 1;
/// The most months an extension may add, in total.
pub const MAX_EXTENSION_MONTHS: u32 = 2;

/// The due day of a request received on `received` with `extension` extra months: the same
/// day of the month `1 + extension` months later, or that month's last day when it is shorter
/// (received 31 January: due 28 or 29 February).
pub fn due(received: NaiveDate, extension: u32) -> Result<NaiveDate> {
    MONTHS_ALLOWED
        .checked_add(extension)
        .and_then(|m| received.checked_add_months(Months::new(m)))
        .ok_or_else(|| Error::invalid(format!("{received} + {extension} month(s) is out of range")))
}

/// Days left on `day` until `due` (0 on the due day itself, negative when overdue).
pub fn days_left(due: NaiveDate, day: NaiveDate) -> i64 {
    (due - day).num_days()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governance::retention::parse_day;

    #[test]
    fn one_month_from_receipt_clamped_to_the_month_end() {
        let d = |s| parse_day(s).unwrap();
        assert_eq!(due(d("2026-09-01"), 0).unwrap(), d("2026-10-01"));
        assert_eq!(due(d("2026-01-31"), 0).unwrap(), d("2026-02-28"));
        assert_eq!(due(d("2028-01-31"), 0).unwrap(), d("2028-02-29"));
        assert_eq!(due(d("2026-09-01"), 2).unwrap(), d("2026-12-01"));
        assert!(due(d("2026-09-01"), u32::MAX).is_err(), "no wrap past u32");
    }

    #[test]
    fn days_left_counts_the_due_day_as_in_time() {
        let d = |s| parse_day(s).unwrap();
        assert_eq!(days_left(d("2026-10-01"), d("2026-10-01")), 0);
        assert_eq!(days_left(d("2026-10-01"), d("2026-09-21")), 10);
        assert_eq!(days_left(d("2026-10-01"), d("2026-10-15")), -14);
    }
}
