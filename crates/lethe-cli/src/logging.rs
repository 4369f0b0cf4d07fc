//! The log: `-v` (info), `-vv` (debug) or `LETHE_LOG` (an `EnvFilter` directive), on stderr.
//!
//! Whatever is asked, events of other crates' targets (DataFusion, sqlparser, tokio-postgres,
//! the `iceberg` crate, Ballista, HTTP and TLS clients, Avro...) pass at info level at most:
//! at debug they print statements' parameters (tokio-postgres: `executing statement … with
//! parameters: [[3590]]`), the SQL they parse and the plans they optimize, with the literals a
//! restriction, a recompute or a store's delete puts there — subjects' values. lethe's own
//! crates (targets `lethe…`) log counts, tables, files and requests, never a value, at every
//! level. The `log` crate's records (tokio-postgres logs through it) are bridged and filtered
//! the same way.

use tracing::Level;
use tracing_subscriber::filter::{EnvFilter, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The most verbose level another crate's events may have.
pub const THIRD_PARTY_MAX: Level = Level::INFO;

/// The directive for `-v` repeated `verbose` times (when `LETHE_LOG` is not set).
pub fn directive(verbose: u8) -> &'static str {
    match verbose {
        0 => "warn",
        1 => "info,datafusion=warn,iceberg=warn",
        _ => "debug",
    }
}

/// Whether an event of `target` at `level` may be logged at all: lethe's own at any level,
/// another crate's at [`THIRD_PARTY_MAX`] or less verbose.
pub fn allowed(target: &str, level: &Level) -> bool {
    target.starts_with("lethe") || *level <= THIRD_PARTY_MAX
}

/// Installs the subscriber: `LETHE_LOG` if set, else `-v`'s directive, then [`allowed`].
pub fn init(verbose: u8) {
    let filter = EnvFilter::try_from_env("LETHE_LOG").unwrap_or_else(|_| directive(verbose).into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .finish()
        .with(filter_fn(|m| allowed(m.target(), m.level())))
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_crates_stop_at_info_lethes_own_go_to_trace() {
        assert!(!allowed("tokio_postgres::query", &Level::DEBUG));
        assert!(!allowed("datafusion_optimizer::optimizer", &Level::DEBUG));
        assert!(!allowed("sqlparser::parser", &Level::TRACE));
        assert!(allowed("tokio_postgres::connection", &Level::INFO));
        assert!(allowed("datafusion", &Level::WARN));
        assert!(allowed("lethe_iceberg::commit", &Level::TRACE));
        assert!(allowed("lethe::cmd::erase", &Level::DEBUG));
    }
}
