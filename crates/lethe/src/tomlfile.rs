//! Reading reviewed TOML files with errors that name the file, the line and the key.
//!
//! Every configuration and governance file goes through [`load`]: a mistake is reported as
//! `path:line: key: message`, so a reviewer can find it without reading lethe's source.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// A parsed TOML file: its path, its text (to locate keys for later validation errors) and value.
#[derive(Debug, Clone)]
pub struct TomlFile<T> {
    /// Where the file is.
    pub path: PathBuf,
    /// Its text.
    pub text: String,
    /// The parsed value.
    pub value: T,
}

impl<T> TomlFile<T> {
    /// An error at the place the dotted `key` is defined (its header or its `key =` line).
    pub fn error_at(&self, key: &str, message: impl Into<String>) -> Error {
        Error::Config {
            file: self.path.clone(),
            line: locate_key(&self.text, key),
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// Reads and parses `path` as `T`.
pub fn load<T: DeserializeOwned>(path: &Path) -> Result<TomlFile<T>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    let value = parse(path, &text)?;
    Ok(TomlFile {
        path: path.to_path_buf(),
        text,
        value,
    })
}

/// Parses `text` (read from `path`) as `T`.
pub fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T> {
    toml::from_str(text).map_err(|e| {
        let (line, key) = match e.span() {
            Some(span) => (line_of(text, span.start), key_at(text, span.start)),
            None => (1, String::from("(file)")),
        };
        Error::Config {
            file: path.to_path_buf(),
            line,
            key,
            message: e.message().trim().to_string(),
        }
    })
}

/// The 1-based line holding byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    text[..offset].matches('\n').count() + 1
}

/// The dotted key path at byte `offset`: the deepest key whose entry (key or value) holds the
/// offset, as the parsed document's spans say; for text that doesn't parse, the nearest table
/// header above plus the key on the offset's line.
pub(crate) fn key_at(text: &str, offset: usize) -> String {
    if let Ok(doc) = toml::de::DeTable::parse(text) {
        let mut path = Vec::new();
        path_at(doc.get_ref(), offset, &mut path);
        if !path.is_empty() {
            return join_key(&path);
        }
    }
    key_at_line(text, offset)
}

/// Appends to `path` the keys leading to the entry of `table` that holds `offset`; whether
/// one does. A table made by a dotted key (`holds.x = { … }`) has no span of its own, so an
/// entry whose spans miss the offset is still searched inside.
fn path_at(table: &toml::de::DeTable<'_>, offset: usize, path: &mut Vec<String>) -> bool {
    for (k, v) in table.iter() {
        let here = k.span().contains(&offset) || v.span().contains(&offset);
        path.push(k.get_ref().to_string());
        let inside = match v.get_ref() {
            toml::de::DeValue::Table(t) => path_at(t, offset, path),
            toml::de::DeValue::Array(items) => items.iter().any(|item| match item.get_ref() {
                toml::de::DeValue::Table(t) if item.span().contains(&offset) || !here => {
                    path_at(t, offset, path)
                }
                _ => false,
            }),
            _ => false,
        };
        if here || inside {
            return true;
        }
        path.pop();
    }
    false
}

/// A key path written as TOML writes it: segments joined by dots, quoted when they aren't bare.
fn join_key(path: &[String]) -> String {
    path.iter().map(|s| quote(s)).collect::<Vec<_>>().join(".")
}

/// One segment of a dotted key as TOML writes it: bare when it is letters, digits, `_` and `-`,
/// else [`quoted`].
pub fn quote(segment: &str) -> String {
    let bare = !segment.is_empty()
        && segment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        segment.to_string()
    } else {
        quoted(segment)
    }
}

/// A segment of a dotted key as a TOML basic string (`"a.b"`, `"say \"hi\""`), so a name
/// holding a quote, a dot, a backslash or a control character is named as the file spells it
/// and [`locate_key`] finds it.
pub fn quoted(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len() + 2);
    out.push('"');
    for c in segment.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A dotted key from its segments, each as [`quote`] writes it: `key(&["holds", name, "until"])`.
pub fn key(segments: &[&str]) -> String {
    segments
        .iter()
        .map(|s| quote(s))
        .collect::<Vec<_>>()
        .join(".")
}

/// [`key_at`] for text that doesn't parse: the nearest table header above plus the key on
/// the offset's line.
fn key_at_line(text: &str, offset: usize) -> String {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = text[line_start..line_end].trim();
    let header = text[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|h| h.trim_matches(|c| c == '[' || c == ']').trim().to_string());
    if line.starts_with('[') {
        let h = line.trim_matches(|c| c == '[' || c == ']').trim();
        if !h.is_empty() {
            return h.to_string();
        }
    }
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| !k.is_empty() && !k.starts_with('#'));
    match (header.filter(|h| !h.is_empty()), key) {
        (Some(h), Some(k)) => format!("{h}.{k}"),
        (Some(h), None) => h,
        (None, Some(k)) => k,
        (None, None) => String::from("(top level)"),
    }
}

/// Splits a dotted key into its segments, honouring quotes: `tables."a.b".keep_days` is
/// `tables`, `a.b`, `keep_days`.
fn segments(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = key.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('"'), '\\') => match chars.next() {
                Some(u @ ('u' | 'U')) => {
                    let digits: String =
                        chars.by_ref().take(if u == 'u' { 4 } else { 8 }).collect();
                    if let Some(c) = u32::from_str_radix(&digits, 16)
                        .ok()
                        .and_then(char::from_u32)
                    {
                        cur.push(c);
                    }
                }
                Some('n') => cur.push('\n'),
                Some('t') => cur.push('\t'),
                Some('r') => cur.push('\r'),
                Some('b') => cur.push('\u{8}'),
                Some('f') => cur.push('\u{c}'),
                Some(n) => cur.push(n),
                None => {}
            },
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => quote = Some(c),
            (None, '.') => out.push(std::mem::take(&mut cur).trim().to_string()),
            (None, c) => cur.push(c),
        }
    }
    out.push(cur.trim().to_string());
    out
}

/// The 1-based line where a dotted key is defined (its `[header]` or its `key =`), found by the
/// parsed document's spans; a key the file doesn't hold is placed at its closest enclosing
/// key that it does, and at line 1 (the file as a whole) when there is none.
pub(crate) fn locate_key(text: &str, key: &str) -> usize {
    let Ok(doc) = toml::de::DeTable::parse(text) else {
        return 1;
    };
    let mut table = doc.get_ref();
    let mut line = 1;
    for seg in segments(key) {
        let Some((k, v)) = table.iter().find(|(k, _)| k.get_ref().as_ref() == seg) else {
            break;
        };
        line = line_of(text, k.span().start);
        match v.get_ref() {
            toml::de::DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        #[allow(dead_code)]
        tables: std::collections::BTreeMap<String, Rule>,
    }
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Rule {
        #[allow(dead_code)]
        keep_days: u32,
    }

    #[test]
    fn type_error_names_file_line_and_key() {
        let text = "# rules\n[tables.\"support.tickets\"]\nkeep_days = \"two years\"\n";
        let err = parse::<Doc>(Path::new("governance/retention.toml"), text).unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.starts_with("governance/retention.toml:3: "),
            "{shown}"
        );
        assert!(
            shown.contains("tables.\"support.tickets\".keep_days"),
            "{shown}"
        );
    }

    #[test]
    fn unknown_key_is_named() {
        let text = "[tables.\"a.b\"]\nkeep_days = 3\nkeep_dayz = 4\n";
        let err = parse::<Doc>(Path::new("r.toml"), text)
            .unwrap_err()
            .to_string();
        assert!(err.contains("r.toml:3"), "{err}");
        assert!(err.contains("keep_dayz"), "{err}");
    }

    #[test]
    fn syntax_error_has_a_line() {
        let text = "[tables\nkeep_days = 3\n";
        let err = parse::<Doc>(Path::new("r.toml"), text)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("r.toml:1:"), "{err}");
    }

    /// Names holding a quote, a backslash, a dot or a control character are quoted as TOML
    /// spells them, and found again by [`locate_key`] (found by fuzzing: `holds."a"b".basis`).
    #[test]
    fn quoted_names_are_keys_the_file_spells() {
        assert_eq!(key(&["holds", "a\"b", "basis"]), r#"holds."a\"b".basis"#);
        assert_eq!(key(&["t", "a\\b"]), r#"t."a\\b""#);
        assert_eq!(key(&["t", "a.b", "x_1"]), r#"t."a.b".x_1"#);
        assert_eq!(quoted("a-1"), r#""a-1""#);
        assert_eq!(key(&["t", "\u{1b}", ""]), r#"t."\u001B"."""#);
        let text = "[holds.\"a\\\"b\"]\nbasis = 1\n\n[holds.\"c\\u001Bd\"]\nbasis = 2\n";
        for (name, line) in [("a\"b", 2), ("c\u{1b}d", 5)] {
            let k = key(&["holds", name, "basis"]);
            assert!(
                toml::from_str::<toml::Table>(&format!("{k} = 0")).is_ok(),
                "{k}"
            );
            assert_eq!(locate_key(text, &k), line, "{k}");
        }
    }

    #[test]
    fn locate_finds_headers_and_keys() {
        let text = "[a]\nx = 1\n[tables.\"support.tickets\"]\ncounted_from = \"opened_at\"\n";
        assert_eq!(locate_key(text, "tables.\"support.tickets\""), 3);
        assert_eq!(
            locate_key(text, "tables.\"support.tickets\".counted_from"),
            4
        );
        assert_eq!(locate_key(text, "a.x"), 2);
        assert_eq!(locate_key(text, "tables.\"support.tickets\".missing"), 3);
        assert_eq!(locate_key(text, "nothing"), 1);
    }

    /// Keys are found by the parsed document's spans: a header inside a multi-line string is
    /// text, not a section; dotted keys and inline tables have the line they are on.
    #[test]
    fn locate_follows_the_document_not_the_lines() {
        let text = "[holds.\"a\"]\nbasis = \"\"\"\n[holds.\"b\"]\nuntil = x\n\"\"\"\nuntil = 2027-01-01\n\n[holds.\"b\"]\nbasis = \"y\"\n";
        assert_eq!(locate_key(text, "holds.\"a\".until"), 6);
        assert_eq!(locate_key(text, "holds.\"b\""), 8);
        let text = "x = 1\ntables.\"a.b\".keep_days = 3\ninline = { deep = { key = 1 } }\n";
        assert_eq!(locate_key(text, "tables.\"a.b\".keep_days"), 2);
        assert_eq!(locate_key(text, "inline.deep.key"), 3);
        assert_eq!(locate_key(text, "inline.deep.missing"), 3);
        let e = parse::<Doc>(
            Path::new("r.toml"),
            "tables = { \"a.b\" = { keep_days = \"x\" } }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("r.toml:1: tables.\"a.b\".keep_days: "), "{e}");
    }

    /// Found by fuzzing (config_holds_toml): an entry under a dotted key (`holds.x = { … }`)
    /// has no table span of its own; its key was then read off the line, through a header
    /// that is text inside a multi-line string.
    #[test]
    fn keys_under_a_dotted_key_come_from_the_document() {
        let text = "holds.x = { requests = [\"r\"], tables = [\"a.b\"], basis = \"\"\"multi\n[holds.y]\nline\"\"\", decided_by = \"legal\", until = 2027-03-31 }\n";
        let path = Path::new("governance/holds.toml");
        let e = crate::governance::holds::HoldsFile::parse(path, text).unwrap_err();
        let Error::Config { key, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(key.starts_with("holds.x"), "{e}");
        assert!(!key.contains("holds.y"), "{e}");
    }
}
