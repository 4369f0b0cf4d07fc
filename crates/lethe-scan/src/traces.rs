//! Traces: what is searched for, compiled once into a multi-pattern matcher.
//!
//! Guarantees:
//! - Identifying values are searched by their first `prefix_len` code points, lowercased
//!   (char by char), as a substring of every haystack, case-insensitively. Values shorter
//!   than `prefix_len` are searched whole.
//! - All subjects' value prefixes live in ONE Aho-Corasick automaton searched with
//!   overlapping semantics, and all IDs in hash maps keyed by column, so the cost of a
//!   search does not grow with the number of subjects (only with the number of hits).
//! - Every match names the subject (its index in the list given to [`TraceSet::new`]).
//! - Nothing in this module prints a value: `Debug` of [`TraceSet`], [`SubjectTraces`],
//!   [`IdValue`] and [`ValueTrace`] shows counts and labels only.
//!
//! Does not:
//! - search ID traces as free text (an ID like `3590` would be everywhere); IDs are matched
//!   only where a column/field/key name says what a value is.
//! - apply Unicode case folding beyond `char::to_lowercase` (no NFC/NFKC normalisation).

use std::collections::HashMap;
use std::fmt;

use aho_corasick::{AhoCorasick, MatchKind};
use serde::Deserialize;

use crate::grams::Grams;
use crate::{Error, Result};

/// Everything searched for one subject (one person).
#[derive(Clone, Default, Deserialize)]
pub struct SubjectTraces {
    /// A label for the subject (e.g. a request ID). Never printed by `Debug`.
    pub label: String,
    /// Identifier values, by the column that holds them.
    pub ids: Vec<IdTrace>,
    /// Identifying values (email, phone, name...), searched by prefix.
    pub values: Vec<ValueTrace>,
}

impl fmt::Debug for SubjectTraces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubjectTraces")
            .field("ids", &self.ids)
            .field("values", &self.values)
            .finish_non_exhaustive()
    }
}

/// The exact values of one identifier column that address the subject.
#[derive(Clone, Default, Deserialize)]
pub struct IdTrace {
    /// Column (or field, or JSON key) name; matched case-insensitively against leaf names.
    pub column: String,
    /// The subject's values in that column.
    pub values: Vec<IdValue>,
}

impl fmt::Debug for IdTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IdTrace {{ column: {:?}, values: {} }}",
            self.column,
            self.values.len()
        )
    }
}

/// One identifier value.
#[derive(Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(untagged)]
pub enum IdValue {
    /// An integer ID (compared with integer columns, and in decimal with string columns).
    Int(i64),
    /// A string ID (compared exactly; also with integer columns when it is a canonical integer).
    Text(String),
}

impl fmt::Debug for IdValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdValue::Int(_) => f.write_str("Int(<redacted>)"),
            IdValue::Text(_) => f.write_str("Text(<redacted>)"),
        }
    }
}

/// One identifying value and the kind of value it is (usually the column it came from).
#[derive(Clone, Deserialize)]
pub struct ValueTrace {
    /// Kind label, e.g. `email`; reported with each hit.
    pub kind: String,
    /// The value; only its first `prefix_len` code points are searched.
    pub value: String,
}

impl fmt::Debug for ValueTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ValueTrace {{ kind: {:?}, value: <redacted> }}",
            self.kind
        )
    }
}

/// Who a matched value prefix belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ValueOwner {
    pub subject: u32,
    /// Index into [`TraceSet::kinds`].
    pub kind: u32,
}

/// Who a matched ID belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IdOwner {
    pub subject: u32,
    /// Index into [`TraceSet::id_columns`] (the column name as the trace spelled it).
    pub column: u32,
}

/// The IDs expected in one column (all subjects).
#[derive(Default)]
pub(crate) struct IdColumn {
    ints: HashMap<i64, Vec<IdOwner>, IntHasher>,
    /// The smallest and largest integer ID: most values fall outside and are answered
    /// without a lookup.
    int_range: Option<(i64, i64)>,
    texts: HashMap<String, Vec<IdOwner>>,
}

impl IdColumn {
    /// Owners of an integer value.
    pub fn int(&self, v: i64) -> &[IdOwner] {
        match self.int_range {
            Some((lo, hi)) if v >= lo && v <= hi => {
                self.ints.get(&v).map(Vec::as_slice).unwrap_or(&[])
            }
            _ => &[],
        }
    }

    /// Owners of a string value (exact comparison).
    pub fn text(&self, v: &str) -> &[IdOwner] {
        self.texts.get(v).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Owners of a byte-string value (exact comparison, must be UTF-8).
    pub fn bytes(&self, v: &[u8]) -> &[IdOwner] {
        match std::str::from_utf8(v) {
            Ok(s) => self.text(s),
            Err(_) => &[],
        }
    }

    /// All integer IDs with owners.
    pub fn ints(&self) -> impl Iterator<Item = (i64, &[IdOwner])> {
        self.ints.iter().map(|(k, v)| (*k, v.as_slice()))
    }

    /// All text IDs with owners (includes integer IDs rendered in decimal).
    pub fn texts(&self) -> impl Iterator<Item = (&str, &[IdOwner])> {
        self.texts.iter().map(|(k, v)| (k.as_str(), v.as_slice()))
    }
}

/// A hasher for integer IDs (one multiply; the default SipHash is several times slower
/// on the one lookup per decoded integer value).
#[derive(Clone, Copy, Default)]
pub(crate) struct IntHasher;

impl std::hash::BuildHasher for IntHasher {
    type Hasher = IntHash;

    fn build_hasher(&self) -> IntHash {
        IntHash(0)
    }
}

/// The state of [`IntHasher`].
pub(crate) struct IntHash(u64);

impl std::hash::Hasher for IntHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }

    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
}

/// All subjects' traces compiled for searching. Build once with [`TraceSet::new`], share
/// between threads (it is `Sync`).
pub struct TraceSet {
    subjects: usize,
    prefix_len: usize,
    kinds: Vec<String>,
    id_columns: Vec<String>,
    by_column: HashMap<String, IdColumn>,
    automaton: Option<AhoCorasick>,
    /// Every ID as text, for [`Self::mentions_any`] (one pass, however many IDs).
    id_texts: Option<AhoCorasick>,
    /// Per automaton pattern: the (subject, kind) pairs that produced it.
    owners: Vec<Vec<ValueOwner>>,
    /// Automata for searching raw page bytes (see [`PageSearch`]).
    pages: PageAutomata,
    max_pattern_bytes: usize,
    id_count: usize,
    value_count: usize,
}

impl fmt::Debug for TraceSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceSet")
            .field("subjects", &self.subjects)
            .field("prefix_len", &self.prefix_len)
            .field("id_values", &self.id_count)
            .field("id_columns", &self.by_column.len())
            .field("value_traces", &self.value_count)
            .field("patterns", &self.owners.len())
            .finish()
    }
}

/// Lowercase one character. Turkish dotted capital `İ` and dotless `ı` fold to `i` (plain
/// `to_lowercase` would give `i` + U+0307 for `İ`, so `ÇELİK` would not match `Çelik`).
fn fold(c: char) -> impl Iterator<Item = char> {
    let c = if c == 'İ' || c == 'ı' { 'i' } else { c };
    c.to_lowercase()
}

/// Lowercase char by char (the same function for patterns and haystacks).
pub(crate) fn lower(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        out.extend(fold(c));
    }
    out
}

/// Lowercase raw bytes (invalid UTF-8 becomes U+FFFD) into `out`; when `map` is given it
/// receives, for each byte of `out`, the offset of the raw byte it came from.
pub(crate) fn lower_bytes(raw: &[u8], out: &mut String, mut map: Option<&mut Vec<usize>>) {
    out.clear();
    if let Some(m) = map.as_deref_mut() {
        m.clear();
    }
    let mut base = 0usize;
    for chunk in raw.utf8_chunks() {
        let valid = chunk.valid();
        for (i, c) in valid.char_indices() {
            for lc in fold(c) {
                out.push(lc);
                if let Some(m) = map.as_deref_mut() {
                    m.extend(std::iter::repeat_n(base + i, lc.len_utf8()));
                }
            }
        }
        base += valid.len();
        let invalid = chunk.invalid();
        if !invalid.is_empty() {
            out.push(char::REPLACEMENT_CHARACTER);
            if let Some(m) = map.as_deref_mut() {
                m.extend(std::iter::repeat_n(
                    base,
                    char::REPLACEMENT_CHARACTER.len_utf8(),
                ));
            }
            base += invalid.len();
        }
    }
}

/// What the decompressed bytes of a Parquet page are searched for, by the column's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PageSearch {
    /// Byte-array values: value prefixes only.
    Values,
    /// Byte-array values of a column that may hold IDs: value prefixes and IDs as text.
    ValuesAndIds,
    /// Plain INT32 values of a column that may hold IDs: the IDs' 4 little-endian bytes.
    Int32,
    /// Plain INT64 values of a column that may hold IDs: the IDs' 8 little-endian bytes.
    Int64,
}

/// The automata [`TraceSet::page_may_hold`] uses. Each finds a superset of what searching
/// every decoded value would find: a pattern across two values, or inside a length prefix,
/// is a candidate that decoding then rejects.
struct PageAutomata {
    /// Value prefixes.
    values: Option<Grams>,
    /// Value prefixes and every text ID, lowercased (a superset of exact ID equality).
    values_and_ids: Option<Grams>,
    int32: Option<Grams>,
    int64: Option<Grams>,
    /// False when a value pattern holds U+FFFD: a decoder's replacement for invalid UTF-8
    /// is not in the raw bytes, so only decoding can find such a pattern.
    bytes_searchable: bool,
}

impl PageAutomata {
    fn new(patterns: &[String], by_column: &HashMap<String, IdColumn>) -> Result<Self> {
        // Case-sensitive: the haystack is lowercased first ([`fold_for_search`]), which with
        // the lowercase patterns is several times faster than ASCII case folding in the DFA.
        let build = |pats: &[Vec<u8>]| -> Result<Option<Grams>> {
            Grams::new(pats)
                .map_err(|e| Error::InvalidTraces(format!("cannot build the matcher: {e}")))
        };
        let mut texts: Vec<Vec<u8>> = patterns.iter().map(|p| p.as_bytes().to_vec()).collect();
        let mut int32: Vec<Vec<u8>> = Vec::new();
        let mut int64: Vec<Vec<u8>> = Vec::new();
        for col in by_column.values() {
            for t in col.texts.keys() {
                texts.push(lower(t).into_bytes());
            }
            for &i in col.ints.keys() {
                int64.push(i.to_le_bytes().to_vec());
                // INT32 holds i32 and, for unsigned logical types, u32 bit patterns.
                if i >= i64::from(i32::MIN) && i <= i64::from(u32::MAX) {
                    int32.push((i as u32).to_le_bytes().to_vec());
                }
            }
        }
        texts.sort_unstable();
        texts.dedup();
        int32.sort_unstable();
        int32.dedup();
        int64.sort_unstable();
        int64.dedup();
        let values: Vec<Vec<u8>> = patterns.iter().map(|p| p.as_bytes().to_vec()).collect();
        Ok(PageAutomata {
            values_and_ids: build(&texts)?,
            values: build(&values)?,
            int32: build(&int32)?,
            int64: build(&int64)?,
            bytes_searchable: !patterns
                .iter()
                .any(|p| p.contains(char::REPLACEMENT_CHARACTER)),
        })
    }
}

/// `raw` lowercased as the value search lowercases, for searching many values at once:
/// ASCII letters lowercased, every other valid character that lowercases to something else
/// replaced by its lowercase (as [`lower`]), invalid UTF-8 kept as is. Valid characters
/// decode the same whatever precedes them (UTF-8 resynchronises at every lead byte), so each
/// value's lowercased form is a substring of the result.
///
/// Most pages need no copy: one pass over `raw` tells whether it holds an uppercase ASCII
/// letter or a non-ASCII byte; without either (numbers, addresses, codes, lowercase text)
/// `raw` is its own lowercase and is returned as it is. ASCII with capitals is lowercased
/// into `out` in one more pass; only text with non-ASCII characters is folded char by char.
fn fold_for_search<'a>(raw: &'a [u8], out: &'a mut Vec<u8>) -> &'a [u8] {
    match ascii_kind(raw) {
        AsciiKind::Lowercase => raw,
        AsciiKind::Capitals => {
            out.clear();
            out.extend(raw.iter().map(u8::to_ascii_lowercase));
            out
        }
        AsciiKind::NotAscii => fold_chars(raw, out),
    }
}

/// What [`ascii_kind`] found in a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AsciiKind {
    /// ASCII without uppercase letters.
    Lowercase,
    /// ASCII with an uppercase letter.
    Capitals,
    /// Some byte is not ASCII.
    NotAscii,
}

/// Classify `raw` in one pass of blocks the compiler vectorises (no early exit inside a
/// block: a branch per byte would keep it scalar).
fn ascii_kind(raw: &[u8]) -> AsciiKind {
    let mut capitals = false;
    for block in raw.chunks(256) {
        let (mut high, mut upper) = (0u8, 0u8);
        for &b in block {
            high |= b;
            upper |= u8::from(b.wrapping_sub(b'A') < 26);
        }
        if high >= 0x80 {
            return AsciiKind::NotAscii;
        }
        capitals |= upper != 0;
    }
    if capitals {
        AsciiKind::Capitals
    } else {
        AsciiKind::Lowercase
    }
}

/// [`fold_for_search`] of a buffer with non-ASCII bytes, char by char.
fn fold_chars<'a>(raw: &[u8], out: &'a mut Vec<u8>) -> &'a [u8] {
    out.clear();
    let first = raw.iter().position(|b| !b.is_ascii()).unwrap_or(raw.len());
    out.extend(raw[..first].iter().map(u8::to_ascii_lowercase));
    for chunk in raw[first..].utf8_chunks() {
        let mut buf = [0u8; 4];
        for c in chunk.valid().chars() {
            if c.is_ascii() {
                out.push((c as u8).to_ascii_lowercase());
            } else {
                for lc in fold(c) {
                    out.extend_from_slice(lc.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        out.extend_from_slice(chunk.invalid());
    }
    out
}

impl TraceSet {
    /// Compile the traces of `subjects` (a hit's `subject` is an index into this slice).
    ///
    /// `prefix_len` is the number of leading code points of each identifying value that is
    /// searched: the truncation length of the table's metrics minus one (15 for Iceberg's
    /// default `truncate(16)`, whose upper bounds have their last character raised).
    ///
    /// Errors (naming subject/trace indices, never values): `prefix_len == 0`, an empty
    /// value, an empty column name, an empty text ID.
    pub fn new(subjects: &[SubjectTraces], prefix_len: usize) -> Result<TraceSet> {
        if prefix_len == 0 {
            return Err(Error::InvalidTraces("prefix_len must be at least 1".into()));
        }
        let mut kinds: Vec<String> = Vec::new();
        let mut kind_index: HashMap<String, u32> = HashMap::new();
        let mut id_columns: Vec<String> = Vec::new();
        let mut column_index: HashMap<String, u32> = HashMap::new();
        let mut by_column: HashMap<String, IdColumn> = HashMap::new();
        let mut patterns: Vec<String> = Vec::new();
        let mut pattern_index: HashMap<String, usize> = HashMap::new();
        let mut owners: Vec<Vec<ValueOwner>> = Vec::new();
        let mut id_count = 0usize;
        let mut value_count = 0usize;

        for (s, subject) in subjects.iter().enumerate() {
            let subject_no =
                u32::try_from(s).map_err(|_| Error::InvalidTraces("too many subjects".into()))?;
            for (t, trace) in subject.ids.iter().enumerate() {
                if trace.column.trim().is_empty() {
                    return Err(Error::InvalidTraces(format!(
                        "subject {s}: ID trace {t} has an empty column name"
                    )));
                }
                let column = *column_index.entry(trace.column.clone()).or_insert_with(|| {
                    id_columns.push(trace.column.clone());
                    (id_columns.len() - 1) as u32
                });
                let owner = IdOwner {
                    subject: subject_no,
                    column,
                };
                let entry = by_column.entry(trace.column.to_lowercase()).or_default();
                for (v, value) in trace.values.iter().enumerate() {
                    id_count += 1;
                    match value {
                        IdValue::Int(i) => {
                            push_owner(entry.ints.entry(*i).or_default(), owner);
                            push_owner(entry.texts.entry(i.to_string()).or_default(), owner);
                        }
                        IdValue::Text(text) => {
                            if text.is_empty() {
                                return Err(Error::InvalidTraces(format!(
                                    "subject {s}: ID trace {t} value {v} is empty"
                                )));
                            }
                            push_owner(entry.texts.entry(text.clone()).or_default(), owner);
                            if let Ok(i) = text.parse::<i64>()
                                && i.to_string() == *text
                            {
                                push_owner(entry.ints.entry(i).or_default(), owner);
                            }
                        }
                    }
                }
            }
            for (v, trace) in subject.values.iter().enumerate() {
                if trace.value.is_empty() {
                    return Err(Error::InvalidTraces(format!(
                        "subject {s}: value trace {v} is empty"
                    )));
                }
                value_count += 1;
                let kind = *kind_index.entry(trace.kind.clone()).or_insert_with(|| {
                    kinds.push(trace.kind.clone());
                    (kinds.len() - 1) as u32
                });
                let prefix: String = trace.value.chars().take(prefix_len).collect();
                let pattern = lower(&prefix);
                let p = *pattern_index.entry(pattern.clone()).or_insert_with(|| {
                    patterns.push(pattern);
                    owners.push(Vec::new());
                    owners.len() - 1
                });
                let owner = ValueOwner {
                    subject: subject_no,
                    kind,
                };
                if !owners[p].contains(&owner) {
                    owners[p].push(owner);
                }
            }
        }

        for c in by_column.values_mut() {
            c.int_range = c.ints.keys().fold(None, |r, &v| {
                Some(r.map_or((v, v), |(lo, hi)| (v.min(lo), v.max(hi))))
            });
        }
        let max_pattern_bytes = patterns.iter().map(String::len).max().unwrap_or(0);
        let automaton = if patterns.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    // A DFA keeps the per-byte cost flat as subjects are added (the default
                    // picks an NFA for many patterns); its size grows with the patterns only.
                    .kind(Some(aho_corasick::AhoCorasickKind::DFA))
                    .build(&patterns)
                    .map_err(|e| Error::InvalidTraces(format!("cannot build the matcher: {e}")))?,
            )
        };
        let mut texts: Vec<&str> = by_column
            .values()
            .flat_map(|c| c.texts.keys().map(String::as_str))
            .collect();
        texts.sort_unstable();
        texts.dedup();
        let id_texts = if texts.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::new(&texts)
                    .map_err(|e| Error::InvalidTraces(format!("cannot build the matcher: {e}")))?,
            )
        };
        let pages = PageAutomata::new(&patterns, &by_column)?;
        Ok(TraceSet {
            pages,
            subjects: subjects.len(),
            id_texts,
            prefix_len,
            kinds,
            id_columns,
            by_column,
            automaton,
            owners,
            max_pattern_bytes,
            id_count,
            value_count,
        })
    }

    /// Number of subjects.
    pub fn subject_count(&self) -> usize {
        self.subjects
    }

    /// The prefix length the set was built with.
    pub fn prefix_len(&self) -> usize {
        self.prefix_len
    }

    /// Longest pattern, in bytes (after lowercasing).
    pub(crate) fn max_pattern_bytes(&self) -> usize {
        self.max_pattern_bytes
    }

    /// Kind label by index.
    pub(crate) fn kind(&self, i: u32) -> &str {
        self.kinds.get(i as usize).map(String::as_str).unwrap_or("")
    }

    /// ID column name (as spelled in the trace) by index.
    pub(crate) fn id_column_name(&self, i: u32) -> &str {
        self.id_columns
            .get(i as usize)
            .map(String::as_str)
            .unwrap_or("")
    }

    /// The IDs expected in a column named `name` (case-insensitive).
    pub(crate) fn id_column(&self, name: &str) -> Option<&IdColumn> {
        if self.by_column.is_empty() {
            return None;
        }
        if let Some(c) = self.by_column.get(name) {
            return Some(c);
        }
        self.by_column.get(&name.to_lowercase())
    }

    /// Search value prefixes in `hay` (any bytes; UTF-8 text is lowercased, invalid
    /// sequences are skipped over). Calls `f` once per occurrence per owner.
    pub(crate) fn search(&self, hay: &[u8], mut f: impl FnMut(ValueOwner)) {
        let Some(ac) = &self.automaton else { return };
        if hay.is_ascii() {
            for m in ac.find_overlapping_iter(hay) {
                for o in &self.owners[m.pattern().as_usize()] {
                    f(*o);
                }
            }
        } else {
            let mut low = String::new();
            lower_bytes(hay, &mut low, None);
            for m in ac.find_overlapping_iter(low.as_bytes()) {
                for o in &self.owners[m.pattern().as_usize()] {
                    f(*o);
                }
            }
        }
    }

    /// Like [`Self::search`], also giving each occurrence's end offset in `hay` (raw bytes,
    /// exclusive) and its start offset.
    pub(crate) fn search_positions(&self, hay: &[u8], mut f: impl FnMut(ValueOwner, usize, usize)) {
        let Some(ac) = &self.automaton else { return };
        if hay.is_ascii() {
            for m in ac.find_overlapping_iter(hay) {
                for o in &self.owners[m.pattern().as_usize()] {
                    f(*o, m.start(), m.end());
                }
            }
        } else {
            let mut low = String::new();
            let mut map = Vec::new();
            lower_bytes(hay, &mut low, Some(&mut map));
            for m in ac.find_overlapping_iter(low.as_bytes()) {
                let start = map.get(m.start()).copied().unwrap_or(0);
                let end = m
                    .end()
                    .checked_sub(1)
                    .and_then(|i| map.get(i))
                    .map(|&i| i + 1)
                    .unwrap_or(start);
                for o in &self.owners[m.pattern().as_usize()] {
                    f(*o, start, end);
                }
            }
        }
    }

    /// True when the raw bytes of a decompressed Parquet page may hold a trace of kind
    /// `what`: a superset of what decoding the page and searching each value finds (see
    /// [`Self::page_bytes_searchable`]). `scratch` is reused between calls.
    pub(crate) fn page_may_hold(
        &self,
        what: PageSearch,
        buf: &[u8],
        scratch: &mut Vec<u8>,
    ) -> bool {
        let p = &self.pages;
        match what {
            PageSearch::Values | PageSearch::ValuesAndIds => {
                let ac = if what == PageSearch::Values {
                    &p.values
                } else {
                    &p.values_and_ids
                };
                let Some(ac) = ac else { return false };
                ac.is_match(fold_for_search(buf, scratch))
            }
            PageSearch::Int32 => p.int32.as_ref().is_some_and(|ac| ac.is_match(buf)),
            PageSearch::Int64 => p.int64.as_ref().is_some_and(|ac| ac.is_match(buf)),
        }
    }

    /// [`Self::page_may_hold`] for PLAIN byte-array values (`values`: each a 4-byte
    /// little-endian length, then its bytes; nothing else): the values without their
    /// lengths, a zero byte after each, lowercased as [`fold_for_search`] and searched.
    /// Searched whole, the lengths (and a data page's levels before them) are arbitrary
    /// bytes: a length of 128 or more, or a level run, made the whole page non-ASCII and
    /// folded char by char. Each value's lowercased form is in the searched bytes, so this
    /// finds a superset of what searching each decoded value finds (a match across two
    /// values is possible, never a miss). `None` when the lengths don't describe `values`
    /// exactly: the caller searches the raw bytes.
    pub(crate) fn plain_byte_arrays_may_hold(
        &self,
        what: PageSearch,
        values: &[u8],
        scratch: &mut Vec<u8>,
    ) -> Option<bool> {
        let p = &self.pages;
        let ac = match what {
            PageSearch::Values => &p.values,
            PageSearch::ValuesAndIds => &p.values_and_ids,
            PageSearch::Int32 | PageSearch::Int64 => return None,
        };
        let Some(ac) = ac else { return Some(false) };
        scratch.clear();
        scratch.reserve(values.len());
        let mut rest = values;
        while !rest.is_empty() {
            let (len, tail) = rest.split_first_chunk::<4>()?;
            let len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
            if len > tail.len() {
                return None;
            }
            let (value, tail) = tail.split_at(len);
            scratch.extend_from_slice(value);
            scratch.push(0);
            rest = tail;
        }
        // The zero byte (ASCII) ends any character a value leaves unfinished, so each value
        // folds as it would alone.
        Some(match ascii_kind(scratch) {
            AsciiKind::Lowercase => ac.is_match(scratch),
            AsciiKind::Capitals => {
                scratch.make_ascii_lowercase();
                ac.is_match(scratch)
            }
            AsciiKind::NotAscii => ac.is_match(fold_chars(scratch, &mut Vec::new())),
        })
    }

    /// True when plain INT32 (`width` 4) or INT64 (8) values, `values` holding nothing else,
    /// may hold an ID of one of `columns` (the ID columns the value walk could compare this
    /// Parquet column with): each value is compared (as i32 and as u32 for INT32, the bit
    /// patterns the signed and unsigned logical types store).
    pub(crate) fn plain_ints_may_hold(
        &self,
        width: usize,
        values: &[u8],
        columns: &[&IdColumn],
    ) -> bool {
        let hit = |v: i64| columns.iter().any(|c| !c.int(v).is_empty());
        match width {
            4 => values
                .chunks_exact(4)
                .filter_map(|c| c.first_chunk::<4>())
                .any(|b| {
                    hit(i64::from(i32::from_le_bytes(*b))) || hit(i64::from(u32::from_le_bytes(*b)))
                }),
            _ => values.chunks_exact(8).any(|c| {
                c.first_chunk::<8>()
                    .is_some_and(|b| hit(i64::from_le_bytes(*b)))
            }),
        }
    }

    /// False when some value trace can only be found by decoding (its prefix holds U+FFFD,
    /// the replacement the search puts for invalid UTF-8): pages must then be decoded.
    pub(crate) fn page_bytes_searchable(&self) -> bool {
        self.pages.bytes_searchable
    }

    /// True when there are ID traces.
    pub(crate) fn has_ids(&self) -> bool {
        !self.by_column.is_empty()
    }

    /// True when `text` contains any value prefix or any ID (as text): used to withhold
    /// third-party error messages that might quote data.
    pub(crate) fn mentions_any(&self, text: &str) -> bool {
        let mut found = false;
        self.search(text.as_bytes(), |_| found = true);
        if found {
            return true;
        }
        self.id_texts.as_ref().is_some_and(|ac| ac.is_match(text))
    }

    /// Make a reader's error message safe to report: cut to 300 characters and withheld
    /// entirely if it mentions a trace.
    pub(crate) fn redact(&self, message: &str) -> String {
        let cut: String = message.chars().take(300).collect();
        if self.mentions_any(message) {
            "the reader's message was withheld because it quotes a searched trace".to_string()
        } else {
            cut
        }
    }
}

fn push_owner(v: &mut Vec<IdOwner>, o: IdOwner) {
    if !v.contains(&o) {
        v.push(o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(email: &str, id: i64) -> SubjectTraces {
        SubjectTraces {
            label: "s".into(),
            ids: vec![IdTrace {
                column: "Learner_ID".into(),
                values: vec![IdValue::Int(id)],
            }],
            values: vec![ValueTrace {
                kind: "email".into(),
                value: email.into(),
            }],
        }
    }

    fn owners_in(ts: &TraceSet, hay: &str) -> Vec<u32> {
        let mut v = Vec::new();
        ts.search(hay.as_bytes(), |o| v.push(o.subject));
        v.sort();
        v
    }

    #[test]
    fn prefix_is_searched_case_insensitively() {
        let ts = TraceSet::new(&[subject("Alexa590@Post.Example", 3590)], 15).unwrap();
        assert_eq!(owners_in(&ts, "xx ALEXA590@POST.E yy"), vec![0]);
        assert_eq!(owners_in(&ts, "alexa590@post.ey"), vec![0]);
        assert!(owners_in(&ts, "alexa590@post.").is_empty());
    }

    #[test]
    fn mentions_any_finds_ids_as_text_and_value_prefixes_among_many_subjects() {
        let mut many: Vec<SubjectTraces> = (0..1000)
            .map(|i| subject(&format!("person.{i}@example.org"), 10_000_000 + i))
            .collect();
        many.push(SubjectTraces {
            label: "t".into(),
            ids: vec![IdTrace {
                column: "customer_id".into(),
                values: vec![IdValue::Text("CGB0000113".into())],
            }],
            values: Vec::new(),
        });
        let ts = TraceSet::new(&many, 15).unwrap();
        assert!(ts.mentions_any("key 10000999 here"));
        assert!(ts.mentions_any("a-CGB0000113#3"));
        assert!(ts.mentions_any("PERSON.999@EXAMPLE"));
        assert!(
            !ts.mentions_any("cgb0000113"),
            "IDs are exact, not case-folded"
        );
        assert!(!ts.mentions_any("snapshot-id 9999999 and CGB0000112"));
        let none = TraceSet::new(&[], 15).unwrap();
        assert!(!none.mentions_any("10000999"));
    }

    #[test]
    fn non_ascii_haystack_is_lowercased() {
        let ts = TraceSet::new(&[subject("Ömer Çelik", 1)], 15).unwrap();
        assert_eq!(owners_in(&ts, "name: ÖMER ÇELİK!"), vec![0]);
        assert_eq!(owners_in(&ts, "ömer çelik"), vec![0]);
    }

    #[test]
    fn overlapping_patterns_of_different_subjects_are_all_found() {
        let ts = TraceSet::new(
            &[subject("ann", 1), subject("anna", 2), subject("nna b", 3)],
            15,
        )
        .unwrap();
        assert_eq!(owners_in(&ts, "xANNA B"), vec![0, 1, 2]);
    }

    #[test]
    fn same_value_for_two_subjects_reports_both() {
        let ts = TraceSet::new(
            &[subject("shared@x.org", 1), subject("shared@x.org", 2)],
            15,
        )
        .unwrap();
        assert_eq!(owners_in(&ts, "shared@x.org"), vec![0, 1]);
    }

    #[test]
    fn ids_are_keyed_case_insensitively_and_cross_typed() {
        let ts = TraceSet::new(&[subject("a@b.c", 3590)], 15).unwrap();
        let col = ts.id_column("learner_id").unwrap();
        assert_eq!(col.int(3590).len(), 1);
        assert_eq!(col.text("3590").len(), 1);
        assert!(col.int(3591).is_empty());
        assert!(ts.id_column("LEARNER_ID").is_some());
        assert!(ts.id_column("review_id").is_none());
        let text = SubjectTraces {
            label: String::new(),
            ids: vec![IdTrace {
                column: "c".into(),
                values: vec![IdValue::Text("0042".into()), IdValue::Text("17".into())],
            }],
            values: vec![],
        };
        let ts = TraceSet::new(&[text], 15).unwrap();
        let col = ts.id_column("c").unwrap();
        assert!(col.int(42).is_empty(), "0042 is not a canonical integer");
        assert_eq!(col.int(17).len(), 1);
    }

    #[test]
    fn positions_map_back_to_raw_bytes() {
        let ts = TraceSet::new(&[subject("Çelik", 1)], 15).unwrap();
        let hay = "ab ÇELİK cd".as_bytes();
        let mut found = Vec::new();
        ts.search_positions(hay, |_, s, e| found.push((s, e)));
        assert_eq!(found.len(), 1);
        let (s, e) = found[0];
        assert_eq!(&hay[s..s + 2], "Ç".as_bytes());
        assert!(e <= hay.len() && e > s);
    }

    #[test]
    fn invalid_traces_are_rejected_without_values() {
        let mut s = subject("", 1);
        let err = TraceSet::new(&[s.clone()], 15).unwrap_err().to_string();
        assert!(err.contains("subject 0"));
        s.values.clear();
        assert!(TraceSet::new(&[s], 0).is_err());
    }

    /// The old fold of a whole buffer, char by char: what [`fold_for_search`] must give.
    fn fold_reference(raw: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in raw.utf8_chunks() {
            for c in chunk.valid().chars() {
                for lc in fold(c) {
                    out.extend_from_slice(lc.encode_utf8(&mut [0u8; 4]).as_bytes());
                }
            }
            out.extend_from_slice(chunk.invalid());
        }
        out
    }

    #[test]
    fn fold_for_search_agrees_with_folding_every_char() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let seed = crate::test_seed(20_261_201);
        let mut rng = StdRng::seed_from_u64(seed);
        let pieces: &[&[u8]] = &[
            b"a",
            b"Z",
            b"0",
            b".",
            b" ",
            b"@",
            "\u{212A}".as_bytes(),
            "\u{130}".as_bytes(),
            "\u{131}".as_bytes(),
            "\u{23A}".as_bytes(),
            "Ç".as_bytes(),
            "ß".as_bytes(),
            "字".as_bytes(),
            &[0xff],
            &[0xc3],
            &[0xe2, 0x82],
            &[0x80],
        ];
        let mut kinds = [0usize; 3];
        for _ in 0..3000 {
            // Lengths across the classifier's 256-byte blocks; mostly one kind of byte.
            let n = rng.random_range(0..700);
            let mix = rng.random_range(0..4);
            let mut raw = Vec::with_capacity(n);
            while raw.len() < n {
                match mix {
                    0 => raw.push(rng.random_range(b'0'..=b'9')),
                    1 => raw.push(rng.random_range(b' '..=b'~')),
                    2 if rng.random_bool(0.99) => raw.push(rng.random_range(b'a'..=b'z')),
                    _ => raw.extend_from_slice(pieces[rng.random_range(0..pieces.len())]),
                }
            }
            let mut out = Vec::new();
            let kind = ascii_kind(&raw);
            kinds[kind as usize] += 1;
            let folded = fold_for_search(&raw, &mut out).to_vec();
            assert_eq!(
                folded,
                fold_reference(&raw),
                "seed {seed}, {kind:?}, {raw:?}"
            );
        }
        assert!(kinds.iter().all(|&k| k > 100), "every kind seen: {kinds:?}");
    }

    /// PLAIN byte-array values: a 4-byte length before each.
    fn plain(values: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for v in values {
            out.extend_from_slice(&u32::try_from(v.len()).unwrap().to_le_bytes());
            out.extend_from_slice(v);
        }
        out
    }

    #[test]
    fn plain_byte_arrays_are_searched_value_by_value() {
        let ts = TraceSet::new(&[subject("Ömer.Çelik@Post.example", 3590)], 15).unwrap();
        let mut scratch = Vec::new();
        let mut may = |what, raw: &[u8]| ts.plain_byte_arrays_may_hold(what, raw, &mut scratch);
        // A long value before the trace (its length byte is 0xc8, not ASCII), the trace in
        // capitals, non-ASCII and invalid UTF-8 around.
        let long = vec![b'x'; 200];
        let page = plain(&[&long, "ÖMER.ÇELİK@POST.EX…".as_bytes(), &[0xff, b'a']]);
        assert_eq!(may(PageSearch::Values, &page), Some(true));
        assert_eq!(
            may(
                PageSearch::Values,
                &plain(&[&long, b"omer.celik@post.example"])
            ),
            Some(false)
        );
        // An ID as text is searched where the column may hold IDs.
        let ids = plain(&[b"L-0", b"3590"]);
        assert_eq!(may(PageSearch::Values, &ids), Some(false));
        assert_eq!(may(PageSearch::ValuesAndIds, &ids), Some(true));
        // A value split by a length is not joined back (its halves are two values).
        let split = plain(&["ömer.çe".as_bytes(), "lik@post.example".as_bytes()]);
        assert_eq!(may(PageSearch::Values, &split), Some(false));
        // Lengths that don't describe the bytes: the caller searches the raw bytes.
        let mut bad = plain(&[b"abc"]);
        bad.push(7);
        assert_eq!(may(PageSearch::Values, &bad), None);
        let mut over = plain(&[b"abc"]);
        over[0] = 9;
        assert_eq!(may(PageSearch::Values, &over), None);
        assert_eq!(may(PageSearch::Values, &[]), Some(false));
        assert_eq!(may(PageSearch::Int64, &page), None);
    }

    #[test]
    fn debug_shows_no_values() {
        let s = subject("secret.person@mail.example", 987654);
        let ts = TraceSet::new(std::slice::from_ref(&s), 15).unwrap();
        for text in [format!("{ts:?}"), format!("{s:?}")] {
            assert!(!text.contains("secret"), "{text}");
            assert!(!text.contains("987654"), "{text}");
        }
    }

    #[test]
    fn redact_withholds_messages_quoting_traces() {
        let ts = TraceSet::new(&[subject("alexa590@post.example", 3590)], 15).unwrap();
        assert_eq!(ts.redact("bad block at 12"), "bad block at 12");
        assert!(
            !ts.redact("value \"ALEXA590@post.example\"")
                .contains("alexa")
        );
        assert!(!ts.redact("id 3590 invalid").contains("3590"));
    }
}
