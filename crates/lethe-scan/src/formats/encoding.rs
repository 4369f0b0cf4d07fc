//! Text encodings: UTF-16 text (a spreadsheet tool's export) is recognised by its byte-order
//! mark, or without one by its pattern (NUL bytes in every other position of mostly-ASCII
//! text), and decoded to UTF-8 as it is read, so CSV, JSON and plain-text readers see the
//! same text a UTF-8 file would give them. Lines, rows and JSON pointers are therefore the
//! same as in the original; byte offsets are offsets in the decoded UTF-8 text.
//!
//! Guarantees: decoding is streaming (bounded memory); an unpaired surrogate becomes U+FFFD
//! instead of an error, and a trailing odd byte is ignored (it cannot be a character).
//!
//! Does not: detect other encodings (UTF-32, legacy code pages: such bytes are searched as
//! ASCII-compatible bytes, as before).

use std::io::{self, Read};

/// Byte order of UTF-16 text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Utf16 {
    /// Little endian (`FF FE`).
    Le,
    /// Big endian (`FE FF`).
    Be,
}

/// Fewest bytes the BOM-less pattern is judged on.
const MIN_PATTERN_BYTES: usize = 16;

/// UTF-16 by byte-order mark: the byte order and the mark's length.
pub(crate) fn bom(head: &[u8]) -> Option<Utf16> {
    if head.starts_with(&[0xff, 0xfe]) && !head.starts_with(&[0xff, 0xfe, 0, 0]) {
        // FF FE 00 00 would be a UTF-32 LE mark: not decoded here.
        Some(Utf16::Le)
    } else if head.starts_with(&[0xfe, 0xff]) {
        Some(Utf16::Be)
    } else {
        None
    }
}

/// UTF-16 without a byte-order mark: at least 40% of the bytes at odd (LE) or even (BE)
/// positions are NUL, at most 2% at the other positions, and the decoded head looks like text.
pub(crate) fn pattern(head: &[u8]) -> Option<Utf16> {
    let n = head.len() & !1;
    if n < MIN_PATTERN_BYTES {
        return None;
    }
    let units = n / 2;
    let even = head[..n].iter().step_by(2).filter(|&&b| b == 0).count();
    let odd = head[..n]
        .iter()
        .skip(1)
        .step_by(2)
        .filter(|&&b| b == 0)
        .count();
    let order = if odd * 10 >= units * 4 && even * 50 <= units {
        Utf16::Le
    } else if even * 10 >= units * 4 && odd * 50 <= units {
        Utf16::Be
    } else {
        return None;
    };
    decodes_to_text(&head[..n], order).then_some(order)
}

/// True when `bytes` decode to text: no NUL, and at most 5% control characters (other than
/// tab, line breaks and form feed) or unpaired surrogates.
pub(crate) fn decodes_to_text(bytes: &[u8], order: Utf16) -> bool {
    let decoded = decode_all(bytes, order);
    let mut chars = 0usize;
    let mut odd = 0usize;
    for c in decoded.chars() {
        chars += 1;
        if c == '\0' {
            return false;
        }
        if (c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x0c'))
            || c == char::REPLACEMENT_CHARACTER
        {
            odd += 1;
        }
    }
    odd * 20 <= chars
}

fn unit(pair: &[u8], order: Utf16) -> u16 {
    let (a, b) = match pair {
        [a, b, ..] => (*a, *b),
        _ => (0, 0),
    };
    match order {
        Utf16::Le => u16::from_le_bytes([a, b]),
        Utf16::Be => u16::from_be_bytes([a, b]),
    }
}

/// Decode whole UTF-16 bytes (no mark expected; an odd last byte is ignored).
pub(crate) fn decode_all(bytes: &[u8], order: Utf16) -> String {
    char::decode_utf16(bytes.chunks_exact(2).map(|p| unit(p, order)))
        .map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect()
}

/// Raw bytes decoded per step.
const STEP: usize = 64 << 10;

/// A reader giving UTF-8 for UTF-16 input (a leading byte-order mark is dropped).
pub(crate) struct Utf16Reader<R> {
    inner: R,
    order: Utf16,
    /// Undecoded input: an odd byte, or a high surrogate waiting for its pair.
    raw: Vec<u8>,
    /// Decoded UTF-8 not yet handed out, from `at`.
    out: Vec<u8>,
    at: usize,
    eof: bool,
    first: bool,
}

impl<R: Read> Utf16Reader<R> {
    /// Decode `inner` as UTF-16 in `order`.
    pub(crate) fn new(inner: R, order: Utf16) -> Self {
        Utf16Reader {
            inner,
            order,
            raw: Vec::with_capacity(STEP + 4),
            out: Vec::new(),
            at: 0,
            eof: false,
            first: true,
        }
    }

    fn refill(&mut self) -> io::Result<()> {
        self.out.clear();
        self.at = 0;
        while self.out.is_empty() && !self.eof {
            let start = self.raw.len();
            self.raw.resize(start + STEP, 0);
            let n = loop {
                match self.inner.read(&mut self.raw[start..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        self.raw.truncate(start);
                        return Err(e);
                    }
                }
            };
            self.raw.truncate(start + n);
            if n == 0 {
                self.eof = true;
            }
            if self.first && (self.raw.len() >= 2 || self.eof) {
                self.first = false;
                let mark = match self.order {
                    Utf16::Le => [0xff, 0xfe],
                    Utf16::Be => [0xfe, 0xff],
                };
                if self.raw.starts_with(&mark) {
                    self.raw.drain(..2);
                }
            } else if self.first {
                continue;
            }
            let mut usable = self.raw.len() & !1;
            if !self.eof && usable >= 2 {
                // Keep a trailing high surrogate for its pair.
                let last = unit(&self.raw[usable - 2..usable], self.order);
                if (0xd800..0xdc00).contains(&last) {
                    usable -= 2;
                }
            }
            let text = decode_all(&self.raw[..usable], self.order);
            self.out.extend_from_slice(text.as_bytes());
            self.raw.drain(..usable);
            if self.eof {
                // An odd trailing byte cannot be a character.
                self.raw.clear();
            }
        }
        Ok(())
    }
}

impl<R: Read> Read for Utf16Reader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.at >= self.out.len() {
            self.refill()?;
        }
        let rest = self.out.get(self.at..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.at += n;
        Ok(n)
    }
}

/// Drops a leading UTF-8 byte-order mark from `r`.
pub(crate) fn skip_utf8_bom(r: &mut dyn Read) -> io::Result<impl Read + '_> {
    let mut head = Vec::with_capacity(3);
    r.take(3).read_to_end(&mut head)?;
    if head == b"\xef\xbb\xbf" {
        head.clear();
    }
    Ok(io::Cursor::new(head).chain(r))
}

/// `s` in UTF-16 of `order`, with or without a byte-order mark (tests).
#[cfg(test)]
pub(crate) fn utf16(s: &str, order: Utf16, mark: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if mark {
        out.extend_from_slice(match order {
            Utf16::Le => &[0xff, 0xfe],
            Utf16::Be => &[0xfe, 0xff],
        });
    }
    for u in s.encode_utf16() {
        out.extend_from_slice(&match order {
            Utf16::Le => u.to_le_bytes(),
            Utf16::Be => u.to_be_bytes(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads with a tiny buffer from a reader that returns one byte at a time, so every
    /// split (odd byte, surrogate pair) is met.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((b, rest)), Some(slot)) => {
                    *slot = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn decodes_both_orders_across_every_split() {
        let s = "id,email\n1,Zoë 😀 someone@example.org\r\n";
        for order in [Utf16::Le, Utf16::Be] {
            for mark in [true, false] {
                let bytes = utf16(s, order, mark);
                let mut got = String::new();
                Utf16Reader::new(Trickle(&bytes), order)
                    .read_to_string(&mut got)
                    .unwrap();
                assert_eq!(got, s, "{order:?} mark {mark}");
                let mut got = String::new();
                Utf16Reader::new(bytes.as_slice(), order)
                    .read_to_string(&mut got)
                    .unwrap();
                assert_eq!(got, s);
            }
        }
    }

    #[test]
    fn unpaired_surrogates_and_odd_bytes_do_not_fail() {
        let mut bytes = vec![0x00, 0xd8, b'a', 0]; // lone high surrogate, then 'a'
        bytes.push(0x41); // odd trailing byte
        let mut got = String::new();
        Utf16Reader::new(bytes.as_slice(), Utf16::Le)
            .read_to_string(&mut got)
            .unwrap();
        assert_eq!(got, "\u{fffd}a");
    }

    #[test]
    fn detection() {
        let text = "learner_id,email\n3590,someone@example.org\n";
        assert_eq!(bom(&utf16(text, Utf16::Le, true)), Some(Utf16::Le));
        assert_eq!(bom(&utf16(text, Utf16::Be, true)), Some(Utf16::Be));
        assert_eq!(bom(b"\xff\xfe\0\0abcd"), None);
        assert_eq!(bom(text.as_bytes()), None);
        assert_eq!(pattern(&utf16(text, Utf16::Le, false)), Some(Utf16::Le));
        assert_eq!(pattern(&utf16(text, Utf16::Be, false)), Some(Utf16::Be));
        assert_eq!(pattern(text.as_bytes()), None);
        // Binary with alternating NULs that does not decode to text.
        let binary: Vec<u8> = (0..64u8).flat_map(|i| [i % 7 + 1, 0]).collect();
        assert_eq!(pattern(&binary), None);
        assert_eq!(pattern(&[0u8; 64]), None);
        assert_eq!(pattern(b"a\0b\0"), None);
    }
}
