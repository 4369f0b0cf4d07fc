//! What a scan reports: per file, its format, whether it could be read, and where traces were
//! found. Every type here is `Serialize` so the CLI can print `--json`.
//!
//! Guarantees: a [`Hit`] names the subject (index), the place, the trace (column or value
//! kind) and a location (`detail`: column, field id, row group, page, line, JSON path...),
//! never the matched value. Where a location part (a JSON key, a CSV header cell) itself holds
//! a trace, it is replaced by `*` or a position.
//!
//! Hits are aggregated: one [`Hit`] per (subject, place, trace, location group) with a
//! `count` of occurrences, so a file full of one subject's rows gives a few hits, not millions.
//! At most [`MAX_HITS_PER_FILE`] distinct hits are kept per file; further ones are counted in
//! [`FileReport::hits_omitted`].

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::traces::{IdOwner, TraceSet, ValueOwner};

/// Distinct hits kept per file (further ones are only counted).
pub const MAX_HITS_PER_FILE: usize = 10_000;

/// Where in a file a trace was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Place {
    /// A Parquet or ORC data value (any column, nested included).
    DataValue,
    /// A Parquet footer column-chunk statistic (min/max), or an ORC file or stripe column
    /// statistic.
    FooterStatistic,
    /// A Parquet footer's key-value metadata, or an ORC file's user metadata (added beyond
    /// the original list: writers and users can put anything there).
    FooterMetadata,
    /// A Parquet page index (column index) min/max.
    PageIndex,
    /// A Parquet bloom filter answered "maybe present" for an ID.
    BloomFilter,
    /// A value of a delete file (position delete `row`, equality delete, or caller-marked).
    DeleteFile,
    /// An Iceberg manifest entry's lower/upper bound or partition value.
    ManifestBound,
    /// Any other string or bytes value in an Iceberg manifest or manifest list.
    ManifestString,
    /// A manifest list's partition field summary lower/upper bound.
    ManifestListBound,
    /// A value in a (non-Iceberg) Avro file.
    AvroValue,
    /// A string (key or value) in a JSON document such as `*.metadata.json`.
    MetadataJson,
    /// A value in a JSON-lines file.
    JsonLine,
    /// A CSV cell.
    Csv,
    /// A Puffin blob or the Puffin footer's properties.
    PuffinBlob,
    /// Plain text (or a text-like file of unknown format).
    Text,
    /// The file's own path (relative to the scanned root), e.g. a Hive-style partition
    /// directory `email=...`. Added beyond the original list: identity partitions put
    /// values into paths.
    Path,
}

/// Which trace matched.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TraceKind {
    /// An ID of the named column (as spelled in the trace).
    Id {
        /// Column name.
        column: String,
    },
    /// An identifying value of the named kind.
    Value {
        /// Kind label.
        kind: String,
    },
}

/// One aggregated finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hit {
    /// Index of the subject in the list the [`TraceSet`] was built from.
    pub subject: usize,
    /// Where in the file.
    pub place: Place,
    /// Which trace.
    pub trace: TraceKind,
    /// Location (column, field id, row group, page, line, JSON path...) of the first
    /// occurrence; never the value.
    pub detail: String,
    /// Occurrences aggregated into this hit (at least 1).
    pub count: u64,
}

/// Whether a file could be read to the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileStatus {
    /// Read completely with its format's reader.
    Read,
    /// Not (completely) readable: it cannot be proven clean.
    Unreadable {
        /// Why (names positions and formats, never values).
        reason: String,
    },
}

/// The format a file was read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileFormat {
    /// Apache Parquet.
    Parquet,
    /// Apache ORC.
    Orc,
    /// Avro object container (generic Avro).
    Avro,
    /// Iceberg manifest (Avro).
    IcebergManifest,
    /// Iceberg manifest list (Avro).
    IcebergManifestList,
    /// One JSON document (e.g. table metadata).
    Json,
    /// JSON lines.
    JsonLines,
    /// Puffin statistics/deletion-vector file.
    Puffin,
    /// A zip archive (its members are read with their own readers).
    Zip,
    /// A tar archive, plain or compressed (its members are read with their own readers).
    Tar,
    /// CSV with a header row.
    Csv,
    /// Plain text.
    Text,
    /// Hadoop `.crc` checksum file (holds no values).
    Crc,
    /// Symbolic link (not followed).
    Symlink,
    /// A directory that could not be listed.
    Directory,
    /// Not recognised.
    Unknown,
}

/// The result for one file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FileReport {
    /// Path as found under the root (or the name given to `scan_bytes`).
    pub path: PathBuf,
    /// Format it was read as (the inner format for gzip files).
    pub format: FileFormat,
    /// True when the file was gzip-compressed and decompressed for reading.
    pub gzip: bool,
    /// Size on disk in bytes.
    pub bytes: u64,
    /// Read or unreadable.
    pub status: FileStatus,
    /// Findings (empty for a clean file). Found before an error are kept.
    pub hits: Vec<Hit>,
    /// Distinct hits beyond [`MAX_HITS_PER_FILE`] that were only counted.
    pub hits_omitted: u64,
}

impl FileReport {
    /// True when the file holds at least one trace.
    pub fn holds_traces(&self) -> bool {
        !self.hits.is_empty() || self.hits_omitted > 0
    }

    /// True when the file could not be read completely.
    pub fn is_unreadable(&self) -> bool {
        matches!(self.status, FileStatus::Unreadable { .. })
    }
}

/// The result of a whole scan (`Default`: nothing counted yet).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ScanReport {
    /// One report per file, in path order.
    pub files: Vec<FileReport>,
    /// Files read completely.
    pub files_read: u64,
    /// Bytes of the files read completely.
    pub bytes_read: u64,
    /// Files that could not be read (cannot be proven clean).
    pub unreadable: u64,
    /// Files holding at least one trace.
    pub files_holding: u64,
    /// Total distinct hits over all files.
    pub hits: u64,
    /// Wall-clock seconds the scan took.
    pub seconds: f64,
}

impl ScanReport {
    /// Add one file's outcome to the totals (files read or unreadable, bytes, files holding
    /// traces, hits); the file itself is not stored.
    pub fn count(&mut self, f: &FileReport) {
        if f.is_unreadable() {
            self.unreadable += 1;
        } else {
            self.files_read += 1;
            self.bytes_read += f.bytes;
        }
        if f.holds_traces() {
            self.files_holding += 1;
        }
        self.hits += f.hits.len() as u64 + f.hits_omitted;
    }

    /// True when every file was read and none holds a trace.
    pub fn is_clean(&self) -> bool {
        self.unreadable == 0 && self.files_holding == 0
    }

    /// Files holding traces of `subject`.
    pub fn files_holding_subject(&self, subject: usize) -> impl Iterator<Item = &FileReport> {
        self.files
            .iter()
            .filter(move |f| f.hits.iter().any(|h| h.subject == subject))
    }
}

/// Progress of a running scan (sent after each file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// Files finished.
    pub files_done: u64,
    /// Files to scan.
    pub files_total: u64,
    /// Bytes of finished files.
    pub bytes_done: u64,
    /// Bytes of all files.
    pub bytes_total: u64,
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum TraceRef {
    Id(u32),
    Value(u32),
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct HitKey {
    subject: u32,
    place: Place,
    trace: TraceRef,
    group: String,
}

/// Collects hits for one file.
pub(crate) struct Hits<'t> {
    pub traces: &'t TraceSet,
    /// When true, ID traces are not matched (a table an exception keeps).
    pub values_only: bool,
    /// Inside an archive: `archive!member` (nested: `a!b!c`), prefixed to details and
    /// grouping keys; empty otherwise.
    pub member: String,
    map: BTreeMap<HitKey, (String, u64)>,
    omitted: u64,
}

impl<'t> Hits<'t> {
    pub fn new(traces: &'t TraceSet, values_only: bool) -> Self {
        Hits {
            traces,
            values_only,
            member: String::new(),
            map: BTreeMap::new(),
            omitted: 0,
        }
    }

    /// The grouping key of `group` here (inside an archive: with the member).
    fn group(&self, group: &str) -> String {
        if self.member.is_empty() {
            group.to_string()
        } else {
            format!("{}\0{group}", self.member)
        }
    }

    /// `detail` here (inside an archive: `archive!member: detail`).
    fn detail(&self, detail: String) -> String {
        if self.member.is_empty() {
            detail
        } else {
            format!("{}: {detail}", self.member)
        }
    }

    fn add(&mut self, key: HitKey, detail: &dyn Fn() -> String) {
        if let Some(e) = self.map.get_mut(&key) {
            e.1 += 1;
        } else if self.map.len() >= MAX_HITS_PER_FILE {
            self.omitted += 1;
        } else {
            let detail = self.detail(detail());
            self.map.insert(key, (detail, 1));
        }
    }

    /// Record a value-prefix occurrence.
    pub fn value(&mut self, place: Place, o: ValueOwner, group: &str, detail: &dyn Fn() -> String) {
        let key = HitKey {
            subject: o.subject,
            place,
            trace: TraceRef::Value(o.kind),
            group: self.group(group),
        };
        self.add(key, detail);
    }

    /// Record ID occurrences (ignored when values-only).
    pub fn ids(
        &mut self,
        place: Place,
        owners: &[IdOwner],
        group: &str,
        detail: &dyn Fn() -> String,
    ) {
        if self.values_only {
            return;
        }
        for o in owners {
            let key = HitKey {
                subject: o.subject,
                place,
                trace: TraceRef::Id(o.column),
                group: self.group(group),
            };
            self.add(key, detail);
        }
    }

    /// Search value prefixes in `hay` and record them.
    pub fn search(&mut self, place: Place, hay: &[u8], group: &str, detail: &dyn Fn() -> String) {
        let traces = self.traces;
        let mut found: Vec<ValueOwner> = Vec::new();
        traces.search(hay, |o| found.push(o));
        for o in found {
            self.value(place, o, group, detail);
        }
    }

    /// True when `hay` contains a value prefix or an ID as text (used to keep traces out of
    /// details such as JSON keys or CSV header cells).
    pub fn mentions(&self, hay: &str) -> bool {
        self.traces.mentions_any(hay)
    }

    /// Take over hits recorded out of order, as if each had been recorded in the order of
    /// its first occurrence (so which hits are kept when a file has more than
    /// [`MAX_HITS_PER_FILE`] does not depend on the order they were found in).
    pub fn merge(&mut self, deferred: Deferred) {
        let mut entries: Vec<(HitKey, DeferredHit)> = deferred.map.into_iter().collect();
        entries.sort_by_key(|(_, h)| h.order);
        for (mut key, h) in entries {
            if !self.member.is_empty() {
                key.group = self.group(&key.group);
            }
            if let Some(e) = self.map.get_mut(&key) {
                e.1 += h.count;
            } else if self.map.len() >= MAX_HITS_PER_FILE {
                self.omitted += h.count;
            } else {
                let detail = self.detail(h.detail);
                self.map.insert(key, (detail, h.count));
            }
        }
    }

    /// Finish: hits in a stable order, and the omitted count.
    pub fn finish(self) -> (Vec<Hit>, u64) {
        let traces = self.traces;
        let hits = self
            .map
            .into_iter()
            .map(|(k, (detail, count))| Hit {
                subject: k.subject as usize,
                place: k.place,
                trace: match k.trace {
                    TraceRef::Id(c) => TraceKind::Id {
                        column: traces.id_column_name(c).to_string(),
                    },
                    TraceRef::Value(v) => TraceKind::Value {
                        kind: traces.kind(v).to_string(),
                    },
                },
                detail,
                count,
            })
            .collect();
        (hits, self.omitted)
    }
}

/// Where an occurrence would have been met reading a Parquet file's values batch by batch,
/// column by column: (batch, leaf column, element in the batch).
pub(crate) type Order = (u64, u32, u64);

struct DeferredHit {
    order: Order,
    detail: String,
    count: u64,
}

/// Hits recorded with the position of each occurrence, in any order, for [`Hits::merge`]:
/// per hit the detail of its earliest occurrence and the count of all.
pub(crate) struct Deferred<'t> {
    pub traces: &'t TraceSet,
    /// When true, ID traces are not matched.
    pub values_only: bool,
    map: HashMap<HitKey, DeferredHit>,
    /// Set: orders are ignored, occurrences are ordered as they are recorded (a counter).
    arrival: Option<u64>,
}

impl<'t> Deferred<'t> {
    pub fn new(traces: &'t TraceSet, values_only: bool) -> Self {
        Deferred {
            traces,
            values_only,
            map: HashMap::new(),
            arrival: None,
        }
    }

    /// A sink that orders occurrences as they are recorded, as [`Hits`] itself does.
    #[cfg(any(test, feature = "reference"))]
    pub fn in_arrival_order(traces: &'t TraceSet, values_only: bool) -> Self {
        Deferred {
            arrival: Some(0),
            ..Deferred::new(traces, values_only)
        }
    }

    fn add(&mut self, key: HitKey, order: Order, detail: &dyn Fn() -> String) {
        let order = match &mut self.arrival {
            Some(n) => {
                *n += 1;
                (*n, 0, 0)
            }
            None => order,
        };
        match self.map.get_mut(&key) {
            Some(h) => {
                h.count += 1;
                if order < h.order {
                    h.order = order;
                    h.detail = detail();
                }
            }
            None => {
                self.map.insert(
                    key,
                    DeferredHit {
                        order,
                        detail: detail(),
                        count: 1,
                    },
                );
            }
        }
    }

    /// Record a value-prefix occurrence.
    pub fn value(
        &mut self,
        place: Place,
        o: ValueOwner,
        group: &str,
        order: Order,
        detail: &dyn Fn() -> String,
    ) {
        let key = HitKey {
            subject: o.subject,
            place,
            trace: TraceRef::Value(o.kind),
            group: group.to_string(),
        };
        self.add(key, order, detail);
    }

    /// Record ID occurrences (ignored when values-only).
    pub fn ids(
        &mut self,
        place: Place,
        owners: &[IdOwner],
        group: &str,
        order: Order,
        detail: &dyn Fn() -> String,
    ) {
        if self.values_only {
            return;
        }
        for o in owners {
            let key = HitKey {
                subject: o.subject,
                place,
                trace: TraceRef::Id(o.column),
                group: group.to_string(),
            };
            self.add(key, order, detail);
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::traces::{SubjectTraces, ValueTrace};

    /// Recording occurrences in any order and merging them keeps the hits (details of first
    /// occurrences, counts, and which hits fall beyond the limit) that recording them in
    /// order keeps.
    #[test]
    fn merged_hits_are_those_recorded_in_order() {
        let subjects: Vec<SubjectTraces> = (0..30)
            .map(|i| SubjectTraces {
                label: format!("s{i}"),
                ids: Vec::new(),
                values: vec![ValueTrace {
                    kind: format!("k{}", i % 3),
                    value: format!("value-{i}"),
                }],
            })
            .collect();
        let traces = TraceSet::new(&subjects, 15).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        for prefill in [0, MAX_HITS_PER_FILE - 40, MAX_HITS_PER_FILE] {
            // (order, subject, group) of each occurrence.
            let mut occurrences: Vec<(Order, u32, String)> = (0..400u64)
                .map(|n| {
                    let order = (rng.random_range(0..5), rng.random_range(0..3), n);
                    (
                        order,
                        rng.random_range(0..30),
                        format!("g{}", rng.random_range(0..4)),
                    )
                })
                .collect();
            let fresh = |prefill: usize| {
                let mut h = Hits::new(&traces, false);
                for i in 0..prefill {
                    h.search(
                        Place::Text,
                        b"value-1",
                        &format!("filler {i}"),
                        &String::new,
                    );
                }
                h
            };
            let owner = |s: u32| ValueOwner {
                subject: s,
                kind: 0,
            };
            occurrences.sort();
            let mut in_order = fresh(prefill);
            for (order, s, g) in &occurrences {
                in_order.value(Place::DataValue, owner(*s), g, &|| format!("{order:?}"));
            }
            occurrences.shuffle(&mut rng);
            let mut merged = fresh(prefill);
            let mut d = Deferred::new(&traces, false);
            for (order, s, g) in &occurrences {
                d.value(Place::DataValue, owner(*s), g, *order, &|| {
                    format!("{order:?}")
                });
            }
            merged.merge(d);
            assert_eq!(in_order.finish(), merged.finish(), "prefill {prefill}");
        }
    }
}
