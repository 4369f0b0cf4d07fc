//! Files outside the warehouse (exports, a raw zone): one file or a folder of them.
//!
//! Delete: each Parquet, CSV or JSON-lines file holding the subject is rewritten without the
//! subject's records (written to a temporary file beside it, created private, given the
//! file's own mode, synced, then renamed over it: [`crate::keys::replace_file`]), or removed
//! when the store says `delete = "remove"`. Other formats can't be rewritten record by record:
//! a file of another format holding the subject is an error naming it (use `remove`). Probe:
//! the proof scan ([`lethe_scan`]) over the store's path, searching the subject field's values
//! (exact, by column in Parquet, CSV and JSON); a file it can't read can't be proven clean, so it
//! is an error. Identifying values are not counted here: searched as text they match other
//! people's records (one learner's "200 Maria Lane" inside another's "1200 Maria Lane"), which
//! would keep the store from ever verifying; `lethe scan` searches them in `[scan] roots`.
//! Seed (the drill): a record copied from the first Parquet, CSV or JSON-lines file, with the
//! subject field set to the synthetic subject, text to synthetic text and other fields emptied
//! — in a file of its own beside it (`lethe-drill-<key>.<ext>`) when the store is a folder,
//! appended to the store's one file otherwise; unseed removes the drill's own file (the erasure
//! leaves it empty, or removes it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::registry::StoreConfig;
use super::{Deleted, Seeded, SeededPlace, Store, StoreAction, StoreSubject, error};
use crate::error::Result;
use crate::stores::blocking;

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
                    crate::batchio::replace_batches(p, &kept, crate::keys::FileMode::Keep)?;
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
                    crate::keys::replace_file(p, crate::keys::FileMode::Keep, |f| {
                        use std::io::Write;
                        f.write_all(out.as_bytes())
                            .map_err(|e| crate::Error::io(p.display().to_string(), e))
                    })?;
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

/// The locator of a seeded file the drill created (unseed removes it).
const DRILL_FILE: &str = "drill file";

impl FilesStore {
    /// One synthetic record shaped like `template`'s first (Parquet or CSV).
    fn synthetic_batch(
        &self,
        template: &Path,
        subject: &StoreSubject,
        value: &str,
    ) -> Result<(Vec<arrow::array::RecordBatch>, arrow::array::RecordBatch)> {
        use arrow::array::{Array, StringArray};
        use arrow::datatypes::DataType;
        let batches = crate::batchio::read_batches(template)?;
        let first = batches
            .iter()
            .find(|b| b.num_rows() > 0)
            .ok_or_else(|| {
                error(
                    &self.name,
                    format!("{} holds no record to copy", template.display()),
                )
            })?
            .slice(0, 1);
        let schema = first.schema();
        if schema.field_with_name(&self.field).is_err() {
            return Err(error(
                &self.name,
                format!("{} has no column `{}`", template.display(), self.field),
            ));
        }
        let mut cols: Vec<std::sync::Arc<dyn Array>> = Vec::new();
        for (i, f) in schema.fields().iter().enumerate() {
            let text = |t: String| -> Result<std::sync::Arc<dyn Array>> {
                let a: std::sync::Arc<dyn Array> = std::sync::Arc::new(StringArray::from(vec![t]));
                Ok(arrow::compute::cast(&a, f.data_type())?)
            };
            cols.push(if f.name() == &self.field {
                text(value.to_string()).map_err(|_| {
                    error(
                        &self.name,
                        format!(
                            "`{}` of {} can't hold the subject's value",
                            self.field,
                            template.display()
                        ),
                    )
                })?
            } else if matches!(f.data_type(), DataType::Utf8 | DataType::LargeUtf8) {
                text(super::synthetic_text(subject, f.name()))?
            } else if f.is_nullable() {
                arrow::array::new_null_array(f.data_type(), 1)
            } else {
                first.column(i).clone()
            });
        }
        Ok((batches, arrow::array::RecordBatch::try_new(schema, cols)?))
    }

    /// One synthetic JSON line shaped like `template`'s first.
    fn synthetic_line(
        &self,
        template: &Path,
        subject: &StoreSubject,
        value: &str,
    ) -> Result<String> {
        let text = std::fs::read_to_string(template)
            .map_err(|e| crate::Error::io(template.display().to_string(), e))?;
        let first = text
            .lines()
            .find_map(|l| {
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(l).ok()
            })
            .ok_or_else(|| {
                error(
                    &self.name,
                    format!("{} holds no JSON record to copy", template.display()),
                )
            })?;
        let mut out = serde_json::Map::new();
        for (k, v) in first {
            let nv = if k == self.field {
                match (&v, value.parse::<i64>()) {
                    (serde_json::Value::Number(_), Ok(i)) => serde_json::Value::from(i),
                    _ => serde_json::Value::from(value),
                }
            } else if v.is_string() {
                serde_json::Value::from(super::synthetic_text(subject, &k))
            } else {
                serde_json::Value::Null
            };
            out.insert(k, nv);
        }
        if !out.contains_key(&self.field) {
            out.insert(self.field.clone(), serde_json::Value::from(value));
        }
        let mut line = serde_json::Value::Object(out).to_string();
        line.push('\n');
        Ok(line)
    }

    fn seed_blocking(&self, subject: &StoreSubject, key: i64) -> Result<Seeded> {
        let value = subject.values.first().ok_or_else(|| {
            error(
                &self.name,
                "the synthetic subject has no value for this store",
            )
        })?;
        let template = self
            .files()?
            .into_iter()
            .find(|p| format_of(p) != Format::Other)
            .ok_or_else(|| {
                error(
                    &self.name,
                    format!(
                        "{} has no Parquet, CSV or JSON-lines file to copy a record from",
                        self.path.display()
                    ),
                )
            })?;
        let folder = self.path.is_dir();
        if !folder && self.remove {
            return Err(error(
                &self.name,
                "it removes whole files holding the subject: a synthetic record in its one file would get every record removed",
            ));
        }
        let fmt = format_of(&template);
        let ext = template
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_string();
        let target = if folder {
            template.with_file_name(format!("lethe-drill-{key}.{ext}"))
        } else {
            self.path.clone()
        };
        match fmt {
            Format::Parquet | Format::Csv => {
                let (mut all, row) = self.synthetic_batch(&template, subject, value)?;
                if folder {
                    crate::batchio::write_batches(&target, &[row])?;
                } else {
                    all.push(row);
                    crate::batchio::replace_batches(&target, &all, crate::keys::FileMode::Keep)?;
                }
            }
            Format::JsonLines => {
                let line = self.synthetic_line(&template, subject, value)?;
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&target)
                    .map_err(|e| crate::Error::io(target.display().to_string(), e))?;
                f.write_all(line.as_bytes())
                    .map_err(|e| crate::Error::io(target.display().to_string(), e))?;
            }
            Format::Other => unreachable!("only readable formats are templates"),
        }
        Ok(Seeded {
            records: 1,
            places: vec![SeededPlace {
                place: target.display().to_string(),
                key: folder.then(|| (DRILL_FILE.to_string(), format!("lethe-drill-{key}.{ext}"))),
            }],
        })
    }
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

    async fn seed(&self, subject: &StoreSubject, key: i64) -> Result<Seeded> {
        let (s, subject) = (self.clone(), subject.clone());
        blocking(move || s.seed_blocking(&subject, key)).await
    }

    async fn unseed(&self, seeded: &Seeded) -> Result<u64> {
        let mut n = 0;
        for p in &seeded.places {
            let path = PathBuf::from(&p.place);
            // Only a file the drill created, and only under the store's own folder.
            if p.key.as_ref().is_some_and(|(k, _)| k == DRILL_FILE)
                && path.starts_with(&self.path)
                && path.exists()
            {
                std::fs::remove_file(&path)
                    .map_err(|e| crate::Error::io(path.display().to_string(), e))?;
                n += 1;
            }
        }
        Ok(n)
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

    /// Issue 44 item 13: a rewritten export keeps its mode (an export shared with a group
    /// stays so; one kept private stays private), and leaves no temporary file.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_rewritten_file_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("exports");
        std::fs::create_dir_all(&root).unwrap();
        let files = [
            ("a.csv", "learner_id,n\n3590,1\n2,2\n", 0o640),
            (
                "b.jsonl",
                "{\"learner_id\":3590}\n{\"learner_id\":2}\n",
                0o600,
            ),
            ("c.csv", "learner_id,n\n3590,1\n2,2\n", 0o604),
        ];
        for (f, text, mode) in files {
            std::fs::write(root.join(f), text).unwrap();
            std::fs::set_permissions(root.join(f), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let s = FilesStore {
            name: "exports".into(),
            path: root.clone(),
            field: "learner_id".into(),
            remove: false,
        };
        let subj = [StoreSubject {
            request: "r".into(),
            values: vec!["3590".into()],
            traces: vec![],
        }];
        assert_eq!(s.delete(&subj).await.unwrap().records, vec![3]);
        for (f, _, mode) in files {
            let got = std::fs::metadata(root.join(f))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777;
            assert_eq!(got, mode, "{f} lost its mode");
            assert!(
                !std::fs::read_to_string(root.join(f))
                    .unwrap()
                    .contains("3590")
            );
        }
        assert_eq!(
            std::fs::read_dir(&root).unwrap().count(),
            3,
            "a temporary file was left"
        );
    }
}
