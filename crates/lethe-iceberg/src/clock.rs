//! Time as a parameter.
//!
//! Nothing in lethe reads the wall clock for a decision except through a [`Clock`]: retention
//! takes the day it is given; settings defined in wall-clock terms (snapshot age, a sweep's
//! minimum file age) compare against a clock that tests pin with [`FixedClock`].

use chrono::{DateTime, Utc};

/// A source of "now".
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock stopped at one instant (for tests and for replaying a decision).
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub DateTime<Utc>);

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        self.0
    }
}

/// The longest duration lethe takes from a flag or a configuration file: 100 years (36,525
/// days). Past it, durations stop meaning anything for files and snapshots, and the arithmetic
/// on instants (`now - min_age`) could leave chrono's range.
pub const MAX_DAYS: i64 = 36_525;

/// Parses a duration: `0`, `90s`, `45m`, `72h`, `3d`, `2w` (a bare number is seconds), at most
/// [`MAX_DAYS`] days; a longer one is an error, never a panic or a wrapped negative value.
pub fn parse_duration(s: &str) -> crate::error::Result<chrono::Duration> {
    let t = s.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let too_long = || {
        crate::error::Error::invalid(format!(
            "`{s}` is out of range: at most {MAX_DAYS}d (100 years)"
        ))
    };
    if num.is_empty() {
        return Err(crate::error::Error::invalid(format!(
            "`{s}` is not a duration: write e.g. 0, 90s, 45m, 72h, 3d"
        )));
    }
    // Digits only: a parse error here is a number past i64.
    let n: i64 = num.parse().map_err(|_| too_long())?;
    let d = match unit.trim() {
        "" | "s" => chrono::Duration::try_seconds(n),
        "m" | "min" => chrono::Duration::try_minutes(n),
        "h" => chrono::Duration::try_hours(n),
        "d" => chrono::Duration::try_days(n),
        "w" => chrono::Duration::try_weeks(n),
        other => {
            return Err(crate::error::Error::invalid(format!(
                "`{s}`: unknown unit `{other}` (use s, m, h, d or w)"
            )));
        }
    };
    match d {
        Some(d) if d <= chrono::Duration::days(MAX_DAYS) => Ok(d),
        _ => Err(too_long()),
    }
}

/// Parses an instant: RFC 3339 (`2026-10-01T00:00:00Z`), a day (`2026-10-01`, midnight UTC), or
/// a duration before `now` (`5d` is five days ago).
pub fn parse_instant(s: &str, now: DateTime<Utc>) -> crate::error::Result<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s.trim()) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).expect("midnight").and_utc());
    }
    parse_duration(s).map(|d| now - d).map_err(|_| {
        crate::error::Error::invalid(format!(
            "`{s}` is not a time: write RFC 3339 (2026-10-01T00:00:00Z), a day (2026-10-01) or an age (5d)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0").unwrap(), chrono::Duration::zero());
        assert_eq!(parse_duration("72h").unwrap(), chrono::Duration::hours(72));
        assert_eq!(parse_duration("3d").unwrap(), chrono::Duration::days(3));
        assert!(parse_duration("3 fortnights").is_err());
        assert!(parse_duration("h").is_err());
    }

    /// Issue 44 (item 5): a huge duration is an error naming the limit, never a panic.
    #[test]
    fn huge_durations_are_out_of_range_not_a_panic() {
        for s in [
            "9223372036854775807w",
            "99999999999999999999",
            "9223372036854775807",
            "36526d",
            "5218w",
            "876601h",
        ] {
            let e = parse_duration(s).unwrap_err().to_string();
            assert!(e.contains("out of range: at most 36525d"), "{s}: {e}");
        }
        assert_eq!(
            parse_duration("36525d").unwrap(),
            chrono::Duration::days(36_525)
        );
        let now = "2026-11-30T12:00:00Z".parse::<DateTime<Utc>>().unwrap();
        assert!(parse_instant("9223372036854775807w", now).is_err());
    }

    #[test]
    fn instants() {
        let now = "2026-11-30T12:00:00Z".parse::<DateTime<Utc>>().unwrap();
        assert_eq!(
            parse_instant("5d", now).unwrap(),
            now - chrono::Duration::days(5)
        );
        assert_eq!(
            parse_instant("2026-10-01", now).unwrap().to_rfc3339(),
            "2026-10-01T00:00:00+00:00"
        );
        assert!(parse_instant("yesterday", now).is_err());
    }
}
