//! Mentions: rows the plan doesn't delete whose text names the subject (another learner's
//! ticket giving the subject's email), counted and listed by table and row key for a person to
//! review. Matching is as the proof scan's: the first (truncation length − 1) characters of each
//! identifying value, lowercased, anywhere in a text column or nested text field (struct
//! fields, list elements, map keys and values). Rows are named by the table's first key
//! column in `metadata.toml` (a struct field may be one), else by row number.

use std::collections::BTreeMap;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use serde::Serialize;

use crate::erasure::case::CaseFile;
use crate::error::{Error, Result};
use crate::governance::identifiers::column_array;
use crate::workspace::Workspace;
use iceberg::spec::{PrimitiveType, Type};
use lethe_iceberg::nested::{FieldPath, field_paths, leaf};
use lethe_iceberg::read::read_data_file;

/// Whether `v` mentions a pattern (ASCII case-insensitively; other text lowercased first).
fn matches(ac: &AhoCorasick, v: &str) -> bool {
    if v.is_ascii() {
        ac.is_match(v)
    } else {
        ac.is_match(&v.to_lowercase())
    }
}

/// Mentions found in one table.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TableMentions {
    /// Rows that mention a subject.
    pub rows: u64,
    /// Their keys (`key=value` of the table's first key column, or row numbers), for review.
    pub keys: Vec<String>,
    /// The text columns (nested paths too) they were found in.
    pub columns: Vec<String>,
}

/// Counts rows whose text mentions any case's identifying values, excluding rows that carry
/// one of the case's IDs (the subject's own rows). `key_of(table)` names a table's key column.
/// A table lethe can't read is an error.
pub async fn mentions(
    ws: &Workspace,
    cases: &[CaseFile],
    prefix_len: usize,
) -> Result<BTreeMap<String, TableMentions>> {
    let (found, unread) = search(ws, cases, prefix_len, false).await?;
    debug_assert!(unread.is_empty());
    Ok(found)
}

/// [`mentions`], going on past the tables lethe can't read (column types it can't represent):
/// those are returned apart, with why, for the caller to say.
pub async fn mentions_readable(
    ws: &Workspace,
    cases: &[CaseFile],
    prefix_len: usize,
) -> Result<(BTreeMap<String, TableMentions>, Vec<(String, String)>)> {
    search(ws, cases, prefix_len, true).await
}

async fn search(
    ws: &Workspace,
    cases: &[CaseFile],
    prefix_len: usize,
    skip_unreadable: bool,
) -> Result<(BTreeMap<String, TableMentions>, Vec<(String, String)>)> {
    let mut unread = Vec::new();
    let patterns: Vec<String> = cases
        .iter()
        .flat_map(|c| c.values.iter())
        .map(|v| {
            v.value
                .to_lowercase()
                .chars()
                .take(prefix_len)
                .collect::<String>()
        })
        .filter(|p| p.chars().count() >= 4)
        .collect();
    let mut out = BTreeMap::new();
    if patterns.is_empty() {
        return Ok((out, unread));
    }
    let ac: AhoCorasick = AhoCorasickBuilder::new()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .build(&patterns)
        .map_err(|e| Error::Internal(format!("mention patterns: {e}")))?;
    let ids: BTreeMap<String, std::collections::BTreeSet<String>> =
        cases.iter().fold(BTreeMap::new(), |mut m, c| {
            for (col, vals) in &c.ids {
                m.entry(col.clone())
                    .or_insert_with(Default::default)
                    .extend(vals.iter().cloned());
            }
            m
        });
    let gov = ws.governance()?;
    let wh = &ws.warehouse;
    for name in wh.tables().await? {
        let t = match wh.load(&name).await {
            Ok(t) => t,
            Err(lethe_iceberg::Error::Unsupported {
                feature, detail, ..
            }) if skip_unreadable => {
                unread.push((name.to_string(), format!("{feature}: {detail}")));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let schema = t.metadata.current_schema().clone();
        let tname = name.to_string();
        let key = gov
            .metadata
            .table(&tname)
            .and_then(|m| m.key.first().cloned());
        let text_fields: Vec<FieldPath> = field_paths(&schema)
            .into_iter()
            .filter(|p| {
                matches!(
                    p.field.field_type.as_ref(),
                    Type::Primitive(PrimitiveType::String)
                )
            })
            .collect();
        let mut found = TableMentions::default();
        let mut row_base = 0u64;
        for f in wh.current_files(&t).await? {
            if !f.is_data() {
                continue;
            }
            for b in read_data_file(wh.store.as_ref(), f.entry.data_file.file_path(), &schema)? {
                let n = b.num_rows();
                let mut own = vec![false; n];
                for (col, vals) in &ids {
                    if let Some(c) = column_array(&b, col) {
                        let c = arrow::compute::cast(&c, &DataType::Utf8)?;
                        let s = c.as_string::<i32>();
                        for (i, o) in own.iter_mut().enumerate() {
                            if s.is_valid(i) && vals.contains(s.value(i)) {
                                *o = true;
                            }
                        }
                    }
                }
                let mut hit = vec![false; n];
                // Every text field: top-level columns, struct fields, list elements, map
                // keys and values.
                for p in &text_fields {
                    let l = leaf(b.column(p.column), &p.steps)?;
                    let c = arrow::compute::cast(&l.values, &DataType::Utf8)?;
                    let s = c.as_string::<i32>();
                    let mut any = false;
                    for (row, slot) in l.present() {
                        if own[row] {
                            continue;
                        }
                        if matches(&ac, s.value(slot)) {
                            hit[row] = true;
                            any = true;
                        }
                    }
                    if any && !found.columns.contains(&p.name) {
                        found.columns.push(p.name.clone());
                    }
                }
                let keycol = key
                    .as_ref()
                    .and_then(|k| column_array(&b, k))
                    .map(|c| arrow::compute::cast(&c, &DataType::Utf8))
                    .transpose()?;
                for (i, h) in hit.iter().enumerate() {
                    if *h {
                        found.rows += 1;
                        let k = match &keycol {
                            Some(c) => {
                                let s = c.as_string::<i32>();
                                if s.is_valid(i) {
                                    format!("{}={}", key.as_deref().unwrap_or("key"), s.value(i))
                                } else {
                                    format!("row {}", row_base + i as u64)
                                }
                            }
                            None => format!("row {}", row_base + i as u64),
                        };
                        if found.keys.len() < 1000 {
                            found.keys.push(k);
                        }
                    }
                }
                row_base += n as u64;
            }
        }
        if found.rows > 0 {
            out.insert(tname, found);
        }
    }
    Ok((out, unread))
}
