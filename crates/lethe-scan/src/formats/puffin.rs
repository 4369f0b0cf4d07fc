//! Puffin files (Iceberg statistics and deletion vectors).
//!
//! Layout: `PFA1` blob* footer, footer = `PFA1` payload payload-size(u32 LE) flags(u32 LE)
//! `PFA1`. The payload is JSON (LZ4-framed when flag bit 0 is set) listing blobs by offset
//! and length with an optional `compression-codec` (`zstd` or `lz4`).
//!
//! Guarantees: the magic at both ends, the footer and every blob's range are checked before
//! reading; a `deletion-vector-v1` blob is read as a deletion vector (positions, validated, not
//! searched: see [`super::deletion_vector`]); every other blob is decompressed as a stream and
//! searched as text (value prefixes) -> `PuffinBlob`; the footer JSON (blob and file
//! properties, where a vector's `referenced-data-file` is) is searched too. Anything malformed,
//! a corrupt deletion vector or an unknown codec makes the file unreadable.
//!
//! Does not: interpret sketches (theta sketches hold hashes, which cannot be searched).

use std::io::Read;

use parquet::file::reader::ChunkReader;
use serde_json::Value;

use crate::formats::text::{Position, scan_text};
use crate::formats::{deletion_vector, json};
use crate::report::{Hits, Place};

const MAGIC: &[u8; 4] = b"PFA1";
/// Largest footer payload accepted (bytes, compressed or not).
const MAX_FOOTER: u64 = 64 << 20;

/// Read a Puffin file.
pub(crate) fn scan_puffin<R: ChunkReader>(src: &R, hits: &mut Hits) -> Result<(), String> {
    let len = src.len();
    if len < 20 {
        return Err(format!("too short for Puffin ({len} bytes)"));
    }
    let get = |start: u64, n: u64| -> Result<bytes::Bytes, String> {
        let n_usize = usize::try_from(n).map_err(|_| "range too large".to_string())?;
        match start.checked_add(n) {
            Some(end) if end <= len => {}
            _ => {
                return Err(format!(
                    "range {start}+{n} is outside the file ({len} bytes)"
                ));
            }
        }
        src.get_bytes(start, n_usize)
            .map_err(|e| format!("read error at {start}: {e}"))
    };
    if get(0, 4)?.as_ref() != MAGIC {
        return Err("missing Puffin magic at start".into());
    }
    let tail = get(len - 12, 12)?;
    if &tail[8..12] != MAGIC {
        return Err("missing Puffin magic at end".into());
    }
    let payload_size = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    let flags = u32::from_le_bytes([tail[4], tail[5], tail[6], tail[7]]);
    if payload_size > MAX_FOOTER {
        return Err(format!(
            "footer payload of {payload_size} bytes is larger than {MAX_FOOTER}"
        ));
    }
    let footer_start = (len - 12)
        .checked_sub(payload_size)
        .and_then(|x| x.checked_sub(4))
        .filter(|&s| s >= 4)
        .ok_or_else(|| format!("footer payload size {payload_size} does not fit in the file"))?;
    if get(footer_start, 4)?.as_ref() != MAGIC {
        return Err("missing Puffin magic at the start of the footer".into());
    }
    let raw = get(footer_start + 4, payload_size)?;
    let payload: Vec<u8> = if flags & 1 == 1 {
        let mut out = Vec::new();
        lz4_flex::frame::FrameDecoder::new(raw.as_ref())
            .take(MAX_FOOTER + 1)
            .read_to_end(&mut out)
            .map_err(|e| format!("footer LZ4 frame: {e}"))?;
        if out.len() as u64 > MAX_FOOTER {
            return Err("decompressed footer too large".into());
        }
        out
    } else {
        raw.to_vec()
    };
    let footer: Value =
        serde_json::from_slice(&payload).map_err(|e| format!("footer: {}", json::describe(&e)))?;
    let blobs = match footer.get("blobs") {
        Some(Value::Array(b)) => b,
        _ => return Err("footer has no `blobs` array".into()),
    };
    // Validate every blob before reading any.
    let mut plan = Vec::new();
    for (i, b) in blobs.iter().enumerate() {
        let offset = b.get("offset").and_then(Value::as_u64);
        let length = b.get("length").and_then(Value::as_u64);
        let (Some(offset), Some(length)) = (offset, length) else {
            return Err(format!("blob {i}: missing offset or length"));
        };
        match offset.checked_add(length) {
            Some(end) if offset >= 4 && end <= footer_start => {}
            _ => {
                return Err(format!(
                    "blob {i}: range {offset}+{length} is outside the blob area"
                ));
            }
        }
        let codec = match b.get("compression-codec") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) if c == "zstd" || c == "lz4" => Some(c.clone()),
            Some(Value::String(c)) => {
                let c: String = c.chars().take(32).collect();
                return Err(format!("blob {i}: unknown compression codec `{c}`"));
            }
            Some(_) => return Err(format!("blob {i}: compression-codec is not a string")),
        };
        let ty: String = b
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .chars()
            .take(64)
            .collect();
        if ty == deletion_vector::BLOB_TYPE && codec.is_some() {
            return Err(format!(
                "blob {i}: a deletion vector must not be compressed (compression-codec is set)"
            ));
        }
        let cardinality = b
            .get("properties")
            .and_then(|p| p.get("cardinality"))
            .and_then(Value::as_str)
            .map(str::to_string);
        plan.push((offset, length, codec, ty, cardinality));
    }
    let mut pointer = String::new();
    json::walk(&footer, hits, Place::PuffinBlob, &mut pointer, None, None);
    for (i, (offset, length, codec, ty, cardinality)) in plan.into_iter().enumerate() {
        let group = format!("blob {i} (`{ty}`)");
        let raw = src
            .get_read(offset)
            .map_err(|e| format!("blob {i}: read error: {e}"))?
            .take(length);
        if ty == deletion_vector::BLOB_TYPE {
            deletion_vector::check_deletion_vector(raw, length, cardinality.as_deref())
                .map_err(|e| format!("blob {i} (deletion vector): {e}"))?;
            continue;
        }
        let mut reader: Box<dyn Read> = match codec.as_deref() {
            Some("zstd") => Box::new(
                zstd::stream::read::Decoder::new(raw)
                    .map_err(|e| format!("blob {i}: zstd: {e}"))?,
            ),
            Some(_) => Box::new(lz4_flex::frame::FrameDecoder::new(raw)),
            None => Box::new(raw),
        };
        scan_text(
            &mut reader,
            hits,
            Place::PuffinBlob,
            &group,
            Position::Offset,
        )
        .map_err(|e| format!("blob {i}: {e}"))?;
    }
    Ok(())
}
