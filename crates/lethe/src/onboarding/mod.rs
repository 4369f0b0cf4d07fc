//! Bringing an existing warehouse: [`init`] writes a lethe folder for a catalog a team already
//! has, [`discover`] proposes classifications and identifiers from the catalog and sampled
//! values.

pub mod discover;
pub mod init;
