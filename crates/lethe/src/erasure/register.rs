//! The erasure register: for each request, its ID and a keyed hash of the erased subject's
//! root identifier — nothing else.
//!
//! The hash is HMAC-SHA256 over `<subject name>:<id>` under the register key, which comes
//! from `LETHE_REGISTER_KEY`, the file `LETHE_REGISTER_KEY_FILE` names, or `register.key` in
//! the state folder, and lives in a `secrecy` type: it never appears in logs, errors,
//! Debug output or evidence. Whoever holds the key can hash every ID and find whom the register
//! names, so it is a different secret from the query layer's pseudonym key.
//!
//! The register is a JSON-lines file in the state folder (`register.jsonl`), appended with one
//! entry per request before the erasure's first delete, so a failure later can't lose the
//! record. Writing an entry for a request that already has one changes nothing.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use secrecy::{ExposeSecret, SecretBox};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::error::{Error, Result};
use crate::governance::identifiers::{id_strings, identifier_columns};
use crate::keys::KeySource;
use crate::workspace::Workspace;

/// The environment variable holding the register key.
pub const KEY_ENV: &str = "LETHE_REGISTER_KEY";
/// The environment variable naming a file that holds the register key.
pub const KEY_FILE_ENV: &str = "LETHE_REGISTER_KEY_FILE";

/// The register key. Its Debug output never shows the key.
pub struct RegisterKey(SecretBox<Vec<u8>>);

impl std::fmt::Debug for RegisterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RegisterKey(<redacted>)")
    }
}

const SOURCE: KeySource = KeySource {
    what: "register",
    env: KEY_ENV,
    file_env: KEY_FILE_ENV,
};

impl RegisterKey {
    /// A key from bytes (at least 16).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<RegisterKey> {
        SOURCE.key(bytes).map(RegisterKey)
    }

    /// The key from `LETHE_REGISTER_KEY`, else the file `LETHE_REGISTER_KEY_FILE` names, else
    /// `fallback_file`. Refuses when none is set: an erasure must not run without its register.
    pub fn load(fallback_file: Option<&Path>) -> Result<RegisterKey> {
        match SOURCE.load(fallback_file.map(Path::to_path_buf))? {
            Some(key) => Ok(RegisterKey(key)),
            None => Err(Error::Refused(format!(
                "no register key: set {KEY_ENV} to the key (16 bytes or more, e.g. the output of `openssl rand -hex 32`), or {KEY_FILE_ENV} to a file that holds it, or keep it as register.key in the state folder (lethe.toml's [paths] state, default state/); lethe won't erase without writing the register"
            ))),
        }
    }

    /// HMAC-SHA256 of `<subject>:<id>`, hex.
    pub fn hash(&self, subject: &str, id: &str) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(self.0.expose_secret())
            .expect("HMAC takes any key length");
        mac.update(subject.as_bytes());
        mac.update(b":");
        mac.update(id.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

/// One register entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The request ID.
    pub request: String,
    /// The subject's name (`learner`).
    pub subject: String,
    /// HMAC-SHA256 of `<subject>:<id>`.
    pub hash: String,
    /// When it was written (RFC 3339).
    pub at: String,
}

/// The register file.
#[derive(Debug, Clone)]
pub struct Register {
    path: PathBuf,
}

impl Register {
    /// The register in a state folder.
    pub fn in_state(state: &Path) -> Register {
        Register {
            path: state.join("register.jsonl"),
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry.
    pub fn entries(&self) -> Result<Vec<Entry>> {
        crate::keys::read_json_lines(&self.path, "a register entry")
    }

    /// Appends an entry unless the request already has one; returns whether it wrote.
    pub fn record(&self, entry: Entry) -> Result<bool> {
        Ok(self.record_all(vec![entry])? == 1)
    }

    /// Appends the entries whose requests have none yet, in one durable write; returns how
    /// many it wrote.
    pub fn record_all(&self, entries: Vec<Entry>) -> Result<usize> {
        let known: BTreeSet<String> = self.entries()?.into_iter().map(|e| e.request).collect();
        let mut seen = BTreeSet::new();
        let new: Vec<Entry> = entries
            .into_iter()
            .filter(|e| !known.contains(&e.request) && seen.insert(e.request.clone()))
            .collect();
        if new.is_empty() {
            return Ok(0);
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| Error::io(self.path.display().to_string(), e))?;
        let mut text = String::new();
        for e in &new {
            text.push_str(&serde_json::to_string(e)?);
            text.push('\n');
        }
        f.write_all(text.as_bytes())
            .map_err(|e| Error::io(self.path.display().to_string(), e))?;
        f.sync_all()
            .map_err(|e| Error::io(self.path.display().to_string(), e))?;
        Ok(new.len())
    }

    /// Removes the entry of `request` (only the drill's synthetic subject is ever forgotten),
    /// rewriting the file atomically; returns whether there was one.
    pub fn forget(&self, request: &str) -> Result<bool> {
        let entries = self.entries()?;
        let kept: Vec<&Entry> = entries.iter().filter(|e| e.request != request).collect();
        if kept.len() == entries.len() {
            return Ok(false);
        }
        let mut text = String::new();
        for e in kept {
            text.push_str(&serde_json::to_string(e)?);
            text.push('\n');
        }
        crate::erasure::case::write_atomic(&self.path, text.as_bytes(), false)?;
        Ok(true)
    }

    /// The hashes of erased subjects of one subject type.
    pub fn hashes(&self, subject: &str) -> Result<BTreeSet<String>> {
        Ok(self
            .entries()?
            .into_iter()
            .filter(|e| e.subject == subject)
            .map(|e| e.hash)
            .collect())
    }
}

/// The register key file named in the state folder, when it exists.
pub fn default_key_file(ws: &Workspace) -> Option<PathBuf> {
    let p = ws.config.paths.state.join("register.key");
    p.exists().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_keyed_and_key_never_shows() {
        let k1 = RegisterKey::from_bytes(b"0123456789abcdef-secret".to_vec()).unwrap();
        let k2 = RegisterKey::from_bytes(b"another key of 16+ bytes".to_vec()).unwrap();
        assert_eq!(k1.hash("learner", "3590"), k1.hash("learner", "3590"));
        assert_ne!(k1.hash("learner", "3590"), k2.hash("learner", "3590"));
        assert_ne!(k1.hash("learner", "3590"), k1.hash("learner", "3591"));
        assert_eq!(k1.hash("learner", "3590").len(), 64);
        assert!(!format!("{k1:?}").contains("secret"));
        assert!(RegisterKey::from_bytes(b"short".to_vec()).is_err());
    }

    #[test]
    fn record_is_idempotent_per_request() {
        let dir = tempfile::tempdir().unwrap();
        let r = Register::in_state(dir.path());
        let e = Entry {
            request: "erasure-0001".into(),
            subject: "learner".into(),
            hash: "ab".into(),
            at: "t".into(),
        };
        assert!(r.record(e.clone()).unwrap());
        assert!(!r.record(e).unwrap());
        assert_eq!(r.entries().unwrap().len(), 1);
    }
}

/// Rows of erased subjects found in a table.
#[derive(Debug, Clone, Serialize)]
pub struct Incident {
    /// The table.
    pub table: String,
    /// The identifier column.
    pub column: String,
    /// Rows whose identifier hashes to a register entry.
    pub rows: u64,
    /// The requests those rows were erased by.
    pub requests: Vec<String>,
}

/// Rows of erased subjects found in one table's identifier column, with the values found
/// (personal data: for `lethe register replay` only, never reported).
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// What is reported.
    pub incident: Incident,
    /// The values whose keyed hash is in the register, with the request each belongs to.
    pub values: std::collections::BTreeMap<String, String>,
}

/// After loads, restores and rebuilds: hashes every value of every identifier column in every
/// table and reports rows of erased subjects, except in tables a legal exception keeps.
pub async fn check(ws: &crate::workspace::Workspace, key: &RegisterKey) -> Result<Vec<Incident>> {
    Ok(find(ws, key)
        .await?
        .into_iter()
        .map(|f| f.incident)
        .collect())
}

/// The register's entries by subject kind: hash -> request.
pub(crate) fn by_subject(
    entries: &[Entry],
) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>> {
    let mut by_subject: std::collections::BTreeMap<
        String,
        std::collections::BTreeMap<String, String>,
    > = Default::default();
    for e in entries {
        by_subject
            .entry(e.subject.clone())
            .or_default()
            .insert(e.hash.clone(), e.request.clone());
    }
    by_subject
}

/// [`check`], keeping the values found.
pub(crate) async fn find(
    ws: &crate::workspace::Workspace,
    key: &RegisterKey,
) -> Result<Vec<Found>> {
    find_in(ws, key, None).await
}

/// [`find`] in the tables named by `only` (every table when `None`): `lethe register replay`
/// checks again the tables it changed.
pub(crate) async fn find_in(
    ws: &crate::workspace::Workspace,
    key: &RegisterKey,
    only: Option<&BTreeSet<String>>,
) -> Result<Vec<Found>> {
    let register = Register::in_state(&ws.config.paths.state);
    let entries = register.entries()?;
    let gov = ws.governance()?;
    let wh = &ws.warehouse;
    let by_subject = by_subject(&entries);
    let mut out = Vec::new();
    for name in wh.tables().await? {
        let tname = name.to_string();
        if gov.retention.value.erasure.exceptions.contains_key(&tname)
            || only.is_some_and(|o| !o.contains(&tname))
        {
            continue;
        }
        let t = wh.load(&name).await?;
        let schema = t.metadata.current_schema().clone();
        let columns = t.column_names();
        for (subject, hashes) in &by_subject {
            for col in identifier_columns(&gov, subject, &tname, &columns) {
                let mut rows = 0u64;
                let mut requests = BTreeSet::new();
                let mut values = std::collections::BTreeMap::new();
                let mut cache: std::collections::HashMap<String, Option<String>> =
                    Default::default();
                for f in wh.current_files(&t).await? {
                    if !f.is_data() {
                        continue;
                    }
                    for b in lethe_iceberg::read::read_data_file(
                        wh.store.as_ref(),
                        f.entry.data_file.file_path(),
                        &schema,
                    )? {
                        for v in id_strings(&b, &col)?.into_iter().flatten() {
                            let hit = cache
                                .entry(v.clone())
                                .or_insert_with(|| hashes.get(&key.hash(subject, &v)).cloned());
                            if let Some(r) = hit {
                                rows += 1;
                                requests.insert(r.clone());
                                values.insert(v, r.clone());
                            }
                        }
                    }
                }
                if rows > 0 {
                    out.push(Found {
                        incident: Incident {
                            table: tname.clone(),
                            column: col,
                            rows,
                            requests: requests.into_iter().collect(),
                        },
                        values,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// How suppression treats a listed subject's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SuppressMode {
    /// Leave the row out.
    Drop,
    /// Keep the row with its identifier and the given columns set to null.
    Tombstone,
}

/// What suppression did.
#[derive(Debug, Clone, Serialize)]
pub struct Suppressed {
    /// Rows read.
    pub rows_in: u64,
    /// Rows written.
    pub rows_out: u64,
    /// Rows of erased subjects dropped or tombstoned.
    pub suppressed: u64,
}

/// Filters batches against the register before they are loaded: rows whose `column` hashes to
/// a register entry of `subject` are dropped, or tombstoned (`column` and `null_columns` set to
/// null).
pub fn suppress(
    batches: &[arrow::array::RecordBatch],
    key: &RegisterKey,
    hashes: &BTreeSet<String>,
    subject: &str,
    column: &str,
    mode: SuppressMode,
    null_columns: &[String],
) -> Result<(Vec<arrow::array::RecordBatch>, Suppressed)> {
    use arrow::array::{BooleanArray, new_null_array};
    let mut out = Vec::new();
    let mut s = Suppressed {
        rows_in: 0,
        rows_out: 0,
        suppressed: 0,
    };
    for b in batches {
        s.rows_in += b.num_rows() as u64;
        let listed: BooleanArray = id_strings(b, column)?
            .into_iter()
            .map(|v| Some(v.is_some_and(|v| hashes.contains(&key.hash(subject, &v)))))
            .collect();
        let n = listed.true_count() as u64;
        s.suppressed += n;
        let kept = match mode {
            SuppressMode::Drop => {
                arrow::compute::filter_record_batch(b, &arrow::compute::not(&listed)?)?
            }
            SuppressMode::Tombstone => {
                let mut cols = b.columns().to_vec();
                for (i, f) in b.schema().fields().iter().enumerate() {
                    if f.name() == column || null_columns.iter().any(|c| c == f.name()) {
                        let nulls = new_null_array(f.data_type(), b.num_rows());
                        cols[i] = arrow::compute::kernels::zip::zip(&listed, &nulls, &cols[i])?;
                    }
                }
                let relaxed = std::sync::Arc::new(arrow::datatypes::Schema::new(
                    b.schema()
                        .fields()
                        .iter()
                        .map(|f| f.as_ref().clone().with_nullable(true))
                        .collect::<Vec<_>>(),
                ));
                arrow::array::RecordBatch::try_new(relaxed, cols)?
            }
        };
        s.rows_out += kept.num_rows() as u64;
        out.push(kept);
    }
    Ok((out, s))
}
