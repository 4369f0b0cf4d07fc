//! Governance as reviewed files in `governance/`: classifications, retention rules and legal
//! exceptions, privacy subjects, legal holds.
//!
//! Every file is parsed with errors naming the file, line and key ([`crate::tomlfile`]). Columns
//! may be nested paths (`contact.email`, `addresses.element.street`), checked against the
//! catalog by [`paths::check`]. Checks that need the catalog (a rule naming a table that doesn't exist, a `counted_from` column that
//! isn't a date) are in [`crate::lifecycle::retention::check_rules`] and friends, and report the line of
//! the offending key too.

pub mod holds;
pub mod identifiers;
pub mod metadata;
pub mod paths;
pub mod retention;
pub mod subjects;

use std::path::{Path, PathBuf};

use crate::error::Result;

/// The governance folder's files, loaded.
#[derive(Debug, Clone)]
pub struct Governance {
    /// The folder.
    pub dir: PathBuf,
    /// `metadata.toml`.
    pub metadata: metadata::MetadataFile,
    /// `retention.toml`.
    pub retention: retention::RetentionFile,
    /// `subjects.toml`.
    pub subjects: subjects::SubjectsFile,
    /// `holds.toml`: legal holds.
    pub holds: holds::HoldsFile,
}

impl Governance {
    /// Loads every governance file in `dir` (a missing file counts as empty).
    pub fn load(dir: &Path) -> Result<Governance> {
        Ok(Governance {
            dir: dir.to_path_buf(),
            metadata: metadata::MetadataFile::load(&dir.join("metadata.toml"))?,
            retention: retention::RetentionFile::load(&dir.join("retention.toml"))?,
            subjects: subjects::SubjectsFile::load(&dir.join("subjects.toml"))?,
            holds: holds::HoldsFile::load(&dir.join("holds.toml"))?,
        })
    }
}
