//! The course assistant's evaluation set: support questions and expected answers, kept on
//! purpose in a Git repository (`evalset/`, JSON lines in `cases/support.jsonl`) and versioned,
//! so a case deleted from the branch survives in history. One case was drawn from a ticket of
//! learner 3590 and was later corrected: two versions of it are in history, the first of them
//! also under the annotated tag `v1`.

use std::path::Path;

use git2::{Repository, Signature, Time};

use lethe::error::{Error, Result};

use super::data::DEMO_LEARNER;

/// The repository folder, relative to the demo folder.
pub const EVALSET: &str = "evalset";
/// The dataset file inside it.
pub const CASES: &str = "cases/support.jsonl";
/// The case id of the learner's case (for tests that look for it in every object).
pub const DEMO_CASE: &str = "eval-0004";

fn err(e: git2::Error) -> Error {
    Error::invalid(format!("the demo's evaluation set: {}", e.message()))
}

fn case(id: usize, learner: i64, question: &str, expected: &str) -> String {
    serde_json::json!({
        "case_id": format!("eval-{id:04}"),
        "learner_id": learner,
        "question": question,
        "expected": expected,
    })
    .to_string()
}

fn commit(repo: &Repository, text: &str, message: &str, at: i64) -> Result<git2::Oid> {
    let mut index = repo.index().map_err(err)?;
    let blob = repo.blob(text.as_bytes()).map_err(err)?;
    let entry = git2::IndexEntry {
        ctime: git2::IndexTime::new(0, 0),
        mtime: git2::IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode: 0o100644,
        uid: 0,
        gid: 0,
        file_size: text.len() as u32,
        id: blob,
        flags: CASES.len() as u16,
        flags_extended: 0,
        path: CASES.as_bytes().to_vec(),
    };
    index.add(&entry).map_err(err)?;
    let readme = repo
        .blob(b"# Course assistant evaluation set\n\nOne JSON case per line; `learner_id` names the learner whose ticket the case came from.\n")
        .map_err(err)?;
    index
        .add(&git2::IndexEntry {
            path: b"README.md".to_vec(),
            id: readme,
            flags: 9,
            ..entry
        })
        .map_err(err)?;
    index.write().map_err(err)?;
    let tree = repo
        .find_tree(index.write_tree().map_err(err)?)
        .map_err(err)?;
    let sig =
        Signature::new("ml team", "ml-team@platform.example", &Time::new(at, 0)).map_err(err)?;
    let parents: Vec<git2::Commit> = match repo.head().ok().and_then(|h| h.peel_to_commit().ok()) {
        Some(c) => vec![c],
        None => vec![],
    };
    let refs: Vec<&git2::Commit> = parents.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &refs)
        .map_err(err)
}

/// Creates the evaluation set's repository in `dir/evalset` with four commits and a tag; the
/// work tree is checked out.
pub fn create(dir: &Path) -> Result<()> {
    let path = dir.join(EVALSET);
    let repo = Repository::init(&path).map_err(err)?;
    let base = [
        case(
            1,
            12,
            "How do I reset my password?",
            "Use 'Forgot password' on the sign-in page.",
        ),
        case(
            2,
            77,
            "Can I get an invoice with my company's address?",
            "Yes: Billing > Invoices > Edit address.",
        ),
        case(
            3,
            1500,
            "The video stops after a minute.",
            "Clear the cache or try another browser.",
        ),
    ];
    let mut text = base.join("\n") + "\n";
    commit(
        &repo,
        &text,
        "eval set: first cases from support",
        1_767_225_600,
    )?;
    let learner_case_v1 = case(
        4,
        DEMO_LEARNER,
        "My certificate for Advanced SQL is missing.",
        "Certificates appear 24h after the last lesson.",
    );
    text.push_str(&learner_case_v1);
    text.push('\n');
    text.push_str(&case(
        5,
        2048,
        "Can I pause my subscription?",
        "Yes, for up to three months.",
    ));
    text.push('\n');
    let v1 = commit(
        &repo,
        &text,
        "eval set: certificate and subscription cases",
        1_769_904_000,
    )?;
    let sig = Signature::new(
        "ml team",
        "ml-team@platform.example",
        &Time::new(1_769_904_100, 0),
    )
    .map_err(err)?;
    repo.tag(
        "v1",
        &repo.find_object(v1, None).map_err(err)?,
        &sig,
        "evaluation set v1",
        false,
    )
    .map_err(err)?;
    let learner_case_v2 = case(
        4,
        DEMO_LEARNER,
        "My certificate for Advanced SQL is missing after I finished the course.",
        "Certificates appear within 24 hours of the last lesson; support can issue it by hand.",
    );
    text = text.replace(&learner_case_v1, &learner_case_v2);
    commit(
        &repo,
        &text,
        "eval set: sharpen the certificate case",
        1_772_323_200,
    )?;
    text.push_str(&case(
        6,
        4096,
        "Is there a student discount?",
        "Yes, 30% with a student email.",
    ));
    text.push('\n');
    commit(&repo, &text, "eval set: discount case", 1_775_001_600)?;
    repo.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))
        .map_err(err)?;
    Ok(())
}
