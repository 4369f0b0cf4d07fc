//! A check of an ORC file's type tree before orc-rust builds its schema from it: orc-rust
//! follows the footer's subtype indices recursively, so a corrupt footer whose types refer
//! back to a parent (found by fuzzing) recursed until the stack overflowed, which ends the
//! process, not just the file. ORC lists types in pre-order, so the check refuses a subtype
//! index that is not after its parent, a type that is the subtype of two parents, and nesting
//! deeper than [`MAX_DEPTH`]. The footer is decompressed here (in bounded chunks) to read it.
//! Anything else wrong with the tail is left to orc-rust to refuse.

use std::io::Read;

use orc_rust::proto::{CompressionKind, Footer, PostScript, Type};
use parquet::file::reader::ChunkReader;
use prost::Message;

/// Deepest nesting of types accepted.
pub(crate) const MAX_DEPTH: usize = 200;
/// Largest footer (decompressed) read for the check.
const MAX_FOOTER: usize = 64 << 20;
/// Largest decompressed chunk, whatever the postscript says.
const MAX_CHUNK: usize = 16 << 20;

/// Check the type tree of the ORC file `src`.
pub(crate) fn check<R: ChunkReader>(src: &R) -> Result<(), String> {
    let len = src.len();
    let Some(ps_len_at) = len.checked_sub(1) else {
        return Ok(());
    };
    let read = |at: u64, n: u64| {
        src.get_bytes(at, n as usize)
            .map_err(|e| format!("ORC footer: {e}"))
    };
    let ps_len = u64::from(read(ps_len_at, 1)?.first().copied().unwrap_or(0));
    let Some(ps_at) = ps_len_at.checked_sub(ps_len) else {
        return Ok(());
    };
    let Ok(ps) = PostScript::decode(read(ps_at, ps_len)?) else {
        return Ok(());
    };
    let footer_len = ps.footer_length();
    let Some(footer_at) = ps_at.checked_sub(footer_len) else {
        return Ok(());
    };
    if footer_len > MAX_FOOTER as u64 {
        return Err(format!(
            "ORC footer of {footer_len} bytes is larger than {MAX_FOOTER}"
        ));
    }
    let raw = read(footer_at, footer_len)?;
    let block = usize::try_from(ps.compression_block_size.unwrap_or(256 << 10))
        .unwrap_or(MAX_CHUNK)
        .min(MAX_CHUNK);
    let footer = decompress(&raw, ps.compression(), block)?;
    let Ok(footer) = Footer::decode(footer.as_slice()) else {
        return Ok(());
    };
    check_types(&footer.types)
}

/// ORC's compressed stream: chunks, each with a 3-byte header (length << 1 | original).
fn decompress(raw: &[u8], kind: CompressionKind, block: usize) -> Result<Vec<u8>, String> {
    if kind == CompressionKind::None {
        return Ok(raw.to_vec());
    }
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < raw.len() {
        let Some(h) = raw.get(at..at + 3) else {
            return Err("ORC footer: truncated compression chunk header".into());
        };
        let h = u32::from(h[0]) | u32::from(h[1]) << 8 | u32::from(h[2]) << 16;
        at += 3;
        let n = (h >> 1) as usize;
        let Some(chunk) = raw.get(at..at + n) else {
            return Err("ORC footer: compression chunk beyond the footer".into());
        };
        at += n;
        if h & 1 == 1 {
            out.extend_from_slice(chunk);
        } else {
            let failed =
                |what: &str| format!("ORC footer: {kind:?} chunk cannot be decompressed ({what})");
            let limit = block as u64 + 1;
            let plain = match kind {
                CompressionKind::Zlib => {
                    let mut v = Vec::new();
                    flate2::read::DeflateDecoder::new(chunk)
                        .take(limit)
                        .read_to_end(&mut v)
                        .map_err(|e| failed(&e.to_string()))?;
                    v
                }
                CompressionKind::Zstd => {
                    let mut v = Vec::new();
                    zstd::stream::read::Decoder::new(chunk)
                        .map_err(|e| failed(&e.to_string()))?
                        .take(limit)
                        .read_to_end(&mut v)
                        .map_err(|e| failed(&e.to_string()))?;
                    v
                }
                CompressionKind::Snappy => {
                    let len =
                        snap::raw::decompress_len(chunk).map_err(|e| failed(&e.to_string()))?;
                    if len > block {
                        return Err(failed("larger than the block size"));
                    }
                    snap::raw::Decoder::new()
                        .decompress_vec(chunk)
                        .map_err(|e| failed(&e.to_string()))?
                }
                CompressionKind::Lz4 => {
                    lz4_flex::block::decompress(chunk, block).map_err(|e| failed(&e.to_string()))?
                }
                CompressionKind::Lzo => lzokay_native::decompress_all(chunk, Some(block))
                    .map_err(|e| failed(&format!("{e:?}")))?,
                CompressionKind::None => chunk.to_vec(),
            };
            if plain.len() > block {
                return Err(failed("larger than the block size"));
            }
            out.extend_from_slice(&plain);
        }
        if out.len() > MAX_FOOTER {
            return Err(format!(
                "ORC footer larger than {MAX_FOOTER} bytes decompressed"
            ));
        }
    }
    Ok(out)
}

/// Types in pre-order: each subtype after its parent, no type under two parents, bounded
/// depth. Errors name type indices only.
fn check_types(types: &[Type]) -> Result<(), String> {
    let n = types.len();
    let mut depth = vec![0usize; n];
    let mut referenced = vec![false; n];
    for (i, t) in types.iter().enumerate() {
        for &s in &t.subtypes {
            let s = s as usize;
            if s <= i || s >= n {
                return Err(format!(
                    "ORC footer: type {i} has subtype {s} out of order (a type must come after its parent)"
                ));
            }
            if std::mem::replace(&mut referenced[s], true) {
                return Err(format!("ORC footer: type {s} is the subtype of two types"));
            }
            depth[s] = depth[i] + 1;
            if depth[s] > MAX_DEPTH {
                return Err(format!("ORC footer: types nest deeper than {MAX_DEPTH}"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(subtypes: &[u32]) -> Type {
        Type {
            subtypes: subtypes.to_vec(),
            ..Type::default()
        }
    }

    #[test]
    fn type_trees() {
        assert!(check_types(&[ty(&[1, 2]), ty(&[]), ty(&[3]), ty(&[])]).is_ok());
        assert!(check_types(&[ty(&[1]), ty(&[0])]).is_err());
        assert!(check_types(&[ty(&[1]), ty(&[1])]).is_err());
        assert!(check_types(&[ty(&[1, 1]), ty(&[])]).is_err());
        assert!(check_types(&[ty(&[5])]).is_err());
        let deep: Vec<Type> = (0..300u32).map(|i| ty(&[i + 1])).chain([ty(&[])]).collect();
        assert!(check_types(&deep).unwrap_err().contains("deeper than 200"));
    }
}
