//! Keys lethe reads from the environment or a file (the register key, the pseudonym key) and
//! the random key files the demo and test fixtures write, plus the private (mode 0600) files and
//! JSON-lines logs lethe keeps in its state folder, and [`replace_file`], which every file lethe
//! rewrites goes through. Errors name the variable or file, never a byte of a key.
//!
//! A key file must be private: one readable or writable by its group or others is refused
//! (as ssh refuses such a private key), with the command that fixes it. A private file lethe
//! writes has mode 0600 from the moment it exists — never written with the default mode and
//! changed afterwards, never a leftover with a looser mode reused.

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
        Ok(self.load_with_origin(fallback)?.map(|(key, _)| key))
    }

    /// [`Self::load`], with where the key came from: the variable's name or the file's path.
    pub(crate) fn load_with_origin(
        &self,
        fallback: Option<PathBuf>,
    ) -> Result<Option<(SecretBox<Vec<u8>>, String)>> {
        if let Ok(v) = std::env::var(self.env) {
            let v = v.trim().to_string();
            if v.is_empty() {
                return Err(Error::invalid(format!("{} is set but empty", self.env)));
            }
            return Ok(Some((self.key(v.into_bytes())?, self.env.to_string())));
        }
        let Some(file) = std::env::var(self.file_env)
            .ok()
            .map(PathBuf::from)
            .or(fallback)
        else {
            return Ok(None);
        };
        check_private(self.what, &file)?;
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
        Ok(Some((self.key(trimmed)?, file.display().to_string())))
    }
}

/// Refuses a key file its group or others may read or write (Unix), naming the file, its
/// mode and the fix. A file that can't be looked at is left to the read's own error.
fn check_private(what: &str, file: &Path) -> Result<()> {
    match lethe_iceberg::store::not_private(file) {
        Some(problem) => Err(Error::invalid(format!("the {what} key file {problem}"))),
        None => Ok(()),
    }
}

/// The mode a file written by [`replace_file`] ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// 0600: only the owner (state files holding a subject's values, held rows, keys).
    Private,
    /// The mode (and, where the process may set them, owner and group) of the file replaced;
    /// 0600 when there is none.
    Keep,
    /// The default for a new file (0666 less the umask).
    Default,
}

/// Writes `path` whole or not at all: `write` fills a new temporary file beside it (created
/// with mode 0600, or the default mode for [`FileMode::Default`]; never a leftover reused),
/// which gets its final mode, is flushed to disk (fsync), and is renamed over `path`; the
/// folder is synced so the rename survives a crash. The temporary file is removed when
/// anything fails.
pub fn replace_file(
    path: &Path,
    mode: FileMode,
    write: impl FnOnce(&mut std::fs::File) -> Result<()>,
) -> Result<()> {
    let shown = || path.display().to_string();
    let dir = parent_dir(path);
    let tmp = temp_beside(path)?;
    #[cfg(unix)]
    let old = std::fs::metadata(path).ok();
    let mut opts = match mode {
        FileMode::Default => std::fs::OpenOptions::new(),
        FileMode::Private | FileMode::Keep => private_options(),
    };
    let mut f = opts
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| Error::io(tmp.display().to_string(), e))?;
    let done = (|| -> Result<()> {
        write(&mut f)?;
        #[cfg(unix)]
        if let (FileMode::Keep, Some(old)) = (mode, &old) {
            use std::os::unix::fs::{MetadataExt, PermissionsExt};
            // Owner and group first (a change of owner clears set-id bits), where allowed.
            let _ = std::os::unix::fs::fchown(&f, Some(old.uid()), Some(old.gid()));
            f.set_permissions(std::fs::Permissions::from_mode(old.mode() & 0o7777))
                .map_err(|e| Error::io(tmp.display().to_string(), e))?;
        }
        f.sync_all()
            .map_err(|e| Error::io(tmp.display().to_string(), e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(shown(), e))?;
        // The rename is durable once the folder is.
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// One file for [`replace_files`]: where it goes, the mode it ends with
/// ([`FileMode::Private`] or [`FileMode::Default`]) and its bytes.
#[derive(Debug, Clone)]
pub struct NewFile {
    /// The file replaced or created.
    pub path: PathBuf,
    /// 0600 when true, else the default mode.
    pub private: bool,
    /// Its whole content.
    pub bytes: Vec<u8>,
}

/// Writes many files whole or not at all with one durable barrier for all of them, not one
/// per file: each is written to a new temporary file beside it (as [`replace_file`] does),
/// then every temporary file is made durable at once (Linux: one `syncfs` per filesystem
/// they are on, elsewhere an `fsync` each), then each is renamed over its path and each
/// distinct folder is synced once. A batch of 4,000 requests' records costs two waits on
/// the disk instead of 8,000 (issue 49). `syncfs` also flushes whatever else is dirty on
/// that filesystem, which the erasure that calls this would make durable next anyway.
///
/// A failure before the renames leaves every path as it was (the temporary files are
/// removed); a rename that fails, or a crash during the renames, leaves the files before it
/// new and the others old, each whole, never torn.
pub fn replace_files(files: &[NewFile]) -> Result<()> {
    let mut tmps: Vec<(PathBuf, std::fs::File)> = Vec::with_capacity(files.len());
    let written = (|| -> Result<()> {
        for nf in files {
            let tmp = temp_beside(&nf.path)?;
            let mut opts = if nf.private {
                private_options()
            } else {
                std::fs::OpenOptions::new()
            };
            let f = opts
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(|e| Error::io(tmp.display().to_string(), e))?;
            tmps.push((tmp, f));
            let (tmp, f) = tmps.last_mut().expect("just pushed");
            f.write_all(&nf.bytes)
                .map_err(|e| Error::io(tmp.display().to_string(), e))?;
        }
        sync_files(&tmps)
    })();
    if let Err(e) = written {
        for (t, _) in &tmps {
            let _ = std::fs::remove_file(t);
        }
        return Err(e);
    }
    let mut dirs = std::collections::BTreeSet::new();
    for (i, ((tmp, _), nf)) in tmps.iter().zip(files).enumerate() {
        if let Err(e) = std::fs::rename(tmp, &nf.path) {
            // The files before it are replaced; none after it is, and no temporary file stays.
            for (t, _) in &tmps[i..] {
                let _ = std::fs::remove_file(t);
            }
            return Err(Error::io(nf.path.display().to_string(), e));
        }
        dirs.insert(parent_dir(&nf.path));
    }
    for d in dirs {
        if let Ok(d) = std::fs::File::open(&d) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// The folder a file is in (`.` for a bare name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A new temporary file name beside `path`, never a leftover's.
fn temp_beside(path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{}: not a file name", path.display())))?
        .to_string_lossy();
    Ok(parent_dir(path).join(format!(
        ".{name}.{}.lethe-tmp",
        uuid::Uuid::new_v4().simple()
    )))
}

/// Makes every file durable: on Linux one `syncfs` per filesystem the files are on (a
/// failed write-back of any of them is reported, Linux 5.8 and later); elsewhere an `fsync`
/// each. An error names a file.
fn sync_files(files: &[(PathBuf, std::fs::File)]) -> Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let mut devices = std::collections::BTreeSet::new();
        for (p, f) in files {
            let dev = f
                .metadata()
                .map_err(|e| Error::io(p.display().to_string(), e))?
                .dev();
            if devices.insert(dev) {
                // SAFETY: `f` is an open file descriptor for the whole call; the call reads
                // no memory of ours.
                if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
                    return Err(Error::io(
                        p.display().to_string(),
                        std::io::Error::last_os_error(),
                    ));
                }
            }
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        for (p, f) in files {
            f.sync_all()
                .map_err(|e| Error::io(p.display().to_string(), e))?;
        }
        Ok(())
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
    replace_file(path, FileMode::Private, |f| {
        f.write_all(hex::encode(bytes).as_bytes())
            .map_err(|e| Error::io(path.display().to_string(), e))
    })
}

/// Opens `path` to append, private: created with mode 0600, and an existing file whose mode
/// is looser set to 0600 before anything is written.
pub(crate) fn open_private_append(path: &Path) -> Result<std::fs::File> {
    let f = private_options()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| Error::io(path.display().to_string(), e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = f
            .metadata()
            .map_err(|e| Error::io(path.display().to_string(), e))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            f.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|e| Error::io(path.display().to_string(), e))?;
        }
    }
    Ok(f)
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

/// Where the master keys of encrypted Parquet files come from.
const PARQUET_SOURCE: KeySource = KeySource {
    what: "Parquet master",
    env: "LETHE_PARQUET_KEYS",
    file_env: "LETHE_PARQUET_KEYS_FILE",
};

/// The Parquet master keys of `config`: `$LETHE_PARQUET_KEYS` (the list, `id:base64key`
/// entries), else the file `$LETHE_PARQUET_KEYS_FILE` names, else `[storage.encryption]
/// keys_file` (a file must be private, as every key file). None configured: no keys, and an
/// encrypted file stays unreadable. Errors name the variable or file and the entry's line.
pub fn parquet_keys(config: &crate::config::Config) -> Result<lethe_scan::ParquetKeys> {
    use secrecy::ExposeSecret;
    let configured = config
        .storage
        .encryption
        .as_ref()
        .and_then(|e| e.keys_file.as_ref())
        .map(|f| config.root.join(f));
    let Some((text, source)) = PARQUET_SOURCE.load_with_origin(configured)? else {
        return Ok(lethe_scan::ParquetKeys::default());
    };
    let text = std::str::from_utf8(text.expose_secret())
        .map_err(|_| Error::invalid(format!("the Parquet master keys in {source} are not text")))?;
    let file = lethe_scan::KeyFile::parse(text, &source).map_err(Error::invalid)?;
    Ok(lethe_scan::ParquetKeys::new(std::sync::Arc::new(file)))
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
        write_private(&f, "0123456789abcdef0123\n");
        let key = SOURCE.load(Some(f.clone())).unwrap().unwrap();
        assert_eq!(key.expose_secret().as_slice(), b"0123456789abcdef0123");
        write_private(&f, "short-secret");
        let e = SOURCE.load(Some(f)).unwrap_err().to_string();
        assert!(e.contains("the test key is too short"), "{e}");
        assert!(!e.contains("short-secret"), "{e}");
        let missing = dir.path().join("missing");
        let e = SOURCE.load(Some(missing.clone())).unwrap_err().to_string();
        assert!(e.contains(&missing.display().to_string()), "{e}");
    }

    /// Writes a file with mode 0600.
    fn write_private(f: &Path, text: &str) {
        replace_file(f, FileMode::Private, |w| {
            w.write_all(text.as_bytes()).unwrap();
            Ok(())
        })
        .unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_open_to_group_or_others_is_refused_naming_file_and_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("k");
        write_private(&f, "0123456789abcdef0123");
        for mode in [0o640, 0o604, 0o620, 0o644] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = SOURCE.load(Some(f.clone())).unwrap_err().to_string();
            assert!(
                e.contains(&f.display().to_string())
                    && e.contains(&format!("{mode:04o}"))
                    && e.contains("chmod 600"),
                "{e}"
            );
            assert!(!e.contains("0123456789abcdef"), "{e}");
        }
        for mode in [0o600, 0o400] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            assert!(SOURCE.load(Some(f.clone())).unwrap().is_some());
        }
    }

    #[cfg(unix)]
    #[test]
    fn replace_files_writes_all_with_their_modes_or_none_and_leaves_no_temporary_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("1.json"), "old").unwrap();
        let file = |p: PathBuf, private: bool, text: &str| NewFile {
            path: p,
            private,
            bytes: text.as_bytes().to_vec(),
        };
        let files = vec![
            file(a.join("1.json"), false, "one"),
            file(a.join("2.json"), true, "two"),
            file(b.join("3.json"), false, "three"),
        ];
        replace_files(&files).unwrap();
        assert_eq!(std::fs::read_to_string(a.join("1.json")).unwrap(), "one");
        assert_eq!(std::fs::read_to_string(a.join("2.json")).unwrap(), "two");
        assert_eq!(std::fs::read_to_string(b.join("3.json")).unwrap(), "three");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&a.join("2.json")), 0o600);
        assert_ne!(
            mode(&b.join("3.json")),
            0o600,
            "a default file is not made private"
        );
        // A file that can't be written (its folder is missing): nothing is replaced and no
        // temporary file is left beside the others.
        let broken = vec![
            file(a.join("1.json"), false, "changed"),
            file(dir.path().join("missing").join("4.json"), false, "four"),
        ];
        assert!(replace_files(&broken).is_err());
        assert_eq!(std::fs::read_to_string(a.join("1.json")).unwrap(), "one");
        let names: Vec<_> = std::fs::read_dir(&a)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn replace_file_keeps_the_mode_makes_private_from_the_start_and_reuses_no_leftover() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode_of = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        let f = dir.path().join("export.csv");
        std::fs::write(&f, "a\n1\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
        replace_file(&f, FileMode::Keep, |w| {
            // While it is written, the new file is private.
            let tmp: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.to_string_lossy().ends_with(".lethe-tmp"))
                .collect();
            assert_eq!(tmp.len(), 1);
            assert_eq!(mode_of(&tmp[0]), 0o600);
            w.write_all(b"a\n2\n").unwrap();
            Ok(())
        })
        .unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "a\n2\n");
        assert_eq!(mode_of(&f), 0o640, "the export's mode was lost");
        // Private, over a file that was world-readable.
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        replace_file(&f, FileMode::Private, |w| {
            w.write_all(b"x").unwrap();
            Ok(())
        })
        .unwrap();
        assert_eq!(mode_of(&f), 0o600);
        // A failing write leaves the file as it was and no temporary file.
        let e = replace_file(&f, FileMode::Keep, |_| Err(Error::invalid("stop")));
        assert!(e.is_err());
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "x");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // A random key over a loose leftover: private.
        let k = dir.path().join("k");
        std::fs::write(&k, "old").unwrap();
        std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_random_key(&k).unwrap();
        assert_eq!(mode_of(&k), 0o600);
        // An append log with a loose mode is made private.
        let log = dir.path().join("audit.jsonl");
        std::fs::write(&log, "").unwrap();
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(open_private_append(&log).unwrap());
        assert_eq!(mode_of(&log), 0o600);
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
