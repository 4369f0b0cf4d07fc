//! A check of a Parquet footer's (and column index's) Thrift bytes before parquet-rs decodes
//! them. parquet-rs
//! reserves memory for a list from the size found in the data (`Vec::with_capacity`), so a
//! few crafted bytes in a footer made it ask for 11 GB (found by fuzzing); an allocation that
//! fails aborts the process, which would end a whole scan on one corrupt file.
//!
//! The walk follows the Thrift compact protocol without a schema (every struct, list, set
//! and map it holds) and guarantees, before parquet-rs sees the footer: every list, set and
//! map declares no more elements than the bytes left could hold (each element takes at least
//! one byte, a double eight, a UUID sixteen; a map entry two), every binary length fits, and
//! nesting is at most [`MAX_DEPTH`]. It checks sizes only; field types and required fields
//! are parquet-rs's to check.

/// Deepest nesting of structs and containers (parquet-rs's own footers nest about 10 deep).
pub(crate) const MAX_DEPTH: usize = 64;

const STOP: u8 = 0;
const TRUE: u8 = 1;
const FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

/// Check the footer's `FileMetaData` (a Thrift struct in the compact protocol). The error
/// names the byte offset in the footer, never data.
pub(crate) fn check_footer(bytes: &[u8]) -> Result<(), String> {
    check_struct(bytes).map_err(|what| format!("footer: {what} of the footer"))
}

/// Check one Thrift struct in the compact protocol (a footer, a column index). The error
/// names what is wrong and the byte offset, never data.
pub(crate) fn check_struct(bytes: &[u8]) -> Result<(), String> {
    let mut walk = Walk { bytes, at: 0 };
    walk.value(STRUCT, 0)
        .map_err(|what| format!("{what} at byte {}", walk.at))
}

/// Skip one value of Thrift compact type `kind` (a struct field's: a bool field's value is
/// its type) starting at `at` in `bytes`, with the checks of [`check_struct`]; the offset
/// after it.
pub(crate) fn skip_value(bytes: &[u8], at: usize, kind: u8) -> Result<usize, &'static str> {
    if at > bytes.len() {
        return Err("truncated");
    }
    let mut walk = Walk { bytes, at };
    match kind {
        TRUE | FALSE => {}
        _ => walk.value(kind, 0)?,
    }
    Ok(walk.at)
}

struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Walk<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn byte(&mut self) -> Result<u8, &'static str> {
        let b = *self.bytes.get(self.at).ok_or("truncated")?;
        self.at += 1;
        Ok(b)
    }

    fn skip(&mut self, n: usize) -> Result<(), &'static str> {
        if n > self.left() {
            return Err("a length past the end");
        }
        self.at += n;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, &'static str> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err("an overlong varint");
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("an overlong varint")
    }

    /// The fewest bytes an element of `kind` takes in a container.
    fn min_size(kind: u8) -> Result<usize, &'static str> {
        match kind {
            TRUE | FALSE | BYTE | I16 | I32 | I64 | BINARY | LIST | SET | MAP | STRUCT => Ok(1),
            DOUBLE => Ok(8),
            UUID => Ok(16),
            _ => Err("an unknown type"),
        }
    }

    fn count(&mut self, n: u64, each: usize) -> Result<u64, &'static str> {
        let need = n
            .checked_mul(each as u64)
            .ok_or("a container larger than the footer")?;
        if need > self.left() as u64 {
            return Err("a container larger than the footer");
        }
        Ok(n)
    }

    /// Walk one value of `kind` (a struct field's or a container element's).
    fn value(&mut self, kind: u8, depth: usize) -> Result<(), &'static str> {
        if depth > MAX_DEPTH {
            return Err("nesting too deep");
        }
        match kind {
            // A container's bool takes a byte (a struct field's is its type: see `fields`).
            TRUE | FALSE | BYTE => self.skip(1),
            I16 | I32 | I64 => self.varint().map(|_| ()),
            DOUBLE => self.skip(8),
            UUID => self.skip(16),
            BINARY => {
                let n = self.varint()?;
                self.skip(usize::try_from(n).map_err(|_| "a length past the end")?)
            }
            LIST | SET => {
                let head = self.byte()?;
                let elem = head & 0x0f;
                let n = match head >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                let n = self.count(n, Self::min_size(elem)?)?;
                for _ in 0..n {
                    self.value(elem, depth + 1)?;
                }
                Ok(())
            }
            MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let kinds = self.byte()?;
                let (k, v) = (kinds >> 4, kinds & 0x0f);
                let each = Self::min_size(k)? + Self::min_size(v)?;
                let n = self.count(n, each)?;
                for _ in 0..n {
                    self.value(k, depth + 1)?;
                    self.value(v, depth + 1)?;
                }
                Ok(())
            }
            STRUCT => self.fields(depth),
            _ => Err("an unknown type"),
        }
    }

    fn fields(&mut self, depth: usize) -> Result<(), &'static str> {
        loop {
            let head = self.byte()?;
            let kind = head & 0x0f;
            if kind == STOP {
                return Ok(());
            }
            if head >> 4 == 0 {
                self.varint()?; // the field id, when not a delta
            }
            match kind {
                TRUE | FALSE => {} // the value is the type
                _ => self.value(kind, depth + 1)?,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_footer_parquet_rs_wrote_passes() {
        use arrow::array::{Int64Array, StringArray};
        use arrow::datatypes::{DataType, Field, Schema};
        use arrow::record_batch::RecordBatch;
        use std::sync::Arc;

        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                Arc::new(StringArray::from(vec![Some("a"), None, Some("c")])),
            ],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let n = out.len();
        let len = u32::from_le_bytes(out[n - 8..n - 4].try_into().unwrap()) as usize;
        let footer = &out[n - 8 - len..n - 8];
        check_footer(footer).unwrap();
        // Every truncation of a valid footer is refused, none panics.
        for cut in 0..footer.len() {
            assert!(check_footer(&footer[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn a_list_larger_than_the_footer_is_refused() {
        // struct { 1: list<struct> of 2^31 elements }
        let footer = [0x19, 0xfc, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00];
        let err = check_footer(&footer).unwrap_err();
        assert!(err.contains("a container larger than the footer"), "{err}");
        // A map of 2^40 entries, a binary longer than the footer.
        let err = check_footer(&[0x1b, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x88]).unwrap_err();
        assert!(err.contains("larger than the footer"), "{err}");
        let err = check_footer(&[0x18, 0xff, 0x7f, 0x00]).unwrap_err();
        assert!(err.contains("past the end"), "{err}");
        // Nesting without end.
        let deep: Vec<u8> = std::iter::repeat_n(0x1c, 200).collect();
        assert!(check_footer(&deep).unwrap_err().contains("too deep"));
        // A well-formed small struct: { 1: i32 7, 2: list<binary> ["ab"], 3: true }.
        check_footer(&[0x15, 0x0e, 0x19, 0x18, 0x02, b'a', b'b', 0x11, 0x00]).unwrap();
    }
}
