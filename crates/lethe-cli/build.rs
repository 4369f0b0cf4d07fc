//! Links the `lethe` binary as a position-dependent executable on x86_64 Linux with glibc.
//!
//! A position-independent executable of lethe's size (DataFusion, iceberg, parquet, the S3 and
//! PostgreSQL clients) carries ~280,000 relative relocations that the loader applies at every
//! start, writing 1,200 pages of read-only-after-relocation data: 5 ms and 1,250 page faults
//! before `main`, against 2 ms for the whole of `lethe --version` without them
//! (BENCHMARKS.md section 36). lethe runs as many short processes (an erasure at scale 1 is
//! ~0.1 s), so that start is a visible share of each. What it gives up is the executable's
//! own address randomisation (libraries, stack and heap are still randomised), as Go's
//! binaries on Linux do by default. Other targets keep the toolchain's default.
fn main() {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let static_crt = var("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    if var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && !static_crt
    {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
