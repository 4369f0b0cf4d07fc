//! The access path: consent states that change the next query ([`consent`]), the access
//! policy of `governance/policy.toml` ([`policy`]), the enforced query path
//! ([`query`]: row filters and masks folded under the user's SQL) and its audit log
//! ([`audit`]).

pub mod audit;
pub mod consent;
pub mod policy;
pub mod query;
