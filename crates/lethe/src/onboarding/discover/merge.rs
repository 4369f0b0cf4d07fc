//! Merging discovery's proposals into `governance/metadata.toml` as text, keeping every
//! decision a person already made.
//!
//! Only columns the file doesn't classify yet are added: each as one line (with the reasons as
//! a comment) at the end of its table's `[tables."ns.t".columns]` section, or in a new section
//! at the end of the file; nested fields as quoted paths (`"contact.email" = "personal"`). A
//! row key is added only to a table that has none, as a `key = [...]` line. Nothing else in the file changes — comments, order, layout and
//! every existing entry stay as they are. The result is parsed again and compared with the old
//! file plus the additions; if it differs (a layout the insertion doesn't understand, such as
//! columns written as an inline table), nothing is written and the lines to add by hand are
//! given instead.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::governance::metadata::{ColumnEntry, Metadata};

/// One column to add.
#[derive(Debug, Clone)]
pub struct Addition {
    /// The table.
    pub table: String,
    /// The column.
    pub column: String,
    /// Its entry.
    pub entry: ColumnEntry,
    /// Why (written as a comment after the entry).
    pub why: String,
}

/// A row key to add to a table that has none.
#[derive(Debug, Clone)]
pub struct KeyAddition {
    /// The table.
    pub table: String,
    /// The key columns.
    pub key: Vec<String>,
    /// Why (written as a comment after the entry).
    pub why: String,
}

/// The merged file.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The new text.
    pub text: String,
    /// A unified-style diff of the additions against the old text.
    pub diff: String,
}

/// A TOML basic string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML key: bare when it can be.
pub fn key(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        s.to_string()
    } else {
        quote(s)
    }
}

/// An entry as an inline TOML value.
pub fn render_entry(e: &ColumnEntry) -> String {
    match e {
        ColumnEntry::Short(c) => quote(&c.to_string()),
        ColumnEntry::Full(m) => {
            let mut parts = vec![format!(
                "classification = {}",
                quote(&m.classification.to_string())
            )];
            if let Some(s) = &m.identifies {
                parts.push(format!("identifies = {}", quote(s)));
            }
            if let Some(d) = &m.derived {
                let mut inner = vec![format!("from = {}", quote(&d.from))];
                if d.pattern != crate::governance::identifiers::ID || d.transform.is_none() {
                    inner.push(format!("pattern = {}", quote(&d.pattern)));
                }
                if let Some(t) = &d.transform {
                    inner.push(format!("transform = {}", quote(t)));
                }
                if let Some(k) = &d.key_env {
                    inner.push(format!("key_env = {}", quote(k)));
                }
                parts.push(format!("derived = {{ {} }}", inner.join(", ")));
            }
            if let Some(n) = &m.note {
                parts.push(format!("note = {}", quote(n)));
            }
            format!("{{ {} }}", parts.join(", "))
        }
    }
}

fn line_of(a: &Addition) -> String {
    let why: String = a
        .why
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("{} = {}  # {why}", key(&a.column), render_entry(&a.entry))
}

fn key_line(k: &KeyAddition) -> String {
    let why: String = k
        .why
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let cols: Vec<String> = k.key.iter().map(|c| quote(c)).collect();
    format!("key = [{}]  # {why}", cols.join(", "))
}

fn table_header(table: &str) -> String {
    format!("[tables.{}]", quote(table))
}

fn section_header(table: &str) -> String {
    format!("[tables.{}.columns]", quote(table))
}

/// A header line's dotted key with quotes and spaces removed (None: not a table header).
fn header_key(line: &str) -> Option<String> {
    let t = line.trim();
    if !t.starts_with('[') || t.starts_with("[[") {
        return None;
    }
    let close = t.rfind(']')?;
    Some(
        t[1..close]
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '"' && *c != '\'')
            .collect(),
    )
}

fn is_entry_line(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && !t.starts_with('#') && !t.starts_with('[')
}

/// Merges `additions` and `keys` into `old_text` (which parsed as `old`). `shown` names the file
/// in the diff. A key goes right under its table's `[tables."ns.t"]` header, or into a new one.
pub fn merge(
    shown: &str,
    old_text: &str,
    old: &Metadata,
    additions: &[Addition],
    keys: &[KeyAddition],
) -> Result<Merged> {
    let lines: Vec<&str> = old_text.lines().collect();
    let mut by_table: BTreeMap<&str, Vec<&Addition>> = BTreeMap::new();
    for a in additions {
        by_table.entry(&a.table).or_default().push(a);
    }
    // (insert after this many old lines, new lines)
    let mut inserts: Vec<(usize, Vec<String>)> = Vec::new();
    let mut appended: Vec<String> = Vec::new();
    for k in keys {
        let want = format!("tables.{}", k.table);
        match lines
            .iter()
            .position(|l| header_key(l).as_deref() == Some(want.as_str()))
        {
            Some(h) => inserts.push((h + 1, vec![key_line(k)])),
            None => {
                appended.push(String::new());
                appended.push(table_header(&k.table));
                appended.push(key_line(k));
            }
        }
    }
    for (table, adds) in &by_table {
        let want: String = format!("tables.{table}.columns");
        let header = lines
            .iter()
            .position(|l| header_key(l).as_deref() == Some(want.as_str()));
        let new_lines: Vec<String> = adds.iter().map(|a| line_of(a)).collect();
        match header {
            Some(h) => {
                let end = lines[h + 1..]
                    .iter()
                    .position(|l| header_key(l).is_some())
                    .map_or(lines.len(), |p| h + 1 + p);
                let last = (h + 1..end)
                    .rev()
                    .find(|i| is_entry_line(lines[*i]))
                    .unwrap_or(h);
                inserts.push((last + 1, new_lines));
            }
            None => {
                appended.push(String::new());
                appended.push(section_header(table));
                appended.extend(new_lines);
            }
        }
    }
    inserts.sort_by_key(|(at, _)| *at);
    // Build the new text and the diff together.
    let mut text = String::new();
    let mut diff = format!("--- {shown}\n+++ {shown} (with discovery's proposals)\n");
    let mut cursor = 0usize;
    let push_old = |text: &mut String, i: usize| {
        text.push_str(lines[i]);
        text.push('\n');
    };
    for (at, new_lines) in &inserts {
        while cursor < *at {
            push_old(&mut text, cursor);
            cursor += 1;
        }
        let ctx_from = at.saturating_sub(2);
        diff.push_str(&format!("@@ line {} @@\n", at + 1));
        for l in &lines[ctx_from..*at] {
            diff.push_str(&format!(" {l}\n"));
        }
        for l in new_lines {
            text.push_str(l);
            text.push('\n');
            diff.push_str(&format!("+{l}\n"));
        }
        if let Some(l) = lines.get(*at) {
            diff.push_str(&format!(" {l}\n"));
        }
    }
    while cursor < lines.len() {
        push_old(&mut text, cursor);
        cursor += 1;
    }
    if !appended.is_empty() {
        diff.push_str(&format!("@@ line {} (end of file) @@\n", lines.len() + 1));
        if text.is_empty() {
            appended.remove(0);
        }
        for l in &appended {
            text.push_str(l);
            text.push('\n');
            diff.push_str(&format!("+{l}\n"));
        }
    }
    if additions.is_empty() && keys.is_empty() {
        diff.clear();
    }
    // Verify: the old decisions and the additions, nothing else.
    let mut expected = old.clone();
    for a in additions {
        expected
            .tables
            .entry(a.table.clone())
            .or_default()
            .columns
            .insert(a.column.clone(), a.entry.clone());
    }
    for k in keys {
        expected.tables.entry(k.table.clone()).or_default().key = k.key.clone();
    }
    let parsed: std::result::Result<Metadata, _> = toml::from_str(&text);
    match parsed {
        Ok(p) if p == expected => Ok(Merged { text, diff }),
        _ => {
            let mut by_hand = String::new();
            for k in keys {
                by_hand.push_str(&format!("{}\n{}\n", table_header(&k.table), key_line(k)));
            }
            for (table, adds) in &by_table {
                by_hand.push_str(&format!("{}\n", section_header(table)));
                for a in adds {
                    by_hand.push_str(&format!("{}\n", line_of(a)));
                }
            }
            Err(Error::Refused(format!(
                "{shown}: its layout keeps discovery from adding lines safely (columns written as an inline table?); nothing was written. Add these entries by hand:\n{by_hand}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governance::metadata::{Classification, ColumnMeta, Derived};

    fn add(table: &str, column: &str, entry: ColumnEntry) -> Addition {
        Addition {
            table: table.into(),
            column: column.into(),
            entry,
            why: "name: email".into(),
        }
    }

    #[test]
    fn adds_lines_keeps_comments_and_decisions() {
        let old_text = "# reviewed by the DPO\n[tables.\"shop.customers\"]\nowner = \"crm\"\n[tables.\"shop.customers\".columns]\nemail = \"internal\"   # a person's decision, even if odd\n\n# next table\n[tables.\"ref.products\".columns]\ntitle = \"public\"\n";
        let old: Metadata = toml::from_str(old_text).unwrap();
        let adds = vec![
            add(
                "shop.customers",
                "phone",
                ColumnEntry::Short(Classification::Personal),
            ),
            add(
                "web.sessions",
                "session_id",
                ColumnEntry::Full(ColumnMeta {
                    classification: Classification::Personal,
                    identifies: Some("customer".into()),
                    derived: Some(Derived {
                        from: "customer_id".into(),
                        pattern: "a-{id}#*".into(),
                        transform: None,
                        key_env: None,
                    }),
                    note: None,
                }),
            ),
        ];
        let keys = [KeyAddition {
            table: "web.sessions".into(),
            key: vec!["session_id".into()],
            why: "lethe discover: unique".into(),
        }];
        let m = merge("metadata.toml", old_text, &old, &adds, &keys).unwrap();
        let parsed: Metadata = toml::from_str(&m.text).unwrap();
        assert_eq!(parsed.tables["web.sessions"].key, vec!["session_id"]);
        assert!(m.text.starts_with("# reviewed by the DPO\n"));
        assert!(m.text.contains("email = \"internal\"   # a person's decision, even if odd\nphone = \"personal\"  # name: email\n\n# next table\n"), "{}", m.text);
        assert!(m.text.contains("[tables.\"web.sessions\".columns]\nsession_id = { classification = \"personal\", identifies = \"customer\", derived = { from = \"customer_id\", pattern = \"a-{id}#*\" } }"), "{}", m.text);
        assert!(m.diff.contains("+phone = \"personal\""), "{}", m.diff);
        assert!(m.diff.contains(" email = \"internal\""), "{}", m.diff);
        let again: Metadata = toml::from_str(&m.text).unwrap();
        assert_eq!(again.tables["shop.customers"].owner.as_deref(), Some("crm"));
    }

    #[test]
    fn an_inline_columns_table_is_refused_not_broken() {
        let old_text = "[tables.\"a.b\"]\ncolumns = { x = \"public\" }\n";
        let old: Metadata = toml::from_str(old_text).unwrap();
        let e = merge(
            "m.toml",
            old_text,
            &old,
            &[add(
                "a.b",
                "email",
                ColumnEntry::Short(Classification::Personal),
            )],
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("nothing was written") && e.contains("email = \"personal\""),
            "{e}"
        );
    }

    #[test]
    fn keys_and_strings_are_quoted_when_needed() {
        assert_eq!(key("email"), "email");
        assert_eq!(key("e mail"), "\"e mail\"");
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        let old_text = "";
        let m = merge(
            "m.toml",
            old_text,
            &Metadata::default(),
            &[add(
                "a.b",
                "weird col",
                ColumnEntry::Short(Classification::Sensitive),
            )],
            &[],
        )
        .unwrap();
        assert!(
            m.text
                .starts_with("[tables.\"a.b\".columns]\n\"weird col\" = \"sensitive\""),
            "{}",
            m.text
        );
    }
}
