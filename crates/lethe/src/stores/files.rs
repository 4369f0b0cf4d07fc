//! Files outside the warehouse (exports, a raw zone): one file or a folder of them.
//!
//! Delete: each Parquet, CSV or JSON-lines file holding the subject is rewritten without the
//! subject's records (written to a temporary file beside it, then renamed over it), or removed
//! when the store says `delete = "remove"`. Other formats can't be rewritten record by record:
//! a file of another format holding the subject is an error naming it (use `remove`). Probe:
//! the proof scan ([`lethe_scan`]) over the store's path, searching the subject field's values
//! (exact, by column in Parquet, CSV and JSON); a file it can't read can't be proven clean, so it
//! is an error. Identifying values are not counted here: searched as text they match other
//! people's records (one learner's "200 Maria Lane" inside another's "1200 Maria Lane"), which
//! would keep the store from ever verifying; `lethe scan` searches them in `[scan] roots`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::registry::StoreConfig;
use super::{Deleted, Store, StoreAction, StoreSubject, error};
use crate::error::Result;

/// The trace set's prefix length (no identifying value is searched by the probe).
const WHOLE_VALUES: usize = 4096;

/// The files connector.
#[derive(Debug, Clone)]
pub struct FilesStore {
    name: String,
    path: PathBuf,
    field: String,
    remove: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Format {
    Parquet,
    Csv,
    JsonLines,
    Other,
}

fn format_of(p: &Path) -> Format {
    match p
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("parquet") => Format::Parquet,
        Some("csv") => Format::Csv,
        Some("jsonl") | Some("ndjson") => Format::JsonLines,
        _ => Format::Other,
    }
}

fn walk(p: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let meta =
        std::fs::symlink_metadata(p).map_err(|e| crate::Error::io(p.display().to_string(), e))?;
    if meta.is_file() {
        out.push(p.to_path_buf());
    } else if meta.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
            .map_err(|e| crate::Error::io(p.display().to_string(), e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            walk(&e, out)?;
        }
    }
    Ok(())
}

impl FilesStore {
    /// From a registered `files` store.
    pub fn open(root: &Path, name: &str, c: &StoreConfig) -> Result<FilesStore> {
        let p = PathBuf::from(c.path.clone().unwrap_or_default());
        Ok(FilesStore {
            name: name.to_string(),
            path: if p.is_absolute() { p } else { root.join(p) },
            field: c.subject_field.clone().unwrap_or_default(),
            remove: c.delete.as_deref() == Some("remove"),
        })
    }

    fn files(&self) -> Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        if self.path.exists() {
            walk(&self.path, &mut out)?;
        }
        Ok(out)
    }

    /// Values of the subject field per record; rewrites the file without `wanted` (unless
    /// `dry`). Returns the records removed per value.
    fn filter_file(
        &self,
        p: &Path,
        wanted: &std::collections::BTreeSet<String>,
        dry: bool,
    ) -> Result<BTreeMap<String, u64>> {
        let mut found: BTreeMap<String, u64> = BTreeMap::new();
        match format_of(p) {
            Format::Parquet | Format::Csv => {
                let batches = crate::batchio::read_batches(p)?;
                let mut kept = Vec::new();
                for b in &batches {
                    if b.column_by_name(&self.field).is_none() {
                        return Err(error(
                            &self.name,
                            format!("{} has no column `{}`", p.display(), self.field),
                        ));
                    }
                    let ids = crate::governance::identifiers::id_strings(b, &self.field)?;
                    let keep: arrow::array::BooleanArray = ids
                        .iter()
                        .map(|v| {
                            let hit = v.as_ref().is_some_and(|v| wanted.contains(v));
                            if hit && let Some(v) = v {
                                *found.entry(v.clone()).or_default() += 1;
                            }
                            Some(!hit)
                        })
                        .collect();
                    kept.push(arrow::compute::filter_record_batch(b, &keep)?);
                }
                if !found.is_empty() && !dry && !self.remove {
                    let tmp = p.with_extension(format!(
                        "lethe-tmp.{}",
                        p.extension().and_then(|e| e.to_str()).unwrap_or("")
                    ));
                    crate::batchio::write_batches(&tmp, &kept)?;
                    std::fs::rename(&tmp, p)
                        .map_err(|e| crate::Error::io(p.display().to_string(), e))?;
                }
            }
            Format::JsonLines => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| crate::Error::io(p.display().to_string(), e))?;
                let mut out = String::with_capacity(text.len());
                for line in text.split_inclusive('\n') {
                    let r = serde_json::from_str::<serde_json::Value>(line.trim_end())
                        .ok()
                        .and_then(|v| match v.get(&self.field)? {
                            serde_json::Value::String(s) => Some(s.clone()),
                            other => Some(other.to_string()),
                        });
                    match r {
                        Some(r) if wanted.contains(&r) => *found.entry(r).or_default() += 1,
                        _ => out.push_str(line),
                    }
                }
                if !found.is_empty() && !dry && !self.remove {
                    let tmp = p.with_extension("lethe-tmp.jsonl");
                    std::fs::write(&tmp, out)
                        .map_err(|e| crate::Error::io(tmp.display().to_string(), e))?;
                    std::fs::rename(&tmp, p)
                        .map_err(|e| crate::Error::io(p.display().to_string(), e))?;
                }
            }
            Format::Other => {}
        }
        if !found.is_empty() && !dry && self.remove {
            std::fs::remove_file(p).map_err(|e| crate::Error::io(p.display().to_string(), e))?;
        }
        Ok(found)
    }

    fn delete_blocking(&self, subjects: &[StoreSubject]) -> Result<Deleted> {
        let wanted: std::collections::BTreeSet<String> =
            subjects.iter().flat_map(|s| s.values.clone()).collect();
        let mut found: BTreeMap<String, u64> = BTreeMap::new();
        let mut changed = 0usize;
        for p in self.files()? {
            let f = self.filter_file(&p, &wanted, false)?;
            if !f.is_empty() {
                changed += 1;
            }
            for (v, n) in f {
                *found.entry(v).or_default() += n;
            }
        }
        Ok(Deleted {
            action: if self.remove {
                StoreAction::Delete
            } else {
                StoreAction::Rewrite
            },
            mechanism: format!(
                "files under {}: {changed} file(s) {}",
                self.path.display(),
                if self.remove {
                    "holding the subject removed"
                } else {
                    "rewritten without the subject's records"
                }
            ),
            records: subjects
                .iter()
                .map(|s| {
                    s.values
                        .iter()
                        .map(|v| found.get(v).copied().unwrap_or(0))
                        .sum()
                })
                .collect(),
            unreachable: Vec::new(),
        })
    }

    fn probe_blocking(&self, subjects: &[StoreSubject]) -> Result<Vec<u64>> {
        if !self.path.exists() {
            return Ok(vec![0; subjects.len()]);
        }
        let traces: Vec<lethe_scan::SubjectTraces> = subjects
            .iter()
            .map(|s| lethe_scan::SubjectTraces {
                label: s.request.clone(),
                ids: vec![lethe_scan::IdTrace {
                    column: self.field.clone(),
                    values: s
                        .values
                        .iter()
                        .map(|v| match v.parse::<i64>() {
                            Ok(i) => lethe_scan::IdValue::Int(i),
                            Err(_) => lethe_scan::IdValue::Text(v.clone()),
                        })
                        .collect(),
                }],
                values: Vec::new(),
            })
            .collect();
        let set = lethe_scan::TraceSet::new(&traces, WHOLE_VALUES)?;
        let report = lethe_scan::scan(
            &set,
            &lethe_scan::ScanOptions {
                roots: vec![self.path.clone()],
                threads: 1,
                ..Default::default()
            },
            &|_| {},
        )?;
        let mut out = vec![0u64; subjects.len()];
        for f in &report.files {
            if let lethe_scan::FileStatus::Unreadable { reason } = &f.status {
                return Err(error(
                    &self.name,
                    format!(
                        "{} can't be read, so it can't be proven clean: {reason}",
                        f.path.display()
                    ),
                ));
            }
            let mut holders: Vec<usize> = f.hits.iter().map(|h| h.subject).collect();
            holders.sort_unstable();
            holders.dedup();
            for i in holders {
                if let Some(o) = out.get_mut(i) {
                    *o += 1;
                }
            }
        }
        Ok(out)
    }

    fn values_blocking(&self) -> Result<Vec<String>> {
        let mut out = std::collections::BTreeSet::new();
        for p in self.files()? {
            match format_of(&p) {
                Format::Parquet | Format::Csv => {
                    for b in crate::batchio::read_batches(&p)? {
                        if b.column_by_name(&self.field).is_some() {
                            out.extend(
                                crate::governance::identifiers::id_strings(&b, &self.field)?
                                    .into_iter()
                                    .flatten(),
                            );
                        }
                    }
                }
                Format::JsonLines => {
                    let text = std::fs::read_to_string(&p)
                        .map_err(|e| crate::Error::io(p.display().to_string(), e))?;
                    for l in text.lines() {
                        if let Ok(v) = serde_json::from_str::<serde_json::Value>(l)
                            && let Some(r) = v.get(&self.field)
                        {
                            out.insert(match r {
                                serde_json::Value::String(s) => s.clone(),
                                other => other.to_string(),
                            });
                        }
                    }
                }
                Format::Other => {}
            }
        }
        Ok(out.into_iter().collect())
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| crate::Error::Internal(format!("a blocking task failed: {e}")))?
}

#[async_trait]
impl Store for FilesStore {
    fn name(&self) -> &str {
        &self.name
    }

    async fn delete(&self, subjects: &[StoreSubject]) -> Result<Deleted> {
        let (s, subjects) = (self.clone(), subjects.to_vec());
        blocking(move || s.delete_blocking(&subjects)).await
    }

    async fn probe(&self, subjects: &[StoreSubject]) -> Result<Vec<u64>> {
        let (s, subjects) = (self.clone(), subjects.to_vec());
        blocking(move || s.probe_blocking(&subjects)).await
    }

    async fn subject_values(&self) -> Result<Option<Vec<String>>> {
        let s = self.clone();
        Ok(Some(blocking(move || s.values_blocking()).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn csv_and_jsonl_files_are_rewritten_without_the_subject() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("exports");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(
            root.join("a.csv"),
            "learner_id,email\n1,one@x.example\n3590,someone.special@x.example\n",
        )
        .unwrap();
        std::fs::write(
            root.join("b.jsonl"),
            "{\"learner_id\":3590,\"n\":1}\n{\"learner_id\":2,\"n\":2}\n",
        )
        .unwrap();
        let s = FilesStore {
            name: "exports".into(),
            path: root.clone(),
            field: "learner_id".into(),
            remove: false,
        };
        let subj = [StoreSubject {
            request: "r".into(),
            values: vec!["3590".into()],
            traces: vec!["someone.special@x.example".into()],
        }];
        assert_eq!(s.probe(&subj).await.unwrap(), vec![2]);
        // Another learner's record that holds the email as text is not the subject's record.
        std::fs::write(
            root.join("c.jsonl"),
            "{\"learner_id\":7,\"note\":\"copy someone.special@x.example\"}\n",
        )
        .unwrap();
        let d = s.delete(&subj).await.unwrap();
        assert_eq!(d.records, vec![2]);
        assert_eq!(s.probe(&subj).await.unwrap(), vec![0]);
        let csv = std::fs::read_to_string(root.join("a.csv")).unwrap();
        assert!(
            csv.contains("one@x.example") && !csv.contains("3590"),
            "{csv}"
        );
        assert_eq!(
            s.subject_values().await.unwrap().unwrap(),
            vec!["1", "2", "7"]
        );
    }
}
