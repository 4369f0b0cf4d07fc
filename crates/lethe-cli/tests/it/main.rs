//! lethe's integration tests: one binary, a module per command group (as delta-rs' `it_*`).
//!
//! Tests that read with PyIceberg need `LETHE_PYTHON` (set by `scripts/test.sh`, which
//! installs the venv); they fail, never skip, when it is missing.

mod architecture;
mod ballista;
mod commits;
mod common;
mod consent;
mod deletes;
mod demo;
mod differential;
mod discover;
mod erase;
mod fixtures;
mod foreign;
mod history;
mod integrity;
mod nested;
mod orc;
mod pgtls;
mod plan;
mod privacy;
mod production;
mod prove;
mod proxy;
mod requests;
mod stores;
mod streaming;
mod v3;
mod verdicts;
