//! Parquet modular encryption, recognised so that such a file is reported unreadable with the
//! keys it needs rather than with a decoding error: "encrypted; no key configured for K".
//!
//! Two layouts: an encrypted footer (magic `PARE` at both ends; the `FileCryptoMetaData`
//! before the encrypted footer names the footer key), and a plaintext footer (`PAR1`) whose
//! `encryption_algorithm` field is set and whose column chunks carry their own key metadata.
//! The key named is the `masterKeyID` of the key material PyArrow and parquet-java store in
//! the file (`PKMT1` JSON), or the key metadata itself when it is a short printable string.
//!
//! With keys configured ([`crate::keys`]) such a file is decrypted instead; this module gives
//! the reason when they aren't.
//!
//! Does not: name keys whose material is stored outside the file (the reason then says the
//! footer names no key).

use super::thrift_guard::skip_value;

const BINARY: u8 = 8;
const LIST: u8 = 9;
const STRUCT: u8 = 12;

/// Longest key metadata shown as a key ID when it is not key material JSON.
const MAX_PLAIN_KEY_ID: usize = 128;

fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The fields of the Thrift compact struct starting at `at`: (field id, type, value offset).
/// Stops (None) at the struct's end or at bytes it can't follow.
fn fields(b: &[u8], mut at: usize) -> impl Iterator<Item = (i16, u8, usize)> + '_ {
    let mut last = 0i16;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let header = *b.get(at)?;
        at += 1;
        if header == 0 {
            done = true;
            return None;
        }
        let kind = header & 0x0f;
        let delta = header >> 4;
        let id = if delta != 0 {
            last.checked_add(i16::from(delta))?
        } else {
            let z = varint(b, &mut at)?;
            i16::try_from((z >> 1) as i64 ^ -((z & 1) as i64)).ok()?
        };
        last = id;
        let start = at;
        match skip_value(b, at, kind) {
            Ok(end) => at = end,
            Err(_) => {
                done = true;
                return None;
            }
        }
        Some((id, kind, start))
    })
}

/// The struct elements of the Thrift compact list starting at `at` (their offsets).
fn struct_elements(b: &[u8], mut at: usize) -> Vec<usize> {
    let Some(&header) = b.get(at) else {
        return Vec::new();
    };
    at += 1;
    let count = match header >> 4 {
        15 => match varint(b, &mut at) {
            Some(n) => n,
            None => return Vec::new(),
        },
        n => u64::from(n),
    };
    if header & 0x0f != STRUCT {
        return Vec::new();
    }
    let mut out = Vec::new();
    for _ in 0..count {
        out.push(at);
        match skip_value(b, at, STRUCT) {
            Ok(end) => at = end,
            Err(_) => break,
        }
    }
    out
}

fn binary(b: &[u8], mut at: usize) -> Option<&[u8]> {
    let len = usize::try_from(varint(b, &mut at)?).ok()?;
    b.get(at..at.checked_add(len)?)
}

/// The key a key metadata names: key material's `masterKeyID`, or a short printable string.
fn key_id(metadata: &[u8]) -> Option<String> {
    if let Ok(serde_json::Value::Object(m)) = serde_json::from_slice(metadata) {
        return m
            .get("masterKeyID")
            .and_then(|v| v.as_str())
            .map(str::to_string);
    }
    let s = std::str::from_utf8(metadata).ok()?;
    (!s.is_empty() && s.len() <= MAX_PLAIN_KEY_ID && s.chars().all(|c| !c.is_control()))
        .then(|| s.to_string())
}

fn reason(keys: &[String]) -> String {
    if keys.is_empty() {
        "encrypted; no key configured (the file names no key)".into()
    } else {
        format!("encrypted; no key configured for {}", keys.join(", "))
    }
}

/// For a file whose footer is encrypted (`PARE`): `region` holds the `FileCryptoMetaData`
/// followed by the encrypted footer; the reason names the footer key.
pub(crate) fn encrypted_footer(region: &[u8]) -> String {
    let key = fields(region, 0)
        .find(|&(id, kind, _)| id == 2 && kind == BINARY)
        .and_then(|(_, _, at)| binary(region, at))
        .and_then(key_id);
    reason(&key.into_iter().collect::<Vec<_>>())
}

/// For a plaintext footer (`FileMetaData` bytes): Err with the reason when the file's columns
/// are encrypted (its `encryption_algorithm` is set), naming the keys its column chunks need.
pub(crate) fn plaintext_footer(footer: &[u8]) -> Result<(), String> {
    let top: Vec<(i16, u8, usize)> = fields(footer, 0).collect();
    if !top.iter().any(|&(id, kind, _)| id == 8 && kind == STRUCT) {
        return Ok(());
    }
    let footer_key = top
        .iter()
        .find(|&&(id, kind, _)| id == 9 && kind == BINARY)
        .and_then(|&(_, _, at)| binary(footer, at))
        .and_then(key_id);
    let mut keys: Vec<String> = Vec::new();
    let mut footer_key_used = false;
    let row_groups = top.iter().filter(|&&(id, kind, _)| id == 4 && kind == LIST);
    for &(_, _, at) in row_groups {
        for rg in struct_elements(footer, at) {
            for (_, _, columns) in fields(footer, rg).filter(|&(id, k, _)| id == 1 && k == LIST) {
                for chunk in struct_elements(footer, columns) {
                    let crypto = fields(footer, chunk).find(|&(id, k, _)| id == 8 && k == STRUCT);
                    let Some((_, _, crypto)) = crypto else {
                        continue;
                    };
                    for (id, kind, at) in fields(footer, crypto) {
                        match (id, kind) {
                            (1, STRUCT) => footer_key_used = true,
                            (2, STRUCT) => {
                                let key = fields(footer, at)
                                    .find(|&(id, k, _)| id == 2 && k == BINARY)
                                    .and_then(|(_, _, at)| binary(footer, at))
                                    .and_then(key_id);
                                if let Some(key) = key
                                    && !keys.contains(&key)
                                {
                                    keys.push(key);
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
    }
    if (footer_key_used || keys.is_empty())
        && let Some(key) = footer_key
        && !keys.contains(&key)
    {
        keys.push(key);
    }
    Err(reason(&keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_ids_from_key_material_or_plain_metadata() {
        let material = br#"{"keyMaterialType":"PKMT1","masterKeyID":"kf","wrappedDEK":"x"}"#;
        assert_eq!(key_id(material).as_deref(), Some("kf"));
        assert_eq!(key_id(br#"{"internalStorage":false}"#), None);
        assert_eq!(key_id(b"column-key-1").as_deref(), Some("column-key-1"));
        assert_eq!(key_id(&[0, 1, 2]), None);
        assert_eq!(key_id(b""), None);
    }

    /// Files PyArrow writes with an in-memory KMS (`tests/interop/write_encrypted_parquet.py`).
    #[test]
    fn pyarrow_encrypted_files_are_unreadable_naming_their_keys() {
        use crate::dispatch::tests::{run_interop_script, subject_traces};
        use crate::{FileFormat, FileStatus, scan_bytes};
        let ts = subject_traces();
        let dir = run_interop_script("write_encrypted_parquet.py");
        let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
        for (name, key) in [
            ("encrypted_footer.parquet", "footer_key"),
            ("plaintext_footer.parquet", "email_key"),
        ] {
            let bytes = read(name);
            let r = scan_bytes(&ts, name, &bytes, false);
            assert_eq!(r.format, FileFormat::Parquet, "{name}");
            assert_eq!(
                r.status,
                FileStatus::Unreadable {
                    reason: format!("encrypted; no key configured for {key}")
                },
                "{name}"
            );
            assert!(r.hits.is_empty(), "{name}: {:?}", r.hits);
            // Inside an archive: the archive is unreadable, naming the member and the key.
            let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            w.start_file(name, zip::write::SimpleFileOptions::default())
                .unwrap();
            std::io::Write::write_all(&mut w, &bytes).unwrap();
            let z = w.finish().unwrap().into_inner();
            let r = scan_bytes(&ts, "e.zip", &z, false);
            assert_eq!(
                r.status,
                FileStatus::Unreadable {
                    reason: format!("member `{name}`: encrypted; no key configured for {key}")
                }
            );
        }
    }

    /// The same files read with their master keys (lethe's file KMS, from the `keys.txt` the
    /// script writes): each is read and the subject is found where PyArrow wrote it — the
    /// email in `email`, the ID in `learner_id` (encrypted or not). With the footer key only,
    /// or a wrong key under a listed ID, the file is unreadable and says why (hits in the
    /// columns read before are kept).
    #[test]
    fn pyarrow_encrypted_files_are_read_with_their_master_keys() {
        use crate::dispatch::tests::{run_interop_script, subject_traces};
        use crate::{FileStatus, KeyFile, ParquetKeys, Place, ScanOptions, TraceKind};
        let ts = subject_traces();
        let dir = run_interop_script("write_encrypted_parquet.py");
        let scan = |keys: &str| {
            let file = KeyFile::parse(keys, "keys.txt").unwrap();
            let options = ScanOptions {
                roots: vec![dir.path().to_path_buf()],
                parquet_keys: ParquetKeys::new(std::sync::Arc::new(file)),
                ..ScanOptions::default()
            };
            crate::scan(&ts, &options, &|_| {}).unwrap()
        };
        let status = |r: &crate::ScanReport, name: &str| {
            let f = r.files.iter().find(|f| f.path.ends_with(name)).unwrap();
            (f.status.clone(), f.hits.clone())
        };
        let names = [
            "encrypted_footer.parquet",
            "plaintext_footer.parquet",
            "single_wrapped.parquet",
        ];
        let keys = std::fs::read_to_string(dir.path().join("keys.txt")).unwrap();
        let all = scan(&keys);
        for name in names {
            let (st, hits) = status(&all, name);
            assert_eq!(st, FileStatus::Read, "{name}");
            let value = hits.iter().any(|h| {
                h.place == Place::DataValue
                    && matches!(&h.trace, TraceKind::Value { kind } if kind == "email")
                    && h.detail.contains("`email`")
            });
            let id = hits.iter().any(|h| {
                h.place == Place::DataValue
                    && matches!(&h.trace, TraceKind::Id { column } if column == "learner_id")
            });
            assert!(value && id, "{name}: {hits:?}");
        }
        let footer_only: String = keys
            .lines()
            .filter(|l| l.starts_with("footer_key:"))
            .collect();
        let some = scan(&footer_only);
        for name in names {
            let (st, hits) = status(&some, name);
            let want = "encrypted; no key configured for email_key".to_string();
            assert_eq!(st, FileStatus::Unreadable { reason: want }, "{name}");
            // What was read before the missing key is kept (`learner_id` in the clear).
            let email = |h: &crate::Hit| matches!(&h.trace, TraceKind::Value { .. });
            assert!(!hits.iter().any(email), "{name}: {hits:?}");
        }
        let wrong = "footer_key:AAAAAAAAAAAAAAAAAAAAAA==\nemail_key:AAAAAAAAAAAAAAAAAAAAAA==";
        let r = scan(wrong);
        for name in names {
            let (st, _) = status(&r, name);
            let FileStatus::Unreadable { reason } = st else {
                panic!("{name}: read with wrong keys")
            };
            assert!(
                reason.contains("does not open with this master key"),
                "{name}: {reason}"
            );
        }
    }

    #[test]
    fn garbage_is_never_a_panic() {
        for n in 0..64u8 {
            let b: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37).wrapping_add(n)).collect();
            let _ = encrypted_footer(&b);
            let _ = plaintext_footer(&b);
        }
        assert_eq!(
            encrypted_footer(&[]),
            "encrypted; no key configured (the file names no key)"
        );
        assert_eq!(plaintext_footer(&[]), Ok(()));
    }
}
