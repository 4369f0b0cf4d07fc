//! `lethe request`: requests as a workflow (open, list, extend, lift, show).

use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use lethe::erasure::intake::{OpenRequest, open};
use lethe::erasure::register::{RegisterKey, default_key_file};
use lethe::governance::retention::parse_day;
use lethe::governance::subjects::SubjectRef;
use lethe::requests::{Kind, Requests};

use crate::out;

/// `lethe request ...`
#[derive(Debug, Subcommand)]
pub enum RequestCommand {
    /// Record a request a controller instructed: an erasure, or a restriction (which never
    /// deletes: from now on the subject's rows are left out of queries and pipelines).
    ///
    /// The due date is one month after --received (GDPR Art. 12(3)). The subject is kept only
    /// as the register's keyed hash, its ID in the request's case file (mode 0600). Needs the
    /// register key. Prints the request ID.
    Open(OpenArgs),
    /// Every request with its state and days left on --day; exit 1 when any is overdue.
    List(ListArgs),
    /// Move a request's due date by 1 or 2 months, with the reason the subject is given (at
    /// most three months from receipt in all).
    Extend(ExtendArgs),
    /// Lift a restriction: the subject's rows are back in queries and pipeline inputs.
    Lift(LiftArgs),
    /// One request's record: kind, controller, dates, extensions, state, history.
    Show(ShowArgs),
}

/// Arguments of `lethe request open`.
#[derive(Debug, Args)]
pub struct OpenArgs {
    /// erasure or restriction.
    #[arg(long, value_parser = ["erasure", "restriction"])]
    kind: String,
    /// The subject, as NAME=ID (e.g. learner=3590).
    #[arg(long)]
    subject: String,
    /// The day the request was received (YYYY-MM-DD): the due date counts from it.
    #[arg(long, value_name = "DAY")]
    received: String,
    /// The controller that instructed it (lethe acts as the processor).
    #[arg(long, value_name = "CONTROLLER")]
    instructed_by: Option<String>,
    /// The controller's reference for it (a legal hold may name it).
    #[arg(long, value_name = "TEXT")]
    reference: Option<String>,
    /// The request ID (default: `<kind>-<received day>-<n>`).
    #[arg(long)]
    request: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `lethe request list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The day to count from (YYYY-MM-DD): never the clock.
    #[arg(long, value_name = "DAY")]
    day: String,
    /// Only overdue requests.
    #[arg(long)]
    overdue: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `lethe request extend`.
#[derive(Debug, Args)]
pub struct ExtendArgs {
    /// The request.
    request: String,
    /// Months to add (1 or 2; at most 2 in all).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=2))]
    months: u32,
    /// Why: the reason the subject is told.
    #[arg(long)]
    reason: String,
    /// The day the extension is recorded (YYYY-MM-DD).
    #[arg(long, value_name = "DAY")]
    day: String,
}

/// Arguments of `lethe request lift`.
#[derive(Debug, Args)]
pub struct LiftArgs {
    /// The restriction request.
    request: String,
    /// The day it is lifted (YYYY-MM-DD).
    #[arg(long, value_name = "DAY")]
    day: String,
}

/// Arguments of `lethe request show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The request.
    request: String,
    /// Days left are counted from this day (YYYY-MM-DD).
    #[arg(long, value_name = "DAY")]
    day: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(c: RequestCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let records = Requests::in_state(&ws.config.paths.state);
    match c {
        RequestCommand::Open(a) => {
            let kind: Kind = a.kind.parse()?;
            let received = parse_day(&a.received)?;
            let subject = SubjectRef::parse(&a.subject)?;
            let id = match a.request {
                Some(id) => id,
                None => {
                    let stem = format!("{kind}-{}", received.format("%Y%m%d"));
                    let n = (1..)
                        .find(|n| {
                            records
                                .find(&format!("{stem}-{n}"))
                                .map(|r| r.is_none())
                                .unwrap_or(true)
                        })
                        .unwrap_or(1);
                    format!("{stem}-{n}")
                }
            };
            let key = RegisterKey::load(default_key_file(&ws).as_deref())?;
            let quiet = a.json;
            let r = open(
                &ws,
                &OpenRequest {
                    id,
                    kind,
                    subject,
                    received,
                    controller: a.instructed_by,
                    reference: a.reference,
                },
                &key,
                &out::progress_unless(quiet),
            )
            .await?;
            out::progress_done();
            if a.json {
                out::json(&r)?;
            } else {
                println!(
                    "{} request {} received {}, due {}; {}",
                    r.kind, r.id, r.received, r.due, r.state
                );
                if r.kind == Kind::Restriction {
                    println!(
                        "the subject's rows are left out of `lethe query` and of every pipeline's inputs until `lethe request lift {}`",
                        r.id
                    );
                } else {
                    println!("next: lethe erase --request {}", r.id);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        RequestCommand::List(a) => {
            let day = parse_day(&a.day)?;
            let all = lethe::requests::list(&ws.config.paths.state, day)?;
            let any_overdue = all.iter().any(|r| r.overdue);
            let shown: Vec<_> = all
                .into_iter()
                .filter(|r| !a.overdue || r.overdue)
                .collect();
            if a.json {
                out::json(&shown)?;
            } else {
                let rows: Vec<Vec<String>> = shown
                    .iter()
                    .map(|r| {
                        vec![
                            r.id.clone(),
                            r.kind.to_string(),
                            r.state.to_string(),
                            r.controller.clone().unwrap_or_else(|| "-".into()),
                            r.received.to_string(),
                            r.due.to_string(),
                            if r.overdue {
                                format!("OVERDUE by {}", -r.days_left)
                            } else if r.state.answered() {
                                "answered".into()
                            } else {
                                r.days_left.to_string()
                            },
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    out::table(
                        &[
                            "request",
                            "kind",
                            "state",
                            "controller",
                            "received",
                            "due",
                            "days left"
                        ],
                        &rows
                    )
                );
            }
            Ok(if any_overdue {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        RequestCommand::Extend(a) => {
            let day = parse_day(&a.day)?;
            let mut r = records.get(&a.request)?;
            r.extend(a.months, &a.reason, day)?;
            records.save(&r)?;
            let e = r.extensions.last().expect("just extended");
            println!(
                "request {} extended by {} month(s): due {} (was {}){}",
                r.id,
                e.months,
                e.due_after,
                e.due_before,
                if e.late {
                    "; note: recorded after the due day it extends"
                } else {
                    ""
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        RequestCommand::Lift(a) => {
            let day = parse_day(&a.day)?;
            let mut r = records.get(&a.request)?;
            r.lift(day, "lethe request lift")?;
            records.save(&r)?;
            println!(
                "restriction {} lifted on {day}: the subject's rows are back in queries and pipeline inputs",
                r.id
            );
            Ok(ExitCode::SUCCESS)
        }
        RequestCommand::Show(a) => {
            let r = records.get(&a.request)?;
            let day = a.day.as_deref().map(parse_day).transpose()?;
            if a.json {
                out::json(&r)?;
                return Ok(ExitCode::SUCCESS);
            }
            println!("request {} ({})", r.id, r.kind);
            println!(
                "  subject: {} (register hash {})",
                r.subject, r.subject_hash
            );
            if let Some(c) = &r.controller {
                println!("  instructed by: {c}");
            }
            if let Some(x) = &r.reference {
                println!("  reference: {x}");
            }
            println!("  received {}, due {}", r.received, r.due);
            if let Some(d) = day {
                println!(
                    "  on {d}: {}",
                    if r.overdue(d) {
                        format!("OVERDUE by {} day(s)", -r.days_left(d))
                    } else if r.state.answered() {
                        "answered".into()
                    } else {
                        format!("{} day(s) left", r.days_left(d))
                    }
                );
            }
            for e in &r.extensions {
                println!(
                    "  extended by {} month(s) on {}: {}",
                    e.months, e.recorded_on, e.reason
                );
            }
            println!("  state: {}", r.state);
            for h in &r.history {
                println!("    {}  {}  {}", h.at, h.state, h.note);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
