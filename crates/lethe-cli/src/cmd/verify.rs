//! `lethe verify`: re-probe the stores an erasure left pending.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use lethe::erasure::erase::{find_request, verify_pending};

use crate::out;

/// Arguments of `lethe verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The request whose pending stores to probe again.
    #[arg(long)]
    request: String,
    /// The day it is, for stores left to their retention (default: today). A store pending
    /// retention until a day is probed only on or after that day.
    #[arg(long, value_name = "YYYY-MM-DD")]
    day: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub async fn verify(a: VerifyArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let mut j = find_request(&ws, &a.request)?
        .ok_or_else(|| anyhow::anyhow!("no erasure with request {}", a.request))?;
    let today = match &a.day {
        Some(d) => d
            .parse::<chrono::NaiveDate>()
            .map_err(|_| anyhow::anyhow!("--day `{d}` is not a date (YYYY-MM-DD)"))?,
        None => ws.clock.now().date_naive(),
    };
    let quiet = a.json;
    // Snapshots the erasure replaced and kept for a grace: expired once the grace has passed.
    let graced = lethe::erasure::erase::grace_pending(&j);
    let cleaned = if j.is_finished() {
        lethe::erasure::erase::run_pending_cleanup(&ws, &mut j, &out::progress_unless(quiet))
            .await?
    } else {
        false
    };
    let grace_left = lethe::erasure::erase::grace_pending(&j);
    let outcomes = verify_pending(&ws, &mut j, today, &out::progress_unless(quiet)).await?;
    out::progress_done();
    let m = lethe::erasure::manifest::of_request(&ws, &j, &a.request, None)?;
    // A store a legal hold keeps waits for the hold's end, not for verify.
    let settled = j.stores.iter().all(|s| {
        matches!(
            s.state,
            lethe::erasure::erase::StoreState::Verified
                | lethe::erasure::erase::StoreState::HandedOff
                | lethe::erasure::erase::StoreState::Held
        )
    });
    let settled = settled && grace_left.is_empty();
    if a.json {
        out::json(&serde_json::json!({
            "probed": outcomes,
            "manifest": m,
            "grace_pending": grace_left,
            "cleaned_up": cleaned,
        }))?;
    } else {
        for (t, until) in &graced {
            match grace_left.iter().find(|(g, _)| g == t) {
                Some((_, u)) => println!(
                    "{t}: the snapshots the erasure replaced are kept until {u} ([snapshots] grace_seconds); run lethe verify --request {} after then",
                    a.request
                ),
                None => println!(
                    "{t}: the snapshots the erasure replaced (kept until {until}) are expired"
                ),
            }
        }
        if outcomes.is_empty() {
            println!("no store of {} was pending", a.request);
        }
        for o in &outcomes {
            println!("{}: {} -> {} ({})", o.store, o.was, o.now, o.detail);
        }
        super::erase::print_manifest(&m);
        if settled {
            println!(
                "next: lethe scan --request {r} && lethe attest --request {r}",
                r = a.request
            );
        }
    }
    Ok(if settled {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

impl VerifyArgs {
    /// A request, text output, today.
    pub fn plain(request: &str) -> Self {
        VerifyArgs {
            request: request.into(),
            day: None,
            json: false,
        }
    }
}
