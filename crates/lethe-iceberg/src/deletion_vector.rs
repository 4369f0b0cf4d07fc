//! Deletion vectors (format v3): the positions of one data file's deleted rows, stored as a
//! `deletion-vector-v1` blob in a Puffin file.
//!
//! A blob is framed as the spec says: the combined length of magic and bitmap (4 bytes,
//! big-endian), the magic `D1 D3 39 64`, the bitmap in the Roaring "portable" 64-bit format (a
//! little-endian count of 32-bit buckets, each a 32-bit key and a 32-bit Roaring bitmap; read
//! and written by the `roaring` crate's `RoaringTreemap`), and a CRC-32 of magic and bitmap (4
//! bytes, big-endian). A manifest entry points at its blob with `content_offset` /
//! `content_size_in_bytes` and names the data file in `referenced_data_file`; its
//! `record_count` is the vector's cardinality.
//!
//! Guarantees:
//! - [`read_deletion_vector`] checks, before any position is used, that the entry's range lies
//!   inside a Puffin file, that the length field matches the blob, the magic, the checksum, that
//!   the bitmap is valid and fills the blob exactly, and that its cardinality is the entry's
//!   `record_count`. Anything else is an error naming the Puffin file, the offset and the data
//!   file the vector is for.
//! - [`write_deletion_vectors`] writes several vectors into one Puffin file, as Spark's
//!   merge-on-read DELETE does (blob properties `referenced-data-file` and `cardinality`,
//!   snapshot id and sequence number -1, uncompressed). lethe uses it for fixtures and
//!   benchmarks; an erasure never deletes rows by writing a vector.

use std::collections::HashMap;
use std::io::Cursor;

use iceberg::puffin::{Blob, CompressionCodec, DELETION_VECTOR_V1, PuffinWriter};
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Struct};
use parquet::file::reader::{ChunkReader, Length};
use roaring::RoaringTreemap;

use crate::error::{Error, Result};
use crate::store::FileStore;

/// The magic that starts a deletion vector's bitmap.
pub const MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];
const PUFFIN_MAGIC: &[u8; 4] = b"PFA1";

/// Whether a manifest entry's file is a deletion vector (a Puffin position delete, or any
/// delete entry that points into its file with `content_offset`).
pub fn is_deletion_vector(df: &DataFile) -> bool {
    df.content_type() == DataContentType::PositionDeletes
        && (df.file_format() == DataFileFormat::Puffin || df.content_offset().is_some())
}

/// The positions a deletion vector deletes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeletionVector {
    positions: RoaringTreemap,
}

impl FromIterator<u64> for DeletionVector {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Self {
        DeletionVector {
            positions: iter.into_iter().collect(),
        }
    }
}

impl DeletionVector {
    /// How many positions are deleted.
    pub fn cardinality(&self) -> u64 {
        self.positions.len()
    }

    /// Whether row `pos` is deleted.
    pub fn contains(&self, pos: u64) -> bool {
        self.positions.contains(pos)
    }

    /// The deleted positions, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.positions.iter()
    }

    /// The largest deleted position, if any.
    pub fn max(&self) -> Option<u64> {
        self.positions.max()
    }

    /// Decodes a `deletion-vector-v1` blob; the error says what is wrong (never a position).
    pub fn decode(blob: &[u8]) -> std::result::Result<Self, String> {
        if blob.len() < 12 {
            return Err(format!(
                "{} bytes is too short for a deletion vector (length, magic and checksum take 12)",
                blob.len()
            ));
        }
        let length = u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
        if length != blob.len() - 8 {
            return Err(format!(
                "its length field says {length} bytes of magic and bitmap, the blob holds {}",
                blob.len() - 8
            ));
        }
        let body = &blob[4..4 + length];
        if body[..4] != MAGIC {
            return Err(format!(
                "bad magic {:02X} {:02X} {:02X} {:02X} (expected D1 D3 39 64)",
                body[0], body[1], body[2], body[3]
            ));
        }
        let stored = u32::from_be_bytes([
            blob[4 + length],
            blob[5 + length],
            blob[6 + length],
            blob[7 + length],
        ]);
        let computed = crc32fast::hash(body);
        if stored != computed {
            return Err(format!(
                "checksum mismatch (stored CRC-32 {stored:08x}, computed {computed:08x})"
            ));
        }
        let bitmap = &body[4..];
        let mut cursor = Cursor::new(bitmap);
        let positions = RoaringTreemap::deserialize_from(&mut cursor)
            .map_err(|e| format!("the bitmap is not a valid portable Roaring bitmap: {e}"))?;
        if cursor.position() as usize != bitmap.len() {
            return Err(format!(
                "the bitmap ends after {} of its {} bytes",
                cursor.position(),
                bitmap.len()
            ));
        }
        if positions.max().is_some_and(|m| m >> 63 == 1) {
            return Err("a position has its most significant bit set".into());
        }
        Ok(DeletionVector { positions })
    }

    /// Encodes the vector as a `deletion-vector-v1` blob.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(4 + self.positions.serialized_size());
        body.extend_from_slice(&MAGIC);
        self.positions
            .serialize_into(&mut body)
            .expect("writing to a Vec can't fail");
        let mut out = Vec::with_capacity(body.len() + 8);
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        out
    }
}

/// Reads and validates the deletion vector a manifest entry points at.
pub fn read_deletion_vector(store: &dyn FileStore, df: &DataFile) -> Result<DeletionVector> {
    let path = df.file_path();
    let data_file = df.referenced_data_file();
    let what = |offset: &dyn std::fmt::Display| {
        format!(
            "deletion vector at offset {offset} of {path} (for data file {})",
            data_file.as_deref().unwrap_or("(none named)")
        )
    };
    let (Some(offset), Some(size)) = (df.content_offset(), df.content_size_in_bytes()) else {
        return Err(Error::invalid(format!(
            "{}: the manifest entry has no content_offset/content_size_in_bytes",
            what(&"?")
        )));
    };
    if data_file.is_none() {
        return Err(Error::invalid(format!(
            "{}: the manifest entry names no referenced_data_file",
            what(&offset)
        )));
    }
    let reader = store.open(path)?;
    let len = reader.len();
    let in_file = u64::try_from(offset)
        .ok()
        .zip(u64::try_from(size).ok())
        .and_then(|(o, s)| o.checked_add(s).map(|end| (o, s, end)))
        .filter(|(o, _, end)| *o >= 4 && *end <= len);
    let Some((start, size, _)) = in_file else {
        return Err(Error::invalid(format!(
            "{}: its {size} bytes lie past the end of the file ({len} bytes)",
            what(&offset)
        )));
    };
    let magic = reader
        .get_bytes(0, 4)
        .map_err(|e| Error::invalid(format!("{}: {e}", what(&offset))))?;
    if magic.as_ref() != PUFFIN_MAGIC {
        return Err(Error::invalid(format!(
            "{}: the file is not a Puffin file (no PFA1 magic)",
            what(&offset)
        )));
    }
    let blob = reader
        .get_bytes(start, size as usize)
        .map_err(|e| Error::invalid(format!("{}: {e}", what(&offset))))?;
    let dv = DeletionVector::decode(&blob)
        .map_err(|reason| Error::invalid(format!("{} is corrupt: {reason}", what(&offset))))?;
    if dv.cardinality() != df.record_count() {
        return Err(Error::invalid(format!(
            "{} is corrupt: it holds {} positions, its manifest entry says {}",
            what(&offset),
            dv.cardinality(),
            df.record_count()
        )));
    }
    Ok(dv)
}

/// One deletion vector to write: the data file it deletes from (its location as the manifest
/// spells it, partition and spec) and the positions.
#[derive(Debug, Clone)]
pub struct NewVector {
    /// The data file's location.
    pub data_file: String,
    /// The data file's partition.
    pub partition: Struct,
    /// The data file's partition spec id.
    pub spec_id: i32,
    /// The deleted positions.
    pub positions: DeletionVector,
}

/// Writes `vectors` as blobs of one Puffin file at `<table location>/data/<uuid>-deletes.puffin`
/// and returns one delete-file entry per vector (not committed). Nothing is written for no
/// vectors.
pub async fn write_deletion_vectors(
    store: &dyn FileStore,
    table_location: &str,
    vectors: &[NewVector],
) -> Result<Vec<DataFile>> {
    if vectors.is_empty() {
        return Ok(Vec::new());
    }
    let location = format!(
        "{}/data/{}-deletes.puffin",
        table_location.trim_end_matches('/'),
        uuid::Uuid::new_v4()
    );
    let result: Result<Vec<DataFile>> = async {
        let output = store.file_io().new_output(&location)?;
        let mut writer = PuffinWriter::new(
            &output,
            HashMap::from([("created-by".to_string(), "lethe".to_string())]),
            false,
        )
        .await?;
        let mut offset = 4i64;
        let mut placed = Vec::with_capacity(vectors.len());
        for v in vectors {
            let blob = v.positions.encode();
            let size = blob.len() as i64;
            writer
                .add(
                    Blob::builder()
                        .r#type(DELETION_VECTOR_V1.to_string())
                        .fields(Vec::new())
                        .snapshot_id(-1)
                        .sequence_number(-1)
                        .data(blob)
                        .properties(HashMap::from([
                            ("referenced-data-file".to_string(), v.data_file.clone()),
                            (
                                "cardinality".to_string(),
                                v.positions.cardinality().to_string(),
                            ),
                        ]))
                        .build(),
                    CompressionCodec::None,
                )
                .await?;
            placed.push((offset, size));
            offset += size;
        }
        writer.close().await?;
        let file_size = store.open(&location)?.len();
        vectors
            .iter()
            .zip(placed)
            .map(|(v, (offset, size))| {
                let mut b = DataFileBuilder::default();
                b.content(DataContentType::PositionDeletes)
                    .file_path(location.clone())
                    .file_format(DataFileFormat::Puffin)
                    .partition(v.partition.clone())
                    .partition_spec_id(v.spec_id)
                    .record_count(v.positions.cardinality())
                    .file_size_in_bytes(file_size)
                    .referenced_data_file(Some(v.data_file.clone()))
                    .content_offset(Some(offset))
                    .content_size_in_bytes(Some(size));
                b.build()
                    .map_err(|e| Error::Internal(format!("deletion vector metadata: {e}")))
            })
            .collect()
    }
    .await;
    if result.is_err() {
        let _ = store.delete(&location);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_and_match_the_spec_framing() {
        let dv: DeletionVector = [0u64, 3, 70_000, (5u64 << 32) + 9].into_iter().collect();
        let blob = dv.encode();
        let length = u32::from_be_bytes(blob[..4].try_into().unwrap()) as usize;
        assert_eq!(length, blob.len() - 8);
        assert_eq!(blob[4..8], MAGIC);
        // Two 32-bit buckets (keys 0 and 5), count little-endian in 8 bytes.
        assert_eq!(u64::from_le_bytes(blob[8..16].try_into().unwrap()), 2);
        let crc = u32::from_be_bytes(blob[blob.len() - 4..].try_into().unwrap());
        assert_eq!(crc, crc32fast::hash(&blob[4..4 + length]));
        let back = DeletionVector::decode(&blob).unwrap();
        assert_eq!(back, dv);
        assert_eq!(
            back.iter().collect::<Vec<_>>(),
            vec![0, 3, 70_000, (5 << 32) + 9]
        );
    }

    #[test]
    fn corrupt_blobs_are_refused_with_the_reason() {
        let dv: DeletionVector = (0u64..100).step_by(7).collect();
        let good = dv.encode();
        let mut magic = good.clone();
        magic[4] ^= 0xFF;
        assert!(
            DeletionVector::decode(&magic)
                .unwrap_err()
                .contains("magic")
        );
        let mut crc = good.clone();
        let n = crc.len();
        crc[n - 1] ^= 1;
        assert!(
            DeletionVector::decode(&crc)
                .unwrap_err()
                .contains("checksum")
        );
        // A bitmap that claims more buckets than it holds, with a checksum that matches.
        let mut bitmap = good[..8].to_vec();
        bitmap.extend_from_slice(&5u64.to_le_bytes());
        let crc = crc32fast::hash(&bitmap[4..]);
        bitmap[..4].copy_from_slice(&12u32.to_be_bytes());
        bitmap.extend_from_slice(&crc.to_be_bytes());
        assert!(
            DeletionVector::decode(&bitmap)
                .unwrap_err()
                .contains("not a valid portable Roaring bitmap")
        );
        let mut long = good.clone();
        long[3] = long[3].wrapping_add(1);
        assert!(
            DeletionVector::decode(&long)
                .unwrap_err()
                .contains("length")
        );
        assert!(
            DeletionVector::decode(&good[..10])
                .unwrap_err()
                .contains("short")
        );
    }
}
