//! CSV: the first record is the header (column names for ID matching; its cells are
//! searched too, in case there is no header); every cell is searched for value prefixes;
//! cells of an ID column are compared exactly with that column's IDs. Records may have
//! differing lengths; bytes need not be UTF-8.
//!
//! Does not: guess delimiters other than `,` or detect a missing header.

use std::io::Read;

use crate::report::{Hits, Place};

/// Read a CSV stream.
pub(crate) fn scan_csv(r: &mut dyn Read, hits: &mut Hits) -> Result<(), String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(r);
    let mut names: Vec<String> = Vec::new();
    let mut groups: Vec<String> = Vec::new();
    let mut columns = Vec::new();
    let mut record = csv::ByteRecord::new();
    let mut row = 0u64;
    loop {
        match reader.read_byte_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(format!("CSV error after data row {row}: {}", describe(&e))),
        }
        if row == 0 && names.is_empty() {
            for (i, cell) in record.iter().enumerate() {
                let text = String::from_utf8_lossy(cell);
                hits.search(Place::Csv, cell, "header", &|| {
                    format!("header, column {}", i + 1)
                });
                let name = if hits.mentions(&text) {
                    format!("{}", i + 1)
                } else {
                    text.chars().take(64).collect()
                };
                names.push(name);
            }
            if names.is_empty() {
                names.push("1".into());
            }
            row = 1;
            continue;
        }
        let traces = hits.traces;
        for (i, cell) in record.iter().enumerate() {
            while groups.len() <= i {
                let n = groups.len();
                let name = names
                    .get(n)
                    .cloned()
                    .unwrap_or_else(|| format!("{}", n + 1));
                columns.push(traces.id_column(name.trim()));
                groups.push(format!("column `{name}`"));
            }
            let group = &groups[i];
            let detail = || format!("{group}, first at data row {row}");
            hits.search(Place::Csv, cell, group, &detail);
            if let Some(col) = columns[i] {
                hits.ids(Place::Csv, col.bytes(cell.trim_ascii()), group, &detail);
            }
        }
        row += 1;
    }
    Ok(())
}

fn describe(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::Io(io) => format!("read error: {io}"),
        _ => match e.position() {
            Some(p) => format!("malformed record at line {}", p.line()),
            None => "malformed record".to_string(),
        },
    }
}
