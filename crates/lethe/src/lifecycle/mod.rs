//! Governance applied to tables: [`retention`] rules for the day they are given, and table
//! [`properties`] generated from the classifications (no bounds of personal columns in
//! manifests, snapshot expiry settings).

pub mod properties;
pub mod retention;
