//! ATTEST: evidence of an erasure as data, in the shape of a DSR manifest.
//!
//! Built from the erasure's journal, its case files (their hashes, never their content), a
//! fresh check of every planned table's current snapshot, and a proof scan. It names the
//! request, the subject by its register hash only, what was done per table (action, rows,
//! snapshot ids), the cleanup, the scan's counts, mentions for review, and what remains —
//! files still holding traces, unreferenced files younger than the sweep's minimum age, and
//! the stores outside the warehouse (governance/stores.toml) that are pending, failed or can't
//! be probed. It includes the request's [`Manifest`] (every system: action, mechanism, records,
//! timings, residual). It holds no value of the person. Logical erasure is COMPLETE when every
//! step ran, no snapshot a carried-out table keeps holds a row that addresses the subject by
//! any column — counted by the logical check ([`crate::erasure::logical`]), a reader that
//! shares nothing with the plan's selection — the erasure's counts agree with that check's
//! count before it, and every store is verified (a store with `probe = "none"` never is);
//! physical purge is COMPLETE (FILES REMOVED
//! on a local folder: lethe can't claim the medium was sanitised) when, in
//! addition, no file holds a trace, every file could be read, and the traces searched for cover
//! every personal column of the tables the erasure changed ([`crate::erasure::searched`]: the
//! attestation lists the kinds of trace searched for, and names the personal columns that were
//! not traces — then the physical purge is INCOMPLETE and the case file's values are kept).
//! Traces that mentions reviewers decided on account for (another person's row quoting the
//! subject, kept or not the subject: [`crate::erasure::review`]) are listed with the
//! decisions, not counted as holding. Rows, values and files are counted apart, never added.
//!
//! The request itself ([`crate::erasure::evidence`]): kind, controller and reference,
//! received / due / certified, extensions, the parts held under a legal hold with the basis
//! (logical erasure is then PARTLY_REFUSED: everything else erased, the held tables kept and
//! their traces expected), and a restriction's scope. A restriction's attestation is its
//! manifest: what was suspended where, nothing deleted, no scan needed. Each attestation that
//! answers a request is recorded in the request's record as a certification; a partly refused
//! request finished after its hold ends is certified again, and shows both.

use std::collections::BTreeMap;

use chrono::Utc;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::erasure::case::{CaseFile, case_path, read_case, write_case};
use crate::erasure::erase::{Journal, find_request};
pub use crate::erasure::manifest::Residual;
use crate::erasure::manifest::{Manifest, TableCheck};
use crate::erasure::mentions::{TableMentions, mentions};
use crate::erasure::plan::{Action, Coverage};
use crate::erasure::prove::{ProveReport, prove};
use crate::erasure::searched::{Changed, Searched, searched};
use crate::error::{Error, Result};
use crate::workspace::Workspace;

/// What one table's erasure did and what remains in it.
#[derive(Debug, Clone, Serialize)]
pub struct TableEvidence {
    /// The table.
    pub table: String,
    /// The action.
    pub action: Action,
    /// Rows deleted or rewritten (for this request).
    pub rows_affected: u64,
    /// Snapshots the erasure committed.
    pub commits: Vec<i64>,
    /// When the current snapshot was checked.
    pub verified_at: String,
    /// What remains: rows of the subject in the current snapshot (0 for DELETE), in older
    /// kept snapshots, erased values, files holding traces in the table's location.
    pub residual: TableResidual,
    /// The logical check per snapshot the table keeps ([`crate::erasure::logical`]).
    pub snapshots: Vec<crate::erasure::logical::SnapshotCount>,
    /// The table's kept history rewritten without the subject (retention.toml `[snapshots]
    /// history = "rewrite"`): per kept snapshot, the refs pointing at it, the snapshot IDs old
    /// → new and the rows before and after, so that numbers published from a tag can be
    /// reconciled. Empty when the table keeps no history.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<lethe_iceberg::ops::twins::Twin>,
}

/// What remains in one table: rows, values and files, each counted apart (never added).
#[derive(Debug, Clone, Default, Serialize)]
pub struct TableResidual {
    /// Rows that address the subject in the current snapshot, by any addressing column, as
    /// the logical check counted them (expected for REWRITE, which keeps rows).
    pub rows: u64,
    /// Rows that address the subject in older snapshots the table still keeps (time travel
    /// reaches them).
    pub rows_in_older_snapshots: u64,
    /// How many of those older snapshots hold such rows.
    pub older_snapshots_holding: u64,
    /// REWRITE: erased-column values still present in the subject's rows (any snapshot).
    pub values_not_erased: u64,
    /// Files under the table's location holding the subject's traces.
    pub files_holding: u64,
}

/// The verdicts.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// COMPLETE or INCOMPLETE: the subject's rows are gone from every planned table;
    /// PARTLY_REFUSED when a legal hold keeps some; PENDING while snapshots the erasure
    /// replaced are kept for a grace (`[snapshots] grace_seconds`) that `lethe verify` ends.
    pub logical: String,
    /// PENDING while a stored file (or, in a versioned bucket, a noncurrent version) holds a
    /// trace or can't be read; INCOMPLETE when some personal column of the tables the erasure
    /// changed wasn't searched for (nor declared not identifying); otherwise COMPLETE on object
    /// storage (no object or version holds one), and FILES REMOVED on a local folder — lethe
    /// unlinked the files but can't claim the medium was sanitised.
    pub physical: String,
    /// What the physical verdict means on this storage, in words: what was deleted and when
    /// the service reclaims the space (from `[storage] reclaim`, with its date).
    pub storage: String,
    /// What remains, in words.
    pub remaining: Vec<String>,
}

/// The attestation.
#[derive(Debug, Clone, Serialize)]
pub struct Attestation {
    /// The request.
    pub request: String,
    /// The erasure batch it ran in.
    pub batch: String,
    /// The subject: its kind and register hash (HMAC-SHA256), never the ID.
    pub subject: BTreeMap<String, String>,
    /// When the erasure started.
    pub received_at: String,
    /// When the erasure finished.
    pub erased_at: Option<String>,
    /// When this was certified.
    pub certified_at: String,
    /// The plan's coverage.
    pub coverage: Coverage,
    /// Per table.
    pub tables: Vec<TableEvidence>,
    /// Cleanup totals.
    pub cleanup: BTreeMap<String, u64>,
    /// Scan totals.
    pub scan: BTreeMap<String, u64>,
    /// Files that hold the subject's traces or couldn't be read (paths, places, kinds).
    pub holding: Vec<String>,
    /// What the proof searched for: the kinds of trace, and per table the erasure changed its
    /// personal columns by how they were accounted for.
    pub searched: Searched,
    /// Rows elsewhere whose text mentions the subject, for review.
    pub mentions: BTreeMap<String, TableMentions>,
    /// The reviewers' decisions on those mentions (`lethe review`), one per row.
    pub reviews: Vec<crate::erasure::review::Decision>,
    /// Traces the proof found that reviewed mentions account for (files, places, kinds):
    /// another person's row that quotes the subject, kept or found not to be the subject.
    pub kept_after_review: Vec<String>,
    /// Places outside the warehouse that may hold the subject.
    pub residuals: Vec<Residual>,
    /// The request's manifest: the request (kind, controller, reference, dates, extensions,
    /// held parts, a restriction's scope) and every system with action, records, timings and
    /// residual.
    pub manifest: Manifest,
    /// The case file: its SHA-256 as written, and whether its values are still held.
    pub case_file: BTreeMap<String, String>,
    /// The verdict.
    pub verdict: Verdict,
    /// The lineage drawing of the plan (DOT), for the HTML page.
    #[serde(skip)]
    pub dot: String,
}

/// A physical verdict that answers the request: COMPLETE, or FILES REMOVED on a local folder.
fn physical_done(physical: &str) -> bool {
    matches!(physical, "COMPLETE" | "FILES REMOVED")
}

impl Attestation {
    /// Exit 0 only when both verdicts are complete: logical COMPLETE and physical COMPLETE (or
    /// FILES REMOVED, on a local folder), neither PENDING nor INCOMPLETE (a restriction's
    /// manifest, which deletes nothing, is complete as recorded).
    pub fn is_complete(&self) -> bool {
        self.manifest.workflow.restriction.is_some()
            || (self.verdict.logical == "COMPLETE" && physical_done(&self.verdict.physical))
    }
}

/// Builds the attestation of `request`: checks the tables, runs the proof scan, and (when
/// COMPLETE and `destroy` is set) destroys the case file's values.
pub async fn attest(
    ws: &Workspace,
    request: &str,
    destroy: bool,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(Attestation, Option<ProveReport>)> {
    let records = crate::requests::Requests::in_state(&ws.config.paths.state);
    if let Some(r) = records.find(request)?
        && r.kind == crate::requests::Kind::Restriction
    {
        return Ok((attest_restriction(ws, &r)?, None));
    }
    let journal: Journal = find_request(ws, request)?
        .ok_or_else(|| Error::invalid(format!("no erasure with request {request}")))?;
    let case = read_case(ws, request)?;
    let spec = journal
        .requests
        .iter()
        .find(|r| r.request == request)
        .ok_or_else(|| Error::Internal("request not in its journal".into()))?;
    let case_hash = {
        let bytes = std::fs::read(case_path(ws, request))
            .map_err(|e| Error::io(case_path(ws, request).display().to_string(), e))?;
        hex::encode(Sha256::digest(&bytes))
    };
    let plan = journal
        .plan
        .clone()
        .ok_or_else(|| Error::Internal("journal without a plan".into()))?;
    let now = Utc::now().to_rfc3339();
    let mut remaining = Vec::new();
    let mut logical_ok = journal.finished_at.is_some();
    // Tables whose snapshots from before the erasure are kept for a grace, and until when.
    let graced: BTreeMap<String, String> = crate::erasure::erase::grace_pending(&journal)
        .into_iter()
        .collect();
    let mut grace_left = false;
    if journal.finished_at.is_none() {
        remaining.push(format!(
            "the erasure {} has not finished: run `lethe erase --resume {request}`",
            journal.batch
        ));
    }
    if plan.coverage.unresolved > 0 {
        logical_ok = false;
        for s in plan.steps.iter().filter(|s| s.action == Action::Unresolved) {
            remaining.push(format!(
                "{}: UNRESOLVED ({})",
                s.table,
                s.reason.clone().unwrap_or_default()
            ));
        }
    }
    // The scan first: its per-table counts feed the table evidence.
    progress("proof scan");
    let report = if case.destroyed {
        return Err(Error::invalid(format!(
            "the case file of {request} was destroyed after its attestation; the attestation stands as issued"
        )));
    } else {
        prove(ws, std::slice::from_ref(&case), progress).await?
    };
    // Mentions, and the reviewers' decisions on them: hits those decisions account for are
    // set apart (listed, not counted as holding).
    progress("mentions");
    let mentions = mentions(ws, std::slice::from_ref(&case), report.prefix_len).await?;
    let reviews = crate::erasure::review::load(ws, request)?;
    let current = current_paths(ws, mentions.keys()).await?;
    let explained = crate::erasure::review::explained(&report.hits, &mentions, &reviews, &current);
    let held_tables: std::collections::BTreeSet<String> = journal
        .steps
        .iter()
        .filter(|s| s.is_held())
        .map(|s| s.table.clone())
        .collect();
    // Files holding traces per table, but for hits reviewed mentions explain and noncurrent
    // versions (counted apart).
    let mut holding_by_table: BTreeMap<String, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for (h, e) in report.hits.iter().zip(&explained) {
        if let (Some(t), false) = (&h.table, *e)
            && !h.file.contains("?versionId=")
        {
            holding_by_table
                .entry(t.clone())
                .or_default()
                .insert(&h.file);
        }
    }
    let files_holding = |t: &str| holding_by_table.get(t).map_or(0, |f| f.len() as u64);
    // Everything a legal hold keeps: those tables, and stores (by name).
    let mut held: std::collections::BTreeSet<String> = held_tables.clone();
    for s in journal.stores.iter().filter(|s| s.is_held()) {
        if let Some(h) = &s.held {
            remaining.push(format!(
                "store {}: HELD under legal hold `{}` until {} ({}, decided by the {}): not erased",
                s.store, h.hold, h.until, h.basis, h.decided_by
            ));
        }
        held.insert(s.store.clone());
    }
    // The logical check: every snapshot each carried-out table keeps, read whole.
    progress("logical check");
    let gov = ws.governance()?;
    let checked = crate::erasure::logical::carried_out(&journal);
    let logical = crate::erasure::logical::check(
        ws,
        &gov,
        &spec.subject,
        std::slice::from_ref(&case),
        &checked,
        crate::erasure::logical::Snapshots::Kept,
    )
    .await?;
    let mut tables = Vec::new();
    for s in &journal.steps {
        if !matches!(
            s.action,
            Action::Delete | Action::Rewrite | Action::Recompute
        ) {
            continue;
        }
        if let Some(h) = s.held.as_ref().filter(|_| s.is_held()) {
            remaining.push(format!(
                "{}: HELD under legal hold `{}` until {} ({}, decided by the {}): not erased",
                s.table, h.hold, h.until, h.basis, h.decided_by
            ));
            tables.push(TableEvidence {
                table: s.table.clone(),
                action: s.action,
                rows_affected: 0,
                commits: Vec::new(),
                verified_at: now.clone(),
                residual: TableResidual {
                    rows: case.rows.get(&s.table).copied().unwrap_or(0),
                    files_holding: files_holding(&s.table),
                    ..Default::default()
                },
                snapshots: Vec::new(),
                history: Vec::new(),
            });
            continue;
        }
        let found = logical.iter().find(|t| t.table == s.table);
        let mut residual = TableResidual {
            files_holding: files_holding(&s.table),
            ..Default::default()
        };
        for snap in found.map(|t| t.snapshots.as_slice()).unwrap_or_default() {
            let rows = snap.by_request.get(request).copied().unwrap_or(0);
            if snap.current {
                residual.rows = rows;
            } else if rows > 0 {
                residual.rows_in_older_snapshots += rows;
                residual.older_snapshots_holding += 1;
            }
            residual.values_not_erased += snap.values_not_erased;
            let kept_for_grace = !snap.current && graced.contains_key(&s.table);
            if kept_for_grace && (rows > 0 || snap.values_not_erased > 0) {
                // A snapshot the erasure replaced, kept for other writers' operations in
                // flight: it goes when the grace ends (PENDING, not INCOMPLETE).
                grace_left = true;
                remaining.push(format!(
                    "{}: {} kept until {} for other writers' operations in flight ([snapshots] grace_seconds = {}); run `lethe verify --request {request}` after then",
                    s.table,
                    snapshot_words(snap),
                    graced[&s.table],
                    journal.grace_seconds
                ));
                continue;
            }
            if s.action != Action::Rewrite && rows > 0 {
                logical_ok = false;
                remaining.push(format!(
                    "{}: {rows} row(s) of the subject in {} (by {})",
                    s.table,
                    snapshot_words(snap),
                    columns_words(snap)
                ));
            }
            if snap.values_not_erased > 0 {
                logical_ok = false;
                remaining.push(format!(
                    "{}: {} erased-column value(s) still present in {}",
                    s.table,
                    snap.values_not_erased,
                    snapshot_words(snap)
                ));
            }
        }
        // The erasure's counts and the logical check's count before it must agree.
        if s.done {
            for d in count_disagreements(s, &case) {
                logical_ok = false;
                remaining.push(d);
            }
        }
        if !s.done {
            logical_ok = false;
        }
        tables.push(TableEvidence {
            table: s.table.clone(),
            action: s.action,
            rows_affected: case.rows.get(&s.table).copied().unwrap_or(0),
            commits: s.snapshot_id.into_iter().collect(),
            verified_at: now.clone(),
            residual,
            snapshots: found.map(|t| t.snapshots.clone()).unwrap_or_default(),
            history: s.twins.clone(),
        });
    }
    let mut cleanup = BTreeMap::new();
    let mut too_young = 0u64;
    for c in journal.cleanup.values() {
        *cleanup.entry("snapshots_expired".to_string()).or_default() += c.snapshots_expired as u64;
        *cleanup
            .entry("manifests_rewritten".to_string())
            .or_default() += c.manifests_rewritten as u64;
        *cleanup.entry("files_removed".to_string()).or_default() += c.files_removed as u64;
        *cleanup.entry("versions_purged".to_string()).or_default() += c.versions_purged as u64;
        too_young += c.files_too_young as u64;
    }
    cleanup.insert("unreferenced_files_left_too_young".into(), too_young);
    // Traces in tables a legal hold keeps are expected there: they are the held part.
    let in_held = |h: &&crate::erasure::prove::HitView| {
        h.table.as_ref().is_some_and(|t| held_tables.contains(t))
    };
    let hits: Vec<&crate::erasure::prove::HitView> = report
        .hits
        .iter()
        .zip(&explained)
        .filter(|(h, e)| !in_held(h) && !**e)
        .map(|(h, _)| h)
        .collect();
    let mut kept_after_review: Vec<String> = report
        .hits
        .iter()
        .zip(&explained)
        .filter(|(_, e)| **e)
        .map(|(h, _)| format!("{} [{}] {} {}", h.file, h.place, h.trace, h.detail))
        .collect();
    kept_after_review.dedup();
    let mut holding: Vec<String> = hits
        .iter()
        .map(|h| format!("{} [{}] {} {}", h.file, h.place, h.trace, h.detail))
        .collect();
    holding.dedup();
    for (f, why) in &report.unreadable {
        holding.push(format!("{f} [unreadable] {why}"));
    }
    let clean = hits.is_empty() && report.unreadable.is_empty();
    let mut physical_ok = clean && too_young == 0;
    if !clean {
        let mut files: Vec<(&str, Option<&str>)> = hits
            .iter()
            .map(|h| (h.file.as_str(), h.table.as_deref()))
            .collect();
        files.sort();
        files.dedup();
        for (f, t) in files {
            let waiting = t.and_then(|t| mentions.get(t)).map_or(0, |m| {
                m.keys
                    .iter()
                    .filter(|k| reviews.on(t.unwrap_or_default(), k).is_none())
                    .count()
            });
            if waiting > 0 {
                remaining.push(format!(
                    "{f} holds the subject's traces ({waiting} mention(s) of the subject in {} wait for review: `lethe review --request {request}`)",
                    t.unwrap_or_default()
                ));
            } else {
                remaining.push(format!("{f} holds the subject's traces"));
            }
        }
        for (f, reason) in &report.unreadable {
            remaining.push(format!(
                "{f} can't be read, so it can't be proven clean: {reason}"
            ));
        }
    }
    if let Some(v) = &report.versions
        && v.noncurrent_holding > 0
    {
        remaining.push(format!(
            "{} noncurrent version(s) in the versioned bucket hold the subject's traces: set [storage] purge_versions = true in lethe.toml and run `lethe erase --resume {request}` to delete them by version id",
            v.noncurrent_holding
        ));
    }
    if too_young > 0 {
        remaining.push(format!(
            "{too_young} unreferenced file(s) younger than the sweep's minimum age ({}s): `lethe sweep` removes them once they are old enough",
            journal.min_age_seconds
        ));
    }
    // The proof can't claim what it didn't search for.
    let changed: Vec<Changed<'_>> = journal
        .steps
        .iter()
        .map(|s| Changed {
            table: &s.table,
            action: s.action,
            column: s.column.as_deref(),
        })
        .collect();
    let searched = searched(ws, &ws.governance()?, &case, &changed).await?;
    let search_complete = searched.is_complete();
    remaining.extend(searched.remaining());
    let checks: Vec<TableCheck> = tables
        .iter()
        .map(|t| TableCheck {
            table: t.table.clone(),
            rows: if t.action == Action::Rewrite {
                0
            } else {
                t.residual.rows + t.residual.rows_in_older_snapshots
            },
            values: t.residual.values_not_erased,
            files: t.residual.files_holding,
            at: t.verified_at.clone(),
        })
        .collect();
    if !search_complete {
        physical_ok = false;
    }
    let mut manifest = crate::erasure::manifest::build(
        &journal,
        request,
        &case.hash,
        &case.rows,
        Some(&checks),
        crate::erasure::evidence::for_erasure(ws, request, &journal)?,
    );
    let stores_ok = manifest
        .systems
        .iter()
        .filter(|s| s.kind != "iceberg table" && !held.contains(&s.system))
        .all(|s| s.state == "verified")
        && manifest.residuals.is_empty();
    if !stores_ok {
        logical_ok = false;
        let tables: std::collections::BTreeSet<&str> =
            tables.iter().map(|t| t.table.as_str()).collect();
        for item in manifest.open_items(true) {
            if !tables.iter().any(|t| item.starts_with(&format!("{t}:"))) {
                remaining.push(item);
            }
        }
    }
    let mut residuals: Vec<Residual> = manifest.residuals.clone();
    let values_held = !(destroy && logical_ok && physical_ok && held.is_empty());
    residuals.push(Residual {
        place: format!("case file {}", case_path(ws, request).display()),
        basis: "the erasure's own record of the subject's traces, needed to prove the erasure"
            .into(),
        expires: if values_held {
            "when an attestation is COMPLETE".into()
        } else {
            "values destroyed now".into()
        },
        control: "mode 0600; only hashes and counts are kept once the attestation is COMPLETE"
            .into(),
    });
    if !logical_ok {
        physical_ok = false;
    }
    let kind = ws.warehouse.store.kind();
    let storage = storage_statement(ws, &kind, report.versions.as_ref(), &journal);
    if let lethe_iceberg::store::StoreKind::Object { description } = &kind {
        residuals.push(Residual {
            place: format!("the space of deleted objects in {description}"),
            basis: ws.config.storage.reclaim.clone().unwrap_or_else(|| {
                "the service reclaims it on its own schedule (not stated: set [storage] reclaim in lethe.toml)".into()
            }),
            expires: reclaim_date(ws, &journal).unwrap_or_else(|| "not stated".into()),
            control: "the objects are deleted (noncurrent versions by id with purge_versions); reads return nothing"
                .into(),
        });
    }
    let mut scan = BTreeMap::new();
    scan.insert("files_read".into(), report.files_read);
    scan.insert("bytes_read".into(), report.bytes_read);
    scan.insert("files_holding".into(), report.files_holding);
    scan.insert("unreadable".into(), report.unreadable.len() as u64);
    scan.insert("prefix_length".into(), report.prefix_len as u64);
    if let Some(v) = &report.versions {
        scan.insert("noncurrent_versions_read".into(), v.noncurrent_read);
        scan.insert("noncurrent_versions_holding".into(), v.noncurrent_holding);
        scan.insert("delete_markers".into(), v.delete_markers);
    }
    let mut case_file = BTreeMap::new();
    case_file.insert(
        "sha256_at_erasure".into(),
        journal
            .case_hashes
            .get(request)
            .cloned()
            .unwrap_or_default(),
    );
    case_file.insert("sha256_now".into(), case_hash);
    if logical_ok && physical_ok {
        manifest.certified = Some(now.clone());
    }
    let mut attestation = Attestation {
        request: request.to_string(),
        batch: journal.batch.clone(),
        subject: [
            ("kind".to_string(), spec.subject.clone()),
            ("register_hash".to_string(), case.hash.clone()),
        ]
        .into(),
        received_at: journal.started_at.clone(),
        erased_at: journal.finished_at.clone(),
        certified_at: now,
        coverage: plan.coverage.clone(),
        tables,
        cleanup,
        scan,
        holding,
        searched,
        mentions,
        reviews: reviews.in_force().into_iter().cloned().collect(),
        kept_after_review,
        residuals,
        manifest,
        case_file,
        verdict: Verdict {
            logical: if logical_ok && grace_left {
                "PENDING".into()
            } else if logical_ok && !held.is_empty() {
                "PARTLY_REFUSED".into()
            } else if logical_ok {
                "COMPLETE".into()
            } else {
                "INCOMPLETE".into()
            },
            physical: match (physical_ok, &kind) {
                (false, _) if !search_complete => "INCOMPLETE".into(),
                (false, _) => "PENDING".into(),
                (true, lethe_iceberg::store::StoreKind::Local) => "FILES REMOVED".into(),
                (true, lethe_iceberg::store::StoreKind::Object { .. }) => "COMPLETE".into(),
            },
            storage,
            remaining,
        },
        dot: plan_dot(&plan),
    };
    certify(ws, &mut attestation, &held)?;
    // The case file is personal data too: once COMPLETE, keep only hashes and counts.
    if destroy && attestation.is_complete() {
        let kept = CaseFile {
            request: case.request.clone(),
            subject: case.subject.clone(),
            hash: case.hash.clone(),
            ids: BTreeMap::new(),
            values: Vec::new(),
            addressing: BTreeMap::new(),
            exempt_tables: case.exempt_tables.clone(),
            value_columns: case.value_columns.clone(),
            rows: case.rows.clone(),
            checked_rows: case.checked_rows.clone(),
            destroyed: true,
        };
        let h = write_case(ws, &kept)?;
        attestation
            .case_file
            .insert("sha256_after_destruction".into(), h);
        attestation.case_file.insert(
            "values_held".into(),
            "no: destroyed after this COMPLETE attestation".into(),
        );
    } else {
        attestation.case_file.insert(
            "values_held".into(),
            format!(
                "yes, in {} (mode 0600), until an attestation is COMPLETE",
                case_path(ws, request).display()
            ),
        );
    }
    let evidence_dir = ws.config.paths.state.join("attestations");
    std::fs::create_dir_all(&evidence_dir)
        .map_err(|e| Error::io(evidence_dir.display().to_string(), e))?;
    let f = evidence_dir.join(format!("{request}.json"));
    std::fs::write(&f, serde_json::to_vec_pretty(&attestation)?)
        .map_err(|e| Error::io(f.display().to_string(), e))?;
    Ok((attestation, Some(report)))
}

/// Every file each of `tables`' current snapshot reads (live data and delete files,
/// manifests, the manifest list, the metadata file), by location as the proof scan names
/// files: normalized, and as a local path on a local folder.
async fn current_paths<'a>(
    ws: &Workspace,
    tables: impl Iterator<Item = &'a String>,
) -> Result<BTreeMap<String, std::collections::HashSet<String>>> {
    let wh = &ws.warehouse;
    let mut out = BTreeMap::new();
    for t in tables {
        let Ok(name) = lethe_iceberg::catalog::TableName::parse(t) else {
            continue;
        };
        let loaded = wh.load(&name).await?;
        let mut locations = vec![loaded.metadata_location.clone()];
        if let Some(snap) = loaded.current_snapshot() {
            locations.push(snap.manifest_list().to_string());
            for mf in wh.manifest_list(&loaded, snap)?.entries() {
                locations.push(mf.manifest_path.clone());
            }
            for f in wh.live_files(&loaded, snap).await? {
                locations.push(f.entry.data_file.file_path().to_string());
            }
        }
        let mut set = std::collections::HashSet::new();
        for l in locations.iter().filter(|l| !l.is_empty()) {
            let n = wh.store.normalize(l)?;
            if n.starts_with("file:")
                && let Ok(p) = lethe_iceberg::store::normalize_local(&n)
            {
                set.insert(p.display().to_string());
            }
            set.insert(n);
        }
        out.insert(t.clone(), set);
    }
    Ok(out)
}

/// A snapshot in words: `the current snapshot 123`, `snapshot 45 (tag q3_close)`.
fn snapshot_words(s: &crate::erasure::logical::SnapshotCount) -> String {
    let refs = if s.refs.is_empty() {
        String::new()
    } else {
        format!(" ({})", s.refs.join(", "))
    };
    if s.current {
        format!("the current snapshot {}{refs}", s.snapshot_id)
    } else {
        format!("kept snapshot {}{refs}", s.snapshot_id)
    }
}

/// The columns that addressed rows, with their counts: `session_id: 1, anonymous_id: 0`.
fn columns_words(s: &crate::erasure::logical::SnapshotCount) -> String {
    s.by_column
        .iter()
        .map(|(c, n)| format!("{c}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where the erasure's own counts and the logical check's count before it disagree, in
/// words: the rows the plan selected for the request (`case.rows`) against the rows that
/// addressed it (`case.checked_rows`), and the rows the step's commit matched against the
/// batch's rows that addressed a subject (`checked_rows`).
fn count_disagreements(s: &crate::erasure::erase::JournalStep, case: &CaseFile) -> Vec<String> {
    let mut out = Vec::new();
    if !matches!(s.action, Action::Delete | Action::Rewrite) {
        return out;
    }
    if let Some(checked) = case.checked_rows.get(&s.table) {
        let planned = case.rows.get(&s.table).copied().unwrap_or(0);
        if planned != *checked {
            out.push(format!(
                "{}: the plan selected {planned} row(s) of the subject, the logical check counted {checked} before the erasure",
                s.table
            ));
        }
    }
    if let Some(checked) = s.checked_rows
        && s.snapshot_id.is_some()
        && s.rows != checked
    {
        out.push(format!(
            "{}: the erasure's commit matched {} row(s), the logical check counted {checked} row(s) of the batch's subjects before it",
            s.table, s.rows
        ));
    }
    out
}

/// Records an attestation that answers the request (COMPLETE, or PARTLY_REFUSED with every
/// other part complete) as a certification in the request's record, and moves its state.
fn certify(
    ws: &Workspace,
    a: &mut Attestation,
    held: &std::collections::BTreeSet<String>,
) -> Result<()> {
    let answered = physical_done(&a.verdict.physical)
        && (a.verdict.logical == "COMPLETE" || a.verdict.logical == "PARTLY_REFUSED");
    let records = crate::requests::Requests::in_state(&ws.config.paths.state);
    let Some(mut r) = records.find(&a.request)? else {
        return Ok(());
    };
    let held: Vec<String> = held.iter().cloned().collect();
    // Attesting again with the same outcome certifies nothing new.
    let same = r
        .certifications
        .last()
        .is_some_and(|c| c.verdict == a.verdict.logical && c.held == held);
    if answered && !same {
        let empty = held.is_empty();
        r.certifications.push(crate::requests::Certification {
            at: a.certified_at.clone(),
            verdict: a.verdict.logical.clone(),
            held,
        });
        let state = if empty {
            crate::requests::State::Certified
        } else {
            crate::requests::State::PartlyRefused
        };
        r.transition(
            state,
            a.certified_at.clone(),
            format!("attested {}", a.verdict.logical),
        );
        records.save(&r)?;
    }
    a.manifest.workflow.state = Some(r.state);
    a.manifest.workflow.certifications = r.certifications.clone();
    Ok(())
}

/// A restriction's attestation: its manifest — what was suspended where; nothing deleted, so
/// nothing to scan for.
fn attest_restriction(ws: &Workspace, r: &crate::requests::Request) -> Result<Attestation> {
    let now = Utc::now().to_rfc3339();
    let scope = crate::requests::scope::Scope::load(&ws.config.paths.state, &r.id)?;
    let mut workflow = crate::erasure::evidence::from_record(Some(r));
    workflow.restriction = Some(crate::erasure::evidence::restriction(ws, r)?);
    let manifest = crate::erasure::manifest::restriction(r, &scope, workflow);
    // What isn't suspended, by name (tables lethe can't restrict, every store).
    let remaining: Vec<String> = manifest
        .systems
        .iter()
        .filter(|s| s.state.starts_with("not suspended"))
        .map(|s| format!("{}: {}", s.system, s.state))
        .collect();
    let logical = manifest.status.clone();
    let a = Attestation {
        request: r.id.clone(),
        batch: r.id.clone(),
        subject: [
            ("kind".to_string(), r.subject.clone()),
            ("register_hash".to_string(), r.subject_hash.clone()),
        ]
        .into(),
        received_at: r.received.to_string(),
        erased_at: None,
        certified_at: now,
        coverage: Coverage::default(),
        tables: Vec::new(),
        cleanup: BTreeMap::new(),
        scan: BTreeMap::new(),
        holding: Vec::new(),
        searched: Searched::default(),
        mentions: BTreeMap::new(),
        reviews: Vec::new(),
        kept_after_review: Vec::new(),
        residuals: Vec::new(),
        manifest,
        case_file: BTreeMap::new(),
        verdict: Verdict {
            logical,
            physical: "NOT_APPLICABLE".into(),
            storage: "nothing deleted: a restriction suspends, it doesn't erase".into(),
            remaining,
        },
        dot: String::new(),
    };
    let evidence_dir = ws.config.paths.state.join("attestations");
    std::fs::create_dir_all(&evidence_dir)
        .map_err(|e| Error::io(evidence_dir.display().to_string(), e))?;
    let f = evidence_dir.join(format!("{}.json", r.id));
    std::fs::write(&f, serde_json::to_vec_pretty(&a)?)
        .map_err(|e| Error::io(f.display().to_string(), e))?;
    Ok(a)
}

/// The request's part of the HTML page: instruction, dates, extensions, certifications, the
/// partial refusal with its held parts, a restriction's scope.
fn workflow_html(a: &Attestation, esc: &dyn Fn(&str) -> String) -> String {
    let w = &a.manifest.workflow;
    let opt = |v: &Option<String>| esc(v.as_deref().unwrap_or("-"));
    let day = |d: Option<chrono::NaiveDate>| d.map_or("-".to_string(), |d| d.to_string());
    let mut h = format!(
        "<h2>The request</h2><table><tr><td>kind</td><td>{}</td></tr><tr><td>instructed by (controller)</td><td>{}</td></tr><tr><td>controller's reference</td><td>{}</td></tr><tr><td>received</td><td>{}</td></tr><tr><td>due</td><td>{}</td></tr><tr><td>state</td><td>{}</td></tr><tr><td>certified</td><td>{}</td></tr></table>",
        w.kind.map_or("-".to_string(), |k| k.to_string()),
        opt(&w.controller),
        opt(&w.reference),
        day(w.received),
        day(w.due),
        w.state.map_or("-".to_string(), |s| s.to_string()),
        if w.certifications.is_empty() {
            "not yet".to_string()
        } else {
            w.certifications
                .iter()
                .map(|c| format!("{} ({})", esc(&c.at), esc(&c.verdict)))
                .collect::<Vec<_>>()
                .join("; ")
        }
    );
    for e in &w.extensions {
        h.push_str(&format!(
            "<p>Extended by {} month(s) on {}: due {} (was {}). Reason: {}{}</p>",
            e.months,
            e.recorded_on,
            e.due_after,
            e.due_before,
            esc(&e.reason),
            if e.late {
                " (recorded after the due day it extends)"
            } else {
                ""
            }
        ));
    }
    if let Some(r) = &w.refusal {
        h.push_str(&format!("<h2>Partial refusal</h2><p>{}</p>", esc(r)));
    }
    if !w.held.is_empty() {
        h.push_str("<table><tr><th>held</th><th>action when released</th><th>hold</th><th>basis</th><th>decided by</th><th>until</th><th>released</th></tr>");
        for p in &w.held {
            h.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&p.system),
                esc(&p.action_when_released),
                esc(&p.hold),
                esc(&p.basis),
                esc(&p.decided_by),
                p.until,
                day(p.released_on)
            ));
        }
        h.push_str("</table>");
    }
    if !w.ended_restrictions.is_empty() {
        h.push_str(&format!(
            "<p>This erasure ended restriction(s) {}.</p>",
            esc(&w.ended_restrictions.join(", "))
        ));
    }
    if let Some(r) = &w.restriction {
        h.push_str(&format!(
            "<h2>Restriction</h2><p>In force since {}{}. Nothing was deleted. Roles that still see the rows: {}. What was suspended where: the manifest below.</p>",
            r.since,
            match (&r.lifted_on, &r.lifted_by) {
                (Some(d), Some(by)) => format!("; lifted on {d} by {}", esc(by)),
                _ => String::new(),
            },
            esc(&r.visible_to_roles.join(", "))
        ));
    }
    h
}

/// When the space of the erasure's deleted objects is reclaimed: the erasure's end plus
/// `[storage] reclaim_days`, if stated.
fn reclaim_date(ws: &Workspace, journal: &Journal) -> Option<String> {
    let days = ws.config.storage.reclaim_days?;
    let from = journal
        .finished_at
        .as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(Utc::now);
    Some(
        (from + chrono::Duration::days(i64::from(days)))
            .format("%Y-%m-%d")
            .to_string(),
    )
}

/// The physical verdict in words, for this store.
fn storage_statement(
    ws: &Workspace,
    kind: &lethe_iceberg::store::StoreKind,
    versions: Option<&crate::erasure::prove::VersionsReport>,
    journal: &Journal,
) -> String {
    match kind {
        lethe_iceberg::store::StoreKind::Local => {
            "local folder: files removed; media not sanitised (lethe unlinks files, it does not overwrite the disk)".into()
        }
        lethe_iceberg::store::StoreKind::Object { description } => {
            let purged: usize = journal.cleanup.values().map(|c| c.versions_purged).sum();
            let versions = match versions {
                Some(v) if v.versioned && v.noncurrent_holding > 0 => format!(
                    "; versioned bucket: {} noncurrent version(s) still hold the subject (purge_versions is {})",
                    v.noncurrent_holding,
                    if ws.config.storage.purge_versions { "on" } else { "off" }
                ),
                Some(v) if v.versioned => format!(
                    "; versioned bucket: no noncurrent version holds the subject ({purged} deleted by version id, {} read)",
                    v.noncurrent_read
                ),
                _ => String::new(),
            };
            let reclaim = match (&ws.config.storage.reclaim, reclaim_date(ws, journal)) {
                (Some(how), Some(date)) => format!("; the service reclaims the space by {date}: {how}"),
                (Some(how), None) => format!("; the service reclaims the space: {how}"),
                (None, Some(date)) => format!("; the service reclaims the space by {date}"),
                (None, None) => "; when the service reclaims the space is not stated ([storage] reclaim)".into(),
            };
            format!("{description}: objects deleted{versions}{reclaim}")
        }
    }
}

/// A DOT drawing of the plan's tables (nodes by action) for people.
fn plan_dot(plan: &crate::erasure::plan::Plan) -> String {
    let mut s = String::from("digraph plan {\n");
    for st in &plan.steps {
        s.push_str(&format!(
            "  \"{}\" [label=\"{}\\n{}\"];\n",
            st.table, st.table, st.action
        ));
    }
    s.push_str("}\n");
    s
}

/// Renders the attestation as one self-contained HTML page, with an SVG drawing of the plan's
/// tables (sources left, derived right) coloured by action.
pub fn html(a: &Attestation, plan: &crate::erasure::plan::Plan) -> String {
    fn esc(s: &str) -> String {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    }
    let color = |act: Action| match act {
        Action::Delete => "#d9534f",
        Action::Rewrite => "#f0ad4e",
        Action::Recompute => "#5bc0de",
        Action::NoAction => "#aaaaaa",
        Action::Unresolved => "#000000",
    };
    // Layout: depth = position of the first step whose `via` names this table's source.
    let mut depth: BTreeMap<String, usize> = BTreeMap::new();
    for st in &plan.steps {
        let d = plan
            .steps
            .iter()
            .filter(|o| o.table != st.table && st.via.starts_with(&format!("{}.", o.table)))
            .map(|o| depth.get(&o.table).copied().unwrap_or(0) + 1)
            .max()
            .unwrap_or(0);
        depth.insert(st.table.clone(), d);
    }
    let mut rows_at: BTreeMap<usize, usize> = BTreeMap::new();
    let mut pos: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for st in &plan.steps {
        let d = depth[&st.table];
        let r = rows_at.entry(d).or_default();
        pos.insert(st.table.clone(), (40 + d * 320, 30 + *r * 60));
        *r += 1;
    }
    let height = 60 + rows_at.values().max().copied().unwrap_or(1) * 60;
    let width = 80 + (rows_at.keys().max().copied().unwrap_or(0) + 1) * 320;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    svg.push_str("<defs><marker id=\"a\" markerWidth=\"8\" markerHeight=\"8\" refX=\"8\" refY=\"4\" orient=\"auto\"><path d=\"M0,0 L8,4 L0,8 z\" fill=\"#555\"/></marker></defs>");
    for st in &plan.steps {
        for o in &plan.steps {
            if o.table != st.table && st.via.starts_with(&format!("{}.", o.table)) {
                let (x1, y1) = pos[&o.table];
                let (x2, y2) = pos[&st.table];
                svg.push_str(&format!("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#555\" marker-end=\"url(#a)\"/>", x1 + 230, y1 + 18, x2, y2 + 18));
            }
        }
    }
    for st in &plan.steps {
        let (x, y) = pos[&st.table];
        svg.push_str(&format!(
            "<rect x=\"{x}\" y=\"{y}\" width=\"230\" height=\"36\" rx=\"6\" fill=\"white\" stroke=\"{}\" stroke-width=\"3\"/><text x=\"{}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>",
            color(st.action),
            x + 8,
            y + 15,
            esc(&st.table),
            x + 8,
            y + 30,
            color(st.action),
            st.action
        ));
    }
    svg.push_str("</svg>");
    let mut rows = String::new();
    for t in &a.tables {
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} row(s) in the current snapshot, {} in {} older kept snapshot(s); {} value(s) not erased; {} file(s)</td></tr>",
            esc(&t.table),
            t.action,
            t.rows_affected,
            t.commits.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "),
            t.residual.rows,
            t.residual.rows_in_older_snapshots,
            t.residual.older_snapshots_holding,
            t.residual.values_not_erased,
            t.residual.files_holding
        ));
    }
    let mut systems = String::new();
    for m in &a.manifest.systems {
        systems.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&m.system),
            esc(&m.kind),
            esc(&m.action),
            esc(&m.mechanism),
            m.records,
            esc(m.started.as_deref().unwrap_or("-")),
            esc(m.verified.as_deref().unwrap_or("-")),
            m.duration_ms.map_or("-".to_string(), |d| format!("{d} ms")),
            esc(&format!(
                "{} ({})",
                m.residual.map_or("-".to_string(), |r| r.to_string()),
                m.state
            )),
        ));
    }
    let hand_offs: Vec<String> = a
        .manifest
        .hand_offs
        .iter()
        .map(|h| {
            format!(
                "{} (trained on {}): handed to {}, not erased by lethe",
                h.artifact,
                h.trained_on.join(", "),
                h.owner
            )
        })
        .collect();
    let list = |v: &[String]| -> String {
        if v.is_empty() {
            "<p>None.</p>".into()
        } else {
            format!(
                "<ul>{}</ul>",
                v.iter()
                    .map(|x| format!("<li>{}</li>", esc(x)))
                    .collect::<String>()
            )
        }
    };
    let residuals: Vec<String> = a
        .residuals
        .iter()
        .map(|r| {
            format!(
                "{}: {} (ends: {}; control: {})",
                r.place, r.basis, r.expires, r.control
            )
        })
        .collect();
    let mut history = String::new();
    for t in a.tables.iter().filter(|t| !t.history.is_empty()) {
        for w in &t.history {
            history.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} &rarr; {}</td><td>{} &rarr; {}</td></tr>",
                esc(&t.table),
                esc(&if w.refs.is_empty() { w.kept_because.clone() } else { w.refs.join(", ") }),
                w.files_rewritten,
                w.original,
                w.twin.map_or("-".to_string(), |x| x.to_string()),
                w.rows_before,
                w.rows_after
            ));
        }
    }
    let history = if history.is_empty() {
        "<p>No table's kept history was rewritten.</p>".to_string()
    } else {
        format!(
            "<table><tr><th>table</th><th>refs (or why kept)</th><th>files rewritten</th><th>snapshot old &rarr; new</th><th>rows before &rarr; after</th></tr>{history}</table>"
        )
    };
    let reviews: Vec<String> = a
        .reviews
        .iter()
        .map(|d| {
            format!(
                "{} {}: {} by the {} on {}{}",
                d.table,
                d.row,
                d.outcome,
                d.role,
                d.day,
                d.basis
                    .as_ref()
                    .map(|b| format!(" ({b})"))
                    .unwrap_or_default()
            )
        })
        .collect();
    let kv = |m: &BTreeMap<String, u64>| {
        m.iter()
            .map(|(k, v)| format!("<tr><td>{}</td><td>{v}</td></tr>", esc(k)))
            .collect::<String>()
    };
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Erasure attestation {req}</title>\
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}.v{{font-size:1.4em;font-weight:bold}}</style></head><body>\
<h1>Erasure attestation</h1><p>Request <b>{req}</b> (batch {batch}) for a <b>{kind}</b>, register hash <code>{hash}</code>. Received {rec}; erased {era}; certified {cert}.</p>\
<p class=\"v\">Logical erasure: {log} &middot; Physical purge: {phys}</p><p>{storage}</p>{workflow}<h2>What remains</h2>{rem}\
<h2>Plan</h2><p>Coverage: {disc} tables discovered, {res} resolved automatically, {ex} exempt, {unres} unresolved ({pct:.1}%).</p>{svg}\
<h2>Manifest: every system ({mstatus})</h2><p>Received {mrec}; due {deadline}; certified {certified}.</p><table><tr><th>system</th><th>kind</th><th>action</th><th>mechanism</th><th>records</th><th>started</th><th>verified</th><th>took</th><th>residual</th></tr>{systems}</table><h3>Hand-offs</h3>{hand_offs}\
<h2>Per table</h2><table><tr><th>table</th><th>action</th><th>rows affected</th><th>commits</th><th>residual</th></tr>{rows}</table>\
<h2>Kept history rewritten</h2>{history}\
<h2>Cleanup</h2><table>{cleanup}</table><h2>Proof scan</h2><table>{scan}</table><h2>Searched for</h2>{traces}<h2>Files holding traces</h2>{holding}\
<h2>Mentions for review</h2><p>{mentions} row(s) elsewhere mention the subject.</p><h3>Decisions</h3>{reviews}<h3>Traces kept after review</h3>{kept}<h2>Outside the warehouse</h2>{residuals}\
<h2>Case file</h2><table>{case}</table><p>This page holds no value of the person: IDs of requests, tables, snapshots and files, and counts.</p></body></html>",
        req = esc(&a.request),
        batch = esc(&a.batch),
        kind = esc(a.subject.get("kind").map(String::as_str).unwrap_or("")),
        hash = esc(a
            .subject
            .get("register_hash")
            .map(String::as_str)
            .unwrap_or("")),
        rec = esc(&a.received_at),
        era = esc(a.erased_at.as_deref().unwrap_or("not finished")),
        cert = esc(&a.certified_at),
        workflow = workflow_html(a, &esc),
        log = a.verdict.logical,
        phys = a.verdict.physical,
        storage = esc(&a.verdict.storage),
        rem = list(&a.verdict.remaining),
        disc = a.coverage.discovered,
        res = a.coverage.resolved,
        ex = a.coverage.exempt,
        unres = a.coverage.unresolved,
        pct = a.coverage.percent,
        cleanup = kv(&a.cleanup),
        scan = kv(&a.scan),
        holding = list(&a.holding),
        traces = list(&a.searched.traces),
        mentions = a.mentions.values().map(|m| m.rows).sum::<u64>(),
        reviews = list(&reviews),
        history = history,
        kept = list(&a.kept_after_review),
        residuals = list(&residuals),
        mstatus = esc(&a.manifest.status),
        mrec = a
            .manifest
            .workflow
            .received
            .map_or("-".to_string(), |d| d.to_string()),
        deadline = a
            .manifest
            .workflow
            .due
            .map_or("-".to_string(), |d| d.to_string()),
        certified = esc(a.manifest.certified.as_deref().unwrap_or("not certified")),
        hand_offs = list(&hand_offs),
        case = a
            .case_file
            .iter()
            .map(|(k, v)| format!("<tr><td>{}</td><td>{}</td></tr>", esc(k), esc(v)))
            .collect::<String>(),
    )
}
