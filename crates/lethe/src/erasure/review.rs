//! REVIEW: what waits on a person, and the decisions people record.
//!
//! Some of an erasure can't be decided by lethe: another person's row that quotes the subject
//! (a complaint that gives the subject's email) is kept and listed as a *mention*; a part a
//! legal hold keeps waits for the hold's end; a store rebuilt from a source waits for its next
//! rebuild; a store whose probe can't see waits for its configuration to be fixed. [`pending`]
//! lists all of these for each request whose attestation is not yet complete.
//!
//! A reviewer decides each mention ([`decide`]), as one of:
//! - **redacted**: the row was edited so it no longer quotes the subject — lethe checks that
//!   the row no longer mentions the subject before recording it;
//! - **not the subject**: the text names someone else (a namesake, a shared address);
//! - **kept**, with a basis: the row stays as it is (another person's complaint that quotes the
//!   email, kept as that person's record).
//!
//! Each decision names the reviewer's role (never a person) and the day, and is kept in
//! `state/reviews/<request>.json` (mode 0600: it names tables and row keys, never a value).
//! A mention decided *not the subject* or *kept* no longer keeps the request open: the traces
//! the proof scan finds in that table's current files — values, never IDs — are accounted
//! for by the decisions, and the attestation lists each decision ([`explained`]). A mention
//! not yet decided keeps them unexplained, as before.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::erasure::case::{CaseFile, read_case, write_atomic};
use crate::erasure::mentions::{TableMentions, mentions};
use crate::erasure::prove::HitView;
use crate::error::{Error, Result};
use crate::workspace::Workspace;

/// A reviewer's decision on a mention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The row was edited and no longer quotes the subject (checked when recorded).
    Redacted,
    /// The text names someone else.
    NotTheSubject,
    /// Kept as it is, on the decision's basis.
    Kept,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Outcome::Redacted => "redacted",
            Outcome::NotTheSubject => "not-the-subject",
            Outcome::Kept => "kept",
        })
    }
}

impl std::str::FromStr for Outcome {
    type Err = Error;
    fn from_str(s: &str) -> Result<Outcome> {
        match s {
            "redacted" => Ok(Outcome::Redacted),
            "not-the-subject" => Ok(Outcome::NotTheSubject),
            "kept" => Ok(Outcome::Kept),
            other => Err(Error::invalid(format!(
                "`{other}` is not a review decision: use redacted, not-the-subject or kept"
            ))),
        }
    }
}

/// One recorded decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The table holding the mention.
    pub table: String,
    /// The row, as the mention lists it (`ticket_id=T-17`, or `row 12`).
    pub row: String,
    /// The decision.
    pub outcome: Outcome,
    /// Why (required for `kept`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<String>,
    /// The reviewer's role (a role, never a person's name).
    pub role: String,
    /// The day decided.
    pub day: NaiveDate,
    /// When it was recorded (RFC 3339).
    pub recorded_at: String,
}

impl Decision {
    /// Whether the decision accounts for the mention's text staying where it is.
    pub fn keeps_text(&self) -> bool {
        matches!(self.outcome, Outcome::Kept | Outcome::NotTheSubject)
    }
}

/// The decisions recorded for one request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reviews {
    /// The request.
    pub request: String,
    /// Every decision, in the order recorded (a later decision on the same row replaces an
    /// earlier one).
    pub decisions: Vec<Decision>,
}

impl Reviews {
    /// The decision in force on a row of a table.
    pub fn on(&self, table: &str, row: &str) -> Option<&Decision> {
        self.decisions
            .iter()
            .rev()
            .find(|d| d.table == table && d.row == row)
    }

    /// The decisions in force, one per row.
    pub fn in_force(&self) -> Vec<&Decision> {
        let mut seen = BTreeSet::new();
        let mut out: Vec<&Decision> = self
            .decisions
            .iter()
            .rev()
            .filter(|d| seen.insert((d.table.clone(), d.row.clone())))
            .collect();
        out.reverse();
        out
    }
}

fn reviews_path(ws: &Workspace, request: &str) -> std::path::PathBuf {
    ws.config
        .paths
        .state
        .join("reviews")
        .join(format!("{request}.json"))
}

/// The decisions recorded for `request` (none when nothing was decided).
pub fn load(ws: &Workspace, request: &str) -> Result<Reviews> {
    let p = reviews_path(ws, request);
    if !p.exists() {
        return Ok(Reviews {
            request: request.to_string(),
            decisions: Vec::new(),
        });
    }
    let text = std::fs::read_to_string(&p).map_err(|e| Error::io(p.display().to_string(), e))?;
    serde_json::from_str(&text)
        .map_err(|e| Error::invalid(format!("{}: not a reviews file: {e}", p.display())))
}

/// A decision to record.
#[derive(Debug, Clone)]
pub struct Decide {
    /// The request.
    pub request: String,
    /// The table holding the mention.
    pub table: String,
    /// The row, as `lethe review` lists it.
    pub row: String,
    /// The decision.
    pub outcome: Outcome,
    /// Why (required for `kept`).
    pub basis: Option<String>,
    /// The reviewer's role.
    pub role: String,
    /// The day decided.
    pub day: NaiveDate,
}

/// Records a decision on a mention of `d.request`'s subject. The row must be one the search
/// for mentions lists (or, for `redacted`, one that no longer mentions the subject: checked
/// now); `kept` needs a basis; the role is required. Returns the decisions in force.
pub async fn decide(ws: &Workspace, d: &Decide) -> Result<Reviews> {
    crate::erasure::case::valid_request_id(&d.request)?;
    if d.role.trim().is_empty() {
        return Err(Error::invalid(
            "a decision names the reviewer's role (e.g. --role \"privacy officer\")",
        ));
    }
    let basis = d.basis.as_deref().map(str::trim).filter(|b| !b.is_empty());
    if d.outcome == Outcome::Kept && basis.is_none() {
        return Err(Error::invalid(
            "a mention kept needs its basis (--basis \"...\"): why the row stays as it is",
        ));
    }
    let case = open_case(ws, &d.request)?;
    let found = mentions_of(ws, &case).await?;
    let listed = found
        .get(&d.table)
        .is_some_and(|m| m.keys.iter().any(|k| k == &d.row));
    match (d.outcome, listed) {
        (Outcome::Redacted, true) => {
            return Err(Error::Refused(format!(
                "{} {} still mentions the subject: it can't be recorded as redacted",
                d.table, d.row
            )));
        }
        (Outcome::Redacted, false) => {}
        (_, false) => {
            return Err(Error::invalid(format!(
                "{} {} is not a mention of request {}'s subject (see `lethe review --request {}`)",
                d.table, d.row, d.request, d.request
            )));
        }
        (_, true) => {}
    }
    let mut reviews = load(ws, &d.request)?;
    reviews.decisions.push(Decision {
        table: d.table.clone(),
        row: d.row.clone(),
        outcome: d.outcome,
        basis: basis.map(str::to_string),
        role: d.role.trim().to_string(),
        day: d.day,
        recorded_at: chrono::Utc::now().to_rfc3339(),
    });
    write_atomic(
        &reviews_path(ws, &d.request),
        serde_json::to_string_pretty(&reviews)?.as_bytes(),
        true,
    )?;
    Ok(reviews)
}

fn open_case(ws: &Workspace, request: &str) -> Result<CaseFile> {
    let case = read_case(ws, request)?;
    if case.destroyed {
        return Err(Error::invalid(format!(
            "the case file of {request} was destroyed after its COMPLETE attestation: nothing is left to review"
        )));
    }
    Ok(case)
}

async fn mentions_of(ws: &Workspace, case: &CaseFile) -> Result<BTreeMap<String, TableMentions>> {
    let prefix = crate::erasure::prove::prefix_len(ws).await?;
    mentions(ws, std::slice::from_ref(case), prefix).await
}

/// One mention as the review lists it.
#[derive(Debug, Clone, Serialize)]
pub struct MentionItem {
    /// The table.
    pub table: String,
    /// The row.
    pub row: String,
    /// The text columns the subject was found in (in that table).
    pub columns: Vec<String>,
    /// The decision in force, if any.
    pub decision: Option<Decision>,
}

/// What waits on a person for one request.
#[derive(Debug, Clone, Serialize)]
pub struct Pending {
    /// The request.
    pub request: String,
    /// Every mention with its decision (undecided ones have none).
    pub mentions: Vec<MentionItem>,
    /// Mentions the search found more of than it lists, per table (it lists 1,000 per table).
    pub unlisted: BTreeMap<String, u64>,
    /// Parts a legal hold keeps, in words.
    pub held: Vec<String>,
    /// Stores waiting for something (a rebuild, a retention date, a fix), in words.
    pub stores: Vec<String>,
}

impl Pending {
    /// Mentions not yet decided.
    pub fn undecided(&self) -> usize {
        self.mentions
            .iter()
            .filter(|m| m.decision.is_none())
            .count()
            + self.unlisted.values().sum::<u64>() as usize
    }

    /// Nothing waits on a person.
    pub fn is_empty(&self) -> bool {
        self.undecided() == 0 && self.held.is_empty() && self.stores.is_empty()
    }
}

/// What waits on a person for `request`: its mentions with their decisions, held parts,
/// stores waiting.
pub async fn pending(ws: &Workspace, request: &str) -> Result<Pending> {
    let journal = crate::erasure::erase::find_request(ws, request)?
        .ok_or_else(|| Error::invalid(format!("no erasure with request {request}")))?;
    let case = open_case(ws, request)?;
    let reviews = load(ws, request)?;
    let mut out = Pending {
        request: request.to_string(),
        mentions: Vec::new(),
        unlisted: BTreeMap::new(),
        held: Vec::new(),
        stores: Vec::new(),
    };
    for (table, m) in mentions_of(ws, &case).await? {
        for k in &m.keys {
            out.mentions.push(MentionItem {
                table: table.clone(),
                row: k.clone(),
                columns: m.columns.clone(),
                decision: reviews.on(&table, k).cloned(),
            });
        }
        let unlisted = m.rows.saturating_sub(m.keys.len() as u64);
        if unlisted > 0 {
            out.unlisted.insert(table.clone(), unlisted);
        }
    }
    for s in journal.steps.iter().filter(|s| s.is_held()) {
        if let Some(h) = &s.held {
            out.held.push(format!(
                "{}: held under `{}` until {} ({})",
                s.table, h.hold, h.until, h.basis
            ));
        }
    }
    for s in &journal.stores {
        use crate::erasure::erase::StoreState as S;
        let why = match s.state {
            S::Held => s
                .held
                .as_ref()
                .map(|h| format!("held under `{}` until {}", h.hold, h.until)),
            S::PendingRebuild => Some(format!(
                "waiting for its next rebuild from {} ({}); then `lethe verify --request {request}`",
                s.rebuilt_from.clone().unwrap_or_default(),
                s.schedule.clone().unwrap_or_default()
            )),
            S::PendingRetention => Some(format!(
                "waiting for its retention to end on {}; then `lethe verify --request {request}`",
                s.expires_on.clone().unwrap_or_default()
            )),
            S::Planned | S::Deleted | S::Verified | S::HandedOff | S::Residual => None,
            _ => Some(format!(
                "{}: {}; fix it, then `lethe erase --resume {request}`",
                s.state,
                s.error.clone().unwrap_or_default()
            )),
        };
        if let Some(w) = why {
            out.stores.push(format!("store {}: {w}", s.store));
        }
    }
    Ok(out)
}

/// The hits of a proof scan that reviewed mentions account for, and the decisions that do.
///
/// A hit is accounted for when every mention the search finds in its table is decided *kept*
/// or *not the subject*, the hit is a value searched as text (an identifying value, or a
/// text ID) found in one of the text columns the mentions are in (the hit's detail names the
/// column: Parquet values, statistics and page indexes), and its file is one the table's
/// current snapshot reads (`current`: by location, for each table with mentions). An ID found
/// in an ID column, a value in another column, a file only older snapshots read, a manifest's
/// bounds: all stay hits (bounds of a kept text column go with `lethe properties apply`).
pub fn explained(
    hits: &[HitView],
    found: &BTreeMap<String, TableMentions>,
    reviews: &Reviews,
    current: &BTreeMap<String, HashSet<String>>,
) -> Vec<bool> {
    let settled: BTreeSet<&str> = found
        .iter()
        .filter(|(t, m)| {
            m.rows == m.keys.len() as u64
                && m.keys
                    .iter()
                    .all(|k| reviews.on(t, k).is_some_and(Decision::keeps_text))
        })
        .map(|(t, _)| t.as_str())
        .collect();
    hits.iter()
        .map(|h| {
            let Some(t) = h.table.as_deref() else {
                return false;
            };
            let in_mention_column = column_of(&h.detail).is_some_and(|c| {
                found
                    .get(t)
                    .is_some_and(|m| m.columns.iter().any(|x| x == c))
            });
            settled.contains(t)
                && h.trace.starts_with("value ")
                && in_mention_column
                && current.get(t).is_some_and(|c| c.contains(&h.file))
        })
        .collect()
}

/// The column a hit's detail names (`column `body`, row group 0, min`).
fn column_of(detail: &str) -> Option<&str> {
    let rest = detail.strip_prefix("column `")?;
    rest.split_once('`').map(|(c, _)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(table: &str, file: &str, trace: &str, detail: &str) -> HitView {
        HitView {
            request: "r".into(),
            file: file.into(),
            table: Some(table.into()),
            place: "DataValue".into(),
            trace: trace.into(),
            detail: detail.into(),
            count: 1,
        }
    }

    fn decision(table: &str, row: &str, outcome: Outcome) -> Decision {
        Decision {
            table: table.into(),
            row: row.into(),
            outcome,
            basis: Some("b".into()),
            role: "privacy officer".into(),
            day: NaiveDate::from_ymd_opt(2026, 12, 7).unwrap(),
            recorded_at: String::new(),
        }
    }

    #[test]
    fn only_value_hits_in_mention_columns_of_settled_tables_current_files_are_explained() {
        let found: BTreeMap<String, TableMentions> = [(
            "support.tickets".to_string(),
            TableMentions {
                rows: 2,
                keys: vec!["ticket_id=1".into(), "ticket_id=2".into()],
                columns: vec!["body".into()],
            },
        )]
        .into();
        let current: BTreeMap<String, HashSet<String>> = [(
            "support.tickets".to_string(),
            ["/w/t/a.parquet".to_string()].into(),
        )]
        .into();
        let hits = vec![
            hit(
                "support.tickets",
                "/w/t/a.parquet",
                "value email",
                "column `body`, first at row 0",
            ),
            hit(
                "support.tickets",
                "/w/t/a.parquet",
                "value id as text customer_id",
                "column `body`, row group 0, min",
            ),
            hit(
                "support.tickets",
                "/w/t/a.parquet",
                "id customer_id",
                "column `customer_id`",
            ),
            hit(
                "support.tickets",
                "/w/t/a.parquet",
                "value email",
                "column `subject`, first at row 3",
            ),
            hit(
                "support.tickets",
                "/w/t/old.parquet",
                "value email",
                "column `body`, first at row 0",
            ),
            hit(
                "crm.customers",
                "/w/c/a.parquet",
                "value email",
                "column `body`, first at row 0",
            ),
        ];
        let mut reviews = Reviews::default();
        reviews
            .decisions
            .push(decision("support.tickets", "ticket_id=1", Outcome::Kept));
        // One of the two mentions undecided: nothing is explained.
        assert!(
            explained(&hits, &found, &reviews, &current)
                .iter()
                .all(|e| !e)
        );
        reviews.decisions.push(decision(
            "support.tickets",
            "ticket_id=2",
            Outcome::NotTheSubject,
        ));
        assert_eq!(
            explained(&hits, &found, &reviews, &current),
            vec![true, true, false, false, false, false]
        );
        // A later decision replaces an earlier one: redacted no longer accounts for the text.
        reviews.decisions.push(decision(
            "support.tickets",
            "ticket_id=2",
            Outcome::Redacted,
        ));
        assert!(
            explained(&hits, &found, &reviews, &current)
                .iter()
                .all(|e| !e)
        );
        assert_eq!(reviews.in_force().len(), 2);
    }

    #[test]
    fn outcomes_parse_as_written() {
        for o in [Outcome::Redacted, Outcome::NotTheSubject, Outcome::Kept] {
            assert_eq!(o.to_string().parse::<Outcome>().unwrap(), o);
        }
        assert!("maybe".parse::<Outcome>().is_err());
    }
}
