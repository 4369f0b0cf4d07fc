//! Integration tests of lethe-sql: lineage of real DataFusion plans over the demo schema.

mod constructs;
mod fixtures;
mod pipelines;
