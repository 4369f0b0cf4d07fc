//! Bounded caches of what the Avro reader parses from a container's header: a warehouse's
//! manifests and manifest lists share a handful of distinct writer schemas (`avro.schema`)
//! and Iceberg table schemas (`schema` + `partition-spec` metadata), so parsing each once per
//! distinct value instead of once per file saves most of the header work.
//!
//! Guarantees: an entry is keyed by the exact bytes it was parsed from, and holds what the
//! parse of those bytes returned, so a hit gives what a parse would (same bytes, same
//! deterministic parse); only successful parses are stored (a header that fails is parsed,
//! and fails, again each time); at most [`MAX_ENTRIES`] entries and [`MAX_KEY_BYTES`] key
//! bytes per cache, the least recently used entry evicted first; a key larger than the
//! whole bound is never stored. The lock is never held while parsing, so a panic in a parser
//! cannot poison it (a poisoned lock is used anyway: the map is consistent between calls).
//!
//! Does not: bound the parsed values' memory directly (they grow with their key's bytes).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use super::avro::ManifestSchema;
use super::avro_guard::WriterSchema;

/// Most entries per cache.
pub(crate) const MAX_ENTRIES: usize = 64;
/// Most key bytes per cache.
pub(crate) const MAX_KEY_BYTES: usize = 4 << 20;

/// A map from exact key bytes to a parsed value, bounded by entry count and key bytes.
pub(crate) struct Bounded<V> {
    map: HashMap<Box<[u8]>, (V, u64)>,
    tick: u64,
    key_bytes: usize,
    max_entries: usize,
    max_key_bytes: usize,
    #[cfg(test)]
    pub(crate) hits: u64,
    #[cfg(test)]
    pub(crate) misses: u64,
}

impl<V: Clone> Bounded<V> {
    /// An empty cache; `max_entries == 0` stores nothing.
    pub(crate) fn new(max_entries: usize, max_key_bytes: usize) -> Self {
        Bounded {
            map: HashMap::new(),
            tick: 0,
            key_bytes: 0,
            max_entries,
            max_key_bytes,
            #[cfg(test)]
            hits: 0,
            #[cfg(test)]
            misses: 0,
        }
    }

    /// The value stored for exactly these bytes, marked as just used.
    pub(crate) fn get(&mut self, key: &[u8]) -> Option<V> {
        self.tick += 1;
        let tick = self.tick;
        let found = self.map.get_mut(key).map(|(v, used)| {
            *used = tick;
            v.clone()
        });
        #[cfg(test)]
        match found {
            Some(_) => self.hits += 1,
            None => self.misses += 1,
        }
        found
    }

    /// Store `value` for `key`, evicting the least recently used entries to stay bounded.
    pub(crate) fn insert(&mut self, key: &[u8], value: V) {
        if self.max_entries == 0 || key.len() > self.max_key_bytes {
            return;
        }
        if self.map.remove(key).is_some() {
            self.key_bytes -= key.len();
        }
        while !self.map.is_empty()
            && (self.map.len() >= self.max_entries
                || self.key_bytes + key.len() > self.max_key_bytes)
        {
            let oldest = self
                .map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.map.remove(&k);
                self.key_bytes -= k.len();
            }
        }
        self.tick += 1;
        self.key_bytes += key.len();
        self.map.insert(key.into(), (value, self.tick));
    }

    /// Entries and key bytes held.
    #[cfg(test)]
    pub(crate) fn size(&self) -> (usize, usize) {
        (self.map.len(), self.key_bytes)
    }
}

/// One bounded cache shared by the scan's threads.
pub(crate) type Shared<V> = Mutex<Bounded<Arc<V>>>;

/// The caches of the Avro reader.
pub(crate) struct Caches {
    /// `avro.schema` bytes -> the guard's and apache-avro's parsed writer schema.
    pub(crate) writer: Shared<WriterSchema>,
    /// Iceberg `schema` + `partition-spec` metadata bytes -> fields and partition fields.
    pub(crate) manifest: Shared<ManifestSchema>,
}

impl Caches {
    /// Caches of at most `max_entries` entries and `max_key_bytes` key bytes each.
    pub(crate) fn new(max_entries: usize, max_key_bytes: usize) -> Self {
        Caches {
            writer: Mutex::new(Bounded::new(max_entries, max_key_bytes)),
            manifest: Mutex::new(Bounded::new(max_entries, max_key_bytes)),
        }
    }
}

/// The process's caches, used by every scan.
pub(crate) fn shared() -> &'static Caches {
    static CACHES: LazyLock<Caches> = LazyLock::new(|| Caches::new(MAX_ENTRIES, MAX_KEY_BYTES));
    &CACHES
}

/// The value cached for `key`, or `parse()`'s, stored if it succeeded.
pub(crate) fn get_or_parse<V>(
    cache: &Shared<V>,
    key: &[u8],
    parse: impl FnOnce() -> Result<V, String>,
) -> Result<Arc<V>, String> {
    let lock = || cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = lock().get(key) {
        return Ok(v);
    }
    let v = Arc::new(parse()?);
    lock().insert(key, v.clone());
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_stays_bounded_by_entries_and_key_bytes() {
        let mut c: Bounded<usize> = Bounded::new(8, 1000);
        for i in 0..100usize {
            c.insert(format!("key-{i:04}").as_bytes(), i);
            let (n, bytes) = c.size();
            assert!(n <= 8 && bytes <= 1000, "{n} entries, {bytes} bytes");
        }
        // The most recent entries are the ones kept.
        assert_eq!(c.get(b"key-0099"), Some(99));
        assert_eq!(c.get(b"key-0092"), Some(92));
        assert_eq!(c.get(b"key-0091"), None);
        // Key bytes bound: 300-byte keys, at most 3 fit in 1000 bytes.
        let mut c: Bounded<usize> = Bounded::new(8, 1000);
        for i in 0..20u8 {
            c.insert(&[i; 300], usize::from(i));
            let (n, bytes) = c.size();
            assert!(n <= 3 && bytes <= 1000, "{n} entries, {bytes} bytes");
        }
        assert_eq!(c.get(&[19; 300]), Some(19));
        // A key larger than the whole bound is not stored and evicts nothing.
        c.insert(&[1; 1001], 1);
        assert_eq!(c.get(&[1; 1001]), None);
        assert_eq!(c.get(&[19; 300]), Some(19));
        // Re-inserting a key replaces it without counting its bytes twice.
        c.insert(&[19; 300], 7);
        assert_eq!(c.get(&[19; 300]), Some(7));
        assert!(c.size().1 <= 1000);
        // Recently used entries survive eviction.
        let mut c: Bounded<u8> = Bounded::new(2, 100);
        c.insert(b"a", 1);
        c.insert(b"b", 2);
        assert_eq!(c.get(b"a"), Some(1));
        c.insert(b"c", 3);
        assert_eq!(
            (c.get(b"a"), c.get(b"b"), c.get(b"c")),
            (Some(1), None, Some(3))
        );
        // A disabled cache stores nothing.
        let mut c: Bounded<u8> = Bounded::new(0, 100);
        c.insert(b"a", 1);
        assert_eq!((c.get(b"a"), c.size()), (None, (0, 0)));
    }

    #[test]
    fn shared_cache_bound_holds_for_distinct_schemas() {
        let caches = Caches::new(MAX_ENTRIES, MAX_KEY_BYTES);
        for i in 0..(MAX_ENTRIES * 3) {
            let key = format!("schema {i}").into_bytes();
            let v = get_or_parse(&caches.manifest, &key, || Ok(ManifestSchema::default())).unwrap();
            assert!(v.is_empty());
        }
        let c = caches.manifest.lock().unwrap();
        assert_eq!(c.size().0, MAX_ENTRIES);
        assert_eq!((c.hits, c.misses), (0, (MAX_ENTRIES * 3) as u64));
    }

    #[test]
    fn failed_parse_is_not_cached() {
        let caches = Caches::new(4, 100);
        let e = get_or_parse::<ManifestSchema>(&caches.manifest, b"k", || Err("bad".into()));
        assert_eq!(e.err().as_deref(), Some("bad"));
        let ok = get_or_parse(&caches.manifest, b"k", || Ok(ManifestSchema::default()));
        assert!(ok.is_ok());
        let c = caches.manifest.lock().unwrap();
        assert_eq!((c.size().0, c.hits, c.misses), (1, 0, 2));
    }
}
