//! Fixture files built by the tests themselves: a canary in every place the scanner must
//! look, or (with `canaries = false`) the same files with neutral values instead.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use apache_avro::Schema as AvroSchema;
use apache_avro::types::Value as Avro;
use arrow::array::{
    Array, ArrayRef, DictionaryArray, Int64Array, ListBuilder, RecordBatch, StringArray,
    StringBuilder, StructArray,
};
use arrow::datatypes::{DataType, Field, Fields, Int32Type, Schema};
use lethe_scan::{IdTrace, IdValue, Place, SubjectTraces, ValueTrace};
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

/// One canary: the subject's traces and where it must be found.
pub struct Canary {
    pub kind: &'static str,
    pub value: Option<&'static str>,
    pub id: Option<(&'static str, i64)>,
    pub file: &'static str,
    pub place: Place,
}

const fn v(kind: &'static str, value: &'static str, file: &'static str, place: Place) -> Canary {
    Canary {
        kind,
        value: Some(value),
        id: None,
        file,
        place,
    }
}

const fn id(column: &'static str, value: i64, file: &'static str, place: Place) -> Canary {
    Canary {
        kind: "id",
        value: None,
        id: Some((column, value)),
        file,
        place,
    }
}

pub const DATA: &str = "data/00000-data.parquet";
pub const POS_DELETE: &str = "data/00001-pos-deletes.parquet";
pub const EQ_DELETE: &str = "data/00002-eq-deletes.parquet";
pub const MANIFEST: &str = "metadata/abc-m0.avro";
pub const MANIFEST_LIST: &str = "metadata/snap-1-abc.avro";
pub const METADATA: &str = "metadata/00001-abc.metadata.json";
pub const GZ_METADATA: &str = "metadata/00002-abc.gz.metadata.json";
pub const PUFFIN_A: &str = "metadata/stats-a.puffin";
pub const PUFFIN_B: &str = "metadata/stats-b.puffin";
pub const JSONL_GZ: &str = "exports/events.jsonl.gz";
pub const CSV: &str = "exports/learners.csv";
pub const TEXT: &str = "logs/app.log";
pub const AVRO: &str = "exports/events.avro";
pub const CRC: &str = "data/.00000-data.parquet.crc";

/// The canaries, one subject each (subject index = position).
pub const CANARIES: &[Canary] = &[
    v("email", "mmmm.canary.data@ex.org", DATA, Place::DataValue),
    v(
        "email",
        "aaaa.canary.min@ex.org",
        DATA,
        Place::FooterStatistic,
    ),
    v(
        "email",
        "zzzz.canary.max@ex.org",
        DATA,
        Place::FooterStatistic,
    ),
    v("email", "kkkk.canary.page@ex.org", DATA, Place::PageIndex),
    id("learner_id", 3590, DATA, Place::BloomFilter),
    v("phone", "+44 7700 900123", DATA, Place::DataValue),
    v("full_name", "Zoë Canary-Dictionary", DATA, Place::DataValue),
    v(
        "email",
        "pppp.canary.posdel@ex.org",
        POS_DELETE,
        Place::DeleteFile,
    ),
    id("review_id", 1199, EQ_DELETE, Place::DeleteFile),
    v(
        "email",
        "llll.canary.lower@ex.org",
        MANIFEST,
        Place::ManifestBound,
    ),
    v(
        "email",
        "alexa590@post.example",
        MANIFEST,
        Place::ManifestBound,
    ),
    v(
        "email",
        "dddd.canary.deleted@ex.org",
        MANIFEST,
        Place::ManifestBound,
    ),
    id("learner_id", 4242, MANIFEST, Place::ManifestBound),
    id("learner_id", 5151, MANIFEST, Place::ManifestBound),
    v(
        "street_address",
        "Rue du Canari 14, Lyon",
        MANIFEST_LIST,
        Place::ManifestListBound,
    ),
    v(
        "email",
        "snapshot.canary@ex.org",
        METADATA,
        Place::MetadataJson,
    ),
    v(
        "email",
        "puffin.canary.blob@ex.org",
        PUFFIN_A,
        Place::PuffinBlob,
    ),
    v(
        "email",
        "puffin.canary.prop@ex.org",
        PUFFIN_B,
        Place::PuffinBlob,
    ),
    v(
        "email",
        "puffin.canary.lz4@ex.org",
        PUFFIN_B,
        Place::PuffinBlob,
    ),
    v("email", "gz.canary.line@ex.org", JSONL_GZ, Place::JsonLine),
    id("learner_id", 7777, JSONL_GZ, Place::JsonLine),
    v("email", "csv.canary@ex.org", CSV, Place::Csv),
    id("learner_id", 8888, CSV, Place::Csv),
    v("email", "text.canary@ex.org", TEXT, Place::Text),
    v("email", "avro.canary@ex.org", AVRO, Place::AvroValue),
    id("learner_id", 6060, AVRO, Place::AvroValue),
    v(
        "email",
        "path.canary@ex.org",
        MANIFEST,
        Place::ManifestString,
    ),
    v(
        "email",
        "gzjson.canary@ex.org",
        GZ_METADATA,
        Place::MetadataJson,
    ),
];

/// Subject index of the canary with this value or ID.
pub fn subject_of(value: &str) -> usize {
    CANARIES
        .iter()
        .position(|c| c.value == Some(value) || c.id.is_some_and(|(_, i)| i.to_string() == value))
        .unwrap()
}

/// The canary subjects' traces.
pub fn subjects() -> Vec<SubjectTraces> {
    CANARIES
        .iter()
        .enumerate()
        .map(|(i, c)| SubjectTraces {
            label: format!("canary-{i}"),
            ids: c
                .id
                .map(|(col, v)| {
                    vec![IdTrace {
                        column: col.into(),
                        values: vec![IdValue::Int(v)],
                    }]
                })
                .unwrap_or_default(),
            values: c
                .value
                .map(|v| {
                    vec![ValueTrace {
                        kind: c.kind.into(),
                        value: v.into(),
                    }]
                })
                .unwrap_or_default(),
        })
        .collect()
}

/// Builds the files; `pick(canary, neutral)` chooses by `canaries`.
pub struct Builder {
    pub canaries: bool,
}

impl Builder {
    fn s<'a>(&self, canary: &'a str, neutral: &'a str) -> &'a str {
        if self.canaries { canary } else { neutral }
    }
    fn i(&self, canary: i64, neutral: i64) -> i64 {
        if self.canaries { canary } else { neutral }
    }

    /// All files by relative path.
    pub fn files(&self) -> Vec<(&'static str, Vec<u8>)> {
        vec![
            (DATA, self.data_parquet()),
            (POS_DELETE, self.pos_delete()),
            (EQ_DELETE, self.eq_delete()),
            (MANIFEST, self.manifest()),
            (MANIFEST_LIST, self.manifest_list()),
            (METADATA, self.metadata_json()),
            (GZ_METADATA, gzip(&self.gz_metadata_json())),
            (PUFFIN_A, self.puffin_a()),
            (PUFFIN_B, self.puffin_b()),
            (JSONL_GZ, gzip(&self.jsonl())),
            (CSV, self.csv()),
            (TEXT, self.text()),
            (AVRO, self.avro()),
            (CRC, b"crc\0\x00\x00\x02\x00\x12\x34\x56\x78".to_vec()),
        ]
    }

    pub fn data_parquet(&self) -> Vec<u8> {
        let ids = Int64Array::from(vec![100, 200, 300, 10, self.i(3590, 3591), 99999]);
        let emails = StringArray::from(vec![
            self.s("aaaa.canary.min@ex.org", "abab.neutral@ex.org"),
            "bbbb@ex.org",
            "cccc@ex.org",
            self.s("kkkk.canary.page@ex.org", "kaka.neutral@ex.org"),
            self.s("mmmm.canary.data@ex.org", "mama.neutral@ex.org"),
            self.s("zzzz.canary.max@ex.org", "zaza.neutral@ex.org"),
        ]);
        let mut phones = ListBuilder::new(StringBuilder::new());
        for i in 0..6 {
            phones.values().append_value(format!("+1 555 010{i}"));
            if i == 4 {
                phones
                    .values()
                    .append_value(self.s("+44 7700 900123", "+44 7700 900999"));
            }
            phones.append(true);
        }
        let phones = phones.finish();
        let names = StringArray::from(vec![
            "Ann One", "Bob Two", "Cy Three", "Di Four", "Ed Five", "Flo Six",
        ]);
        let profile_fields = Fields::from(vec![
            Field::new("full_name", DataType::Utf8, true),
            Field::new("phones", phones.data_type().clone(), true),
        ]);
        let profile = StructArray::new(
            profile_fields.clone(),
            vec![Arc::new(names) as ArrayRef, Arc::new(phones) as ArrayRef],
            None,
        );
        let nick: DictionaryArray<Int32Type> = vec![
            "ann",
            "bob",
            "ann",
            "di",
            self.s("ZOË CANARY-DICTIONARY", "ZOË NEUTRAL"),
            "flo",
        ]
        .into_iter()
        .collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("learner_id", DataType::Int64, false),
            Field::new("email", DataType::Utf8, true),
            Field::new("profile", DataType::Struct(profile_fields), true),
            Field::new("nickname", nick.data_type().clone(), true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(ids),
                Arc::new(emails),
                Arc::new(profile),
                Arc::new(nick),
            ],
        )
        .unwrap();
        let props = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_data_page_row_count_limit(3)
            .set_write_batch_size(3)
            .set_dictionary_enabled(false)
            .set_column_bloom_filter_enabled(ColumnPath::from("learner_id"), true)
            .set_column_bloom_filter_ndv(ColumnPath::from("learner_id"), 64)
            .set_column_bloom_filter_fpp(ColumnPath::from("learner_id"), 0.0001)
            .build();
        write_parquet(schema, batch, props)
    }

    pub fn pos_delete(&self) -> Vec<u8> {
        let with_id = |f: Field, id: i64| {
            f.with_metadata(HashMap::from([(
                "PARQUET:field_id".to_string(),
                id.to_string(),
            )]))
        };
        let row_fields = Fields::from(vec![with_id(Field::new("email", DataType::Utf8, true), 2)]);
        let schema = Arc::new(Schema::new(vec![
            with_id(
                Field::new("file_path", DataType::Utf8, false),
                2_147_483_546,
            ),
            with_id(Field::new("pos", DataType::Int64, false), 2_147_483_545),
            with_id(
                Field::new("row", DataType::Struct(row_fields.clone()), true),
                2_147_483_544,
            ),
        ]));
        let row = StructArray::new(
            row_fields,
            vec![Arc::new(StringArray::from(vec![
                self.s("pppp.canary.posdel@ex.org", "pepe.neutral@ex.org"),
            ])) as ArrayRef],
            None,
        );
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["s3://b/t/data/00000-data.parquet"])),
                Arc::new(Int64Array::from(vec![4])),
                Arc::new(row),
            ],
        )
        .unwrap();
        write_parquet(schema, batch, WriterProperties::builder().build())
    }

    pub fn eq_delete(&self) -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "review_id",
            DataType::Int64,
            false,
        )]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(vec![self.i(1199, 1198)]))],
        )
        .unwrap();
        write_parquet(schema, batch, WriterProperties::builder().build())
    }

    pub fn manifest(&self) -> Vec<u8> {
        let schema = AvroSchema::parse_str(MANIFEST_SCHEMA).unwrap();
        let mut w = apache_avro::Writer::new(&schema, Vec::new());
        w.add_user_metadata("schema".into(), ICEBERG_SCHEMA)
            .unwrap();
        w.add_user_metadata(
            "partition-spec".into(),
            r#"[{"name":"learner_id","transform":"identity","source-id":1,"field-id":1000}]"#,
        )
        .unwrap();
        w.add_user_metadata("partition-spec-id".into(), "0")
            .unwrap();
        w.add_user_metadata("format-version".into(), "2").unwrap();
        w.add_user_metadata("content".into(), "data").unwrap();
        let kv = |id: i32, b: Vec<u8>| {
            Avro::Record(vec![
                ("key".into(), Avro::Int(id)),
                ("value".into(), Avro::Bytes(b)),
            ])
        };
        let bounds = |items: Vec<Avro>| Avro::Union(1, Box::new(Avro::Array(items)));
        let entry = |status: i32, path: String, part: i64, lower: Vec<Avro>, upper: Vec<Avro>| {
            Avro::Record(vec![
                ("status".into(), Avro::Int(status)),
                (
                    "snapshot_id".into(),
                    Avro::Union(1, Box::new(Avro::Long(1))),
                ),
                (
                    "data_file".into(),
                    Avro::Record(vec![
                        ("content".into(), Avro::Int(0)),
                        ("file_path".into(), Avro::String(path)),
                        ("file_format".into(), Avro::String("PARQUET".into())),
                        (
                            "partition".into(),
                            Avro::Record(vec![(
                                "learner_id".into(),
                                Avro::Union(1, Box::new(Avro::Long(part))),
                            )]),
                        ),
                        ("record_count".into(), Avro::Long(6)),
                        ("lower_bounds".into(), bounds(lower)),
                        ("upper_bounds".into(), bounds(upper)),
                    ]),
                ),
            ])
        };
        let added = entry(
            1,
            format!(
                "s3://b/t/data/email={}/00000.parquet",
                self.s("path.canary@ex.org", "pathneutral@ex.org")
            ),
            self.i(5151, 5152),
            vec![
                kv(1, self.i(4242, 4243).to_le_bytes().to_vec()),
                kv(
                    2,
                    self.s("llll.canary.lower@ex.org", "lolo.neutral@ex.org")
                        .as_bytes()
                        .to_vec(),
                ),
                kv(3, 19000i32.to_le_bytes().to_vec()),
            ],
            vec![
                kv(1, 99999i64.to_le_bytes().to_vec()),
                // "alexa590@post.example" truncated to 16 characters, last one raised.
                kv(
                    2,
                    self.s("alexa590@post.ey", "alexa590@post.")
                        .as_bytes()
                        .to_vec(),
                ),
                kv(3, 19100i32.to_le_bytes().to_vec()),
            ],
        );
        let deleted = entry(
            2,
            "s3://b/t/data/00009.parquet".into(),
            7,
            vec![kv(
                2,
                self.s("dddd.canary.deleted@ex.org", "dodo.neutral@ex.org")
                    .as_bytes()
                    .to_vec(),
            )],
            vec![kv(2, b"zz".to_vec())],
        );
        w.append(added).unwrap();
        w.append(deleted).unwrap();
        w.into_inner().unwrap()
    }

    pub fn manifest_list(&self) -> Vec<u8> {
        let schema = AvroSchema::parse_str(MANIFEST_LIST_SCHEMA).unwrap();
        let mut w = apache_avro::Writer::new(&schema, Vec::new());
        w.add_user_metadata("snapshot-id".into(), "1").unwrap();
        w.add_user_metadata("sequence-number".into(), "1").unwrap();
        w.add_user_metadata("format-version".into(), "2").unwrap();
        let summary = Avro::Record(vec![
            ("contains_null".into(), Avro::Boolean(false)),
            ("contains_nan".into(), Avro::Union(0, Box::new(Avro::Null))),
            (
                "lower_bound".into(),
                Avro::Union(
                    1,
                    Box::new(Avro::Bytes(
                        self.s("Rue du Canari 14, Lyon", "Rue Neutre 1")
                            .as_bytes()
                            .to_vec(),
                    )),
                ),
            ),
            (
                "upper_bound".into(),
                Avro::Union(1, Box::new(Avro::Bytes(b"Zz".to_vec()))),
            ),
        ]);
        let record = Avro::Record(vec![
            (
                "manifest_path".into(),
                Avro::String("s3://b/t/metadata/abc-m0.avro".into()),
            ),
            ("manifest_length".into(), Avro::Long(1234)),
            ("partition_spec_id".into(), Avro::Int(0)),
            (
                "added_snapshot_id".into(),
                Avro::Union(1, Box::new(Avro::Long(1))),
            ),
            (
                "partitions".into(),
                Avro::Union(1, Box::new(Avro::Array(vec![summary]))),
            ),
        ]);
        w.append(record).unwrap();
        w.into_inner().unwrap()
    }

    pub fn metadata_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(&serde_json::json!({
            "format-version": 2,
            "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
            "location": "s3://b/t",
            "current-snapshot-id": 1,
            "snapshots": [{
                "snapshot-id": 1,
                "timestamp-ms": 1700000000000u64,
                "summary": {"operation": "append", "note": self.s("fixed snapshot.canary@ex.org", "fixed nobody")},
                "manifest-list": "s3://b/t/metadata/snap-1-abc.avro"
            }],
            "properties": {"owner": "data-team"}
        }))
        .unwrap()
    }

    pub fn gz_metadata_json(&self) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "format-version": 2,
            "properties": {"contact": self.s("gzjson.canary@ex.org", "gzjson.neutral@ex.org")}
        }))
        .unwrap()
    }

    pub fn puffin_a(&self) -> Vec<u8> {
        let blob = format!(
            "sketch-bytes {} more",
            self.s("Puffin.Canary.Blob@ex.org", "puffin.neutral@ex.org")
        );
        puffin(
            &[(
                "apache-datasketches-theta-v1",
                Some("zstd"),
                blob.into_bytes(),
            )],
            "{}",
            false,
        )
    }

    pub fn puffin_b(&self) -> Vec<u8> {
        let blob = format!(
            "dv {}",
            self.s("puffin.canary.lz4@ex.org", "puffin.neutral2@ex.org")
        );
        let props = format!(
            r#"{{"created-by":"{}"}}"#,
            self.s("puffin.canary.prop@ex.org", "puffin.neutral3@ex.org")
        );
        puffin(
            &[
                (
                    "apache-datasketches-theta-v1",
                    Some("lz4"),
                    blob.into_bytes(),
                ),
                ("x", None, b"raw".to_vec()),
            ],
            &props,
            true,
        )
    }

    pub fn jsonl(&self) -> Vec<u8> {
        let mut out = String::new();
        out.push_str("{\"learner_id\": 1, \"note\": \"hello\"}\n\n");
        out.push_str(&format!(
            "{{\"learner_id\": {}, \"contact\": {{\"email\": \"{}\"}}}}\n",
            self.i(7777, 7778),
            self.s("gz.canary.line@ex.org", "gz.neutral@ex.org")
        ));
        out.into_bytes()
    }

    pub fn csv(&self) -> Vec<u8> {
        format!(
            "learner_id,email\n1,one@ex.org\n{},{}\n2,\"quoted, two\"\n",
            self.i(8888, 8889),
            self.s("CSV.Canary@ex.org", "csv.neutral@ex.org")
        )
        .into_bytes()
    }

    pub fn text(&self) -> Vec<u8> {
        format!(
            "2026-01-01 start\n2026-01-01 user {} logged in\n2026-01-01 stop\n",
            self.s("text.canary@ex.org", "text.neutral@ex.org")
        )
        .into_bytes()
    }

    pub fn avro(&self) -> Vec<u8> {
        let schema = AvroSchema::parse_str(
            r#"{"type":"record","name":"event","fields":[
                {"name":"learner_id","type":"long"},
                {"name":"comment","type":"string"},
                {"name":"attrs","type":{"type":"map","values":"string"}}]}"#,
        )
        .unwrap();
        let mut w = apache_avro::Writer::new(&schema, Vec::new());
        for (lid, comment) in [
            (1, "fine"),
            (
                self.i(6060, 6061),
                self.s("by avro.canary@ex.org", "by nobody"),
            ),
        ] {
            w.append(Avro::Record(vec![
                ("learner_id".into(), Avro::Long(lid)),
                ("comment".into(), Avro::String(comment.into())),
                (
                    "attrs".into(),
                    Avro::Map(HashMap::from([("k".to_string(), Avro::String("v".into()))])),
                ),
            ]))
            .unwrap();
        }
        w.into_inner().unwrap()
    }
}

pub fn write_parquet(schema: Arc<Schema>, batch: RecordBatch, props: WriterProperties) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    out
}

/// Parquet file with key-value metadata (e.g. `delete-type`).
pub fn parquet_with_kv(kv: Vec<KeyValue>) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![Field::new(
        "review_id",
        DataType::Int64,
        false,
    )]));
    let batch =
        RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![1199]))]).unwrap();
    write_parquet(
        schema,
        batch,
        WriterProperties::builder()
            .set_key_value_metadata(Some(kv))
            .build(),
    )
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A Puffin file built by hand.
pub fn puffin(
    blobs: &[(&str, Option<&str>, Vec<u8>)],
    properties: &str,
    lz4_footer: bool,
) -> Vec<u8> {
    let mut out = b"PFA1".to_vec();
    let mut metas = Vec::new();
    for (ty, codec, data) in blobs {
        let stored = match codec {
            Some("zstd") => zstd::encode_all(data.as_slice(), 3).unwrap(),
            Some("lz4") => {
                let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            _ => data.clone(),
        };
        let codec_json = codec
            .map(|c| format!(r#","compression-codec":"{c}""#))
            .unwrap_or_default();
        metas.push(format!(
            r#"{{"type":"{ty}","fields":[1],"snapshot-id":1,"sequence-number":1,"offset":{},"length":{}{codec_json}}}"#,
            out.len(),
            stored.len()
        ));
        out.extend_from_slice(&stored);
    }
    let payload = format!(
        r#"{{"blobs":[{}],"properties":{properties}}}"#,
        metas.join(",")
    );
    let payload = if lz4_footer {
        let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
        e.write_all(payload.as_bytes()).unwrap();
        e.finish().unwrap()
    } else {
        payload.into_bytes()
    };
    out.extend_from_slice(b"PFA1");
    out.extend_from_slice(&payload);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&(u32::from(lz4_footer)).to_le_bytes());
    out.extend_from_slice(b"PFA1");
    out
}

pub const ICEBERG_SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
 {"id":1,"name":"learner_id","required":true,"type":"long"},
 {"id":2,"name":"email","required":false,"type":"string"},
 {"id":3,"name":"signup","required":false,"type":"date"}]}"#;

pub const MANIFEST_SCHEMA: &str = r#"{"type":"record","name":"manifest_entry","fields":[
 {"name":"status","type":"int","field-id":0},
 {"name":"snapshot_id","type":["null","long"],"default":null,"field-id":1},
 {"name":"data_file","type":{"type":"record","name":"r2","fields":[
   {"name":"content","type":"int","field-id":134},
   {"name":"file_path","type":"string","field-id":100},
   {"name":"file_format","type":"string","field-id":101},
   {"name":"partition","type":{"type":"record","name":"r102","fields":[
      {"name":"learner_id","type":["null","long"],"default":null,"field-id":1000}]},"field-id":102},
   {"name":"record_count","type":"long","field-id":103},
   {"name":"lower_bounds","type":["null",{"type":"array","items":{"type":"record","name":"k126_v127",
      "fields":[{"name":"key","type":"int","field-id":126},{"name":"value","type":"bytes","field-id":127}]},
      "logicalType":"map"}],"default":null,"field-id":125},
   {"name":"upper_bounds","type":["null",{"type":"array","items":{"type":"record","name":"k129_v130",
      "fields":[{"name":"key","type":"int","field-id":129},{"name":"value","type":"bytes","field-id":130}]},
      "logicalType":"map"}],"default":null,"field-id":128}]},"field-id":2}]}"#;

pub const MANIFEST_LIST_SCHEMA: &str = r#"{"type":"record","name":"manifest_file","fields":[
 {"name":"manifest_path","type":"string","field-id":500},
 {"name":"manifest_length","type":"long","field-id":501},
 {"name":"partition_spec_id","type":"int","field-id":502},
 {"name":"added_snapshot_id","type":["null","long"],"default":null,"field-id":503},
 {"name":"partitions","type":["null",{"type":"array","items":{"type":"record","name":"r508","fields":[
    {"name":"contains_null","type":"boolean","field-id":509},
    {"name":"contains_nan","type":["null","boolean"],"default":null,"field-id":518},
    {"name":"lower_bound","type":["null","bytes"],"default":null,"field-id":510},
    {"name":"upper_bound","type":["null","bytes"],"default":null,"field-id":511}]},"element-id":508}],
  "default":null,"field-id":507}]}"#;
