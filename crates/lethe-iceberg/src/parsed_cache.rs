//! A small cache of what was parsed from bytes, keyed by the bytes themselves.
//!
//! Table metadata files and Avro headers are parsed again and again while one process works
//! on a warehouse (an erasure loads a table when it plans, when it changes it, when a
//! pipeline reads it and when it cleans it up; every manifest of a table repeats its header).
//! Parsing them is slow (serde's buffering of Iceberg's metadata, apache-avro's schema
//! checks), reading them is not. The key is all of the bytes, not a path: a file rewritten
//! in place, or another store's file at the same path, is parsed anew, so what a lookup
//! returns is always what parsing those bytes would give.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use foldhash::fast::FixedState;

/// Parsed values keyed by their bytes, at most `max_entries` of them and `max_bytes` of keys
/// (the least recently inserted go first).
pub(crate) struct ParsedCache<T> {
    entries: HashMap<Vec<u8>, Arc<T>, FixedState>,
    order: VecDeque<Vec<u8>>,
    key_bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

impl<T> ParsedCache<T> {
    /// An empty cache of at most `max_entries` values and `max_bytes` bytes of keys.
    pub(crate) fn new(max_entries: usize, max_bytes: usize) -> Self {
        ParsedCache {
            entries: HashMap::with_hasher(FixedState::default()),
            order: VecDeque::new(),
            key_bytes: 0,
            max_entries,
            max_bytes,
        }
    }

    /// The value parsed from `key`, if kept.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Arc<T>> {
        self.entries.get(key).cloned()
    }

    /// Keeps `value` as what `key` parses to; a key larger than the whole cache is not kept.
    pub(crate) fn insert(&mut self, key: Vec<u8>, value: Arc<T>) {
        if key.len() > self.max_bytes || self.entries.contains_key(&key) {
            return;
        }
        while self.entries.len() >= self.max_entries || self.key_bytes + key.len() > self.max_bytes
        {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            self.key_bytes -= old.len();
            self.entries.remove(&old);
        }
        self.key_bytes += key.len();
        self.order.push_back(key.clone());
        self.entries.insert(key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_values_by_their_bytes_within_its_bounds() {
        let mut c = ParsedCache::new(2, 10);
        c.insert(b"abc".to_vec(), Arc::new(1));
        c.insert(b"abd".to_vec(), Arc::new(2));
        assert_eq!(c.get(b"abc").as_deref(), Some(&1));
        assert_eq!(c.get(b"ab"), None, "a prefix is other bytes");
        // A third entry drops the oldest.
        c.insert(b"xyz".to_vec(), Arc::new(3));
        assert_eq!(c.get(b"abc"), None);
        assert_eq!(c.get(b"abd").as_deref(), Some(&2));
        // Keys past the byte bound drop old ones; a key past the whole bound is not kept.
        c.insert(b"0123456789".to_vec(), Arc::new(4));
        assert_eq!((c.get(b"abd"), c.get(b"xyz")), (None, None));
        assert_eq!(c.get(b"0123456789").as_deref(), Some(&4));
        c.insert(b"0123456789a".to_vec(), Arc::new(5));
        assert_eq!(c.get(b"0123456789a"), None);
        assert_eq!(c.get(b"0123456789").as_deref(), Some(&4));
        // The same key again keeps the first value.
        c.insert(b"0123456789".to_vec(), Arc::new(6));
        assert_eq!(c.get(b"0123456789").as_deref(), Some(&4));
    }
}
