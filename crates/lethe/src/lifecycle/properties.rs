//! Table properties generated from the classifications: keep personal values out of
//! manifests, and expire snapshots as retention.toml says.
//!
//! For every primitive column classified `personal` or `sensitive` in metadata.toml, and every
//! column nobody classified (fail-closed, as the access policy), the table gets
//! `write.metadata.metrics.column.<name> = none` (or `counts`, per `[statistics] protected`);
//! every table gets `history.expire.max-snapshot-age-ms` and
//! `history.expire.min-snapshots-to-keep` from `[snapshots]`.
//!
//! Columns are resolved by field id: a column renamed since metadata.toml was written keeps
//! its classification (found under any name the field had in an earlier schema), and
//! properties under names no current column has (a renamed or dropped column) are removed, so
//! regenerating after a schema change keeps a renamed personal column at `none` — PyIceberg
//! and Java look the property up by the column's current name only.
//!
//! A metrics mode applies only to files written after it is set, so [`apply_one`] rewrites each
//! changed table's data once; expiry and a sweep then remove the files from before.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::error::Result;
use crate::governance::Governance;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::commit::{SetProperties, commit};
use lethe_iceberg::metrics::{COLUMN_MODE_PREFIX, primitive_leaves};
use lethe_iceberg::ops::rewrite::{RowRewrite, rewrite_rows};
use lethe_iceberg::table::{LoadedTable, Warehouse};

/// Marks a table whose properties lethe generated.
pub const MARKER: &str = "lethe.properties";

/// The properties a table should have, and the stale ones it should lose.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Generated {
    /// The table.
    pub table: String,
    /// Properties to have.
    pub set: BTreeMap<String, String>,
    /// Properties to remove (metrics settings of columns the table no longer has).
    pub remove: Vec<String>,
    /// Columns turned off that nobody has classified.
    pub unclassified: Vec<String>,
}

/// The properties `governance` asks of one table.
pub fn generate(table: &LoadedTable, gov: &Governance) -> Generated {
    let meta = &table.metadata;
    let tname = table.name.to_string();
    // Every name each field id has had, so a renamed column keeps its classification.
    let mut names: HashMap<i32, BTreeSet<String>> = HashMap::new();
    for s in meta.schemas_iter() {
        for (n, f) in primitive_leaves(s) {
            names.entry(f.id).or_default().insert(n);
        }
    }
    let retention = &gov.retention.value;
    let mode = retention.statistics.protected.clone();
    let mut g = Generated {
        table: tname.clone(),
        ..Default::default()
    };
    let current: BTreeSet<String> = primitive_leaves(meta.current_schema())
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    for (name, field) in primitive_leaves(meta.current_schema()) {
        let class = gov.metadata.classification(&tname, &name).or_else(|| {
            names
                .get(&field.id)
                .into_iter()
                .flatten()
                .find_map(|old| gov.metadata.classification(&tname, old))
        });
        let protect = match class {
            Some(c) => c.is_protected(),
            None => {
                g.unclassified.push(name.clone());
                true
            }
        };
        if protect {
            g.set
                .insert(format!("{COLUMN_MODE_PREFIX}{name}"), mode.clone());
        }
    }
    g.set.insert(
        "history.expire.max-snapshot-age-ms".into(),
        (retention.snapshots.max_snapshot_age_hours * 3_600_000).to_string(),
    );
    g.set.insert(
        "history.expire.min-snapshots-to-keep".into(),
        retention.snapshots.min_snapshots_to_keep.to_string(),
    );
    g.set.insert(MARKER.into(), "generated".into());
    for k in meta.properties().keys() {
        if let Some(col) = k.strip_prefix(COLUMN_MODE_PREFIX)
            && !current.contains(col)
        {
            g.remove.push(k.clone());
        }
    }
    g.remove.sort();
    g
}

/// Whether a table lacks any generated property (or has a stale one).
pub fn missing(table: &LoadedTable, g: &Generated) -> Vec<String> {
    let props = table.metadata.properties();
    let mut out: Vec<String> = g
        .set
        .iter()
        .filter(|(k, v)| props.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    out.extend(
        g.remove
            .iter()
            .map(|k| format!("{k} (stale: no such column)")),
    );
    out
}

/// What `apply` did to one table.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    /// The table.
    pub table: String,
    /// Properties changed.
    pub changed: usize,
    /// Whether the data was rewritten so the metrics modes take effect.
    pub rewritten: bool,
    /// The rewrite's snapshot.
    pub snapshot_id: Option<i64>,
}

/// Sets the generated properties on one table; when a metrics setting changed, rewrites its
/// data once.
pub async fn apply_one(wh: &Warehouse, name: &TableName, gov: &Governance) -> Result<Applied> {
    let table = wh.load(name).await?;
    let g = generate(&table, gov);
    let miss = missing(&table, &g);
    let metrics_changed = miss.iter().any(|m| m.starts_with(COLUMN_MODE_PREFIX));
    let mut action = SetProperties {
        set: g.set.clone().into_iter().collect::<HashMap<_, _>>(),
        remove: g.remove.clone(),
    };
    if !miss.is_empty() {
        commit(wh, name, &mut action).await?;
    }
    let mut snapshot_id = None;
    let has_data = table.current_snapshot().is_some();
    if metrics_changed && has_data {
        let r = rewrite_rows(
            wh,
            name,
            &RowRewrite::rewrite_all().with_summary("lethe-properties", "metrics rewrite"),
        )
        .await?;
        snapshot_id = r.snapshot_id;
    }
    Ok(Applied {
        table: name.to_string(),
        changed: miss.len(),
        rewritten: snapshot_id.is_some(),
        snapshot_id,
    })
}

/// Whether any table of the warehouse carries generated properties (then pipelines apply them
/// to the tables they build).
pub async fn in_use(wh: &Warehouse) -> Result<bool> {
    for n in wh.tables().await? {
        if wh.load(&n).await?.property(MARKER).is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}
