//! DISCOVER: proposed classifications and identifiers for every column of every table, from
//! names and from a bounded sample of values — a reviewed starting point for a warehouse lethe
//! didn't build.
//!
//! For each table, a random sample of rows ([`sample`]: at most `--sample` rows, read without
//! reading the table) is checked against value patterns ([`rules`]), each column name against
//! name rules, and every text column against the subject's identifier column ([`links`]):
//! copies of the identifier under another name, and derived identifiers that embed it (the part
//! name rules miss: a `session_id` built as `a-<customer_id>#<n>`), with the transformation
//! found ([`crate::governance::identifiers`]).
//!
//! What it guarantees:
//! - the result is a proposal: a diff against `governance/metadata.toml`, applied only with
//!   `--write`, which adds entries for unclassified columns and never changes one a person wrote
//!   (a proposal that disagrees with a reviewed entry is reported, not applied; see [`merge`]);
//! - discovery never proposes `public`, and never writes a value it sampled anywhere (reports
//!   carry kinds, shares and counts);
//! - a table that can't be read is reported and discovery goes on with the others;
//! - sampling is bounded in rows and time per table.
//!
//! What it does not: decide who the subjects are (it proposes one per table of people with a
//! unique key, named after the table, for a person to declare in subjects.toml), find personal
//! data a sample doesn't show, or classify columns with nothing remarkable in name or values —
//! those stay unclassified, which the access policy and the metrics properties treat as closed.
//!
//! Classifications can also live with the tables: [`mirror`] writes each reviewed
//! classification into a table property (`lethe.pii.<column> = personal`, with
//! `lethe.pii.<column>.identifies` and `.derived`), and [`check`] reports drift between the
//! file and the properties.

pub mod links;
pub mod merge;
pub mod rules;
pub mod sample;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::governance::metadata::{Classification, ColumnEntry, ColumnMeta, Derived, TableMeta};
use crate::workspace::Workspace;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::commit::{SetProperties, commit};
use links::{Candidate, Link, Root};
use rules::{Kind, ValueFinding};
use sample::{Sample, SampleOptions};

/// The table-property prefix of mirrored classifications.
pub const PII_PREFIX: &str = "lethe.pii.";

/// Options of a discovery.
#[derive(Debug, Clone)]
pub struct DiscoverOptions {
    /// Rows sampled per table at most (default 1,000).
    pub sample: usize,
    /// Time per table at most, for sampling and for reading an identifier column (default 30 s).
    pub budget: Duration,
    /// The random seed of the sample (default 0: the same sample for the same table state).
    pub seed: u64,
    /// The share of a column's sampled non-null values a pattern must match (default 0.8).
    pub min_share: f64,
    /// Merge the proposals into metadata.toml.
    pub write: bool,
}

impl Default for DiscoverOptions {
    fn default() -> Self {
        DiscoverOptions {
            sample: 1000,
            budget: Duration::from_secs(30),
            seed: 0,
            min_share: 0.8,
            write: false,
        }
    }
}

/// What discovery proposes for one column.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Proposal {
    /// The classification.
    pub classification: Classification,
    /// The subject whose identifier the column holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identifies: Option<String>,
    /// The transformation, for a derived identifier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derived: Option<Derived>,
    /// Why, in words (name rules, value shares, identifier matches; never a value).
    pub reasons: Vec<String>,
}

impl Proposal {
    /// The metadata.toml entry.
    pub fn entry(&self) -> ColumnEntry {
        if self.identifies.is_none() && self.derived.is_none() {
            ColumnEntry::Short(self.classification)
        } else {
            ColumnEntry::Full(ColumnMeta {
                classification: self.classification,
                identifies: self.identifies.clone(),
                derived: self.derived.clone(),
                note: None,
            })
        }
    }

    fn agrees_with(&self, e: &ColumnEntry) -> bool {
        e.classification() == self.classification
            && e.identifies() == self.identifies.as_deref()
            && e.derived() == self.derived.as_ref()
    }
}

/// How a column's proposal relates to metadata.toml.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not classified yet; the proposal is added by `--write`.
    New,
    /// Classified as proposed.
    Agrees,
    /// Classified otherwise: the person's decision is kept, the disagreement reported.
    Differs,
    /// Classified, and discovery has nothing to say.
    Reviewed,
    /// Neither classified nor proposed: treated as closed.
    Unclassified,
    /// A struct, list or map: its fields are reported (and classified) one by one.
    Fields,
}

/// One column's findings.
#[derive(Debug, Clone, Serialize)]
pub struct ColumnReport {
    /// The column.
    pub column: String,
    /// Its Iceberg type.
    #[serde(rename = "type")]
    pub ty: String,
    /// What its name says.
    pub by_name: Option<Kind>,
    /// What its sampled values say.
    pub by_values: Option<ValueFinding>,
    /// The proposal, if any.
    pub proposal: Option<Proposal>,
    /// The entry metadata.toml has, rendered.
    pub reviewed: Option<String>,
    /// How the two relate.
    pub status: Status,
}

/// One table's findings.
#[derive(Debug, Clone, Serialize)]
pub struct TableReport {
    /// The table.
    pub table: String,
    /// Rows in its current snapshot.
    pub rows_total: u64,
    /// Rows sampled.
    pub rows_sampled: usize,
    /// Data files opened / live data files.
    pub files_read: usize,
    /// Live data files.
    pub files_total: usize,
    /// Whether the time budget cut the sample short.
    pub cut_short: bool,
    /// Seconds spent sampling.
    pub seconds: f64,
    /// Columns in schema order (a nested column, then each of its fields).
    pub columns: Vec<ColumnReport>,
    /// The row key proposed, when metadata.toml names none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<KeyProposal>,
}

/// A row key discovery proposes.
#[derive(Debug, Clone, Serialize)]
pub struct KeyProposal {
    /// The key columns.
    pub columns: Vec<String>,
    /// Why, in words (never a value).
    pub reason: String,
}

/// A row key for a sample's table: its Iceberg identifier fields, else a column with one value
/// per row, named as an ID (`*_id`, `*_key`, `uuid`...), present and distinct in every sampled
/// row — the one named after the table first (`visit_id` in `visits`), then the shortest.
fn propose_key(s: &Sample, identifier_fields: &[String]) -> Option<KeyProposal> {
    if !identifier_fields.is_empty() {
        return Some(KeyProposal {
            columns: identifier_fields.to_vec(),
            reason: "the table's Iceberg identifier fields".into(),
        });
    }
    if s.rows < 2 {
        return None;
    }
    let own = links::singular(s.table.rsplit('.').next().unwrap_or(&s.table));
    let id_words = ["id", "key", "uuid", "guid", "ref", "number", "no"];
    s.columns
        .iter()
        .filter(|c| c.sampled && c.is_per_row() && (c.is_text() || c.is_integer()))
        .filter(|c| {
            rules::words(&c.name)
                .last()
                .is_some_and(|w| id_words.contains(&w.as_str()))
        })
        .filter(|c| {
            let vals: Vec<&str> = c.present().collect();
            vals.len() == s.rows && vals.iter().collect::<BTreeSet<_>>().len() == vals.len()
        })
        .min_by_key(|c| {
            let first = rules::words(&c.name).first().cloned().unwrap_or_default();
            (links::singular(&first) != own, c.name.len(), c.name.clone())
        })
        .map(|c| KeyProposal {
            columns: vec![c.name.clone()],
            reason: format!(
                "`{}` is named as an ID and unique and present in all {} sampled rows",
                c.name, s.rows
            ),
        })
}

/// A table that couldn't be read.
#[derive(Debug, Clone, Serialize)]
pub struct Unreadable {
    /// The table.
    pub table: String,
    /// Why.
    pub error: String,
}

/// A privacy subject as discovery sees it.
#[derive(Debug, Clone, Serialize)]
pub struct SubjectProposal {
    /// Its name (declared, or proposed from the table's name).
    pub name: String,
    /// Its root identifier column, `namespace.table.column`.
    pub root: String,
    /// Whether subjects.toml declares it.
    pub declared: bool,
    /// Identifying value columns of the root table, for the proof scan.
    pub values: Vec<String>,
}

impl SubjectProposal {
    /// The subjects.toml section a person would write for it.
    pub fn toml(&self) -> String {
        let values: Vec<String> = self.values.iter().map(|v| merge::quote(v)).collect();
        format!(
            "[{}]\nidentifiers = [{}]\nvalues = [{}]\n",
            merge::key(&self.name),
            merge::quote(&self.root),
            values.join(", ")
        )
    }
}

/// What discovery found and proposed.
#[derive(Debug, Clone, Serialize)]
pub struct DiscoverReport {
    /// Tables read.
    pub tables: Vec<TableReport>,
    /// Tables that couldn't be read.
    pub unreadable: Vec<Unreadable>,
    /// Subjects: declared ones and proposed ones.
    pub subjects: Vec<SubjectProposal>,
    /// Remarks (an identifier column read only in part...).
    pub notes: Vec<String>,
    /// Columns with a new proposal.
    pub proposed: usize,
    /// Columns whose reviewed entry differs from the proposal (kept).
    pub differing: usize,
    /// Columns neither classified nor proposed (after `--write`, or were it run).
    pub unclassified: usize,
    /// Those columns, `namespace.table.column`.
    pub unclassified_columns: Vec<String>,
    /// The diff against metadata.toml (empty when nothing is new).
    pub diff: String,
    /// Whether metadata.toml was written.
    pub written: bool,
    /// Seconds.
    pub seconds: f64,
}

fn render_reviewed(e: &ColumnEntry) -> String {
    merge::render_entry(e)
}

/// Columns a name or value says are not identifiers (so numbers inside them aren't either).
fn excluded_from_links(by_name: Option<Kind>, by_values: Option<&ValueFinding>) -> bool {
    let other = |k: Kind| {
        !matches!(
            k,
            Kind::PersonIdentifier | Kind::OnlineIdentifier | Kind::Uuid
        )
    };
    by_name.is_some_and(other) || by_values.is_some_and(|v| other(v.kind))
}

const PEOPLE_KINDS: &[Kind] = &[Kind::Email, Kind::Phone, Kind::PersonName];

/// Runs a discovery over every table of the workspace.
pub async fn discover(
    ws: &Workspace,
    opts: &DiscoverOptions,
    progress: &dyn Fn(&str),
) -> Result<DiscoverReport> {
    let started = Instant::now();
    let gov = ws.governance()?;
    let wh = &ws.warehouse;
    let names = wh.tables().await?;
    let sopts = SampleOptions {
        rows: opts.sample.max(1),
        budget: opts.budget,
        seed: opts.seed,
    };
    let mut samples: Vec<(Sample, f64)> = Vec::new();
    let mut unreadable = Vec::new();
    for (i, name) in names.iter().enumerate() {
        progress(&format!("sampling {name} ({}/{})", i + 1, names.len()));
        let t0 = Instant::now();
        let got = async {
            let t = wh.load(name).await?;
            sample::sample(wh, &t, &sopts).await
        }
        .await;
        match got {
            Ok(s) => {
                progress(&format!(
                    "sampled {name}: {} of {} rows from {} of {} files",
                    s.rows, s.rows_total, s.files_read, s.files_total
                ));
                samples.push((s, t0.elapsed().as_secs_f64()));
            }
            Err(e) => {
                progress(&format!("can't read {name}: {e}"));
                unreadable.push(Unreadable {
                    table: name.to_string(),
                    error: e.to_string(),
                });
            }
        }
    }
    // Name and value findings.
    let mut findings: HashMap<(String, String), (Option<Kind>, Option<ValueFinding>)> =
        HashMap::new();
    for (s, _) in &samples {
        for c in &s.columns {
            let by_name = if c.sampled {
                rules::by_field_name(&c.name, c.map_key)
            } else {
                None
            };
            let by_values = if c.is_text() {
                rules::by_values(c.present(), opts.min_share)
            } else if c.is_integer() {
                // Card numbers and phones stored as numbers.
                rules::by_values(c.present(), opts.min_share)
                    .filter(|f| matches!(f.kind, Kind::CardNumber))
            } else {
                None
            };
            findings.insert((s.table.clone(), c.name.clone()), (by_name, by_values));
        }
    }
    // Roots: declared subjects, then proposed ones.
    let mut roots: Vec<Root> = Vec::new();
    let known: BTreeSet<&str> = samples.iter().map(|(s, _)| s.table.as_str()).collect();
    for (subject, def) in &gov.subjects.value {
        for id in &def.identifiers {
            let split = crate::governance::paths::split_qualified(id, |t| known.contains(t))
                .map(Ok)
                .unwrap_or_else(|| crate::governance::subjects::split_column(id));
            if let Ok((table, column)) = split {
                roots.push(Root {
                    subject: subject.clone(),
                    table,
                    column,
                    declared: true,
                });
            }
        }
    }
    for (s, _) in &samples {
        if roots.iter().any(|r| r.table == s.table) {
            continue;
        }
        let people = s.columns.iter().any(|c| {
            let f = &findings[&(s.table.clone(), c.name.clone())];
            f.0.is_some_and(|k| PEOPLE_KINDS.contains(&k))
                || f.1.as_ref().is_some_and(|v| PEOPLE_KINDS.contains(&v.kind))
        });
        if !people || s.rows == 0 {
            continue;
        }
        let meta = wh.load(&TableName::parse(&s.table)?).await?;
        let schema = meta.metadata.current_schema();
        let key_fields: Vec<String> = schema
            .identifier_field_ids()
            .filter_map(|id| schema.name_by_field_id(id).map(str::to_string))
            .collect();
        let mut cands: Vec<&sample::SampledColumn> = s
            .columns
            .iter()
            .filter(|c| !c.nested && key_fields.contains(&c.name))
            .collect();
        cands.extend(s.columns.iter().filter(|c| {
            !c.nested
                && !key_fields.contains(&c.name)
                && links::subject_of(&s.table, &c.name).is_some()
        }));
        for c in cands {
            if !(c.is_text() || c.is_integer()) {
                continue;
            }
            let vals: Vec<&str> = c.present().collect();
            let distinct: BTreeSet<&str> = vals.iter().copied().collect();
            if vals.len() * 10 < s.rows * 9 || distinct.len() != vals.len() {
                continue;
            }
            let subject = links::subject_of(&s.table, &c.name)
                .unwrap_or_else(|| links::singular(s.table.rsplit('.').next().unwrap_or(&s.table)));
            if roots.iter().any(|r| r.subject == subject) {
                continue;
            }
            roots.push(Root {
                subject,
                table: s.table.clone(),
                column: c.name.clone(),
                declared: false,
            });
            break;
        }
    }
    // Identifier links.
    let root_cols: BTreeSet<(String, String)> = roots
        .iter()
        .map(|r| (r.table.clone(), r.column.clone()))
        .collect();
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    for (s, _) in &samples {
        for (i, c) in s.columns.iter().enumerate() {
            // Links compare values of one row: fields inside lists and maps can't take part.
            if !(c.is_text() || c.is_integer())
                || !c.is_per_row()
                || root_cols.contains(&(s.table.clone(), c.name.clone()))
            {
                continue;
            }
            let f = &findings[&(s.table.clone(), c.name.clone())];
            if excluded_from_links(f.0, f.1.as_ref()) {
                continue;
            }
            candidates.push(Candidate {
                sample: s,
                index: i,
            });
        }
    }
    let only: Vec<Sample> = samples.iter().map(|(s, _)| s.clone()).collect();
    progress("matching columns against identifier columns");
    let (found, mut notes) =
        links::find_links(wh, &only, &roots, &candidates, opts.min_share, opts.budget).await?;
    let mut link_of: HashMap<(String, String), Link> = HashMap::new();
    for l in found {
        let k = (l.table.clone(), l.column.clone());
        if link_of.get(&k).is_none_or(|o| o.share < l.share) {
            link_of.insert(k, l);
        }
    }
    // Proposals per column.
    let mut tables = Vec::new();
    let mut additions = Vec::new();
    let mut differing = 0usize;
    let mut unclassified_columns = Vec::new();
    let mut keys: Vec<merge::KeyAddition> = Vec::new();
    for (s, secs) in &samples {
        let reviewed_table = gov.metadata.table(&s.table);
        // A row key, for a table metadata.toml gives none: mentions name rows by it.
        let key = if reviewed_table.is_some_and(|t| !t.key.is_empty()) {
            None
        } else {
            let t = wh.load(&TableName::parse(&s.table)?).await?;
            let schema = t.metadata.current_schema();
            let key_fields: Vec<String> = schema
                .identifier_field_ids()
                .filter_map(|id| schema.name_by_field_id(id).map(str::to_string))
                .collect();
            propose_key(s, &key_fields)
        };
        let mut columns = Vec::new();
        for c in &s.columns {
            let (by_name, by_values) = findings[&(s.table.clone(), c.name.clone())].clone();
            let root = roots
                .iter()
                .find(|r| r.table == s.table && r.column == c.name);
            let link = link_of.get(&(s.table.clone(), c.name.clone()));
            let proposal = propose(by_name, by_values.as_ref(), root, link, s.rows);
            let reviewed = reviewed_table.and_then(|t| t.columns.get(&c.name));
            // A field classified through its parent (a struct, list or map classified whole)
            // is reviewed too.
            let inherited = gov.metadata.entry(&s.table, &c.name);
            let status = match (&proposal, reviewed) {
                (Some(p), Some(e)) if p.agrees_with(e) => Status::Agrees,
                (Some(_), Some(_)) => Status::Differs,
                (Some(_), None) => Status::New,
                (None, Some(_)) => Status::Reviewed,
                (None, None) if !c.sampled && c.nested_type() => Status::Fields,
                (None, None) if inherited.is_some() => Status::Reviewed,
                (None, None) => Status::Unclassified,
            };
            match status {
                Status::New => {
                    if let Some(p) = &proposal {
                        additions.push(merge::Addition {
                            table: s.table.clone(),
                            column: c.name.clone(),
                            entry: p.entry(),
                            why: format!("lethe discover: {}", p.reasons.join("; ")),
                        });
                    }
                }
                Status::Differs => differing += 1,
                Status::Unclassified => {
                    unclassified_columns.push(format!("{}.{}", s.table, c.name))
                }
                _ => {}
            }
            columns.push(ColumnReport {
                column: c.name.clone(),
                ty: c.ty.clone(),
                by_name,
                by_values,
                proposal,
                reviewed: reviewed.or(inherited).map(render_reviewed),
                status,
            });
        }
        tables.push(TableReport {
            table: s.table.clone(),
            rows_total: s.rows_total,
            rows_sampled: s.rows,
            files_read: s.files_read,
            files_total: s.files_total,
            cut_short: s.cut_short,
            seconds: *secs,
            columns,
            key: key.clone(),
        });
        if let Some(k) = key {
            keys.push(merge::KeyAddition {
                table: s.table.clone(),
                key: k.columns.clone(),
                why: format!("lethe discover: {}", k.reason),
            });
        }
        if s.cut_short {
            notes.push(format!(
                "{}: the time budget cut the sample short ({} rows)",
                s.table, s.rows
            ));
        }
    }
    // Subjects, with the identifying values of their root table.
    let mut subjects = Vec::new();
    for r in &roots {
        if subjects
            .iter()
            .any(|x: &SubjectProposal| x.name == r.subject)
        {
            continue;
        }
        let values: Vec<String> = tables
            .iter()
            .filter(|t| t.table == r.table)
            .flat_map(|t| t.columns.iter())
            .filter(|c| {
                c.by_name
                    .or(c.by_values.as_ref().map(|v| v.kind))
                    .is_some_and(|k| {
                        matches!(
                            k,
                            Kind::Email | Kind::Phone | Kind::PersonName | Kind::Address
                        )
                    })
            })
            .map(|c| c.column.clone())
            .collect();
        subjects.push(SubjectProposal {
            name: r.subject.clone(),
            root: r.qualified(),
            declared: r.declared,
            values,
        });
    }
    let path = gov.dir.join("metadata.toml");
    let shown = path
        .strip_prefix(&ws.config.root)
        .unwrap_or(&path)
        .display()
        .to_string();
    let merged = merge::merge(
        &shown,
        &gov.metadata.text,
        &gov.metadata.value,
        &additions,
        &keys,
    )?;
    let mut written = false;
    if opts.write && !(additions.is_empty() && keys.is_empty()) {
        write_file(&path, merged.text.as_bytes())?;
        written = true;
    }
    Ok(DiscoverReport {
        tables,
        unreadable,
        subjects,
        notes,
        proposed: additions.len(),
        differing,
        unclassified: unclassified_columns.len(),
        unclassified_columns,
        diff: merged.diff,
        written,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn write_file(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    }
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, bytes).map_err(|e| Error::io(tmp.display().to_string(), e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path.display().to_string(), e))
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// The proposal for one column from its findings.
fn propose(
    by_name: Option<Kind>,
    by_values: Option<&ValueFinding>,
    root: Option<&Root>,
    link: Option<&Link>,
    rows: usize,
) -> Option<Proposal> {
    if let Some(r) = root {
        return Some(Proposal {
            classification: Classification::Personal,
            identifies: Some(r.subject.clone()),
            derived: None,
            reasons: vec![if r.declared {
                format!("root identifier of {} (subjects.toml)", r.subject)
            } else {
                format!(
                    "proposed root identifier of {}: unique in {rows} sampled rows of a table with emails, phones or names",
                    r.subject
                )
            }],
        });
    }
    if let Some(l) = link {
        let (derived, why) = match &l.pattern {
            Some(p) => (
                Some(Derived {
                    from: l.root.column.clone(),
                    pattern: p.render(),
                    transform: None,
                    key_env: None,
                }),
                format!(
                    "values embed {} as `{}` ({} of {} sampled)",
                    l.root.qualified(),
                    p.render(),
                    pct(l.share),
                    l.of
                ),
            ),
            None => (
                None,
                format!(
                    "values are {} ({} of {} sampled)",
                    l.root.qualified(),
                    pct(l.share),
                    l.of
                ),
            ),
        };
        let mut reasons = vec![why];
        if let Some(k) = by_name {
            reasons.insert(0, format!("name: {}", k.describe()));
        }
        return Some(Proposal {
            classification: Classification::Personal,
            identifies: Some(l.root.subject.clone()),
            derived,
            reasons,
        });
    }
    let mut class: Option<Classification> = None;
    let mut reasons = Vec::new();
    if let Some(k) = by_name {
        reasons.push(format!("name: {}", k.describe()));
        class = k.classification();
    }
    if let Some(v) = by_values {
        reasons.push(format!(
            "values: {} {} of {} sampled",
            v.kind.describe(),
            pct(v.share),
            v.of
        ));
        if let Some(vc) = v.kind.classification() {
            class = Some(match class {
                Some(Classification::Sensitive) => Classification::Sensitive,
                _ => vc,
            });
        }
    }
    class.map(|classification| Proposal {
        classification,
        identifies: None,
        derived: None,
        reasons,
    })
}

/// The table properties that mirror a table's reviewed classifications (for the columns the
/// table has).
pub fn mirrored(meta: Option<&TableMeta>, columns: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(meta) = meta else { return out };
    for (col, e) in &meta.columns {
        if !columns.contains(col) {
            continue;
        }
        out.insert(format!("{PII_PREFIX}{col}"), e.classification().to_string());
        if let Some(s) = e.identifies() {
            out.insert(format!("{PII_PREFIX}{col}.identifies"), s.to_string());
        }
        if let Some(d) = e.derived() {
            out.insert(
                format!("{PII_PREFIX}{col}.derived"),
                format!("{} {}", d.from, d.describe()),
            );
        }
    }
    out
}

/// Drift between metadata.toml and one table's `lethe.pii.*` properties.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Drift {
    /// The table.
    pub table: String,
    /// Whether the table carries any `lethe.pii.*` property.
    pub mirrored: bool,
    /// Properties the file asks for that the table lacks (`key = value`).
    pub missing: Vec<String>,
    /// Properties with another value than the file's (`key: table has X, file says Y`).
    pub different: Vec<String>,
    /// Properties the file doesn't ask for (a classification removed or never reviewed).
    pub stale: Vec<String>,
    /// Columns metadata.toml classifies that the table doesn't have.
    pub unknown_columns: Vec<String>,
}

impl Drift {
    /// Whether the file and the table agree.
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty()
            && self.different.is_empty()
            && self.stale.is_empty()
            && self.unknown_columns.is_empty()
    }
}

async fn drift_of(
    ws: &Workspace,
    name: &TableName,
) -> Result<(Drift, BTreeMap<String, String>, Vec<String>)> {
    let gov = ws.governance()?;
    let t = ws.warehouse.load(name).await?;
    let tname = name.to_string();
    // Top-level columns and nested fields, by full and short name.
    let columns: Vec<String> = lethe_iceberg::nested::field_paths(t.metadata.current_schema())
        .into_iter()
        .flat_map(|p| {
            let short = crate::governance::paths::short_name(&p.name);
            [p.name, short]
        })
        .collect();
    let meta = gov.metadata.table(&tname);
    let want = mirrored(meta, &columns);
    let have: BTreeMap<String, String> = t
        .metadata
        .properties()
        .iter()
        .filter(|(k, _)| k.starts_with(PII_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut d = Drift {
        table: tname,
        mirrored: !have.is_empty(),
        ..Default::default()
    };
    for (k, v) in &want {
        match have.get(k) {
            None => d.missing.push(format!("{k} = {v}")),
            Some(h) if h != v => d.different.push(format!(
                "{k}: the table has `{h}`, metadata.toml says `{v}`"
            )),
            _ => {}
        }
    }
    let stale: Vec<String> = have
        .keys()
        .filter(|k| !want.contains_key(*k))
        .cloned()
        .collect();
    d.stale = stale.iter().map(|k| format!("{k} = {}", have[k])).collect();
    if let Some(m) = meta {
        d.unknown_columns = m
            .columns
            .keys()
            .filter(|c| !columns.contains(c))
            .cloned()
            .collect();
    }
    Ok((d, want, stale))
}

/// Compares every table's `lethe.pii.*` properties with metadata.toml.
pub async fn check(ws: &Workspace) -> Result<Vec<Drift>> {
    let mut out = Vec::new();
    for name in ws.warehouse.tables().await? {
        out.push(drift_of(ws, &name).await?.0);
    }
    Ok(out)
}

/// What mirroring did to one table.
#[derive(Debug, Clone, Serialize)]
pub struct Mirrored {
    /// The table.
    pub table: String,
    /// Properties set or changed.
    pub set: usize,
    /// Properties removed.
    pub removed: usize,
}

/// Writes metadata.toml's classifications into each table's `lethe.pii.*` properties (one
/// properties-only commit per table that differs; no data is rewritten).
pub async fn mirror(ws: &Workspace) -> Result<Vec<Mirrored>> {
    let mut out = Vec::new();
    for name in ws.warehouse.tables().await? {
        let (d, want, stale) = drift_of(ws, &name).await?;
        if d.missing.is_empty() && d.different.is_empty() && stale.is_empty() {
            continue;
        }
        let mut action = SetProperties {
            set: want.into_iter().collect(),
            remove: stale.clone(),
        };
        commit(&ws.warehouse, &name, &mut action).await?;
        out.push(Mirrored {
            table: name.to_string(),
            set: d.missing.len() + d.different.len(),
            removed: stale.len(),
        });
    }
    Ok(out)
}
