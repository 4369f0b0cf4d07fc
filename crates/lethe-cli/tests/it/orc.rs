//! Issue 48: an Iceberg table whose data files are ORC (Spark 3.5 + Iceberg 1.10 with
//! `write.format.default=orc`), erased by lethe: the proof scan sees the subject in the ORC
//! files first, the erasure rewrites the files holding the subject (as Parquet: lethe writes no
//! ORC, see `lethe_iceberg::orc`), and Spark and PyIceberg then read exactly the other rows —
//! nested columns and a column renamed after the first files were written included.

use std::collections::BTreeMap;

use lethe::erasure::case::{RequestSpec, read_case};
use lethe::erasure::erase::{erase, prepare};
use lethe::erasure::prove::prove;
use lethe_demo::fixtures::{GovernanceFiles, init_workspace};

use crate::common::{erase_opts, pyiceberg};
use crate::v3::{spark_batch, spark_env};

const TABLE: &str = "lms.orc_events";
const SUBJECTS: &str = "[learner]\nidentifiers = [\"lms.orc_events.learner_id\"]\n";
const METADATA: &str = r#"
[tables."lms.orc_events"]
owner = "lms"
key = ["event_id"]
[tables."lms.orc_events".columns]
learner_id = { classification = "internal", identifies = "learner" }
contact = "personal"
"#;

/// Spark SQL: the table in ORC, three commits of one file each (the subject in the first and
/// the last, beside other rows), and `email` renamed to `contact` before the last, so that
/// file's column has the new name and the older files' the old one (matched by the
/// `iceberg.id` attribute).
fn create() -> Vec<String> {
    let t = format!("lethe.{TABLE}");
    let row = |id: i64, learner: i64, email: &str, city: &str| {
        format!(
            "({id}, {learner}, '{email}', array('t{id}', 'x'), named_struct('city', '{city}', 'visits', {id}), map('k{id}', 'v'), DATE'2024-01-0{}')",
            1 + id % 3
        )
    };
    vec![
        "CREATE NAMESPACE IF NOT EXISTS lethe.lms".into(),
        format!(
            "CREATE TABLE {t} (event_id bigint, learner_id bigint, email string, tags array<string>, \
             info struct<city: string, visits: int>, attrs map<string, string>, day date) USING iceberg \
             TBLPROPERTIES ('format-version' = '2', 'write.format.default' = 'orc')"
        ),
        format!(
            "INSERT INTO {t} SELECT /*+ COALESCE(1) */ * FROM VALUES {}, {}, {}",
            row(1, 3590, "alexa590@post.example", "Uppsala"),
            row(2, 1001, "b@x.example", "Lund"),
            row(3, 1002, "c@x.example", "Umea")
        ),
        format!(
            "INSERT INTO {t} SELECT /*+ COALESCE(1) */ * FROM VALUES {}, {}",
            row(4, 1003, "d@x.example", "Kiruna"),
            row(5, 1004, "e@x.example", "Malmo")
        ),
        format!("ALTER TABLE {t} RENAME COLUMN email TO contact"),
        format!(
            "INSERT INTO {t} SELECT /*+ COALESCE(1) */ * FROM VALUES {}, {}",
            row(6, 3590, "alexa590@post.example", "Uppsala"),
            row(7, 1005, "f@x.example", "Visby")
        ),
    ]
}

/// Spark's rows by `event_id`.
fn by_id(v: &serde_json::Value) -> BTreeMap<i64, serde_json::Value> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["event_id"].as_i64().unwrap(), r.clone()))
        .collect()
}

/// The live data files' formats, by path.
fn formats(files: &serde_json::Value) -> BTreeMap<String, String> {
    files["data_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let path = f["file_path"].as_str().unwrap().to_string();
            (path, f["file_format"].as_str().unwrap().to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_orc_table_spark_wrote_is_erased_and_reads_back_in_spark_and_pyiceberg() {
    let env = spark_env();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ws");
    let ws = init_workspace(
        &dir,
        GovernanceFiles {
            metadata: METADATA,
            retention: "",
            subjects: SUBJECTS,
        },
    )
    .unwrap();
    let statements = create();
    let mut sql: Vec<&str> = vec!["sql"];
    for s in &statements {
        sql.extend(["--statement", s.as_str()]);
    }
    let out = spark_batch(
        &env,
        &dir,
        &[
            sql,
            vec!["read-table", "--table", TABLE],
            vec!["describe-files", "--table", TABLE],
        ],
    );
    let (before, files_before) = (by_id(&out[1]), formats(&out[2]));
    assert_eq!(before.len(), 7, "{}", out[1]);
    assert!(
        files_before.values().all(|f| f == "ORC") && files_before.len() >= 3,
        "{files_before:?}"
    );

    // The proof scan sees the subject in the ORC files before anything changes.
    let request = RequestSpec {
        request: "erasure-0001".into(),
        subject: "learner".into(),
        id: "3590".into(),
    };
    let gov = ws.governance().unwrap();
    let prepared = prepare(&ws, &gov, std::slice::from_ref(&request), None, &|_| {})
        .await
        .unwrap();
    let seen = prove(&ws, &prepared.cases, &|_| {}).await.unwrap();
    assert!(
        seen.unreadable.is_empty() && seen.hits.iter().any(|h| h.file.ends_with(".orc")),
        "{:#?} {:?}",
        seen.hits,
        seen.unreadable
    );

    let r = erase(&ws, &[request], &erase_opts(), &|_| {})
        .await
        .unwrap();
    assert!(r.journal.finished_at.is_some());
    let case = read_case(&ws, "erasure-0001").unwrap();
    let after = prove(&ws, &[case], &|_| {}).await.unwrap();
    assert!(
        after.is_clean(),
        "{:#?}\n{:?}",
        after.hits,
        after.unreadable
    );

    let out = spark_batch(
        &env,
        &dir,
        &[
            vec!["read-table", "--table", TABLE],
            vec!["describe-files", "--table", TABLE],
        ],
    );
    let expected: BTreeMap<i64, serde_json::Value> = before
        .into_iter()
        .filter(|(_, r)| r["learner_id"] != 3590)
        .collect();
    assert_eq!(
        by_id(&out[0]),
        expected,
        "Spark reads the other rows, unchanged"
    );
    let files_after = formats(&out[1]);
    let kept_orc = files_after.values().filter(|f| *f == "ORC").count();
    let parquet = files_after.values().filter(|f| *f == "PARQUET").count();
    assert!(
        kept_orc >= 1 && parquet >= 1,
        "the file without the subject stays ORC, the rewritten ones are Parquet: {files_after:?}"
    );
    assert!(
        files_after
            .keys()
            .filter(|p| p.ends_with(".orc"))
            .all(|p| files_before.contains_key(p)),
        "no new ORC file"
    );

    let spec_all = TABLE.to_string();
    let spec_subject = format!("{TABLE}?learner_id=3590");
    let py = pyiceberg(&dir, "read_tables.py", &[&spec_all, &spec_subject], None);
    assert_eq!(
        py[&spec_all]["rows"], 5,
        "PyIceberg reads ORC and Parquet: {py}"
    );
    assert_eq!(py[&spec_subject]["rows"], 0, "{py}");
}
