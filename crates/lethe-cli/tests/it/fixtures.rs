//! Warehouses as other engines leave them (issue 8): merge-on-read tables with position and
//! equality deletes, partitioned tables, format v1 and v3 tables (deletion vectors, row
//! lineage, default values), evolved schemas. Built with lethe's own code
//! ([`lethe_demo::fixtures`]); each is read by PyIceberg 0.12 in the tests before lethe
//! changes it.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, TimeUnit};
use chrono::{NaiveDate, NaiveDateTime};
use iceberg::spec::{
    FormatVersion, NestedField, PrimitiveType, Schema, Transform, Type, UnboundPartitionSpec,
};
use lethe::workspace::Workspace;
use lethe_demo::fixtures::{GovernanceFiles, init_workspace};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::append;
use lethe_iceberg::table::{LoadedTable, Warehouse};
use lethe_iceberg::writer::WriteOptions;

use crate::common::pyiceberg;

/// The subject every fixture erases: customer 7.
pub const SUBJECT: i64 = 7;
/// Customer 7's email: unique, so the proof scan finds it wherever it is.
pub const SUBJECT_EMAIL: &str = "ada.lovelace.seven@example.org";
/// Customers in `crm.customers`.
pub const CUSTOMERS: i64 = 20;

/// A fixture workspace in a temporary folder.
pub struct Foreign {
    /// Keeps the folder alive.
    pub tmp: tempfile::TempDir,
    /// The workspace folder (lethe.toml, catalog.db, warehouse/).
    pub dir: PathBuf,
    /// The workspace.
    pub ws: Workspace,
}

/// subjects.toml for the fixtures; `email_column` is the root table's email column.
pub fn subjects(email_column: &str) -> String {
    format!(
        "[customer]\nidentifiers = [\"crm.customers.customer_id\"]\nvalues = [\"{email_column}\", \"full_name\"]\n"
    )
}

/// metadata.toml for the fixtures (the email column under its original name).
pub const METADATA: &str = r#"
[tables."crm.customers"]
owner = "crm"
key = ["customer_id"]
[tables."crm.customers".columns]
customer_id = { classification = "internal", identifies = "customer" }
email = "personal"
full_name = "personal"
"#;

impl Foreign {
    /// A workspace with `crm.customers` (format `version`) holding customers 1..=20.
    pub async fn new(version: FormatVersion, retention: &str) -> Foreign {
        Foreign::with_subjects(version, retention, &subjects("email")).await
    }

    /// As [`Foreign::new`] with the given subjects.toml.
    pub async fn with_subjects(version: FormatVersion, retention: &str, subjects: &str) -> Foreign {
        let f = Foreign::bare(retention, subjects);
        f.create("crm.customers", customers_schema(), None, version)
            .await;
        f.append("crm.customers", &customers(1..=CUSTOMERS)).await;
        f
    }

    /// A workspace with no table yet.
    pub fn bare(retention: &str, subjects: &str) -> Foreign {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("foreign");
        let ws = init_workspace(
            &dir,
            GovernanceFiles {
                metadata: METADATA,
                retention,
                subjects,
            },
        )
        .expect("workspace");
        Foreign { tmp, dir, ws }
    }

    /// The warehouse.
    pub fn wh(&self) -> &Warehouse {
        &self.ws.warehouse
    }

    /// Creates a table.
    pub async fn create(
        &self,
        name: &str,
        schema: Schema,
        partition: Option<UnboundPartitionSpec>,
        version: FormatVersion,
    ) -> LoadedTable {
        self.wh()
            .create_table(
                &TableName::parse(name).unwrap(),
                schema,
                partition,
                None,
                HashMap::new(),
                version,
            )
            .await
            .expect("create table")
    }

    /// Appends rows with lethe's writer (one snapshot).
    pub async fn append(&self, name: &str, batch: &RecordBatch) {
        append(
            self.wh(),
            &TableName::parse(name).unwrap(),
            std::slice::from_ref(batch),
            BTreeMap::new(),
            WriteOptions::default(),
        )
        .await
        .expect("append");
    }

    /// PyIceberg's own scan (tests/interop/read_scan.py) of one table with a filter.
    pub fn py_scan(&self, table: &str, filter: Option<&str>) -> serde_json::Value {
        let spec = match filter {
            Some(f) => format!("{table}|{f}"),
            None => table.to_string(),
        };
        self.py_scans(&[spec.as_str()])[&spec].clone()
    }

    /// PyIceberg's own scans of several `TABLE` or `TABLE|FILTER` specs, in one process.
    pub fn py_scans(&self, specs: &[&str]) -> serde_json::Value {
        pyiceberg(&self.dir, "read_scan.py", specs, None)
    }

    /// PyIceberg's scan of a format v3 table with its deletion vectors described
    /// (tests/interop/read_v3.py); `spec` is `TABLE` or `TABLE|FILTER`.
    pub fn py_v3(&self, spec: &str) -> serde_json::Value {
        pyiceberg(&self.dir, "read_v3.py", &[spec], None)[spec].clone()
    }

    /// The spec's merge-on-read semantics over PyIceberg's metadata (tests/interop/read_mor.py).
    pub fn py_mor(&self, spec: &str) -> serde_json::Value {
        pyiceberg(&self.dir, "read_mor.py", &[spec], None)[spec].clone()
    }

    /// Metadata locations of every table (to show nothing changed).
    pub async fn pointers(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for n in self.wh().tables().await.unwrap() {
            out.insert(
                n.to_string(),
                self.wh().load(&n).await.unwrap().metadata_location,
            );
        }
        out
    }
}

fn long(id: i32, name: &str, required: bool) -> Arc<NestedField> {
    let t = Type::Primitive(PrimitiveType::Long);
    Arc::new(if required {
        NestedField::required(id, name, t)
    } else {
        NestedField::optional(id, name, t)
    })
}

fn opt(id: i32, name: &str, p: PrimitiveType) -> Arc<NestedField> {
    Arc::new(NestedField::optional(id, name, Type::Primitive(p)))
}

/// `crm.customers`: customer_id (1), email (2), full_name (3).
pub fn customers_schema() -> Schema {
    Schema::builder()
        .with_fields(vec![
            long(1, "customer_id", true),
            opt(2, "email", PrimitiveType::String),
            opt(3, "full_name", PrimitiveType::String),
        ])
        .with_identifier_field_ids(vec![1])
        .build()
        .unwrap()
}

/// A customer's email (the subject's is [`SUBJECT_EMAIL`]).
pub fn email(c: i64) -> String {
    if c == SUBJECT {
        SUBJECT_EMAIL.to_string()
    } else {
        format!("customer{c:02}@example.org")
    }
}

/// A customer's name.
pub fn full_name(c: i64) -> String {
    if c == SUBJECT {
        "Ada Seven Lovelace".to_string()
    } else {
        format!("Customer Number {c}")
    }
}

fn strings(v: impl IntoIterator<Item = String>) -> ArrayRef {
    Arc::new(StringArray::from(
        v.into_iter().map(Some).collect::<Vec<_>>(),
    ))
}

/// Rows of `crm.customers`.
pub fn customers(ids: impl IntoIterator<Item = i64>) -> RecordBatch {
    let ids: Vec<i64> = ids.into_iter().collect();
    RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![
            Field::new("customer_id", DataType::Int64, false),
            Field::new("email", DataType::Utf8, true),
            Field::new("full_name", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            strings(ids.iter().map(|c| email(*c))),
            strings(ids.iter().map(|c| full_name(*c))),
        ],
    )
    .unwrap()
}

/// `shop.orders`: order_id (1), customer_id (2), email (3), amount (4), ordered_at (5).
pub fn orders_schema() -> Schema {
    Schema::builder()
        .with_fields(vec![
            long(1, "order_id", true),
            long(2, "customer_id", false),
            opt(3, "email", PrimitiveType::String),
            opt(4, "amount", PrimitiveType::Double),
            opt(5, "ordered_at", PrimitiveType::Timestamp),
        ])
        .build()
        .unwrap()
}

/// The customer of an order: orders 6, 26, 46, ... belong to the subject.
pub fn customer_of(order: i64) -> i64 {
    order % CUSTOMERS + 1
}

fn ts(d: NaiveDate, hour: u32) -> i64 {
    NaiveDateTime::new(d, chrono::NaiveTime::from_hms_opt(hour, 0, 0).unwrap())
        .and_utc()
        .timestamp_micros()
}

fn timestamps(v: Vec<i64>) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from(v))
}

/// Rows of `shop.orders`.
pub fn orders(ids: impl IntoIterator<Item = i64>) -> RecordBatch {
    let ids: Vec<i64> = ids.into_iter().collect();
    let day0 = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
    RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![
            Field::new("order_id", DataType::Int64, false),
            Field::new("customer_id", DataType::Int64, true),
            Field::new("email", DataType::Utf8, true),
            Field::new("amount", DataType::Float64, true),
            Field::new(
                "ordered_at",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                true,
            ),
        ])),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(Int64Array::from(
                ids.iter().map(|o| customer_of(*o)).collect::<Vec<_>>(),
            )),
            strings(ids.iter().map(|o| email(customer_of(*o)))),
            Arc::new(Float64Array::from(
                ids.iter().map(|o| *o as f64 * 1.5).collect::<Vec<_>>(),
            )),
            timestamps(
                ids.iter()
                    .map(|o| ts(day0 + chrono::Duration::days(*o), (*o % 24) as u32))
                    .collect(),
            ),
        ],
    )
    .unwrap()
}

/// `shop.events`: event_id (1), customer_id (2), kind (3), occurred_at (4); partitioned by
/// month(occurred_at).
pub fn events_schema() -> Schema {
    Schema::builder()
        .with_fields(vec![
            long(1, "event_id", true),
            long(2, "customer_id", false),
            opt(3, "kind", PrimitiveType::String),
            opt(4, "occurred_at", PrimitiveType::Timestamp),
        ])
        .build()
        .unwrap()
}

/// A spec with one partition field over `source`.
pub fn spec(source: i32, name: &str, t: Transform) -> UnboundPartitionSpec {
    UnboundPartitionSpec::builder()
        .add_partition_field(source, name, t)
        .unwrap()
        .build()
}

/// The month (1..=6 of 2026) of an event.
pub fn month_of_event(e: i64) -> u32 {
    (e % 6) as u32 + 1
}

/// Rows of `shop.events`: event e belongs to customer (e % 20) + 1 and happened in month
/// (e % 6) + 1 of 2026.
pub fn events(ids: impl IntoIterator<Item = i64>) -> RecordBatch {
    let ids: Vec<i64> = ids.into_iter().collect();
    RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![
            Field::new("event_id", DataType::Int64, false),
            Field::new("customer_id", DataType::Int64, true),
            Field::new("kind", DataType::Utf8, true),
            Field::new(
                "occurred_at",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                true,
            ),
        ])),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(Int64Array::from(
                ids.iter().map(|e| customer_of(*e)).collect::<Vec<_>>(),
            )),
            strings(
                ids.iter()
                    .map(|e| ["view", "click", "buy"][(*e % 3) as usize].to_string()),
            ),
            timestamps(
                ids.iter()
                    .map(|e| {
                        let d =
                            NaiveDate::from_ymd_opt(2026, month_of_event(*e), 1 + (*e % 28) as u32)
                                .unwrap();
                        ts(d, (*e % 24) as u32)
                    })
                    .collect(),
            ),
        ],
    )
    .unwrap()
}

/// `shop.accounts`: account_id (1), customer_id (2), email (3), balance (4); partitioned by
/// bucket(8, customer_id).
pub fn accounts_schema() -> Schema {
    Schema::builder()
        .with_fields(vec![
            long(1, "account_id", true),
            long(2, "customer_id", false),
            opt(3, "email", PrimitiveType::String),
            opt(4, "balance", PrimitiveType::Double),
        ])
        .build()
        .unwrap()
}

/// Rows of `shop.accounts`: account a belongs to customer (a % 20) + 1.
pub fn accounts(ids: impl IntoIterator<Item = i64>) -> RecordBatch {
    let ids: Vec<i64> = ids.into_iter().collect();
    RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![
            Field::new("account_id", DataType::Int64, false),
            Field::new("customer_id", DataType::Int64, true),
            Field::new("email", DataType::Utf8, true),
            Field::new("balance", DataType::Float64, true),
        ])),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(Int64Array::from(
                ids.iter().map(|a| customer_of(*a)).collect::<Vec<_>>(),
            )),
            strings(ids.iter().map(|a| email(customer_of(*a)))),
            Arc::new(Float64Array::from(
                ids.iter().map(|a| *a as f64).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}
