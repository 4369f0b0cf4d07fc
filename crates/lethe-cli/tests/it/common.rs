//! Fixtures shared by the integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lethe::config::Config;
use lethe::workspace::Workspace;
use lethe_demo::platform::appdb::AppDb;
use lethe_demo::platform::{DemoOptions, init};

/// A demo platform built in a temporary folder.
pub struct Demo {
    /// Keeps the folder alive.
    pub tmp: tempfile::TempDir,
    /// The demo folder.
    pub dir: PathBuf,
    /// Its workspace.
    pub ws: Workspace,
}

impl Demo {
    /// Builds the demo at scale 1 with seed 42.
    pub async fn new() -> Demo {
        Demo::with_seed(42).await
    }

    /// Builds the demo with a seed.
    pub async fn with_seed(seed: u64) -> Demo {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("demo");
        init(&DemoOptions::embedded(dir.clone(), 1, seed, false), &|_| {})
            .await
            .expect("demo init");
        let ws = Workspace::open(&Config::load(&dir.join("lethe.toml")).expect("config"))
            .expect("workspace");
        Demo { tmp, dir, ws }
    }

    /// Builds the demo with its stores (application database, evaluation set, search index,
    /// vendor) registered in governance/stores.toml.
    pub async fn with_stores(app_db: AppDb) -> Demo {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("demo");
        init(
            &DemoOptions {
                app_db,
                stores: true,
                ..DemoOptions::new(dir.clone())
            },
            &|_| {},
        )
        .await
        .expect("demo init");
        let ws = Workspace::open(&Config::load(&dir.join("lethe.toml")).expect("config"))
            .expect("workspace");
        Demo { tmp, dir, ws }
    }

    /// Starts this demo's vendor API (in the test's runtime) on the port its stores.toml names.
    pub async fn vendor(&self) -> lethe_demo::platform::vendor::Vendor {
        let url = lethe_demo::platform::vendor_url(&self.dir)
            .expect("stores.toml")
            .expect("a helpdesk store");
        let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
        lethe_demo::platform::vendor::Vendor::start(&self.dir, port)
            .await
            .expect("vendor")
    }

    /// Runs the `lethe` binary with this demo's configuration.
    pub fn lethe(&self, args: &[&str]) -> Output {
        lethe_in(&self.dir, args)
    }

    /// Runs `lethe` with extra environment variables; asserts the exit code, returns stdout.
    pub fn lethe_env(&self, args: &[&str], env: &[(&str, &str)], code: i32) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_lethe"))
            .args(args)
            .current_dir(&self.dir)
            .env_remove("LETHE_REGISTER_KEY")
            .env_remove("LETHE_CONFIG")
            .envs(env.iter().copied())
            .output()
            .expect("run lethe");
        assert_eq!(
            out.status.code(),
            Some(code),
            "lethe {args:?} exited {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `lethe` and returns stdout, asserting the exit code.
    pub fn lethe_ok(&self, args: &[&str], code: i32) -> String {
        let out = self.lethe(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "lethe {args:?} exited {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Reloads the workspace (after the binary changed the catalog).
    pub fn reload(&mut self) {
        self.ws = Workspace::open(&Config::load(&self.dir.join("lethe.toml")).expect("config"))
            .expect("workspace");
    }
}

/// Erase options for tests: a real erasure (not a dry run) whose sweep removes unreferenced
/// files of any age, refusing incomplete plans, with the register key from the environment.
pub fn erase_opts() -> lethe::erasure::erase::EraseOptions {
    lethe::erasure::erase::EraseOptions {
        dry_run: false,
        min_age: Some(chrono::Duration::zero()),
        accept_incomplete: false,
        key_file: None,
        day: None,
    }
}

/// Runs the `lethe` binary in `dir` (which holds lethe.toml).
pub fn lethe_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lethe"))
        .args(args)
        .current_dir(dir)
        .env_remove("LETHE_REGISTER_KEY")
        .env_remove("LETHE_CONFIG")
        .output()
        .expect("run lethe")
}

/// The Python with PyIceberg 0.12 (`LETHE_PYTHON`). Panics with instructions when unset:
/// interop tests never pass by skipping.
pub fn python() -> String {
    std::env::var("LETHE_PYTHON").unwrap_or_else(|_| {
        panic!("LETHE_PYTHON is not set: run the tests with `bash scripts/test.sh`, which installs PyIceberg 0.12 and sets it")
    })
}

/// The Spark engine's settings, as `scripts/spark-env.sh` prints them (KEY=VALUE lines).
/// Panics when the script can't provide Spark: without Java 17/11 (exit 3) the Spark interop
/// tests fail, they never pass by skipping (issue 44, item 17); `scripts/test.sh` installs a
/// JDK 17 from Debian first when none is present.
pub fn spark_env_from_script() -> Vec<(String, String)> {
    let script = interop_dir().join("../../scripts/spark-env.sh");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .expect("run scripts/spark-env.sh");
    spark_vars(
        out.status.code(),
        &String::from_utf8_lossy(&out.stdout),
        &String::from_utf8_lossy(&out.stderr),
    )
}

/// The variables of spark-env.sh's output; panics, saying why, unless it exited 0.
pub fn spark_vars(code: Option<i32>, stdout: &str, stderr: &str) -> Vec<(String, String)> {
    match code {
        Some(0) => stdout
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        Some(3) => panic!(
            "Spark interop can't run: no Java 17 or 11. Run the tests with `bash scripts/test.sh` (it installs openjdk-17-jdk-headless from Debian) or install it yourself.\n{}",
            stderr.trim()
        ),
        _ => panic!("scripts/spark-env.sh failed ({code:?}):\n{stderr}"),
    }
}

/// Issue 44 (item 17): a machine without Java 17/11 (spark-env.sh exits 3) fails the Spark
/// tests; it used to make them return early, passing.
#[test]
#[should_panic(expected = "Spark interop can't run: no Java 17 or 11")]
fn spark_without_java_fails_instead_of_skipping() {
    spark_vars(
        Some(3),
        "",
        "spark-env: no Java 17 or 11 found (Spark 3.5 needs one; found: no java on PATH).",
    );
}

/// Runs one of tests/interop/*.py against a demo; returns its JSON output.
pub fn pyiceberg(
    demo_dir: &Path,
    script: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> serde_json::Value {
    let root = interop_dir();
    let mut cmd = Command::new(python());
    cmd.arg(root.join(script))
        .arg(demo_dir.join("catalog.db"))
        .arg(demo_dir.join("warehouse"))
        .arg("lethe")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("run python");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().expect("python output");
    assert!(
        out.status.success(),
        "{script} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("python printed JSON")
}

/// A seed for randomized tests: `LETHE_TEST_SEED` or a fixed default; always printed.
pub fn seed(default: u64) -> u64 {
    let s = std::env::var("LETHE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    eprintln!("seed: {s} (set LETHE_TEST_SEED to replay)");
    s
}

/// The repository's `tests/interop` folder. The manifest folder is read at run time (cargo
/// sets it for tests), so a test binary reused from a target folder another checkout built
/// still finds this checkout's scripts.
pub fn interop_dir() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest.join("../../tests/interop")
}

/// The bloom filters of `column` (its dotted path) in the row groups of the local data file at
/// `location`, read with parquet's own reader (row groups without one are left out).
pub fn column_blooms(location: &str, column: &str) -> Vec<parquet::bloom_filter::Sbbf> {
    use parquet::file::properties::ReaderProperties;
    use parquet::file::reader::FileReader;
    use parquet::file::serialized_reader::{ReadOptionsBuilder, SerializedFileReader};
    let path = lethe_iceberg::store::normalize_local(location).unwrap();
    let opts = ReadOptionsBuilder::new()
        .with_reader_properties(
            ReaderProperties::builder()
                .set_read_bloom_filter(true)
                .build(),
        )
        .build();
    let r =
        SerializedFileReader::new_with_options(std::fs::File::open(path).unwrap(), opts).unwrap();
    (0..r.num_row_groups())
        .filter_map(|i| {
            let rg = r.get_row_group(i).unwrap();
            let c = (0..rg.num_columns())
                .find(|c| rg.metadata().column(*c).column_path().string() == column)?;
            rg.get_column_bloom_filter(c).cloned()
        })
        .collect()
}

/// A lethe folder over a warehouse another engine wrote (`lethe init` in `home`), whose commands
/// run with a register key in the environment.
pub struct Folder {
    /// The folder holding lethe.toml.
    pub home: PathBuf,
    key: String,
}

impl Folder {
    /// `lethe init` in `home` for the SQLite catalog and warehouse folder under `src`.
    pub fn init(home: &Path, src: &Path, key: &str) -> Folder {
        std::fs::create_dir_all(home).unwrap();
        let f = Folder {
            home: home.to_path_buf(),
            key: key.to_string(),
        };
        let catalog = format!("sqlite:///{}", src.join("catalog.db").display());
        let warehouse = src.join("warehouse").display().to_string();
        f.run(
            &["init", "--catalog", &catalog, "--warehouse", &warehouse],
            0,
        );
        f
    }

    /// Runs lethe in the folder.
    pub fn lethe(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_lethe"))
            .args(args)
            .current_dir(&self.home)
            .env_remove("LETHE_CONFIG")
            .env_remove("LETHE_REGISTER_KEY_FILE")
            .env("LETHE_REGISTER_KEY", &self.key)
            .output()
            .expect("run lethe")
    }

    /// Runs lethe, expects exit `code`, returns stdout.
    pub fn run(&self, args: &[&str], code: i32) -> String {
        let out = self.lethe(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "lethe {args:?} exited {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// [`Folder::run`], its output parsed as JSON.
    pub fn json(&self, args: &[&str], code: i32) -> serde_json::Value {
        serde_json::from_str(&self.run(args, code)).expect("JSON")
    }
}

/// Writes a key file as lethe requires it: readable by its owner only (mode 0600).
pub fn write_private(path: &Path, bytes: impl AsRef<[u8]>) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    f.write_all(bytes.as_ref()).unwrap();
}
