//! lethe-demo: the demo learning platform ([`platform`]) and the test fixtures
//! ([`fixtures`]: workspaces and tables shaped as other engines leave them).
//!
//! Used by the CLI's `demo` command, the tests and the benchmarks. Nothing in the erasure
//! library (`lethe`) or the table mechanics (`lethe-iceberg`) depends on this crate: the demo
//! is a user of the library, and reaches it only through the catalog, the files it writes and
//! the governance files it ships.

pub mod fixtures;
pub mod platform;
