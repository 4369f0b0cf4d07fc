//! Plain text (and any byte stream searched as text, e.g. Puffin blobs): read in chunks of
//! [`CHUNK`] bytes with an overlap of at least four times the longest pattern, so memory is
//! bounded and a trace across a chunk border is still found exactly once.
//!
//! UTF-16 text is decoded before it gets here (see [`super::encoding`]).
//!
//! Does not: decode other non-UTF-8 encodings (bytes that are not UTF-8 are searched as
//! ASCII-compatible bytes).

use std::io::{self, Read};

use crate::report::{Hits, Place};

/// Bytes read per step.
pub(crate) const CHUNK: usize = 1 << 20;

/// How a text position is described in a hit's detail.
#[derive(Clone, Copy)]
pub(crate) enum Position {
    /// "line N".
    Line,
    /// "byte offset N".
    Offset,
}

/// Read `r` to the end, searching value prefixes. `group` prefixes the detail and keys the
/// aggregation (use "" for one hit per subject and kind).
pub(crate) fn scan_text(
    r: &mut dyn Read,
    hits: &mut Hits,
    place: Place,
    group: &str,
    position: Position,
) -> io::Result<()> {
    let overlap = 4 * hits.traces.max_pattern_bytes() + 8;
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + overlap);
    let mut carry = 0usize;
    let mut base_offset = 0u64;
    let mut base_line = 1u64;
    loop {
        let before = buf.len();
        let eof = fill(r, &mut buf, CHUNK)?;
        if buf.len() == before {
            break;
        }
        let mut found = Vec::new();
        hits.traces.search_positions(&buf, |o, s, e| {
            if e > carry {
                found.push((s, o));
            }
        });
        found.sort_by_key(|(s, _)| *s);
        let mut line = base_line;
        let mut at = 0usize;
        for (s, o) in found {
            let s = s.min(buf.len());
            if s > at {
                line += count_newlines(&buf[at..s]);
                at = s;
            }
            let offset = base_offset + s as u64;
            let detail = || {
                let pos = match position {
                    Position::Line => format!("line {line}"),
                    Position::Offset => format!("byte offset {offset}"),
                };
                if group.is_empty() {
                    pos
                } else {
                    format!("{group}, {pos}")
                }
            };
            hits.value(place, o, group, &detail);
        }
        if eof {
            break;
        }
        let keep = overlap.min(buf.len());
        let cut = buf.len() - keep;
        base_line += count_newlines(&buf[..cut]);
        base_offset += cut as u64;
        buf.drain(..cut);
        carry = buf.len();
    }
    Ok(())
}

/// Append up to `want` bytes; true at end of input.
pub(crate) fn fill(r: &mut dyn Read, buf: &mut Vec<u8>, want: usize) -> io::Result<bool> {
    let mut got = 0usize;
    let start = buf.len();
    buf.resize(start + want, 0);
    let result = loop {
        if got == want {
            break Ok(false);
        }
        match r.read(&mut buf[start + got..]) {
            Ok(0) => break Ok(true),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    buf.truncate(start + got);
    result
}

fn count_newlines(b: &[u8]) -> u64 {
    b.iter().filter(|&&c| c == b'\n').count() as u64
}

/// Heuristic: does this head of a file look like text? (no NUL; valid UTF-8 or at most 5%
/// control characters).
pub(crate) fn looks_like_text(head: &[u8]) -> bool {
    if head.contains(&0) {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) if e.error_len().is_none() => true,
        Err(_) => {
            let control = head
                .iter()
                .filter(|&&c| c < 0x20 && !matches!(c, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b))
                .count();
            control * 20 <= head.len()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traces::{SubjectTraces, TraceSet, ValueTrace};

    fn traces(values: &[&str]) -> TraceSet {
        let subjects: Vec<SubjectTraces> = values
            .iter()
            .map(|v| SubjectTraces {
                label: String::new(),
                ids: vec![],
                values: vec![ValueTrace {
                    kind: "k".into(),
                    value: (*v).into(),
                }],
            })
            .collect();
        TraceSet::new(&subjects, 15).unwrap()
    }

    #[test]
    fn trace_across_chunk_border_is_found_once_with_its_line() {
        let ts = traces(&["needle.person@example.org"]);
        let mut text = Vec::new();
        text.extend(std::iter::repeat_n(b'a', CHUNK - 5));
        text.extend_from_slice(b"\n\nNEEDLE.PERSON@EXAMPLE.ORG\n");
        text.extend(std::iter::repeat_n(b'b', CHUNK));
        let mut hits = Hits::new(&ts, false);
        scan_text(
            &mut text.as_slice(),
            &mut hits,
            Place::Text,
            "",
            Position::Line,
        )
        .unwrap();
        let (hits, _) = hits.finish();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].count, 1);
        assert_eq!(hits[0].detail, "line 3");
    }

    #[test]
    fn counts_every_occurrence_once() {
        let ts = traces(&["needle.person@example.org"]);
        let mut text = Vec::new();
        for _ in 0..3000 {
            text.extend_from_slice(b"filler filler filler needle.person@example.org\n");
            text.extend(std::iter::repeat_n(b'x', 997));
        }
        let mut hits = Hits::new(&ts, false);
        scan_text(
            &mut text.as_slice(),
            &mut hits,
            Place::Text,
            "",
            Position::Line,
        )
        .unwrap();
        let (hits, _) = hits.finish();
        assert_eq!(hits[0].count, 3000);
    }

    #[test]
    fn text_heuristic() {
        assert!(looks_like_text(b"hello\nworld"));
        assert!(looks_like_text("héllo".as_bytes()));
        assert!(!looks_like_text(b"PAR1\0\0\x01"));
        assert!(looks_like_text(&[b'a', 0xe9, b'b', b'c']));
    }
}
