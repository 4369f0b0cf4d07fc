//! Identifier columns found by their values: the subject's root identifier, copies of it under
//! other names, and derived identifiers that embed it (`a-<id>`, `a-<id>#<n>`).
//!
//! Each sampled text value of a candidate column is cut into pieces at its non-alphanumeric
//! characters (`a-CGB0000113#3` gives `CGB0000113`, `a-CGB0000113`, `CGB0000113#3`...); the
//! identifier column is then read once, value by value (not held in memory), and every piece
//! equal to an identifier value is a match. Where a column's matches share one shape — the same
//! literal text before the identifier, and after it either the same text or the same separator
//! followed by anything — the shape is the transformation proposed. A proposal needs:
//! - at least `min_share` of the column's sampled values matching that one shape;
//! - many identifiers, not one (the most frequent identifier under half the matches), so a
//!   constant such as an area code that happens to equal an identifier is not taken;
//! - where the same row also holds the identifier itself, the embedded one being the row's own
//!   (in at least 90% of the rows);
//! - for identifiers that are easily confused (whole numbers, short codes): literal text with a
//!   letter in the shape (`learner-{id}`), or, for plain copies, a column name that names the
//!   subject or the identifier column — `course_id` holds numbers that are learner IDs too.
//!
//! Columns whose values are already recognised as something else (emails, phones, addresses,
//! free text...) are not candidates: their classification already protects them, and numbers
//! inside them are not identifiers.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Serialize;

use crate::error::Result;
use crate::governance::identifiers::{Pattern, Shape};
use crate::onboarding::discover::rules::words;
use crate::onboarding::discover::sample::{Sample, for_each_value};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::table::Warehouse;

/// An identifier column whose values other columns are matched against.
#[derive(Debug, Clone, Serialize)]
pub struct Root {
    /// The subject's name.
    pub subject: String,
    /// `namespace.table`.
    pub table: String,
    /// The column.
    pub column: String,
    /// Whether subjects.toml declares it (else discovery proposes it).
    pub declared: bool,
}

impl Root {
    /// `namespace.table.column`.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.table, self.column)
    }
}

/// A column found to hold a root identifier's values.
#[derive(Debug, Clone, Serialize)]
pub struct Link {
    /// The table.
    pub table: String,
    /// The column.
    pub column: String,
    /// The root it holds.
    pub root: Root,
    /// The transformation (None: the values are the identifier's own).
    pub pattern: Option<Pattern>,
    /// Share of the column's non-null sampled values matching.
    pub share: f64,
    /// Non-null sampled values.
    pub of: usize,
}

/// A column that may hold an identifier's values.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    /// The table's sample.
    pub sample: &'a Sample,
    /// The column's index in the sample.
    pub index: usize,
}

const MAX_PIECE_VALUE: usize = 160;
const MAX_CUTS: usize = 12;
/// Pieces held in memory at most while one identifier column is read (about 100 MB).
const MAX_PIECES: usize = 2_000_000;

/// Cut positions of a value: its ends and both sides of every non-alphanumeric character.
fn cuts(v: &str) -> Vec<usize> {
    let mut out = vec![0];
    for (i, c) in v.char_indices() {
        if !c.is_alphanumeric() {
            out.push(i);
            out.push(i + c.len_utf8());
        }
        if out.len() > MAX_CUTS * 2 {
            break;
        }
    }
    out.push(v.len());
    out.sort_unstable();
    out.dedup();
    out
}

/// A match of an identifier inside a sampled value.
#[derive(Debug, Clone)]
struct Hit {
    row: usize,
    start: usize,
    end: usize,
    id: String,
}

/// Whether identifiers of this column are easily confused with other numbers and codes.
pub fn confusable(values: &[&str]) -> bool {
    if values.is_empty() {
        return true;
    }
    let mut lens: Vec<usize> = values.iter().map(|v| v.chars().count()).collect();
    lens.sort_unstable();
    let median = lens[lens.len() / 2];
    let all_digits = values
        .iter()
        .all(|v| v.chars().all(|c| c.is_ascii_digit() || c == '-'));
    all_digits || median < 6
}

/// Finds, for each root, the candidate columns holding its values.
pub async fn find_links(
    wh: &Warehouse,
    samples: &[Sample],
    roots: &[Root],
    candidates: &[Candidate<'_>],
    min_share: f64,
    budget: Duration,
) -> Result<(Vec<Link>, Vec<String>)> {
    let mut links = Vec::new();
    let mut notes = Vec::new();
    for root in roots {
        let Some(root_sample) = samples.iter().find(|s| s.table == root.table) else {
            continue;
        };
        let Some(root_col) = root_sample.column(&root.column) else {
            continue;
        };
        let root_values: Vec<&str> = root_col.present().collect();
        let easily_confused = confusable(&root_values);
        // Pieces of every candidate value, by text.
        let mut pieces: HashMap<&str, Vec<(usize, usize, usize, usize)>> = HashMap::new();
        let cands: Vec<&Candidate<'_>> = candidates
            .iter()
            .filter(|c| {
                !(c.sample.table == root.table && c.sample.columns[c.index].name == root.column)
            })
            .collect();
        // Only pieces as long as the identifiers sampled (with some slack) can be one.
        let lens = root_values.iter().map(|v| v.len());
        let min_len = lens.clone().min().unwrap_or(1).saturating_sub(2).max(1);
        let max_len = lens.max().unwrap_or(MAX_PIECE_VALUE) + 4;
        let mut held = 0usize;
        'cands: for (ci, c) in cands.iter().enumerate() {
            for (row, v) in c.sample.columns[c.index].values.iter().enumerate() {
                let Some(v) = v.as_deref() else { continue };
                if v.len() > MAX_PIECE_VALUE {
                    continue;
                }
                let cs = cuts(v);
                for (a, &s) in cs.iter().enumerate() {
                    for &e in &cs[a + 1..] {
                        if e - s < min_len || e - s > max_len {
                            continue;
                        }
                        if let Some(p) = v.get(s..e) {
                            pieces.entry(p).or_default().push((ci, row, s, e));
                            held += 1;
                        }
                    }
                }
                if held > MAX_PIECES {
                    notes.push(format!(
                        "{}: too many columns to match in one pass; columns from {}.{} on were not matched",
                        root.qualified(),
                        c.sample.table,
                        c.sample.columns[c.index].name
                    ));
                    break 'cands;
                }
            }
        }
        if pieces.is_empty() {
            continue;
        }
        let mut hits: Vec<Vec<Hit>> = vec![Vec::new(); cands.len()];
        let table = wh.load(&TableName::parse(&root.table)?).await?;
        let complete = for_each_value(wh, &table, &root.column, budget, &mut |id| {
            if let Some(ps) = pieces.get(id) {
                for (ci, row, s, e) in ps {
                    hits[*ci].push(Hit {
                        row: *row,
                        start: *s,
                        end: *e,
                        id: id.to_string(),
                    });
                }
            }
            true
        })
        .await?;
        if !complete {
            notes.push(format!(
                "{}: read only part of the identifier column within the time budget; matches may be missed",
                root.qualified()
            ));
        }
        for (ci, c) in cands.iter().enumerate() {
            if let Some(link) = judge(root, c, &hits[ci], easily_confused, min_share) {
                links.push(link);
            }
        }
    }
    Ok((links, notes))
}

/// The shapes a hit supports.
fn shapes(v: &str, h: &Hit) -> Vec<Pattern> {
    let before = &v[..h.start];
    let after = &v[h.end..];
    let mut out = vec![Pattern {
        before: before.to_string(),
        after: after.to_string(),
        shape: Shape::Exact,
    }];
    // Prefix: the same separator (non-alphanumeric run) right after the identifier.
    let sep: String = after.chars().take_while(|c| !c.is_alphanumeric()).collect();
    if !sep.is_empty() && sep.len() < after.len() {
        out.push(Pattern {
            before: before.to_string(),
            after: sep,
            shape: Shape::Prefix,
        });
    }
    let sep: String = {
        let rev: String = before
            .chars()
            .rev()
            .take_while(|c| !c.is_alphanumeric())
            .collect();
        rev.chars().rev().collect()
    };
    if !sep.is_empty() && sep.len() < before.len() {
        out.push(Pattern {
            before: sep,
            after: after.to_string(),
            shape: Shape::Suffix,
        });
    }
    out
}

/// A shape: literal text before, after, and [`Shape`] as a number.
type ShapeKey = (String, String, u8);
/// Rows supporting a shape: how many, which, and how often each identifier appears.
type Support = (usize, Vec<usize>, BTreeMap<String, usize>);

fn judge(
    root: &Root,
    c: &Candidate<'_>,
    hits: &[Hit],
    easily_confused: bool,
    min_share: f64,
) -> Option<Link> {
    let col = &c.sample.columns[c.index];
    let present = col.present().count();
    if present == 0 || hits.is_empty() {
        return None;
    }
    // Support per shape: rows (once each) whose value has a hit of that shape.
    let mut support: HashMap<ShapeKey, Support> = HashMap::new();
    for h in hits {
        let Some(v) = col.values[h.row].as_deref() else {
            continue;
        };
        for p in shapes(v, h) {
            let key = (p.before.clone(), p.after.clone(), p.shape as u8);
            let e = support.entry(key).or_default();
            if !e.1.contains(&h.row) {
                e.0 += 1;
                e.1.push(h.row);
                *e.2.entry(h.id.clone()).or_default() += 1;
            }
        }
    }
    // Best: most rows; ties prefer exact, then prefix, then suffix.
    let ((before, after, shape), (n, rows, ids)) = support.into_iter().max_by(|a, b| {
        (a.1.0, std::cmp::Reverse(a.0.2), &b.0.0, &b.0.1).cmp(&(
            b.1.0,
            std::cmp::Reverse(b.0.2),
            &a.0.0,
            &a.0.1,
        ))
    })?;
    let share = n as f64 / present as f64;
    if share < min_share {
        return None;
    }
    let top = ids.values().max().copied().unwrap_or(0);
    if n >= 4 && top * 2 > n {
        return None;
    }
    let shape = match shape {
        0 => Shape::Exact,
        1 => Shape::Prefix,
        _ => Shape::Suffix,
    };
    let pattern = Pattern {
        before,
        after,
        shape,
    };
    let plain = shape == Shape::Exact && pattern.before.is_empty() && pattern.after.is_empty();
    if easily_confused {
        if plain {
            let w = words(&col.name);
            let subject_words = words(&root.subject);
            let named = col.name == root.column || subject_words.iter().all(|s| w.contains(s));
            if !named {
                return None;
            }
        } else if !format!("{}{}", pattern.before, pattern.after)
            .chars()
            .any(|c| c.is_alphabetic())
        {
            return None;
        }
    }
    // The row's own identifier, when the row holds it.
    let own = c
        .sample
        .column(&root.column)
        .filter(|_| !(c.sample.table == root.table && col.name == root.column));
    if let Some(own) = own {
        let mut agree = 0usize;
        let mut checked = 0usize;
        for r in &rows {
            let (Some(v), Some(id)) = (col.values[*r].as_deref(), own.values[*r].as_deref()) else {
                continue;
            };
            checked += 1;
            if pattern.matches(v, id) {
                agree += 1;
            }
        }
        if checked > 0 && (agree as f64) < 0.9 * checked as f64 {
            return None;
        }
    }
    Some(Link {
        table: c.sample.table.clone(),
        column: col.name.clone(),
        root: root.clone(),
        pattern: (!plain).then_some(pattern),
        share,
        of: present,
    })
}

/// The subject a table's key names: `customers` and `customer_id` give `customer`.
pub fn subject_of(table: &str, column: &str) -> Option<String> {
    let tname = table.rsplit('.').next().unwrap_or(table);
    let tw = words(tname);
    let last = singular(tw.last()?);
    let cw = words(column);
    let id_words = ["id", "key", "ref", "uuid", "guid", "number", "no", "code"];
    match cw.as_slice() {
        [one] if id_words.contains(&one.as_str()) => Some(last),
        [.., tail] if id_words.contains(&tail.as_str()) => {
            let x = cw[..cw.len() - 1].join("_");
            let xs = singular(&x);
            (xs == last || x == tw.join("_") || singular(&tw.join("_")) == xs).then_some(xs)
        }
        _ => None,
    }
}

/// A word's singular, by the common English endings.
pub fn singular(w: &str) -> String {
    if let Some(s) = w.strip_suffix("ies") {
        return format!("{s}y");
    }
    if w.ends_with("sses") || w.ends_with("xes") || w.ends_with("ches") || w.ends_with("shes") {
        return w[..w.len() - 2].to_string();
    }
    if w.ends_with('s') && !w.ends_with("ss") && w.len() > 3 {
        return w[..w.len() - 1].to_string();
    }
    w.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onboarding::discover::sample::SampledColumn;

    fn sample(table: &str, cols: Vec<(&str, &str, Vec<Option<&str>>)>) -> Sample {
        let rows = cols.first().map_or(0, |c| c.2.len());
        Sample {
            table: table.into(),
            rows_total: rows as u64,
            rows,
            files_read: 1,
            files_total: 1,
            cut_short: false,
            columns: cols
                .into_iter()
                .map(|(n, t, v)| {
                    SampledColumn::top_level(
                        n,
                        t,
                        v.into_iter().map(|x| x.map(str::to_string)).collect(),
                    )
                })
                .collect(),
        }
    }

    fn hits_for(s: &Sample, col: usize, ids: &[&str]) -> Vec<Hit> {
        let mut out = Vec::new();
        for (row, v) in s.columns[col].values.iter().enumerate() {
            let Some(v) = v.as_deref() else { continue };
            let cs = cuts(v);
            for (a, &st) in cs.iter().enumerate() {
                for &e in &cs[a + 1..] {
                    if ids.contains(&&v[st..e]) {
                        out.push(Hit {
                            row,
                            start: st,
                            end: e,
                            id: v[st..e].to_string(),
                        });
                    }
                }
            }
        }
        out
    }

    fn root(subject: &str, table: &str, column: &str) -> Root {
        Root {
            subject: subject.into(),
            table: table.into(),
            column: column.into(),
            declared: false,
        }
    }

    #[test]
    fn session_ids_are_a_prefix_shape_and_anonymous_ids_exact() {
        let s = sample(
            "web.sessions",
            vec![
                (
                    "session_id",
                    "string",
                    vec![
                        Some("a-CGB0000113#1"),
                        Some("a-CGB0000113#2"),
                        Some("a-CGB0000114#1"),
                        Some("a-CGB0000200#12"),
                    ],
                ),
                (
                    "anonymous_id",
                    "string",
                    vec![
                        Some("a-CGB0000113"),
                        Some("a-CGB0000113"),
                        Some("a-CGB0000114"),
                        Some("a-CGB0000200"),
                    ],
                ),
            ],
        );
        let ids = ["CGB0000113", "CGB0000114", "CGB0000200"];
        let r = root("customer", "shop.customers", "customer_id");
        let c = Candidate {
            sample: &s,
            index: 0,
        };
        let l = judge(&r, &c, &hits_for(&s, 0, &ids), false, 0.8).unwrap();
        assert_eq!(l.pattern.unwrap().render(), "a-{id}#*");
        let c = Candidate {
            sample: &s,
            index: 1,
        };
        let l = judge(&r, &c, &hits_for(&s, 1, &ids), false, 0.8).unwrap();
        assert_eq!(l.pattern.unwrap().render(), "a-{id}");
    }

    #[test]
    fn confusable_numbers_need_names_or_letters() {
        // course_id values are all valid learner IDs, but the name says otherwise.
        let s = sample(
            "learning.enrollments",
            vec![(
                "course_id",
                "long",
                (1..=20)
                    .map(|i| {
                        Some(
                            [
                                "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12",
                                "13", "14", "15", "16", "17", "18", "19", "20",
                            ][i - 1],
                        )
                    })
                    .collect(),
            )],
        );
        let ids: Vec<String> = (1..=5000).map(|i| i.to_string()).collect();
        let idr: Vec<&str> = ids.iter().map(String::as_str).collect();
        let r = root("learner", "crm.learners", "learner_id");
        let c = Candidate {
            sample: &s,
            index: 0,
        };
        assert!(judge(&r, &c, &hits_for(&s, 0, &idr), true, 0.8).is_none());
        // The same values under the subject's name are a copy.
        let mut s2 = s.clone();
        s2.columns[0].name = "learner_id".into();
        let c = Candidate {
            sample: &s2,
            index: 0,
        };
        let l = judge(&r, &c, &hits_for(&s2, 0, &idr), true, 0.8).unwrap();
        assert!(l.pattern.is_none());
    }

    #[test]
    fn a_constant_that_equals_an_identifier_is_not_a_link() {
        let s = sample(
            "x.contacts",
            vec![(
                "line",
                "string",
                (0..10).map(|_| Some("ref-20-x")).collect(),
            )],
        );
        let r = root("learner", "crm.learners", "learner_id");
        let c = Candidate {
            sample: &s,
            index: 0,
        };
        assert!(judge(&r, &c, &hits_for(&s, 0, &["20"]), true, 0.8).is_none());
    }

    #[test]
    fn the_rows_own_identifier_must_agree() {
        // House numbers are 100 + id: they match other learners' IDs, never the row's own.
        let s = sample(
            "crm.learners",
            vec![
                (
                    "learner_id",
                    "long",
                    vec![Some("1"), Some("2"), Some("3"), Some("4")],
                ),
                (
                    "tag",
                    "string",
                    vec![Some("L-101"), Some("L-102"), Some("L-103"), Some("L-104")],
                ),
            ],
        );
        let ids: Vec<String> = (1..=200).map(|i| i.to_string()).collect();
        let idr: Vec<&str> = ids.iter().map(String::as_str).collect();
        let r = root("learner", "crm.learners", "learner_id");
        let c = Candidate {
            sample: &s,
            index: 1,
        };
        assert!(judge(&r, &c, &hits_for(&s, 1, &idr), true, 0.8).is_none());
    }

    #[test]
    fn subjects_from_table_and_key_names() {
        assert_eq!(
            subject_of("shop.customers", "customer_id").as_deref(),
            Some("customer")
        );
        assert_eq!(
            subject_of("crm.learners", "learner_id").as_deref(),
            Some("learner")
        );
        assert_eq!(subject_of("app.users", "id").as_deref(), Some("user"));
        assert_eq!(subject_of("crm.learners", "course_id"), None);
        assert_eq!(subject_of("analytics.learner_activity", "learner_id"), None);
        assert_eq!(singular("activities"), "activity");
        assert_eq!(singular("addresses"), "address");
    }
}
