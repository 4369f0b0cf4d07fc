//! DataFusion plan analysis for lethe.
//!
//! Today this crate computes **column-level lineage** of a SQL query from its DataFusion
//! logical plan ([`column_lineage`]), in OpenLineage terms ([`LineageKind`] × [`Subtype`]),
//! and renders it as an OpenLineage `columnLineage` dataset facet ([`openlineage`]).
//! Lineage is read from the plan, never from the SQL text, and is never guessed: plan
//! nodes it does not understand are errors, and user-defined functions are reported as
//! opaque.
//!
//! [`incremental`] says which output rows of a query a change of its input rows can alter,
//! so that a derived table can be recomputed for those rows only.
//!
//! See the [`lineage`] module for exactly what is and is not guaranteed.

#![warn(missing_docs)]

mod analyze;
mod builtins;
mod deps;
mod error;
pub mod incremental;
pub mod lineage;
pub mod openlineage;

pub use error::{Error, Result};
pub use lineage::{
    ColumnLineage, InputColumn, LineageKind, OPAQUE_PREFIX, OutputColumn, Subtype, column_lineage,
};
