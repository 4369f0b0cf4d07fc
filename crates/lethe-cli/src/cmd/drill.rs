//! `lethe drill`: the weekly erasure drill on a synthetic subject.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use lethe::erasure::drill::{DrillOptions, drill as run_drill};
use lethe_iceberg::clock::parse_duration;

use crate::out;

/// Arguments of `lethe drill`.
#[derive(Debug, Args)]
pub struct DrillArgs {
    /// The subject kind (default: the only one in subjects.toml).
    #[arg(long)]
    subject: Option<String>,
    /// Keep the drill's records (request, journal, attestation, register entry) for review.
    #[arg(long)]
    keep: bool,
    /// The sweep's minimum file age (default: governance/retention.toml [sweep], 72h). The
    /// drill's own files are that young: use 0s only when a single process writes the catalog.
    #[arg(long, value_parser = super::duration_flag)]
    min_age: Option<String>,
    /// The day (YYYY-MM-DD; default: today).
    #[arg(long, value_name = "DAY")]
    day: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub async fn drill(a: DrillArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let gov = ws.governance()?;
    let subject = match a.subject {
        Some(s) => s,
        None => {
            let names: Vec<&String> = gov.subjects.value.keys().collect();
            match names.as_slice() {
                [one] => (*one).clone(),
                _ => anyhow::bail!("name the subject kind with --subject"),
            }
        }
    };
    let opts = DrillOptions {
        keep: a.keep,
        min_age: a.min_age.as_deref().map(parse_duration).transpose()?,
        day: a
            .day
            .as_deref()
            .map(lethe::governance::retention::parse_day)
            .transpose()?,
    };
    let quiet = a.json;
    let r = run_drill(&ws, &subject, &opts, &out::progress_unless(quiet)).await?;
    out::progress_done();
    if a.json {
        out::json(&r)?;
    } else {
        println!(
            "drill {} ({} {}, synthetic): {} table(s) seeded, reached {} table(s)",
            r.request,
            r.subject,
            r.synthetic_id,
            r.seeded.len(),
            r.reached.len()
        );
        let rows: Vec<Vec<String>> = r
            .times
            .iter()
            .map(|t| {
                vec![
                    t.system.clone(),
                    format!("{:.2}", t.seed_seconds),
                    format!("{:.2}", t.pipeline_seconds),
                    format!("{:.2}", t.erase_seconds),
                    format!(
                        "{:.2}",
                        t.seed_seconds + t.pipeline_seconds + t.erase_seconds
                    ),
                ]
            })
            .collect();
        print!(
            "{}",
            out::table(
                &["system", "seed s", "pipeline s", "erase s", "total s"],
                &rows
            )
        );
        if r.stores.is_empty() {
            println!("stores outside the warehouse: none drilled");
        } else {
            let rows: Vec<Vec<String>> = r
                .stores
                .iter()
                .map(|s| {
                    vec![
                        s.store.clone(),
                        s.kind.clone(),
                        s.seeded.to_string(),
                        s.deleted.to_string(),
                        s.residual.map_or("-".into(), |n| n.to_string()),
                        s.state.clone(),
                        s.removed_after.to_string(),
                    ]
                })
                .collect();
            print!(
                "{}",
                out::table(
                    &[
                        "store",
                        "kind",
                        "seeded",
                        "deleted",
                        "residual",
                        "state",
                        "removed after"
                    ],
                    &rows
                )
            );
        }
        for n in &r.notes {
            println!("note: {n}");
        }
        if let Some((l, p)) = &r.verdict {
            println!("attestation: logical {l}, physical {p}");
        }
        for f in &r.failures {
            println!("FAIL {f}");
        }
        println!(
            "{} in {:.1}s",
            if r.passed() { "PASSED" } else { "FAILED" },
            r.seconds
        );
    }
    Ok(if r.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
