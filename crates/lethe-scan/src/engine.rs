//! Where the proof scan's per-file work runs when it doesn't run in this process.
//!
//! The caller lists what to scan ([`crate::plan_local`] for folders) and hands the objects to
//! a [`ScanEngine`] with the subjects' traces; the engine reads each object with
//! [`crate::scan_object`] wherever its tasks run and returns one [`FileReport`] per object, the
//! same report the local scan gives that file. What an engine sends to other processes is
//! [`SubjectTraces::searched_form`]: the traces as the search needs them, nothing more.

use async_trait::async_trait;

use crate::{FileReport, ObjectEntry, Progress, Result, SubjectTraces};

/// Runs the proof scan's per-file work elsewhere (DataFusion Ballista executors, say).
#[async_trait]
pub trait ScanEngine: Send + Sync + std::fmt::Debug {
    /// A short name for reports (`ballista`).
    fn name(&self) -> &str;

    /// Scans every object for the traces of `subjects` (compiled with `prefix_len`, as
    /// [`crate::TraceSet::new`] does); a hit's `subject` indexes `subjects`. Returns one report
    /// per object, in the order of `objects`. A file that can't be read is reported
    /// unreadable; an error means the scan as a whole could not be done.
    async fn scan_objects(
        &self,
        subjects: &[SubjectTraces],
        prefix_len: usize,
        objects: Vec<ObjectEntry>,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<Vec<FileReport>>;
}

impl SubjectTraces {
    /// The traces as a search needs them, for sending to another process: no label (hits
    /// name subjects by index), the IDs, and each identifying value cut to the `prefix_len`
    /// code points that are searched. A [`crate::TraceSet`] built from this finds exactly
    /// what one built from the whole traces finds.
    pub fn searched_form(&self, prefix_len: usize) -> SubjectTraces {
        SubjectTraces {
            label: String::new(),
            ids: self.ids.clone(),
            values: self
                .values
                .iter()
                .map(|v| crate::ValueTrace {
                    kind: v.kind.clone(),
                    value: v.value.chars().take(prefix_len).collect(),
                })
                .collect(),
        }
    }
}
