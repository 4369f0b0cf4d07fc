//! Regression tests named after the bug they cover (inputs found by the fuzz target in
//! /fuzz; the first byte of a fuzz input picks the file name, here already applied).

use lethe_scan::{TraceSet, scan_bytes};

use crate::fixtures::subjects;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// apache-avro reserved memory for the header's metadata map from a corrupt count
/// (~21 GB, the process aborted). The guard now refuses the header first.
#[test]
fn avro_header_with_huge_metadata_count_is_unreadable_not_an_abort() {
    let input = hex(concat!(
        "4f626a0104146176724f65223a226c6f6e67227d2c7b226e616d65223a22636f6d6d656e74222c2274797065223a22",
        "737472696e67227d2c7b226e616d65223a226174747273222c2274797065223a7b2274797065223a226d6170222c22",
        "76616c756573223a22737472696e67227d7d5d7d009f2e636f646563086e756c6c166176726f2e736368656d61d602",
        "7b2274797099ddc5dd7265636f7264222c226e616d65223a226576656e74222c226669656c6473223a5b7b226e616d",
        "65223a226c65"
    ));
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let r = scan_bytes(&traces, "x.avro", &input, false);
    assert!(r.is_unreadable(), "{:?}", r.status);
}

fn assert_no_reader_panic(name: &str, bytes: &[u8]) -> lethe_scan::FileReport {
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let r = scan_bytes(&traces, name, bytes, false);
    if let lethe_scan::FileStatus::Unreadable { reason } = &r.status {
        assert!(!reason.contains("panicked"), "{name}: {reason}");
    }
    r
}

/// arrow-ipc panicked (convert.rs unwraps) on a corrupt `ARROW:schema` in the Parquet
/// footer. The embedded Arrow schema is now skipped. Inputs: the data fixture with the
/// bytes the fuzzer changed (offset, new value).
#[test]
fn parquet_with_corrupt_arrow_schema_does_not_panic() {
    let base = crate::fixtures::Builder { canaries: true }.data_parquet();
    assert_eq!(
        base.len(),
        2583,
        "the fixture changed: these byte edits no longer reproduce the fuzz inputs"
    );
    let cases: [&[(usize, u8)]; 3] = [
        &[
            (303, 117),
            (469, 93),
            (470, 0),
            (471, 0),
            (472, 0),
            (661, 0),
            (662, 28),
            (923, 51),
            (1549, 53),
            (2181, 51),
            (2264, 109),
        ],
        &[
            (59, 186),
            (60, 55),
            (61, 55),
            (62, 55),
            (63, 55),
            (64, 55),
            (65, 55),
            (66, 186),
            (307, 79),
            (308, 98),
            (309, 106),
            (310, 1),
            (469, 93),
            (470, 0),
            (471, 0),
            (472, 0),
            (923, 50),
            (1116, 41),
            (1600, 50),
            (2441, 67),
        ],
        &[
            (307, 79),
            (308, 98),
            (309, 106),
            (310, 1),
            (435, 185),
            (469, 93),
            (470, 0),
            (471, 0),
            (472, 0),
            (784, 145),
            (923, 50),
            (1069, 0),
            (1072, 22),
            (1383, 246),
            (1384, 255),
            (1385, 255),
            (1386, 255),
            (1387, 255),
            (1388, 255),
            (1389, 255),
            (1390, 254),
            (1794, 40),
            (1947, 67),
            (2051, 69),
            (2052, 65),
            (2215, 86),
            (2546, 67),
            (2547, 71),
            (2548, 66),
            (2549, 48),
            (2550, 48),
            (2551, 48),
            (2552, 48),
            (2553, 49),
            (2554, 49),
            (2555, 51),
        ],
    ];
    for edits in cases {
        let mut b = base.clone();
        for &(i, v) in edits {
            b[i] = v;
        }
        assert_no_reader_panic("x.parquet", &b);
    }
}

/// apache-avro unwrapped name parsing and panicked on an invalid record/type name in the
/// writer schema. The guard now checks names first.
#[test]
fn avro_schema_with_invalid_name_is_unreadable_not_a_panic() {
    for schema in [
        r#"{"type":"record","name":"manifest entry","fields":[]}"#,
        r#"{"type":"record","name":"r","fields":[{"name":"a","type":{"type":"in t"}}]}"#,
    ] {
        let mut b = b"Obj\x01\x02\x16avro.schema".to_vec();
        b.push((schema.len() * 2) as u8);
        b.extend_from_slice(schema.as_bytes());
        b.push(0);
        b.extend_from_slice(&[9u8; 16]);
        let r = assert_no_reader_panic("x.avro", &b);
        assert!(r.is_unreadable());
    }
}

/// parquet-rs subtracted with overflow (a panic with debug assertions, a bogus page size
/// without) when the offset index put a page before its column chunk. The offset index is
/// now not used for reading; pages are read in sequence. Input: the data fixture with the
/// byte runs the fuzzer changed (offset, new bytes in hex).
#[test]
fn parquet_with_page_before_its_column_chunk_does_not_panic() {
    let mut b = crate::fixtures::Builder { canaries: true }.data_parquet();
    assert_eq!(
        b.len(),
        2583,
        "the fixture changed: these byte edits no longer reproduce the fuzz input"
    );
    let runs: [(usize, &str); 8] = [
        (39, "65782e6f7267"),
        (48, "501550"),
        (62, "02"),
        (
            66,
            concat!(
                "060207000000416e6e204f6e650700004f626a012054776f0800000043792054687265651500154e154e2c150615",
                "0015061506000002000000060207000000446920466f7572070000004564204669766507000000466c6f20536978",
                "1500157215"
            ),
        ),
        (307, "4f626a01"),
        (469, "5d000000"),
        (923, "32"),
        (1471, "41"),
    ];
    for (at, run) in runs {
        for (k, byte) in hex(run).into_iter().enumerate() {
            b[at + k] = byte;
        }
    }
    assert_no_reader_panic("x.parquet", &b);
}

/// parquet-rs asserted ("column start and length should not be negative", a panic) when a
/// column chunk's dictionary page offset in the footer was negative. The footer's chunk
/// ranges are now checked first: such a file is unreadable, by name, not a caught panic.
/// Input (the fuzz find was a pyarrow seed with one offset changed to -131): the data
/// fixture re-footed with that offset, and with a chunk running past the file's end.
#[test]
fn parquet_with_column_chunk_outside_the_file_is_unreadable_not_a_panic() {
    use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader, ParquetMetaDataWriter};

    let base = bytes::Bytes::from(crate::fixtures::Builder { canaries: true }.data_parquet());
    let meta = ParquetMetaDataReader::new()
        .parse_and_finish(&base)
        .expect("the fixture's footer");
    let footer_len = u32::from_le_bytes(base[base.len() - 8..base.len() - 4].try_into().unwrap());
    let data_end = base.len() - 8 - footer_len as usize;
    let refooted = |edit: &dyn Fn(
        parquet::file::metadata::ColumnChunkMetaData,
    ) -> parquet::file::metadata::ColumnChunkMetaData| {
        let mut builder = ParquetMetaData::clone(&meta).into_builder();
        let groups = builder
            .take_row_groups()
            .into_iter()
            .map(|g| {
                let columns: Vec<_> = g.columns().iter().cloned().map(edit).collect();
                g.into_builder()
                    .set_column_metadata(columns)
                    .build()
                    .unwrap()
            })
            .collect();
        let meta = builder.set_row_groups(groups).build();
        let mut out = base[..data_end].to_vec();
        ParquetMetaDataWriter::new(&mut out, &meta)
            .finish()
            .unwrap();
        out
    };

    // The unedited re-footed file reads (the edit below is what makes it unreadable).
    let same = refooted(&|c| c);
    let r = assert_no_reader_panic("x.parquet", &same);
    assert!(!r.is_unreadable(), "{:?}", r.status);

    let negative = refooted(&|c| {
        c.into_builder()
            .set_dictionary_page_offset(Some(-131))
            .build()
            .unwrap()
    });
    let past_end = refooted(&|c| {
        let size = c.compressed_size();
        c.into_builder()
            .set_total_compressed_size(size + 1_000_000)
            .build()
            .unwrap()
    });
    for (what, bytes) in [("negative offset", negative), ("past the end", past_end)] {
        let r = assert_no_reader_panic("x.parquet", &bytes);
        match &r.status {
            lethe_scan::FileStatus::Unreadable { reason } => {
                assert!(reason.contains("lies outside the file"), "{what}: {reason}")
            }
            other => panic!("{what}: read as {other:?}"),
        }
    }
}

/// parquet-rs reserved memory for a footer list from the size in the data
/// (`Vec::with_capacity`): the fuzz input asked for 11 GB (an allocation that fails aborts
/// the process). The footer's Thrift sizes are now checked first. Input: the data fixture's
/// pages with a footer whose schema list declares 2^30 elements (over 100 GB reserved:
/// without the check the allocation fails and the test process aborts).
#[test]
fn parquet_footer_with_huge_list_is_unreadable_not_an_abort() {
    let base = crate::fixtures::Builder { canaries: true }.data_parquet();
    let n = base.len();
    let footer_len = u32::from_le_bytes(base[n - 8..n - 4].try_into().unwrap()) as usize;
    let mut b = base[..n - 8 - footer_len].to_vec();
    // FileMetaData { 1: version = 1, 2: schema = list<struct> of 2^30 elements }
    let footer = [0x15, 0x02, 0x19, 0xfc, 0x80, 0x80, 0x80, 0x80, 0x04, 0x00];
    b.extend_from_slice(&footer);
    b.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    b.extend_from_slice(b"PAR1");
    let r = assert_no_reader_panic("x.parquet", &b);
    match &r.status {
        lethe_scan::FileStatus::Unreadable { reason } => {
            assert!(
                reason.contains("a container larger than the footer"),
                "{reason}"
            )
        }
        other => panic!("read as {other:?}"),
    }
}

/// The same for a column index (the page index): parquet-rs reserved 2 GB for its page
/// list from a size in the data (fuzz find). Column indexes' ranges and Thrift sizes are now
/// checked before they are decoded. Input: the data fixture with its first column index
/// overwritten by one whose `min_values` list declares 2^30 values.
#[test]
fn parquet_column_index_with_huge_list_is_unreadable_not_an_abort() {
    use parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};

    let mut b = crate::fixtures::Builder { canaries: true }.data_parquet();
    let meta = ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Skip)
        .parse_and_finish(&bytes::Bytes::from(b.clone()))
        .unwrap();
    let (at, n) = meta
        .row_groups()
        .iter()
        .flat_map(|g| g.columns())
        .find_map(|c| Some((c.column_index_offset()?, c.column_index_length()?)))
        .expect("the fixture has a column index");
    assert!(n >= 8, "column index of {n} bytes");
    // ColumnIndex { 2: min_values = list<binary> of 2^30 elements }
    let index = [0x29, 0xf8, 0x80, 0x80, 0x80, 0x80, 0x04, 0x00];
    b[at as usize..at as usize + index.len()].copy_from_slice(&index);
    let r = assert_no_reader_panic("x.parquet", &b);
    match &r.status {
        lethe_scan::FileStatus::Unreadable { reason } => assert!(
            reason.contains("page index") && reason.contains("a container larger"),
            "{reason}"
        ),
        other => panic!("read as {other:?}"),
    }
}

/// parquet-rs reserved memory for a DELTA_LENGTH_BYTE_ARRAY / DELTA_BYTE_ARRAY page's
/// lengths from the count in its DELTA_BINARY_PACKED header (the fuzz input asked for about
/// 3 × 10^18 bytes). Delta pages' headers are now checked against the page's value count
/// before decoding. Input: a parquet-rs file of 300 strings in one delta page whose header
/// count (300) is raised to 16,383.
#[test]
fn parquet_delta_page_counting_more_values_than_the_page_is_unreadable() {
    use std::sync::Arc;

    use arrow::array::StringArray;
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Encoding;
    use parquet::file::properties::WriterProperties;

    let schema = Arc::new(Schema::new(vec![Field::new(
        "email",
        DataType::Utf8,
        false,
    )]));
    // One value is a canary's, so the chunk is decoded (a chunk without a trace is not).
    let canary = crate::fixtures::subjects()
        .into_iter()
        .find_map(|s| s.values.into_iter().next())
        .expect("a canary value")
        .value;
    let values: Vec<String> = (0..300)
        .map(|i| match i {
            150 => canary.clone(),
            _ => format!("someone{i}@post.example"),
        })
        .collect();
    let batch =
        RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(values))]).unwrap();
    for encoding in [
        Encoding::DELTA_LENGTH_BYTE_ARRAY,
        Encoding::DELTA_BYTE_ARRAY,
    ] {
        let props = WriterProperties::builder()
            .set_dictionary_enabled(false)
            .set_encoding(encoding)
            .build();
        let mut b = Vec::new();
        let mut w = ArrowWriter::try_new(&mut b, schema.clone(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let r = assert_no_reader_panic("x.parquet", &b);
        assert!(!r.is_unreadable(), "{encoding:?}: {:?}", r.status);
        assert!(!r.hits.is_empty(), "{encoding:?}: the canary is found");
        // Block 128, 4 miniblocks, 300 values (varint ac 02): the first delta header.
        let header = [0x80, 0x01, 0x04, 0xac, 0x02];
        let at = b
            .windows(header.len())
            .position(|w| w == header)
            .expect("the delta header");
        b[at + 3..at + 5].copy_from_slice(&[0xff, 0x7f]);
        let r = assert_no_reader_panic("x.parquet", &b);
        match &r.status {
            lethe_scan::FileStatus::Unreadable { reason } => {
                assert!(
                    reason.contains("more values than its page"),
                    "{encoding:?}: {reason}"
                )
            }
            other => panic!("{encoding:?}: read as {other:?}"),
        }
    }
}

/// orc-rust sums a string column's lengths into an i64 and reserves that many bytes: negative
/// lengths in a corrupt LENGTH stream made `Vec::with_capacity` panic (capacity overflow,
/// raised in the standard library, so the fuzz target first took it for lethe's own panic).
/// The scan's guard catches it: the file is unreadable, the scan goes on.
#[test]
fn orc_with_negative_string_lengths_is_unreadable_not_a_crash() {
    let input = include_bytes!("data/orc-negative-string-length.orc");
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let r = scan_bytes(&traces, "x.orc", input, false);
    assert_eq!(r.format, lethe_scan::FileFormat::Orc);
    assert!(r.is_unreadable(), "{:?}", r.status);
}

/// orc-rust builds its schema by following the footer's subtype indices recursively: a
/// footer whose types point back at a parent recursed until the stack overflowed, ending the
/// process. The type tree is now checked first.
#[test]
fn orc_with_a_cycle_in_its_types_is_unreadable_not_a_stack_overflow() {
    let input = include_bytes!("data/orc-type-cycle.orc");
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let r = scan_bytes(&traces, "x.orc", input, false);
    let lethe_scan::FileStatus::Unreadable { reason } = &r.status else {
        panic!("read: {r:?}");
    };
    assert!(reason.starts_with("ORC footer: type "), "{reason}");
}
