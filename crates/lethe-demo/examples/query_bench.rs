//! The enforced query path against the same SQL without enforcement, side by side in one run.
//!
//! ```sh
//! lethe demo init --dir /tmp/demo10 --scale 10
//! query_bench --dir /tmp/demo10 --as analyst_gb --runs 7 \
//!     "SELECT kind, count(*) FROM learning.events GROUP BY kind" ...
//! query_bench --dir /tmp/demo10 --as analyst_gb --only enforced "SQL"   # under /usr/bin/time -v
//! ```
//!
//! Both sides get a session built once (raw: every Iceberg table registered as is, as
//! `lethe::pipeline::session` does; enforced: the policy checked against the catalog and a view
//! per granted table), then each query is planned, run and collected `--runs` times,
//! alternating sides so both see the same cache state. The enforced side includes everything
//! `lethe query` does per query: reference checks, plan checks and the audit-log write.
//! Prints the median and minimum per side and the ratio of medians; `--only raw|enforced` runs
//! one side (for peak memory).

use std::time::{Duration, Instant};

use lethe::access::query::Enforcer;
use lethe::config::Config;
use lethe::workspace::Workspace;

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (mut dir, mut principal, mut runs, mut only) = (None, None, 7usize, None);
    let mut queries = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--dir" => dir = args.next(),
            "--as" => principal = args.next(),
            "--runs" => runs = args.next().ok_or("--runs N")?.parse()?,
            "--only" => only = args.next(),
            _ => queries.push(a),
        }
    }
    let dir = dir.ok_or("--dir DEMO_FOLDER")?;
    let principal = principal.ok_or("--as PRINCIPAL")?;
    if queries.is_empty() {
        return Err("give one or more SQL queries".into());
    }
    let ws = Workspace::open(&Config::load(
        &std::path::Path::new(&dir).join("lethe.toml"),
    )?)?;
    let t = Instant::now();
    let raw = lethe::pipeline::session(&ws).await?;
    let raw_setup = t.elapsed();
    let t = Instant::now();
    let enforcer = Enforcer::open(&ws).await?;
    let session = enforcer.session(&principal).await?;
    let enforced_setup = t.elapsed();
    println!(
        "setup: raw session {:.1} ms, enforced (policy checked, views built) {:.1} ms",
        ms(raw_setup),
        ms(enforced_setup)
    );
    for sql in &queries {
        let (mut r, mut e) = (Vec::new(), Vec::new());
        let (mut raw_rows, mut enf_rows) = (0usize, 0usize);
        // One warm-up each, then alternate.
        for i in 0..=runs {
            if only.as_deref() != Some("enforced") {
                let t = Instant::now();
                let batches = raw.sql(sql).await?.collect().await?;
                let d = t.elapsed();
                raw_rows = batches.iter().map(|b| b.num_rows()).sum();
                if i > 0 {
                    r.push(d);
                }
            }
            if only.as_deref() != Some("raw") {
                let t = Instant::now();
                let result = session.query(sql).await?;
                let d = t.elapsed();
                enf_rows = result.rows();
                if i > 0 {
                    e.push(d);
                }
            }
        }
        println!("query: {sql}");
        if !r.is_empty() {
            let min = *r.iter().min().unwrap_or(&Duration::ZERO);
            println!(
                "  raw       median {:8.1} ms  min {:8.1} ms  rows {raw_rows}",
                ms(median(&mut r)),
                ms(min)
            );
        }
        if !e.is_empty() {
            let min = *e.iter().min().unwrap_or(&Duration::ZERO);
            println!(
                "  enforced  median {:8.1} ms  min {:8.1} ms  rows {enf_rows}  (as {principal})",
                ms(median(&mut e)),
                ms(min)
            );
        }
        if !r.is_empty() && !e.is_empty() {
            println!(
                "  ratio (median enforced / median raw) {:.2}x",
                median(&mut e).as_secs_f64() / median(&mut r).as_secs_f64()
            );
        }
    }
    Ok(())
}
