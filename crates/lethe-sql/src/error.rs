//! The crate's single error type.
//!
//! Messages name plan nodes, expression kinds and columns; they never carry literal values
//! from a query (which could be a person's data), so they are safe to log.

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while analysing a logical plan.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The plan contains a node whose lineage this crate does not know how to compute.
    /// Lineage is never guessed: the caller must treat the query as unresolved.
    #[error("column lineage does not support the logical plan node {node}")]
    UnsupportedPlan {
        /// Name of the plan node (for extensions, the extension's own name).
        node: String,
    },
    /// The plan contains an expression kind this crate does not know how to analyse.
    #[error("column lineage does not support the expression kind {kind}")]
    UnsupportedExpr {
        /// Name of the expression variant.
        kind: String,
    },
    /// An expression refers to a column that none of its input schemas has.
    #[error("column {column} referenced in {node} is not produced by its input")]
    UnresolvedColumn {
        /// The column as the plan names it (`qualifier.name`).
        column: String,
        /// The plan node in which the reference occurs.
        node: String,
    },
    /// The plan nests deeper than the analysis allows (protects the stack).
    #[error("logical plan nests deeper than {limit} levels")]
    TooDeep {
        /// The nesting limit.
        limit: usize,
    },
    /// A broken invariant, e.g. a node whose schema width differs from what its
    /// definition implies. Indicates a bug here or in the plan's producer.
    #[error("internal error in column lineage: {0}")]
    Internal(String),
}
