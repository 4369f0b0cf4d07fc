//! Integration tests of lethe-lineage's public API: files as users drop them in (dbt JSON
//! lines, a Spark array, lethe's own pretty JSON) -> parse -> graph -> walk -> DOT.

mod mixed_tools;
