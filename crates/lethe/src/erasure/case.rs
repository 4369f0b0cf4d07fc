//! A request and its case file.
//!
//! A request (`erasure-0001`) names one subject by its root identifier. Its case file
//! (`state/cases/<request>.case.json`, mode 0600) keeps the subject's traces — the IDs of every
//! row the plan deletes, by column, and the identifying values — from before the first delete
//! until a COMPLETE attestation destroys them: the erasure writes it, the proof scan and the
//! search for mentions read it, the attestation destroys its values.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::governance::subjects::SubjectRef;
use crate::keys::NewFile;
use crate::workspace::Workspace;

/// One request of an erasure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestSpec {
    /// The request ID (`erasure-0001`).
    pub request: String,
    /// The subject's name.
    pub subject: String,
    /// The subject's root identifier as typed.
    pub id: String,
}

/// A trace kept in a case file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ValueTrace {
    /// What it is (the column it came from).
    pub kind: String,
    /// The value.
    pub value: String,
}

/// The case file of one request: personal data, readable only by the erasure (mode 0600).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaseFile {
    /// The request.
    pub request: String,
    /// The subject's name.
    pub subject: String,
    /// The register hash of the subject's root identifier.
    pub hash: String,
    /// ID values by column name (exact-match traces).
    pub ids: BTreeMap<String, Vec<String>>,
    /// Identifying values (prefix traces), including the old values of erased columns.
    pub values: Vec<ValueTrace>,
    /// Tables kept under an exception (there the IDs are expected).
    pub exempt_tables: Vec<String>,
    /// The columns read as identifying values, by table: the root table's `values` and the
    /// erased columns of each REWRITE (names only; kept after the values are destroyed, so the
    /// attestation can say what was searched for).
    #[serde(default)]
    pub value_columns: BTreeMap<String, Vec<String>>,
    /// Per table, every column that addresses the subject there with the subject's values in
    /// it, as text: what the logical check ([`crate::erasure::logical`]) looks for in every
    /// snapshot the table keeps (beside the derived identifiers it recomputes itself).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub addressing: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// Rows of the subject per table before the erasure.
    pub rows: BTreeMap<String, u64>,
    /// Rows of the subject per table before the erasure as the logical check counted them
    /// (every file read whole, every addressing column matched): `rows` must agree.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checked_rows: BTreeMap<String, u64>,
    /// Whether the values above were destroyed (after a COMPLETE attestation).
    #[serde(default)]
    pub destroyed: bool,
}

/// The kind of a value trace that is a text ID searched as text ([`id_as_text`]).
pub const ID_AS_TEXT: &str = "id as text";

/// A text ID as a value trace, so that the proof scan finds it wherever it is written — under
/// another column's name, in a JSON file, inside text — not only in columns of its own name.
/// Only IDs at least 6 characters long with something other than digits: a short or numeric
/// ID (`3590`) is found everywhere as text, so it is matched by column only.
pub fn id_as_text(column: &str, id: &str) -> Option<ValueTrace> {
    let distinctive = id.chars().count() >= 6 && !id.chars().all(|c| c.is_ascii_digit());
    distinctive.then(|| ValueTrace {
        kind: format!("{ID_AS_TEXT} {column}"),
        value: id.to_string(),
    })
}

/// Whether a value trace's kind is a text ID's ([`id_as_text`]).
pub fn is_id_as_text(kind: &str) -> bool {
    kind.strip_prefix(ID_AS_TEXT)
        .is_some_and(|rest| rest.starts_with(' '))
}

fn cases_dir(ws: &Workspace) -> PathBuf {
    ws.config.paths.state.join("cases")
}

/// The case file path of a request.
pub fn case_path(ws: &Workspace, request: &str) -> PathBuf {
    cases_dir(ws).join(format!("{request}.case.json"))
}

/// Writes a case file (mode 0600) and returns its SHA-256.
pub fn write_case(ws: &Workspace, case: &CaseFile) -> Result<String> {
    let bytes = serde_json::to_vec_pretty(case)?;
    write_atomic(&case_path(ws, &case.request), &bytes, true)?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// Writes case files (mode 0600) with one durable write for all of them (a batch's, issue
/// 49); returns each one's SHA-256, in order.
pub fn write_cases(ws: &Workspace, cases: &[CaseFile]) -> Result<Vec<String>> {
    let mut files = Vec::with_capacity(cases.len());
    let mut hashes = Vec::with_capacity(cases.len());
    for case in cases {
        let bytes = serde_json::to_vec_pretty(case)?;
        hashes.push(hex::encode(Sha256::digest(&bytes)));
        files.push(NewFile {
            path: case_path(ws, &case.request),
            private: true,
            bytes,
        });
    }
    write_all_atomic(&files)?;
    Ok(hashes)
}

/// Reads a request's case file.
pub fn read_case(ws: &Workspace, request: &str) -> Result<CaseFile> {
    let p = case_path(ws, request);
    let text = std::fs::read_to_string(&p).map_err(|e| Error::io(p.display().to_string(), e))?;
    serde_json::from_str(&text)
        .map_err(|e| Error::invalid(format!("{}: not a case file: {e}", p.display())))
}

/// Parses a subjects file: one `REQUEST NAME=ID` per line (blank lines and `#` comments
/// ignored). A malformed line is an error naming the line; nobody is erased.
pub fn parse_subjects_file(path: &Path) -> Result<Vec<RequestSpec>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    let mut out: Vec<RequestSpec> = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let bad = |m: &str| Error::Config {
            file: path.to_path_buf(),
            line: i + 1,
            key: "(line)".into(),
            message: format!("{m}; write `REQUEST NAME=ID`, e.g. `erasure-0001 learner=3590`"),
        };
        let parts: Vec<&str> = l
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|s| !s.is_empty())
            .collect();
        if parts.len() != 2 {
            return Err(bad("expected two fields"));
        }
        valid_request_id(parts[0])
            .map_err(|_| bad("the request ID may hold letters, digits, '-', '_' and '.' only"))?;
        let s = SubjectRef::parse(parts[1]).map_err(|_| bad("the subject is not NAME=ID"))?;
        if !seen.insert(parts[0].to_string()) {
            return Err(bad("this request ID appears twice"));
        }
        out.push(RequestSpec {
            request: parts[0].to_string(),
            subject: s.subject,
            id: s.id,
        });
    }
    if out.is_empty() {
        return Err(Error::invalid(format!(
            "{} names no subject",
            path.display()
        )));
    }
    Ok(out)
}

/// Checks a request ID: it becomes a file name and a snapshot summary value.
pub fn valid_request_id(id: &str) -> Result<()> {
    if id.is_empty()
        || id.len() > 100
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        || id.starts_with('.')
    {
        return Err(Error::invalid(format!(
            "`{id}` is not a request ID: use letters, digits, '-', '_' and '.' (e.g. erasure-0001)"
        )));
    }
    Ok(())
}

/// Writes many files as [`write_atomic`] does, with one durable write for all of them
/// ([`crate::keys::replace_files`]): none is replaced when one can't be written; a failure
/// or crash during the renames leaves some replaced, each whole.
pub(crate) fn write_all_atomic(files: &[NewFile]) -> Result<()> {
    let dirs: BTreeSet<&Path> = files.iter().filter_map(|f| f.path.parent()).collect();
    for dir in dirs {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    }
    crate::keys::replace_files(files)
}

/// Writes `bytes` to `path` through a temporary file and a rename, synced; readable only by
/// its owner when `private`.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], private: bool) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::Internal("no parent".into()))?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    let mode = if private {
        crate::keys::FileMode::Private
    } else {
        crate::keys::FileMode::Default
    };
    crate::keys::replace_file(path, mode, |f| {
        use std::io::Write;
        f.write_all(bytes)
            .map_err(|e| Error::io(path.display().to_string(), e))
    })
}
