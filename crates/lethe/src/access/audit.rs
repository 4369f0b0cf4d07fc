//! The access audit log: one JSON line per decision of the enforced query path
//! ([`crate::access::query`]), allow or deny, in `state/audit.jsonl`.
//!
//! Guarantees:
//! - An entry is written before a query runs (an allowed query that then fails is still
//!   recorded), and a denial is written before the denial is returned: no decision of the query
//!   path goes unrecorded. When the entry can't be written, the query does not run.
//! - An entry holds the time, the principal as given, its role, the tables the SQL names, the
//!   rules applied (row filters, column masks, by table and column), the decision, the reason
//!   of a denial, and the SHA-256 of the SQL text — never the SQL itself (a query may hold a
//!   person's values in its literals) and never the pseudonym key.
//! - Each entry is appended with one `write` on a file opened in append mode, so concurrent
//!   writers don't interleave within a line.
//!
//! Not guaranteed: tamper evidence. The log is a plain file; ship it to an append-only store
//! if the audit must survive the people who can write the state folder.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The audit log's file name in the state folder.
pub const AUDIT_FILE: &str = "audit.jsonl";

/// Allow or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The query ran under the rules listed.
    Allow,
    /// The query was refused.
    Deny,
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
        })
    }
}

/// One decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When the decision was made.
    pub time: DateTime<Utc>,
    /// The principal the query ran as (as given with `--as`).
    pub principal: String,
    /// The principal's role, when it has one.
    pub role: Option<String>,
    /// The tables the SQL names (resolved to `namespace.table`).
    pub tables: Vec<String>,
    /// The rules applied: `row_filter crm.learners`, `mask crm.learners.email: pseudonym`.
    pub rules: Vec<String>,
    /// Allow or deny.
    pub decision: Decision,
    /// Why a query was denied (names tables, columns, principals, never values).
    pub reason: Option<String>,
    /// SHA-256 of the SQL text, hex.
    pub sql_sha256: String,
}

/// The SHA-256 of an SQL text, hex.
pub fn sql_hash(sql: &str) -> String {
    hex::encode(Sha256::digest(sql.as_bytes()))
}

/// The audit log of a state folder.
#[derive(Debug, Clone)]
pub struct AuditLog {
    path: PathBuf,
}

impl AuditLog {
    /// The log in `state` (the file is created on the first entry).
    pub fn in_state(state: &Path) -> AuditLog {
        AuditLog {
            path: state.join(AUDIT_FILE),
        }
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry.
    pub fn record(&self, entry: &AuditEntry) -> Result<()> {
        let mut line = serde_json::to_vec(entry)?;
        line.push(b'\n');
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
        }
        let mut f = crate::keys::open_private_append(&self.path)?;
        f.write_all(&line)
            .map_err(|e| Error::io(self.path.display().to_string(), e))
    }

    /// Every entry, oldest first (a missing log is empty). A line that doesn't parse is an
    /// error naming its line number.
    pub fn entries(&self) -> Result<Vec<AuditEntry>> {
        crate::keys::read_json_lines(&self.path, "an audit entry")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(principal: &str, decision: Decision) -> AuditEntry {
        AuditEntry {
            time: Utc::now(),
            principal: principal.into(),
            role: None,
            tables: vec!["crm.learners".into()],
            rules: vec![],
            decision,
            reason: None,
            sql_sha256: sql_hash("SELECT 1"),
        }
    }

    #[test]
    fn appends_and_reads_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::in_state(&dir.path().join("state"));
        assert!(log.entries().unwrap().is_empty());
        log.record(&entry("a", Decision::Allow)).unwrap();
        log.record(&entry("b", Decision::Deny)).unwrap();
        let got = log.entries().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].principal, "a");
        assert_eq!(got[1].decision, Decision::Deny);
    }

    #[test]
    fn hash_is_sha256_hex_of_the_text() {
        assert_eq!(
            sql_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_broken_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::in_state(dir.path());
        log.record(&entry("a", Decision::Allow)).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(log.path())
            .unwrap()
            .write_all(b"{oops\n")
            .unwrap();
        let err = log.entries().unwrap_err().to_string();
        assert!(err.contains(":2:"), "{err}");
    }
}
