//! Deletion vectors (`deletion-vector-v1` Puffin blobs): bitmaps of the row positions a data
//! file's deletes hide, read as positions, never searched as text.
//!
//! A blob is the combined length of magic and bitmap (4 bytes, big-endian), the magic
//! `D1 D3 39 64`, a 64-bit Roaring bitmap in the portable format (read by the `roaring`
//! crate), and a CRC-32 of magic and bitmap (4 bytes, big-endian). It holds positions only: no
//! value of a row can be in it, so its bytes are validated, not searched (searching them as
//! text would report whatever the bitmap's bytes happen to spell).
//!
//! Guarantees: the length field, the magic, the checksum, a bitmap that fills the blob
//! exactly, no compression (the spec forbids it), and the blob's `cardinality` property when
//! present are all checked; anything else makes the Puffin file unreadable, with the reason.

use std::io::{Cursor, Read};

use roaring::RoaringTreemap;

/// The Puffin blob type of a deletion vector.
pub(crate) const BLOB_TYPE: &str = "deletion-vector-v1";
const MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];

/// Reads a deletion vector blob of `length` bytes and checks it; returns how many positions it
/// deletes. `cardinality` is the blob's property, when it has one.
pub(crate) fn check_deletion_vector(
    blob: impl Read,
    length: u64,
    cardinality: Option<&str>,
) -> Result<u64, String> {
    let mut bytes = Vec::new();
    blob.take(length)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("read error: {e}"))?;
    if (bytes.len() as u64) < length {
        return Err(format!("ends after {} of {length} bytes", bytes.len()));
    }
    if bytes.len() < 12 {
        return Err(format!(
            "{} bytes is too short for a deletion vector",
            bytes.len()
        ));
    }
    let n = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    if n != bytes.len() - 8 {
        return Err(format!(
            "its length field says {n} bytes, the blob holds {}",
            bytes.len() - 8
        ));
    }
    let body = &bytes[4..4 + n];
    if body[..4] != MAGIC {
        return Err("bad deletion vector magic (expected D1 D3 39 64)".into());
    }
    let stored = u32::from_be_bytes([bytes[4 + n], bytes[5 + n], bytes[6 + n], bytes[7 + n]]);
    if stored != crc32fast::hash(body) {
        return Err("deletion vector checksum mismatch".into());
    }
    let mut cursor = Cursor::new(&body[4..]);
    let bitmap = RoaringTreemap::deserialize_from(&mut cursor)
        .map_err(|e| format!("not a portable Roaring bitmap: {e}"))?;
    if cursor.position() as usize != body.len() - 4 {
        return Err("the bitmap does not fill the blob".into());
    }
    if let Some(c) = cardinality {
        let declared: u64 = c
            .parse()
            .map_err(|_| "its `cardinality` property is not a number".to_string())?;
        if declared != bitmap.len() {
            return Err(format!(
                "it holds {} positions, its `cardinality` property says {declared}",
                bitmap.len()
            ));
        }
    }
    Ok(bitmap.len())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::{FileStatus, TraceSet, scan_bytes};

    fn blob(positions: &[u64]) -> Vec<u8> {
        let bitmap: RoaringTreemap = positions.iter().copied().collect();
        let mut body = MAGIC.to_vec();
        bitmap.serialize_into(&mut body).unwrap();
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        out
    }

    /// One blob of a test Puffin file: type, codec, bytes, `cardinality` property.
    type TestBlob<'a> = (&'a str, Option<&'a str>, Vec<u8>, Option<u64>);

    /// A Puffin file of `blobs`.
    fn puffin(blobs: &[TestBlob<'_>]) -> Vec<u8> {
        let mut out = b"PFA1".to_vec();
        let mut metas = Vec::new();
        for (ty, codec, data, card) in blobs {
            let stored = match codec {
                Some("lz4") => {
                    let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
                    e.write_all(data).unwrap();
                    e.finish().unwrap()
                }
                _ => data.clone(),
            };
            let codec = codec
                .map(|c| format!(r#","compression-codec":"{c}""#))
                .unwrap_or_default();
            let props = card
                .map(|c| {
                    format!(
                        r#","properties":{{"referenced-data-file":"file:/w/t/data/a.parquet","cardinality":"{c}"}}"#
                    )
                })
                .unwrap_or_default();
            metas.push(format!(
                r#"{{"type":"{ty}","fields":[],"snapshot-id":-1,"sequence-number":-1,"offset":{},"length":{}{codec}{props}}}"#,
                out.len(),
                stored.len()
            ));
            out.extend_from_slice(&stored);
        }
        let payload = format!(r#"{{"blobs":[{}],"properties":{{}}}}"#, metas.join(","));
        out.extend_from_slice(b"PFA1");
        out.extend_from_slice(payload.as_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(b"PFA1");
        out
    }

    fn traces() -> TraceSet {
        TraceSet::new(
            &[crate::traces::SubjectTraces {
                label: "s".into(),
                ids: Vec::new(),
                values: vec![crate::traces::ValueTrace {
                    kind: "email".into(),
                    value: "abcdef@example.org".into(),
                }],
            }],
            4,
        )
        .unwrap()
    }

    #[test]
    fn vectors_are_read_as_positions_and_other_blobs_are_searched() {
        // Positions 0x6261 and 0x6463 are stored as the bytes "ab" "cd": searched as text, the
        // bitmap would hold the subject's value prefix "abcd".
        let dv = blob(&[0x6261, 0x6463]);
        assert!(dv.windows(4).any(|w| w == b"abcd"), "the trap is set");
        let f = puffin(&[
            (BLOB_TYPE, None, dv, Some(2)),
            (
                "apache-datasketches-theta-v1",
                Some("lz4"),
                b"x abcdef@example.org".to_vec(),
                None,
            ),
        ]);
        let r = scan_bytes(&traces(), "t/data/x-deletes.puffin", &f, false);
        assert!(matches!(r.status, FileStatus::Read), "{:?}", r.status);
        assert_eq!(r.hits.len(), 1, "{:?}", r.hits);
        assert!(r.hits[0].detail.contains("blob 1"), "{:?}", r.hits);
    }

    #[test]
    fn a_corrupt_vector_makes_the_file_unreadable() {
        let good = blob(&[1, 5, 9]);
        let mut magic = good.clone();
        magic[4] = 0;
        let mut crc = good.clone();
        let n = crc.len();
        crc[n - 1] ^= 1;
        let mut long = good.clone();
        long[3] += 1;
        for (bytes, codec, card, why) in [
            (magic, None, Some(3), "magic"),
            (crc, None, Some(3), "checksum"),
            (long, None, Some(3), "length"),
            (good.clone(), None, Some(4), "cardinality"),
            (good.clone(), Some("lz4"), Some(3), "compressed"),
        ] {
            let f = puffin(&[(BLOB_TYPE, codec, bytes, card)]);
            let r = scan_bytes(&traces(), "x.puffin", &f, false);
            match &r.status {
                FileStatus::Unreadable { reason } => {
                    assert!(reason.contains(why), "{why}: {reason}")
                }
                other => panic!("{why}: {other:?}"),
            }
        }
        let ok = puffin(&[(BLOB_TYPE, None, good, Some(3))]);
        assert!(!scan_bytes(&traces(), "x.puffin", &ok, false).is_unreadable());
    }
}
