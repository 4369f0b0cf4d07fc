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
            Some(span) => {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                (line, key_at(text, span.start))
            }
            None => (0, String::from("(file)")),
        };
        Error::Config {
            file: path.to_path_buf(),
            line,
            key,
            message: e.message().trim().to_string(),
        }
    })
}

/// The dotted key path at byte `offset`: the nearest table header above plus the key on the line.
pub(crate) fn key_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
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
        return line
            .trim_matches(|c| c == '[' || c == ']')
            .trim()
            .to_string();
    }
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| !k.is_empty() && !k.starts_with('#'));
    match (header, key) {
        (Some(h), Some(k)) => format!("{h}.{k}"),
        (Some(h), None) => h,
        (None, Some(k)) => k,
        (None, None) => String::from("(top level)"),
    }
}

/// The 1-based line where a dotted key is defined: a `[header]` equal to it, or a `last = ...`
/// line inside the section named by the rest. 0 when it can't be found.
pub(crate) fn locate_key(text: &str, key: &str) -> usize {
    let normal = |s: &str| s.replace(['"', ' '], "");
    let wanted = normal(key);
    let mut section = String::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with('[') {
            section = normal(line.trim_matches(|c| c == '[' || c == ']'));
            if section == wanted {
                return i + 1;
            }
            continue;
        }
        if let Some((k, _)) = line.split_once('=') {
            let k = normal(k);
            let full = if section.is_empty() {
                k.clone()
            } else {
                format!("{section}.{k}")
            };
            if full == wanted {
                return i + 1;
            }
        }
    }
    // Fall back to the closest enclosing section that exists.
    match wanted.rsplit_once('.') {
        Some((parent, _)) if !parent.is_empty() => locate_key(text, parent),
        _ => 0,
    }
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
        assert_eq!(locate_key(text, "nothing"), 0);
    }
}
