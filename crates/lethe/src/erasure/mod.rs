//! The erasure job: [`plan`] (and [`explain`]) from the catalog, governance and lineage;
//! [`erase`] carries the plan out, journaled and resumable, keeping the subject's traces in a
//! [`case`] file until they are no longer needed; [`prove`] scans every file for those traces;
//! [`logical`] counts, by another reader than the plan's, the rows that still address the
//! subject in every snapshot a planned table keeps;
//! [`mentions`] finds rows that name the subject in free text, which people decide on with
//! [`review`]; [`searched`] accounts for what
//! the scan searched for; [`attest`] issues the attestation with the request's [`manifest`]
//! (every system, warehouse tables and the stores outside it); the [`register`] keeps keyed
//! hashes of erased subjects, and [`replay`] deletes them again after a restore. [`intake`]
//! opens a request (its record, case file and a restriction's scope); [`holds`] applies legal
//! holds; [`evidence`] puts the request into the attestation;
//! [`drill`] runs the weekly erasure drill on a synthetic subject.

pub mod attest;
pub mod case;
pub mod drill;
pub mod erase;
pub mod evidence;
pub mod explain;
pub mod holds;
pub mod intake;
pub mod logical;
pub mod manifest;
pub mod mentions;
pub mod plan;
pub mod prove;
pub mod register;
pub mod replay;
pub mod review;
pub mod searched;
