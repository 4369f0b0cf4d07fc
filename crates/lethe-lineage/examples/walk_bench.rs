//! Benchmark: build a temporal lineage graph from a random layered pipeline and walk it.
//!
//! ```text
//! cargo run --release -p lethe-lineage --example walk_bench -- \
//!     --datasets 100000 --edges 1000000 --seed 42
//! ```
//!
//! Datasets are spread over `--layers` layers; every dataset outside layer 0 is written by its
//! own job whose column lineage reads earlier layers (70% the previous layer). A fifth of the
//! jobs run a second time on a later day with some edges dropped and some added, so edges get
//! closed intervals. About 1% of runs have no column lineage, 0.5% read an external path and
//! 0.5% use an `opaque:` transformation. Events go through JSON (written, then parsed with
//! `parse_events`) unless `--no-json`. The walk starts from `--seed-datasets` datasets of
//! layer 0 with a window starting between the two runs. Times are printed separately for
//! event generation, JSON parsing, graph build and the walk (and DOT output).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use lethe_lineage::{
    ColumnLineageDatasetFacet, GraphBuilder, InputDataset, InputField, Job, OutputDataset,
    RunEvent, Seed, Transformation, parse_events, walk,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uuid::Uuid;

struct Args {
    datasets: usize,
    edges: usize,
    layers: usize,
    fields: usize,
    seed: u64,
    seed_datasets: usize,
    json: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        datasets: 100_000,
        edges: 1_000_000,
        layers: 20,
        fields: 12,
        seed: 42,
        seed_datasets: 10,
        json: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--no-json" {
            a.json = false;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let n: u64 = value
            .parse()
            .map_err(|_| format!("{flag}: not a number: {value}"))?;
        match flag.as_str() {
            "--datasets" => a.datasets = n as usize,
            "--edges" => a.edges = n as usize,
            "--layers" => a.layers = n as usize,
            "--fields" => a.fields = n as usize,
            "--seed" => a.seed = n,
            "--seed-datasets" => a.seed_datasets = n as usize,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.layers < 2 || a.datasets < 2 * a.layers || a.fields == 0 {
        return Err("need --layers >= 2, --datasets >= 2 * layers, --fields >= 1".into());
    }
    Ok(a)
}

fn day(d: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 1, d, 3, 0, 0)
        .single()
        .unwrap_or(DateTime::UNIX_EPOCH)
}

const P: &str = "urn:lethe:walk_bench";

fn name(i: usize) -> String {
    format!("bench.d{i:06}")
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("walk_bench: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "walk_bench: seed={} datasets={} edges={} layers={} fields={} seed_datasets={} json={}",
        args.seed,
        args.datasets,
        args.edges,
        args.layers,
        args.fields,
        args.seed_datasets,
        args.json
    );
    let mut rng = StdRng::seed_from_u64(args.seed);
    let per_layer = args.datasets / args.layers;
    let layer_of = |i: usize| (i / per_layer).min(args.layers - 1);
    let targets: Vec<usize> = (per_layer..args.datasets).collect();
    let per_target = args.edges / targets.len();
    let extra = args.edges % targets.len();

    let resolver = |ns: &str, name: &str| (ns == "bench").then(|| name.to_owned());
    let mut builder = GraphBuilder::new(resolver);
    let (mut t_gen, mut t_write, mut t_json, mut t_build) = (
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
    );
    let mut json_bytes = 0usize;
    let mut events_n = 0usize;
    let field = |rng: &mut StdRng| format!("f{}", rng.random_range(0..args.fields));
    for (k, &target) in targets.iter().enumerate() {
        let t0 = Instant::now();
        let layer = layer_of(target);
        let n_edges = per_target + usize::from(k < extra);
        // (from dataset, from field, to field or None, transformation)
        let mut edges: Vec<(usize, String, Option<String>, Transformation)> =
            Vec::with_capacity(n_edges);
        for _ in 0..n_edges {
            let from_layer = if rng.random_bool(0.7) {
                layer - 1
            } else {
                rng.random_range(0..layer)
            };
            let from = from_layer * per_layer + rng.random_range(0..per_layer);
            let t = match rng.random_range(0..100) {
                0..25 => Transformation::direct("IDENTITY"),
                25..40 => Transformation::direct("TRANSFORMATION"),
                40..65 => Transformation::direct("AGGREGATION"),
                65..80 => Transformation::indirect("JOIN"),
                80..95 => Transformation::indirect("FILTER"),
                _ => Transformation::indirect("GROUP_BY"),
            };
            let to = if rng.random_bool(0.05) {
                None
            } else {
                Some(field(&mut rng))
            };
            edges.push((from, field(&mut rng), to, t));
        }
        let no_lineage = rng.random_bool(0.01);
        let external = rng.random_bool(0.005);
        let opaque = rng.random_bool(0.005);
        let runs = if rng.random_bool(0.2) { 2 } else { 1 };
        let mut batch = Vec::with_capacity(runs);
        for run in 0..runs {
            if run == 1 {
                // The pipeline changed: drop a fifth of the edges, add a few.
                edges.retain(|_| !rng.random_bool(0.2));
                for _ in 0..(n_edges / 10).max(1) {
                    let from = (layer - 1) * per_layer + rng.random_range(0..per_layer);
                    edges.push((
                        from,
                        field(&mut rng),
                        Some(field(&mut rng)),
                        Transformation::direct("IDENTITY"),
                    ));
                }
            }
            let mut cl = ColumnLineageDatasetFacet::new(P);
            let mut inputs: Vec<usize> = Vec::new();
            for (i, (from, f, to, t)) in edges.iter().enumerate() {
                inputs.push(*from);
                let mut t = t.clone();
                if opaque && i == 0 {
                    t = Transformation::direct("TRANSFORMATION")
                        .with_description("opaque: udf scramble()");
                }
                let input = InputField::new("bench", name(*from), f.clone(), [t]);
                cl = match to {
                    Some(to) => cl.with_field(to.clone(), [input]),
                    None => cl.with_dataset_input(input),
                };
            }
            inputs.sort_unstable();
            inputs.dedup();
            let mut output = OutputDataset::new("bench", name(target));
            if !no_lineage {
                output = output.with_column_lineage(cl);
            }
            let run_id = Uuid::from_u128(((target as u128) << 8) | run as u128);
            let mut e = RunEvent::complete(
                P,
                Job::new("bench", format!("job{target:06}")),
                run_id,
                day(1 + 14 * run as u32),
            )
            .with_output(output);
            for i in inputs {
                e = e.with_input(InputDataset::new("bench", name(i)));
            }
            if external {
                e = e.with_input(InputDataset::new(
                    "s3://landing",
                    format!("drop/{target}.parquet"),
                ));
            }
            batch.push(e);
        }
        t_gen += t0.elapsed();
        for e in batch {
            let file = format!("lineage/{target}.json");
            let e = if args.json {
                let t1 = Instant::now();
                let text = match e.to_json_line() {
                    Ok(t) => t,
                    Err(err) => {
                        eprintln!("walk_bench: {err}");
                        return ExitCode::FAILURE;
                    }
                };
                json_bytes += text.len();
                t_write += t1.elapsed();
                let t1 = Instant::now();
                let parsed = parse_events(&file, text.as_bytes());
                t_json += t1.elapsed();
                match parsed {
                    Ok(mut v) if v.len() == 1 => v.remove(0),
                    other => {
                        eprintln!("walk_bench: round trip failed: {:?}", other.err());
                        return ExitCode::FAILURE;
                    }
                }
            } else {
                e
            };
            let t2 = Instant::now();
            if let Err(err) = builder.add_event(&file, &e) {
                eprintln!("walk_bench: {err}");
                return ExitCode::FAILURE;
            }
            t_build += t2.elapsed();
            events_n += 1;
        }
    }
    let t3 = Instant::now();
    let graph = match builder.finish() {
        Ok(g) => g,
        Err(err) => {
            eprintln!("walk_bench: {err}");
            return ExitCode::FAILURE;
        }
    };
    let t_finish = t3.elapsed();
    t_build += t_finish;
    let s = graph.stats();
    println!(
        "graph: {} events, {} runs, {} jobs, {} datasets ({} external), {} field names, {} column edges, {} intervals",
        events_n,
        s.runs,
        s.jobs,
        s.datasets,
        s.external_datasets,
        s.field_names,
        s.column_edges,
        s.intervals
    );
    println!(
        "time: generate events {:.3} s (not part of the build)",
        t_gen.as_secs_f64()
    );
    if args.json {
        println!(
            "time: write JSON lines {:.3} s, parse_events {:.3} s ({:.1} MB, {:.1} MB/s parsed)",
            t_write.as_secs_f64(),
            t_json.as_secs_f64(),
            json_bytes as f64 / 1e6,
            json_bytes as f64 / 1e6 / t_json.as_secs_f64().max(1e-9)
        );
    }
    println!(
        "time: graph build {:.3} s (add_event {:.3} s + finish {:.3} s)",
        t_build.as_secs_f64(),
        (t_build - t_finish).as_secs_f64(),
        t_finish.as_secs_f64()
    );

    let mut seeds = Vec::new();
    for i in 0..args.seed_datasets.min(per_layer) {
        seeds.push(Seed::new(
            name(i * (per_layer / args.seed_datasets.max(1)).max(1)),
            "f0",
            "subject_id",
        ));
    }
    let t4 = Instant::now();
    let w = walk(&graph, day(8), &seeds, |_| vec!["f0".to_owned()]);
    let t_walk = t4.elapsed();
    let holding = w.datasets().filter(|d| d.holds_rows()).count();
    let shaped = w.datasets().filter(|d| d.is_shaped()).count();
    let unresolved = w.datasets().filter(|d| d.is_unresolved()).count();
    let labels: usize = w.datasets().map(|d| d.labels().count()).sum();
    let shaped_edges: usize = w.datasets().map(|d| d.shaped_by().count()).sum();
    println!(
        "walk: {} seeds, window from {}: reached {} datasets ({} hold rows, {} shaped, {} unresolved), {} labelled fields, {} shaping edges",
        seeds.len(),
        day(8).to_rfc3339(),
        w.len(),
        holding,
        shaped,
        unresolved,
        labels,
        shaped_edges
    );
    println!("time: walk {:.3} s", t_walk.as_secs_f64());
    let t5 = Instant::now();
    let dot = w.to_dot();
    println!(
        "time: to_dot {:.3} s ({:.1} MB)",
        t5.elapsed().as_secs_f64(),
        dot.len() as f64 / 1e6
    );
    ExitCode::SUCCESS
}
