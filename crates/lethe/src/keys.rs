//! Keys lethe reads from the environment or a file (the register key, the pseudonym key) and
//! the random key files the demo and test fixtures write, plus the private (mode 0600) files and
//! JSON-lines logs lethe keeps in its state folder. Errors name the variable or file, never a
//! byte of a key.

use std::io::Write;
use std::path::{Path, PathBuf};

use secrecy::SecretBox;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// Where one kind of key comes from.
pub(crate) struct KeySource {
    /// What it is, for messages (`register`, `pseudonym`).
    pub what: &'static str,
    /// The environment variable holding the key.
    pub env: &'static str,
    /// The environment variable naming a file that holds the key.
    pub file_env: &'static str,
}

impl KeySource {
    /// A key from bytes (at least 16).
    pub(crate) fn key(&self, bytes: Vec<u8>) -> Result<SecretBox<Vec<u8>>> {
        if bytes.len() < 16 {
            return Err(Error::invalid(format!(
                "the {} key is too short: use at least 16 bytes (e.g. 32 random bytes, hex-encoded)",
                self.what
            )));
        }
        Ok(SecretBox::new(Box::new(bytes)))
    }

    /// The key from the variable `env`, else from the file `file_env` names, else from
    /// `fallback`; trimmed when it is text. `None` when none of them is set.
    pub(crate) fn load(&self, fallback: Option<PathBuf>) -> Result<Option<SecretBox<Vec<u8>>>> {
        if let Ok(v) = std::env::var(self.env) {
            let v = v.trim().to_string();
            if v.is_empty() {
                return Err(Error::invalid(format!("{} is set but empty", self.env)));
            }
            return self.key(v.into_bytes()).map(Some);
        }
        let Some(file) = std::env::var(self.file_env)
            .ok()
            .map(PathBuf::from)
            .or(fallback)
        else {
            return Ok(None);
        };
        let bytes = std::fs::read(&file).map_err(|e| {
            Error::invalid(format!(
                "the {} key file {} can't be read: {}",
                self.what,
                file.display(),
                e.kind()
            ))
        })?;
        let trimmed = match std::str::from_utf8(&bytes) {
            Ok(s) => s.trim().as_bytes().to_vec(),
            Err(_) => bytes,
        };
        self.key(trimmed).map(Some)
    }
}

/// Options that create a file only its owner can read and write (mode 0600 on Unix).
pub(crate) fn private_options() -> std::fs::OpenOptions {
    let mut opts = std::fs::OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts
}

/// Writes 32 random bytes, hex-encoded, to a new private file at `path` (a key for the demo
/// or a fixture; a deployment keeps its keys in a secret store).
pub fn write_random_key(path: &Path) -> Result<()> {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let mut f = private_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| Error::io(path.display().to_string(), e))?;
    f.write_all(hex::encode(bytes).as_bytes())
        .map_err(|e| Error::io(path.display().to_string(), e))
}

/// Every entry of a JSON-lines log, oldest first (a missing log is empty; blank lines are
/// skipped). A line that doesn't parse is an error naming the file and line, as "not a `what`".
pub(crate) fn read_json_lines<T: DeserializeOwned>(path: &Path, what: &str) -> Result<Vec<T>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| Error::Config {
                file: path.to_path_buf(),
                line: i + 1,
                key: "(entry)".into(),
                message: format!("not {what}: {e}"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    // Variables only these tests use, so they can't disturb other tests.
    const SOURCE: KeySource = KeySource {
        what: "test",
        env: "LETHE_KEYS_TEST_KEY",
        file_env: "LETHE_KEYS_TEST_KEY_FILE",
    };

    #[test]
    fn a_key_file_is_trimmed_a_short_key_refused_and_an_unset_source_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert!(SOURCE.load(None).unwrap().is_none());
        let f = dir.path().join("k");
        std::fs::write(&f, "0123456789abcdef0123\n").unwrap();
        let key = SOURCE.load(Some(f.clone())).unwrap().unwrap();
        assert_eq!(key.expose_secret().as_slice(), b"0123456789abcdef0123");
        std::fs::write(&f, "short-secret").unwrap();
        let e = SOURCE.load(Some(f)).unwrap_err().to_string();
        assert!(e.contains("the test key is too short"), "{e}");
        assert!(!e.contains("short-secret"), "{e}");
        let missing = dir.path().join("missing");
        let e = SOURCE.load(Some(missing.clone())).unwrap_err().to_string();
        assert!(e.contains(&missing.display().to_string()), "{e}");
    }

    #[test]
    fn a_random_key_is_private_and_loads() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("k");
        write_random_key(&f).unwrap();
        assert_eq!(
            SOURCE
                .load(Some(f.clone()))
                .unwrap()
                .unwrap()
                .expose_secret()
                .len(),
            64
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&f).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn json_lines_skip_blanks_and_name_the_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("log.jsonl");
        assert!(read_json_lines::<u32>(&f, "a number").unwrap().is_empty());
        std::fs::write(&f, "1\n\n2\n").unwrap();
        assert_eq!(read_json_lines::<u32>(&f, "a number").unwrap(), vec![1, 2]);
        std::fs::write(&f, "1\n\nx\n").unwrap();
        let e = read_json_lines::<u32>(&f, "a number")
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("{}:3:", f.display())), "{e}");
        assert!(e.contains("not a number"), "{e}");
    }
}
