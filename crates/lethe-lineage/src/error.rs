//! The crate's one error type.
//!
//! Errors name files, lines, columns and JSON paths inside an event (dataset, job and column
//! names are metadata, not personal values). They never quote a JSON value: a file handed to
//! the parser by mistake may hold personal data, so a value that has the wrong type is described
//! by its JSON kind only ("found a string").

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A lineage file could not be read as OpenLineage RunEvents.
    #[error("{file}:{line}:{column}: {message}")]
    Parse {
        /// The file name given to [`crate::parse_events`].
        file: String,
        /// 1-based line of the problem (for an event that is not a RunEvent: where it starts).
        line: usize,
        /// 1-based column, counted in characters.
        column: usize,
        /// What is wrong, e.g. "not an OpenLineage RunEvent: missing `job`".
        message: String,
    },
    /// A JSON value is not an OpenLineage RunEvent (see [`crate::RunEvent::from_json_value`]).
    #[error("not an OpenLineage RunEvent: {message}")]
    InvalidEvent {
        /// What is wrong, with the JSON path inside the event.
        message: String,
    },
    /// An event could not be written as JSON.
    #[error("cannot write an OpenLineage event as JSON: {message}")]
    Serialize {
        /// The serializer's reason.
        message: String,
    },
    /// The lineage graph ran out of 32-bit ids.
    #[error("lineage graph too large: more than {limit} {what}")]
    Capacity {
        /// What ran out ("datasets", "field names", "column edges", ...).
        what: &'static str,
        /// The largest supported count.
        limit: u64,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
