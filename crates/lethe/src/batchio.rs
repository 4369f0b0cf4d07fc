//! Reading and writing batches of rows as Parquet or CSV files (for suppression and exports).

use std::path::Path;
use std::sync::Arc;

use arrow::array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{Error, Result};

fn is_csv(p: &Path) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"))
}

/// Reads a Parquet or CSV file (by extension; CSV with a header row, types inferred).
pub fn read_batches(path: &Path) -> Result<Vec<RecordBatch>> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    if is_csv(path) {
        let fmt = arrow::csv::reader::Format::default().with_header(true);
        let mut probe =
            std::fs::File::open(path).map_err(|e| Error::io(path.display().to_string(), e))?;
        let (schema, _) = fmt
            .infer_schema(&mut probe, Some(1000))
            .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
        let reader = arrow::csv::ReaderBuilder::new(Arc::new(schema))
            .with_format(fmt)
            .build(f)?;
        return reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::invalid(format!("{}: {e}", path.display())));
    }
    let reader = ParquetRecordBatchReaderBuilder::try_new(f)
        .map_err(|e| {
            Error::invalid(format!(
                "{} is neither CSV nor readable Parquet: {e}",
                path.display()
            ))
        })?
        .build()?;
    Ok(reader.collect::<std::result::Result<Vec<_>, _>>()?)
}

/// Writes batches as Parquet or CSV (by extension).
pub fn write_batches(path: &Path, batches: &[RecordBatch]) -> Result<()> {
    let f = std::fs::File::create(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    write_batches_to(f, is_csv(path), batches)
}

/// Replaces `path` with the batches (Parquet or CSV by the path's extension) through
/// [`crate::keys::replace_file`]: whole or not at all, synced, with the final `mode` from the
/// moment the file exists — [`crate::keys::FileMode::Private`] for rows that must stay
/// apart (a loader's rows of restricted subjects), [`crate::keys::FileMode::Keep`] for a file
/// rewritten in place (an export keeps its mode).
pub fn replace_batches(
    path: &Path,
    batches: &[RecordBatch],
    mode: crate::keys::FileMode,
) -> Result<()> {
    let csv = is_csv(path);
    crate::keys::replace_file(path, mode, |f| {
        let w = f
            .try_clone()
            .map_err(|e| Error::io(path.display().to_string(), e))?;
        write_batches_to(w, csv, batches)
    })
}

fn write_batches_to(f: std::fs::File, csv: bool, batches: &[RecordBatch]) -> Result<()> {
    if csv {
        let mut w = arrow::csv::WriterBuilder::new().with_header(true).build(f);
        for b in batches {
            w.write(b)?;
        }
        return Ok(());
    }
    let schema = batches
        .first()
        .map(|b| b.schema())
        .ok_or_else(|| Error::invalid("nothing to write"))?;
    let mut w = ArrowWriter::try_new(f, schema, None)?;
    for b in batches {
        w.write(b)?;
    }
    w.close()?;
    Ok(())
}
