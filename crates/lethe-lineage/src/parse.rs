//! Reading lineage files: one RunEvent, a JSON array of RunEvents, or JSON lines (any
//! whitespace-separated sequence of events or arrays of events).
//!
//! Guarantees: every JSON value in the file is accounted for. A value that is valid JSON but
//! not a RunEvent is an error, never skipped; errors name the file, the 1-based line and
//! column (of the syntax error, or of the start of the offending event) and what is wrong,
//! and never quote the file's content. A UTF-8 byte-order mark is ignored.
//!
//! Not guaranteed: columns are counted in bytes as serde_json counts them for syntax errors
//! and in characters for event errors; an empty array `[]` is accepted as zero events, while an
//! empty file is an error (it is more likely a truncated export than an intended no-op).

use serde_json::value::RawValue;

use crate::error::{Error, Result};
use crate::event::RunEvent;

/// Parses the RunEvents in `bytes`, naming `source` (a file name) in errors.
pub fn parse_events(source: &str, bytes: &[u8]) -> Result<Vec<RunEvent>> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let (line, column) = position(&bytes[..e.valid_up_to()], e.valid_up_to());
            return Err(parse_error(source, line, column, "not UTF-8 text"));
        }
    };
    if text.trim().is_empty() {
        return Err(parse_error(
            source,
            1,
            1,
            "empty file: no OpenLineage RunEvent",
        ));
    }
    let mut events = Vec::new();
    for item in serde_json::Deserializer::from_str(text).into_iter::<&RawValue>() {
        let raw = item.map_err(|e| syntax_error(source, &e))?;
        let json = raw.get();
        if json.starts_with('[') {
            let elements: Vec<&RawValue> =
                serde_json::from_str(json).map_err(|e| syntax_error(source, &e))?;
            for element in elements {
                events.push(decode(source, text, element)?);
            }
        } else {
            events.push(decode(source, text, raw)?);
        }
    }
    Ok(events)
}

fn decode(source: &str, text: &str, raw: &RawValue) -> Result<RunEvent> {
    let at = || {
        // `raw` borrows from `text`, so the pointer difference is its byte offset.
        let offset = (raw.get().as_ptr() as usize)
            .saturating_sub(text.as_ptr() as usize)
            .min(text.len());
        position(&text.as_bytes()[..offset], offset)
    };
    let value: serde_json::Value = serde_json::from_str(raw.get()).map_err(|e| {
        let (line, column) = at();
        parse_error(
            source,
            line,
            column,
            &format!("invalid JSON: {}", syntax_message(&e)),
        )
    })?;
    RunEvent::from_json(value).map_err(|e| {
        let (line, column) = at();
        parse_error(source, line, column, &e.to_string())
    })
}

/// 1-based line and character column of the byte at `offset`, given the bytes before it.
fn position(before: &[u8], offset: usize) -> (usize, usize) {
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let tail = &before[line_start..offset.min(before.len())];
    // Count characters, not bytes: continuation bytes (0b10xx_xxxx) do not start one.
    let column = tail.iter().filter(|&&b| (b & 0xC0) != 0x80).count() + 1;
    (line, column)
}

fn syntax_error(source: &str, e: &serde_json::Error) -> Error {
    parse_error(
        source,
        e.line().max(1),
        e.column().max(1),
        &format!("invalid JSON: {}", syntax_message(e)),
    )
}

/// serde_json's message without its " at line L column C" suffix (we print our own).
/// Syntax messages name the problem ("expected value", "EOF while parsing a string"), not
/// the content.
fn syntax_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    match full.rfind(" at line ") {
        Some(i) => full[..i].to_owned(),
        None => full,
    }
}

fn parse_error(source: &str, line: usize, column: usize, message: &str) -> Error {
    Error::Parse {
        file: source.to_owned(),
        line,
        column,
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventType, TransformationType};

    fn event(name: &str, time: &str) -> String {
        format!(
            r#"{{"eventType":"COMPLETE","eventTime":"{time}","run":{{"runId":"r-{name}"}},"job":{{"namespace":"lethe","name":"{name}"}},"producer":"urn:test","schemaURL":"x"}}"#
        )
    }

    fn parse_err(bytes: &[u8]) -> (usize, usize, String) {
        match parse_events("lineage/events.json", bytes) {
            Err(Error::Parse {
                file,
                line,
                column,
                message,
            }) => {
                assert_eq!(file, "lineage/events.json");
                (line, column, message)
            }
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn single_object_array_and_json_lines() {
        let one = event("a", "2025-01-01T00:00:00Z");
        assert_eq!(parse_events("f", one.as_bytes()).unwrap().len(), 1);
        let arr = format!(
            "[\n  {one},\n  {}\n]\n",
            event("b", "2025-01-02T00:00:00+02:00")
        );
        let evs = parse_events("f", arr.as_bytes()).unwrap();
        assert_eq!(
            evs.iter().map(|e| e.job.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let lines = format!(
            "{one}\n{}\n\n{}\n",
            event("b", "2025-01-02T00:00:00Z"),
            event("c", "2025-01-03T00:00:00Z")
        );
        let evs = parse_events("f", lines.as_bytes()).unwrap();
        assert_eq!(evs.len(), 3);
        assert_eq!(evs[2].event_type, Some(EventType::Complete));
        let bom = format!("\u{feff}{one}");
        assert_eq!(parse_events("f", bom.as_bytes()).unwrap().len(), 1);
        assert!(parse_events("f", b"[]").unwrap().is_empty());
    }

    #[test]
    fn bad_files_name_file_line_and_column() {
        let (line, _, msg) = parse_err(b"this is not json");
        assert_eq!(line, 1);
        assert!(msg.starts_with("invalid JSON: expected"), "{msg}");
        assert!(!msg.contains("line"), "{msg}");

        let text = format!(
            "{}\n{{\"eventTime\": \"2025-01-01T00:00:00Z\",\n \"run\": {{\"runId\": \"x\"",
            event("a", "2025-01-01T00:00:00Z")
        );
        let (line, _, msg) = parse_err(text.as_bytes());
        assert_eq!(line, 3);
        assert!(msg.contains("EOF"), "{msg}");

        // Valid JSON that is not a RunEvent, on line 2, column 3 of an array.
        let text = format!(
            "[{},\n  {{\"eventTime\": \"2025-01-01T00:00:00Z\", \"run\": {{\"runId\": \"x\"}}, \"inputs\": []}}]",
            event("a", "2025-01-01T00:00:00Z")
        );
        let (line, col, msg) = parse_err(text.as_bytes());
        assert_eq!((line, col), (2, 3));
        assert_eq!(msg, "not an OpenLineage RunEvent: missing `job`");
        let e = parse_events("lineage/events.json", text.as_bytes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "lineage/events.json:2:3: not an OpenLineage RunEvent: missing `job`"
        );

        let (line, _, msg) = parse_err(b"\n\n\"a string\"");
        assert_eq!(line, 3);
        assert!(msg.contains("expected an object, found a string"), "{msg}");

        let (_, _, msg) = parse_err(b"  \n ");
        assert!(msg.contains("empty"));
        let (line, col, msg) = parse_err(b"{\"a\":\n\"\xff\"}");
        assert_eq!((line, col), (2, 2));
        assert!(msg.contains("UTF-8"));
    }

    #[test]
    fn spark_style_event_with_unknown_facets_and_legacy_lineage() {
        let spark = r#"{
  "eventType": "COMPLETE",
  "eventTime": "2024-11-05T08:15:30.5+01:00",
  "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.18.0/integration/spark",
  "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
  "run": {"runId": "0192fa1e-7a4e-7b1c-9d0a-1c2d3e4f5a6b",
          "facets": {"spark_properties": {"_producer": "p", "_schemaURL": "s", "properties": {"spark.master": "local"}},
                     "processing_engine": {"_producer": "p", "_schemaURL": "s", "version": "3.5.1", "name": "spark"}}},
  "job": {"namespace": "spark", "name": "nightly.enrich_learners",
          "facets": {"jobType": {"_producer": "p", "_schemaURL": "s", "processingType": "BATCH", "integration": "SPARK"}}},
  "inputs": [{"namespace": "iceberg://warehouse", "name": "crm.learners",
              "facets": {"schema": {"_producer": "p", "_schemaURL": "s", "fields": [{"name": "learner_id", "type": "long"}, {"name": "address", "type": "struct", "fields": [{"name": "city", "type": "string"}]}]},
                         "dataSource": {"_producer": "p", "_schemaURL": "s", "name": "iceberg", "uri": "iceberg://warehouse"},
                         "symlinks": {"_producer": "p", "_schemaURL": "s", "identifiers": []}}}],
  "outputs": [{"namespace": "iceberg://warehouse", "name": "analytics.enriched",
               "facets": {"columnLineage": {"_producer": "p", "_schemaURL": "s",
                  "fields": {"learner_id": {"inputFields": [{"namespace": "iceberg://warehouse", "name": "crm.learners", "field": "learner_id"}],
                                            "transformationDescription": "identical", "transformationType": "IDENTITY"},
                             "city_upper": {"inputFields": [{"namespace": "iceberg://warehouse", "name": "crm.learners", "field": "address"}],
                                            "transformationDescription": "upper(address.city)", "transformationType": "TRANSFORMATION"}}},
                          "lifecycleStateChange": {"_producer": "p", "_schemaURL": "s", "lifecycleStateChange": "OVERWRITE"}},
               "outputFacets": {"outputStatistics": {"_producer": "p", "_schemaURL": "s", "rowCount": 10, "size": 2048}}}]
}"#;
        let evs = parse_events("spark.json", spark.as_bytes()).unwrap();
        let ev = &evs[0];
        assert_eq!(ev.event_time.offset().local_minus_utc(), 3600);
        assert_eq!(ev.run.facets.len(), 2);
        assert!(ev.job.facets.contains_key("jobType"));
        assert_eq!(
            ev.inputs[0].facets.schema.as_ref().unwrap().fields[1].fields[0].name,
            "city"
        );
        assert!(ev.inputs[0].facets.other.contains_key("dataSource"));
        let out = &ev.outputs[0];
        assert!(out.facets.other.contains_key("lifecycleStateChange"));
        assert!(out.output_facets.contains_key("outputStatistics"));
        let cl = out.facets.column_lineage.as_ref().unwrap();
        let id = &cl.fields["learner_id"];
        let t = id.transformations_of(&id.input_fields[0]);
        assert!(t[0].is_identity());
        let city = &cl.fields["city_upper"];
        let t = city.transformations_of(&city.input_fields[0]);
        assert_eq!(t[0].kind, TransformationType::Direct);
        assert_eq!(t[0].subtype.as_deref(), Some("TRANSFORMATION"));
        // Written back, the unknown facets are still there.
        let back = parse_events("back.json", ev.to_json_pretty().unwrap().as_bytes()).unwrap();
        assert_eq!(&back[0], ev);
    }
}
