//! `lethe consent set|withdraw|show|check|sync|rebuild`.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use lethe::access::consent::{
    CheckReport, ConsentChange, ConsentState, RebuildReport, SetReport, check, rebuild, set, show,
    sync,
};
use lethe::erasure::case::RequestSpec;
use lethe::erasure::erase::{EraseOptions, erase as run_erase};
use lethe::governance::subjects::SubjectRef;
use lethe::workspace::Workspace;
use lethe_iceberg::clock::{parse_duration, parse_instant};

use crate::out;

#[derive(Debug, Subcommand)]
pub enum ConsentCommand {
    /// Record a consent change (given, refused, withdrawn, expired) and bring the derived
    /// attribute (e.g. crm.learners.marketing_consent) in step. Deletes nothing.
    Set {
        /// The subject, as NAME=ID (e.g. learner=3590).
        #[arg(long)]
        subject: String,
        /// The purpose (a key of [consent.purposes] in governance/policy.toml).
        #[arg(long)]
        purpose: String,
        /// The new state.
        #[arg(long)]
        state: String,
        /// Where the change came from (a form, a ticket...).
        #[arg(long)]
        source: Option<String>,
        /// When it changed (RFC 3339, a day, or an age like 2d; default now).
        #[arg(long)]
        at: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Record a withdrawal. The person stays in every table; from the next query on the
    /// policy's filters leave them out. Tables built under a consent filter keep them until
    /// rebuilt (--rebuild, or `lethe consent check` to see them).
    Withdraw {
        /// The subject, as NAME=ID (e.g. learner=3590).
        #[arg(long)]
        subject: String,
        /// The purpose.
        #[arg(long)]
        purpose: String,
        /// Where the withdrawal came from.
        #[arg(long)]
        source: Option<String>,
        /// When it happened (default now).
        #[arg(long)]
        at: Option<String>,
        /// Then rerun the pipelines whose tables hold people who no longer consent.
        #[arg(long)]
        rebuild: bool,
        /// Then erase the subject (only when the person asked for erasure too: a withdrawal
        /// alone is not an erasure). Needs --request and the register key.
        #[arg(long, requires = "request")]
        erase: bool,
        /// The erasure's request ID (with --erase).
        #[arg(long, requires = "erase")]
        request: Option<String>,
        /// The erasure's sweep minimum file age (with --erase; default retention.toml [sweep]).
        #[arg(long, requires = "erase", value_parser = super::duration_flag)]
        min_age: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// A subject's current consent per purpose and its history.
    Show {
        /// The subject, as NAME=ID.
        #[arg(long)]
        subject: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Compare every table built under a consent filter (pipelines with `-- lethe:consent`)
    /// with current consent; list rows of people who no longer consent, and attributes out of
    /// step. Exit 0 only when everything is in step.
    Check {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Bring the derived attributes in step with the consent records (after a reload).
    Sync {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sync, then rerun every pipeline whose table holds people who no longer consent.
    Rebuild {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(c: ConsentCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    match c {
        ConsentCommand::Set {
            subject,
            purpose,
            state,
            source,
            at,
            json,
        } => {
            let r = record(
                &ws,
                &subject,
                &purpose,
                ConsentState::parse(&state)?,
                source,
                at,
            )
            .await?;
            print_set(&r, json)?;
            Ok(ExitCode::SUCCESS)
        }
        ConsentCommand::Withdraw {
            subject,
            purpose,
            source,
            at,
            rebuild: rebuild_after,
            erase,
            request,
            min_age,
            json,
        } => {
            let r = record(&ws, &subject, &purpose, ConsentState::Withdrawn, source, at).await?;
            let rebuilt = if rebuild_after {
                Some(rebuild(&ws).await?)
            } else {
                None
            };
            let mut code = ExitCode::SUCCESS;
            let mut erased = None;
            if erase {
                let s = SubjectRef::parse(&subject)?;
                let opts = EraseOptions {
                    dry_run: false,
                    min_age: min_age.as_deref().map(parse_duration).transpose()?,
                    accept_incomplete: false,
                    key_file: None,
                    day: None,
                };
                let spec = RequestSpec {
                    request: request.unwrap_or_default(),
                    subject: s.subject,
                    id: s.id,
                };
                match run_erase(&ws, &[spec], &opts, &out::progress_unless(json)).await {
                    Ok(e) => erased = Some(e),
                    Err(lethe::Error::Refused(why)) => {
                        out::progress_done();
                        eprintln!("lethe: erasure refused: {why}");
                        code = ExitCode::from(1);
                    }
                    Err(e) => return Err(e.into()),
                }
                out::progress_done();
            }
            if json {
                out::json(&serde_json::json!({
                    "withdrawal": r,
                    "rebuild": rebuilt,
                    "erasure": erased,
                }))?;
            } else {
                print_set(&r, false)?;
                if let Some(b) = &rebuilt {
                    print_rebuild(b);
                }
                if let Some(e) = &erased {
                    println!(
                        "erasure {}: {} step(s); next: lethe scan --request {}",
                        e.journal.batch,
                        e.journal.steps.len(),
                        e.journal.requests[0].request
                    );
                }
            }
            Ok(code)
        }
        ConsentCommand::Show { subject, json } => {
            let s = show(&ws, &SubjectRef::parse(&subject)?).await?;
            if json {
                out::json(&s)?;
            } else {
                let rows: Vec<Vec<String>> = s
                    .current
                    .iter()
                    .map(|(p, st)| vec![p.clone(), st.to_string()])
                    .collect();
                print!("{}", out::table(&["purpose", "current"], &rows));
                let rows: Vec<Vec<String>> = s
                    .history
                    .iter()
                    .map(|r| {
                        vec![
                            r.changed_at.to_rfc3339(),
                            r.purpose.clone(),
                            r.state.to_string(),
                            r.source.clone().unwrap_or_default(),
                        ]
                    })
                    .collect();
                println!();
                print!(
                    "{}",
                    out::table(&["changed at", "purpose", "state", "source"], &rows)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ConsentCommand::Check { json } => {
            let r = check(&ws).await?;
            if json {
                out::json(&r)?;
            } else {
                print_check(&r);
            }
            Ok(if r.clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        ConsentCommand::Sync { json } => {
            let r = sync(&ws).await?;
            if json {
                out::json(&r)?;
            } else {
                for (t, n) in &r.rows_changed {
                    println!("{t}: {} row(s) brought in step", out::count(*n));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ConsentCommand::Rebuild { json } => {
            let r = rebuild(&ws).await?;
            if json {
                out::json(&r)?;
            } else {
                print_rebuild(&r);
            }
            Ok(if r.after.clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

async fn record(
    ws: &Workspace,
    subject: &str,
    purpose: &str,
    state: ConsentState,
    source: Option<String>,
    at: Option<String>,
) -> anyhow::Result<SetReport> {
    let changed_at = at
        .as_deref()
        .map(|s| parse_instant(s, ws.clock.now()))
        .transpose()?;
    Ok(set(
        ws,
        &ConsentChange {
            subject: SubjectRef::parse(subject)?,
            purpose: purpose.to_string(),
            state,
            source,
            changed_at,
        },
    )
    .await?)
}

fn print_set(r: &SetReport, json: bool) -> anyhow::Result<()> {
    if json {
        return out::json(r);
    }
    println!(
        "recorded: {} {} {} -> {} (was {}; now {})",
        r.record.purpose,
        r.record.subject_id,
        r.record.changed_at.to_rfc3339(),
        r.record.state,
        r.previous,
        r.current
    );
    for (t, n) in &r.sync.rows_changed {
        if *n > 0 {
            println!("{t}: {n} row(s) of derived consent attributes brought in step");
        }
    }
    Ok(())
}

/// Prints a consent check.
pub fn print_check(r: &CheckReport) {
    let rows: Vec<Vec<String>> = r
        .tables
        .iter()
        .map(|t| {
            let shown: Vec<String> = t.stale_ids.iter().take(10).cloned().collect();
            vec![
                t.table.clone(),
                t.pipeline.clone(),
                t.purposes.join(", "),
                out::count(t.rows),
                out::count(t.stale_rows),
                match &t.unchecked {
                    Some(why) => format!("UNCHECKED: {why}"),
                    None if t.stale_ids.len() > shown.len() => {
                        format!("{} ... ({} ids)", shown.join(", "), t.stale_ids.len())
                    }
                    None => shown.join(", "),
                },
            ]
        })
        .collect();
    print!(
        "{}",
        out::table(
            &[
                "table",
                "pipeline",
                "consent",
                "rows",
                "stale rows",
                "ids of people who no longer consent"
            ],
            &rows
        )
    );
    for d in &r.drift {
        println!(
            "drift: {} disagrees with current {} consent in {} row(s): run `lethe consent sync`",
            d.attribute, d.purpose, d.rows
        );
    }
    if r.clean() {
        println!("every consent-built table is in step with current consent");
    } else if r.tables.iter().any(|t| t.stale_rows > 0) {
        println!("rebuild with `lethe consent rebuild` (or `lethe pipeline run NAME`)");
    }
}

fn print_rebuild(r: &RebuildReport) {
    for run in &r.runs {
        println!(
            "rebuilt {} with pipeline {}: {} row(s)",
            run.target,
            run.pipeline,
            out::count(run.rows)
        );
    }
    if r.runs.is_empty() {
        println!("no consent-built table held people who no longer consent");
    }
    print_check(&r.after);
}

/// The README walkthrough's consent step (`lethe demo run`, before the erasure): withdraw a
/// learner's marketing consent, show marketing's query change, find the stale table, rebuild.
pub async fn walkthrough(n: usize, id: i64, config: Option<&Path>) -> anyhow::Result<()> {
    let subject = format!("learner={id}");
    let count = "SELECT count(*) AS learners FROM crm.learners";
    println!(
        "\n== {n}. Withdraw the learner's marketing consent (not an erasure: nothing is deleted, the next query changes)"
    );
    println!("$ lethe query --as marketing-1 \"{count}\"");
    super::query::query(super::query::QueryArgs::plain("marketing-1", count), config).await?;
    println!(
        "$ lethe consent withdraw --subject {subject} --purpose marketing --source \"unsubscribe link\""
    );
    run(
        ConsentCommand::Withdraw {
            subject: subject.clone(),
            purpose: "marketing".into(),
            source: Some("unsubscribe link".into()),
            at: None,
            rebuild: false,
            erase: false,
            request: None,
            min_age: None,
            json: false,
        },
        config,
    )
    .await?;
    println!("$ lethe query --as marketing-1 \"{count}\"");
    super::query::query(super::query::QueryArgs::plain("marketing-1", count), config).await?;
    println!("$ lethe consent check");
    run(ConsentCommand::Check { json: false }, config).await?;
    println!("$ lethe consent rebuild");
    run(ConsentCommand::Rebuild { json: false }, config).await?;
    Ok(())
}
