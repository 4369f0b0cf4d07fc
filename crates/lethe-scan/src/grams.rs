//! "Does this buffer hold any of many patterns?", at a cost per byte that does not grow with
//! the number of patterns.
//!
//! Aho-Corasick answers it exactly. For a few patterns its packed SIMD searcher (Teddy) is
//! very fast, but the automaton does not always pick it: when the patterns share one or two
//! "rare" bytes (a `.` or a space, as emails, names and phone numbers do) it prefers a rare-byte
//! prefilter, and on text full of those bytes (network addresses, names) that runs the DFA
//! over nearly every byte. So up to [`AUTOMATON_ALONE`] patterns are searched with the packed
//! searcher itself ([`Finder`]), the automaton only where SIMD is missing. For thousands of
//! patterns the DFA outgrows the CPU caches and slows down several times. [`Grams`] then
//! stands in front of it with a q-gram filter:
//!
//! - patterns of at least `L` bytes (L = 15, 11, 8: tiers) are known by their 8-byte
//!   substrings (grams) at offsets `0..=L-8`. Any occurrence of such a pattern covers a
//!   position that is a multiple of `L-7`, and the gram there is one of the pattern's: so only
//!   every `L-7`th position of the buffer is looked at (every 8th for value prefixes);
//! - patterns shorter than 8 bytes, and tiers of a few patterns, are searched with an
//!   automaton of their own.
//!
//! Before any of that, when up to three bytes cover the patterns (every pattern holds one),
//! a buffer without any of them (a page of numbers, codes or network addresses) holds none:
//! that is one SIMD pass ([`memchr`]).
//!
//! A gram is looked up in a bit sketch (a Bloom filter with two hashes in one word, small
//! enough for the first-level cache) and, when the sketch says maybe, in a hash set of grams;
//! only then is the tier's own automaton run, over the window an occurrence through that gram
//! could span. Those windows are short and rare, so that automaton is an NFA: a DFA of
//! thousands of patterns took longer to build than the scan it served.
//!
//! The answer is exact: true if and only if a pattern occurs in the buffer.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

/// The minimum pattern lengths of the gram tiers, longest first; a tier looks at every
/// `min_len - 7`th position (value prefixes are 15 characters, so at least 15 bytes).
const TIERS: [usize; 3] = [15, 11, 8];
/// Multiplier of the gram hash (a 64-bit odd constant with well-mixed high bits).
const HASH: u64 = 0x9e37_79b9_7f4a_7c15;
/// Fewer patterns than this are searched whole, without gram filters, by the packed SIMD
/// searcher ([`Finder`]: Teddy takes up to 64 patterns, and is faster than the grams for a few
/// dozen).
const AUTOMATON_ALONE: usize = 64;
/// Bits of the largest sketch, as a power of two (`1 << 18` bits, 32 KiB: the first-level
/// cache).
const SKETCH_MAX_BITS: u32 = 18;
/// Words of the largest sketch.
const SKETCH_WORDS: usize = 1 << (SKETCH_MAX_BITS - 6);

/// A set of byte patterns to test buffers against (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Grams {
    /// Every pattern, for whole buffers, when there are few (no gram tiers).
    few: Option<Finder>,
    /// Up to three bytes such that every pattern holds one of them, if there are.
    cover: Option<Vec<u8>>,
    /// With many patterns: gram filters (long patterns first), and the other patterns.
    tiers: Vec<Tier>,
    short: Option<Finder>,
}

/// "Does the buffer hold one of these patterns?" for fewer than [`AUTOMATON_ALONE`]
/// patterns: the packed SIMD searcher when the CPU has it, else the automaton.
#[derive(Clone, Debug)]
enum Finder {
    Packed(aho_corasick::packed::Searcher),
    Automaton(AhoCorasick),
}

impl Finder {
    fn new(patterns: &[&[u8]]) -> Result<Finder, aho_corasick::BuildError> {
        if patterns.len() < AUTOMATON_ALONE {
            // Leftmost-first reports a match whenever any pattern occurs.
            let packed = aho_corasick::packed::Config::new()
                .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
                .builder()
                .extend(patterns)
                .build();
            if let Some(p) = packed {
                return Ok(Finder::Packed(p));
            }
        }
        Ok(Finder::Automaton(automaton(patterns)?))
    }

    fn is_match(&self, hay: &[u8]) -> bool {
        match self {
            Finder::Packed(p) => p.find(hay).is_some(),
            Finder::Automaton(a) => a.is_match(hay),
        }
    }
}

/// The grams of the patterns of at least `min_len` bytes (and shorter than the tier before).
#[derive(Clone, Debug)]
struct Tier {
    min_len: usize,
    /// The tier's patterns, as an automaton: checks the windows the gram filter points at.
    /// Those are short and few, so it is an NFA (quick to build for thousands of patterns),
    /// not a DFA.
    verify: AhoCorasick,
    /// The tier's longest pattern, in bytes.
    max_len: usize,
    /// The bit sketch: `1 << sketch_bits` bits are used, in a table of the largest size so
    /// that a masked index needs no bounds check.
    sketch: Box<[u64; SKETCH_WORDS]>,
    sketch_bits: u32,
    grams: GramSet,
}

/// An exact set of grams: open addressing, linear probing, at most half full.
#[derive(Clone, Debug)]
struct GramSet {
    /// `1 << bits` slots; `EMPTY` marks a free one.
    slots: Vec<u64>,
    bits: u32,
    /// Whether `EMPTY` itself is a member.
    has_empty: bool,
}

const EMPTY: u64 = u64::MAX;
/// Multiplier of the set's hash (another odd constant than [`HASH`]).
const SET_HASH: u64 = 0xc2b2_ae3d_27d4_eb4f;

impl GramSet {
    fn new(grams: &[u64]) -> GramSet {
        let bits = (grams.len().max(1) * 2)
            .next_power_of_two()
            .trailing_zeros()
            .max(4);
        let mut set = GramSet {
            slots: vec![EMPTY; 1 << bits],
            bits,
            has_empty: false,
        };
        for &g in grams {
            if g == EMPTY {
                set.has_empty = true;
                continue;
            }
            let mask = set.slots.len() - 1;
            let mut i = set.home(g);
            while set.slots[i] != EMPTY && set.slots[i] != g {
                i = (i + 1) & mask;
            }
            set.slots[i] = g;
        }
        set
    }

    fn home(&self, g: u64) -> usize {
        (g.wrapping_mul(SET_HASH) >> (64 - self.bits)) as usize
    }

    fn contains(&self, g: u64) -> bool {
        if g == EMPTY {
            return self.has_empty;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(g);
        loop {
            match self.slots.get(i) {
                Some(&s) if s == g => return true,
                Some(&EMPTY) | None => return false,
                Some(_) => i = (i + 1) & mask,
            }
        }
    }
}

impl Tier {
    fn new(min_len: usize, patterns: &[&[u8]]) -> Result<Tier, aho_corasick::BuildError> {
        let mut grams: Vec<u64> = patterns
            .iter()
            .flat_map(|p| (0..=min_len - 8).filter_map(|o| gram(p.get(o..)?)))
            .collect();
        grams.sort_unstable();
        grams.dedup();
        // About 16 bits per gram (a few % false "maybe" with two hashes), at most 32 KiB:
        // the sketch is read at every position looked at and must stay in the L1 cache; the
        // set, read only after a "maybe", may not.
        let sketch_bits = (grams.len().max(1) * 16)
            .next_power_of_two()
            .trailing_zeros()
            .clamp(12, SKETCH_MAX_BITS);
        let mut t = Tier {
            min_len,
            verify: AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .kind(Some(AhoCorasickKind::ContiguousNFA))
                .build(patterns)?,
            max_len: patterns.iter().map(|p| p.len()).max().unwrap_or(0),
            sketch: Box::new([0u64; SKETCH_WORDS]),
            sketch_bits,
            grams: GramSet::new(&grams),
        };
        for &g in &grams {
            let (word, bits) = t.slot(g);
            t.sketch[word] |= bits;
        }
        Ok(t)
    }

    /// The sketch word of a gram and the two bits it sets there.
    fn slot(&self, gram: u64) -> (usize, u64) {
        // The high bits of the product depend on every byte of the gram.
        let h = gram.wrapping_mul(HASH);
        let word = (h >> (64 - (self.sketch_bits - 6))) as usize & (SKETCH_WORDS - 1);
        let bits = (1u64 << ((h >> 40) & 63)) | (1u64 << ((h >> 34) & 63));
        (word, bits)
    }

    /// False when `g` is certainly not a gram of the tier (the sketch alone).
    fn maybe(&self, g: u64) -> bool {
        let (word, bits) = self.slot(g);
        self.sketch[word] & bits == bits
    }

    fn has(&self, g: u64) -> bool {
        self.maybe(g) && self.grams.contains(g)
    }
}

fn automaton(patterns: &[&[u8]]) -> Result<AhoCorasick, aho_corasick::BuildError> {
    AhoCorasick::builder()
        .match_kind(MatchKind::Standard)
        .kind(Some(AhoCorasickKind::DFA))
        .build(patterns)
}

impl Grams {
    /// Compile `patterns` (none empty; case-sensitive, as bytes). None when there are none.
    pub fn new(patterns: &[Vec<u8>]) -> Result<Option<Grams>, aho_corasick::BuildError> {
        if patterns.is_empty() {
            return Ok(None);
        }
        let refs: Vec<&[u8]> = patterns.iter().map(Vec::as_slice).collect();
        let cover = cover(&refs);
        if patterns.len() < AUTOMATON_ALONE {
            return Ok(Some(Grams {
                few: Some(Finder::new(&refs)?),
                cover,
                tiers: Vec::new(),
                short: None,
            }));
        }
        // Tiers by length: a longer minimum allows a longer stride (8, 4, 1 positions). A
        // tier of a few patterns, and patterns under 8 bytes, go to one automaton.
        let mut tiers = Vec::new();
        let mut rest: Vec<&[u8]> = Vec::new();
        let mut upper = usize::MAX;
        for min_len in TIERS {
            let members: Vec<&[u8]> = refs
                .iter()
                .copied()
                .filter(|p| p.len() >= min_len && p.len() < upper)
                .collect();
            if members.len() < AUTOMATON_ALONE {
                rest.extend(members);
            } else {
                tiers.push(Tier::new(min_len, &members)?);
            }
            upper = min_len;
        }
        rest.extend(refs.iter().copied().filter(|p| p.len() < upper));
        Ok(Some(Grams {
            few: None,
            cover,
            tiers,
            short: if rest.is_empty() {
                None
            } else {
                Some(Finder::new(&rest)?)
            },
        }))
    }

    /// True when some pattern occurs in `hay`.
    pub fn is_match(&self, hay: &[u8]) -> bool {
        // A buffer without any byte of the cover (numbers, codes, network addresses...) holds
        // no pattern: one SIMD pass instead of the search.
        let covered = match self.cover.as_deref() {
            Some(&[a]) => memchr::memchr(a, hay).is_some(),
            Some(&[a, b]) => memchr::memchr2(a, b, hay).is_some(),
            Some(&[a, b, c]) => memchr::memchr3(a, b, c, hay).is_some(),
            _ => true,
        };
        if !covered {
            return false;
        }
        if let Some(few) = &self.few {
            return few.is_match(hay);
        }
        if self.short.as_ref().is_some_and(|s| s.is_match(hay)) {
            return true;
        }
        self.tiers.iter().any(|t| match t.min_len - 7 {
            8 => Self::tier_match::<8>(t, hay),
            4 => Self::tier_match::<4>(t, hay),
            // Stride 1 (every position) is right for any tier, if slower.
            _ => Self::tier_match::<1>(t, hay),
        })
    }

    /// True when a pattern of tier `t` occurs in `hay`. Every occurrence of one covers a
    /// multiple of `S` (= `min_len - 7`) with one of its grams, and starts at most `S - 1`
    /// bytes before it: so only those positions are looked at, and the automaton is run only
    /// around a position whose gram is the tier's.
    fn tier_match<const S: usize>(t: &Tier, hay: &[u8]) -> bool {
        let found_at = |j: usize, g: u64| {
            t.has(g) && {
                let start = j.saturating_sub(S - 1);
                let end = hay.len().min(j + t.max_len);
                hay.get(start..end).is_some_and(|w| t.verify.is_match(w))
            }
        };
        let mut j = 0;
        // Four positions at a time, from one 32-byte block (their grams end within it, as
        // 3 * S + 8 <= 32): their sketch words are read together and one branch tells
        // whether any of the four may hold a gram (then each is looked at in turn).
        while let Some(block) = hay.get(j..).and_then(<[u8]>::first_chunk::<32>) {
            let g = [
                gram_in(block, 0),
                gram_in(block, S),
                gram_in(block, 2 * S),
                gram_in(block, 3 * S),
            ];
            if (t.maybe(g[0]) | t.maybe(g[1]) | t.maybe(g[2]) | t.maybe(g[3]))
                && g.iter().enumerate().any(|(k, &g)| found_at(j + k * S, g))
            {
                return true;
            }
            j += 4 * S;
        }
        while let Some(g) = hay.get(j..).and_then(gram) {
            if found_at(j, g) {
                return true;
            }
            j += S;
        }
        false
    }
}

/// Up to three bytes such that every pattern holds at least one: greedily the byte most
/// uncovered patterns hold, punctuation and spaces before letters and digits (text without
/// them is common: codes, numbers, addresses). None when three don't do.
fn cover(patterns: &[&[u8]]) -> Option<Vec<u8>> {
    let mut left: Vec<&[u8]> = patterns.to_vec();
    let mut chosen = Vec::new();
    while !left.is_empty() {
        if chosen.len() == 3 {
            return None;
        }
        let mut counts = [0usize; 256];
        for p in &left {
            let mut seen = [false; 256];
            for &b in *p {
                if !seen[usize::from(b)] {
                    seen[usize::from(b)] = true;
                    counts[usize::from(b)] += 1;
                }
            }
        }
        let rank = |b: u8| (counts[usize::from(b)], !b.is_ascii_alphanumeric());
        let best = (0..=255u8).max_by_key(|&b| rank(b))?;
        chosen.push(best);
        left.retain(|p| !p.contains(&best));
    }
    Some(chosen)
}

/// The 8 bytes of `block` at `at` (at most 24), little-endian.
#[inline(always)]
fn gram_in(block: &[u8; 32], at: usize) -> u64 {
    let mut g = [0u8; 8];
    g.copy_from_slice(&block[at..at + 8]);
    u64::from_le_bytes(g)
}

/// The first 8 bytes of `p`, little-endian; None when shorter.
fn gram(p: &[u8]) -> Option<u64> {
    p.first_chunk::<8>().map(|b| u64::from_le_bytes(*b))
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// The answer is the automaton's, for few (the packed searcher) and many patterns
    /// (the gram filters), short, medium and long, on random buffers with and without planted
    /// patterns.
    #[test]
    fn answers_as_the_automaton_does() {
        let seed = crate::test_seed(5);
        let mut rng = StdRng::seed_from_u64(seed);
        for count in [1, 10, 63, 64, 300, 3000] {
            for lengths in [1..8, 8..15, 15..40, 1..40] {
                let patterns: Vec<Vec<u8>> = (0..count)
                    .map(|_| {
                        let n = rng.random_range(lengths.clone());
                        (0..n).map(|_| rng.random_range(b'a'..=b'f')).collect()
                    })
                    .collect();
                let grams = Grams::new(&patterns).unwrap().unwrap();
                let refs: Vec<&[u8]> = patterns.iter().map(Vec::as_slice).collect();
                let reference = automaton(&refs).unwrap();
                for _ in 0..300 {
                    let n = if rng.random_bool(0.2) {
                        rng.random_range(200..3000)
                    } else {
                        rng.random_range(0..200)
                    };
                    // Sometimes without the first letters: buffers the cover rejects.
                    let low = if rng.random_bool(0.3) { b'c' } else { b'a' };
                    let mut hay: Vec<u8> = (0..n).map(|_| rng.random_range(low..=b'h')).collect();
                    if rng.random_bool(0.3) {
                        let p = &patterns[rng.random_range(0..patterns.len())];
                        let at = rng.random_range(0..=hay.len());
                        hay.splice(at..at, p.iter().copied());
                    }
                    assert_eq!(
                        grams.is_match(&hay),
                        reference.is_match(&hay),
                        "seed {seed}: {count} patterns of {lengths:?} bytes, haystack {hay:?}"
                    );
                }
            }
        }
        assert!(Grams::new(&[]).unwrap().is_none());
    }
}
