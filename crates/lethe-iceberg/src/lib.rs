//! lethe-iceberg: the Iceberg table mechanics lethe is built on.
//!
//! What it owns: catalogs ([`catalog`]: the Iceberg SQL catalog; the seam for REST and others),
//! file stores ([`store`]), loading tables and their snapshots ([`table`]), reading rows in a
//! table's current schema ([`read`]) with merge-on-read delete files applied ([`deletes`],
//! format v3 deletion vectors in [`deletion_vector`]) and row lineage ([`lineage`]), nested
//! fields by path ([`nested`]), typed row predicates ([`predicate`]), lethe's data-file
//! writer with Iceberg metrics modes ([`writer`], [`metrics`]) and tables' sort orders
//! ([`sort`]), producing snapshots and the
//! commit path ([`snapshot`], [`commit`]), and the table operations built on it ([`ops`]: row
//! rewrites, snapshot expiry, manifest rewrites, the sweep of unreferenced files), plus
//! looking inside tables ([`inspect`]), every live row of a kept snapshot read whole without
//! predicates ([`snapshot_read`], what independent checks read with), and time as a parameter
//! ([`clock`]).
//!
//! What it must not know: subjects, requests, governance files, consent, column lineage
//! (OpenLineage) or the demo. (Row lineage, [`lineage`], is part of the Iceberg format.)
//! Everything here is about tables and files; the erasure job (crate `lethe`) decides which
//! rows and which tables, and this crate changes them correctly.

mod avro_names;
pub mod catalog;
pub mod clock;
pub mod commit;
pub mod deletes;
pub mod deletion_vector;
pub mod error;
pub mod inspect;
pub mod io;
pub mod lineage;
mod manifest_avro;
pub mod metrics;
pub mod nested;
pub mod ops;
mod orc;
mod parsed_cache;
pub mod pg;
pub mod predicate;
pub mod prune;
pub mod read;
pub mod snapshot;
pub mod snapshot_read;
pub mod sort;
pub mod store;
pub mod table;
pub mod writer;

/// A seed for a randomized unit test: `LETHE_TEST_SEED` or a random one; always printed.
#[cfg(test)]
fn test_seed() -> u64 {
    let seed: u64 = std::env::var("LETHE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("seed {seed} (LETHE_TEST_SEED={seed} repeats it)");
    seed
}

/// Table metadata for a unit test: `schema`, unpartitioned, sorted by `order`, format v2, at
/// `location`.
#[cfg(test)]
fn test_metadata(
    schema: iceberg::spec::Schema,
    order: iceberg::spec::SortOrder,
    location: String,
) -> iceberg::spec::TableMetadata {
    iceberg::spec::TableMetadataBuilder::new(
        schema,
        iceberg::spec::UnboundPartitionSpec::builder().build(),
        order,
        location,
        iceberg::spec::FormatVersion::V2,
        Default::default(),
    )
    .unwrap()
    .build()
    .unwrap()
    .metadata
}

pub use error::{Error, Result};
