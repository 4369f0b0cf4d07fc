//! A dataset versioned in a Git repository (an evaluation set kept on purpose), read and
//! rewritten with libgit2 (`git2`).
//!
//! The dataset is JSON lines (one case per line), or one case per `.json` / `.yaml` file, with
//! a subject reference field (for YAML: a top-level `field: value` line). A delete:
//! 1. removes the subject's cases from every commit reachable from any ref (branches, tags —
//!    annotated tags are re-created —, remote-tracking refs), so no reachable commit holds them;
//!    commits are re-created with their authors, committers and messages; `refs/stash` and
//!    `refs/original/*` are dropped;
//! 2. checks out the rewritten HEAD when the repository has a work tree (it refuses a dirty one
//!    before changing anything);
//! 3. expires every reflog and prunes: the objects reachable from the refs are written to one new
//!    pack, every other pack and loose object is removed, so no object of the repository holds
//!    a case. `ORIG_HEAD`, `FETCH_HEAD` and the commit-graph go too.
//!
//! Remotes are not pushed to: each remote whose history changed is reported as unreachable,
//! naming the force-push it needs (and that its host keeps unreachable objects until it runs
//! its own garbage collection). Objects in alternates (`objects/info/alternates`) are reported
//! the same way. The probe reads every object of the object database, loose and packed, and
//! counts the subject's cases (and objects holding an identifying value) found in any of them.
//! Another process must not write to the repository while a delete runs.
//!
//! Seed (the drill): a synthetic case — a copy of the first JSON-lines case at HEAD with the
//! subject field set to the synthetic subject, text to synthetic text, other fields emptied —
//! appended to that file in one commit on HEAD (`lethe drill: a synthetic case`). The delete
//! rewrites that commit to an empty one; unseed moves the branch back past it, so the history
//! is as it was (the empty commit object holds nothing and goes with the next `git gc`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use git2::{ObjectType, Oid, Repository};

use super::registry::StoreConfig;
use super::{Deleted, Seeded, SeededPlace, Store, StoreAction, StoreSubject, error};
use crate::error::Result;
use crate::stores::blocking;

/// The Git dataset connector.
#[derive(Debug, Clone)]
pub struct GitStore {
    name: String,
    repo: PathBuf,
    globs: Vec<glob::Pattern>,
    field: String,
}

impl GitStore {
    /// From a registered `git` store.
    pub fn open(root: &Path, name: &str, c: &StoreConfig) -> Result<GitStore> {
        let p = PathBuf::from(c.path.clone().unwrap_or_default());
        let mut globs = Vec::new();
        for g in &c.files {
            globs
                .push(glob::Pattern::new(g).map_err(|e| {
                    error(name, format!("files: `{g}` is not a glob pattern: {e}"))
                })?);
        }
        Ok(GitStore {
            name: name.to_string(),
            repo: if p.is_absolute() { p } else { root.join(p) },
            globs,
            field: c.subject_field.clone().unwrap_or_default(),
        })
    }

    fn err(&self, what: &str, e: git2::Error) -> crate::Error {
        error(&self.name, format!("{what}: {}", e.message()))
    }

    fn open_repo(&self) -> Result<Repository> {
        Repository::open(&self.repo).map_err(|e| {
            error(
                &self.name,
                format!(
                    "{} is not a Git repository: {}",
                    self.repo.display(),
                    e.message()
                ),
            )
        })
    }

    fn in_dataset(&self, path: &str) -> bool {
        self.globs.iter().any(|g| g.matches(path))
    }
}

/// The format of a dataset file, by extension.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Format {
    JsonLines,
    Json,
    Yaml,
}

fn format_of(path: &str) -> Format {
    if path.ends_with(".json") {
        Format::Json
    } else if path.ends_with(".yaml") || path.ends_with(".yml") {
        Format::Yaml
    } else {
        Format::JsonLines
    }
}

/// The subject reference of one JSON value, as text.
fn reference(v: &serde_json::Value, field: &str) -> Option<String> {
    match v.get(field)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        other => Some(other.to_string()),
    }
}

/// The subject references a YAML case names at top level (`field: value`).
fn yaml_reference(text: &str, field: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        let v = rest
            .split('#')
            .next()?
            .trim()
            .trim_matches(|c| c == '"' || c == '\'');
        (!v.is_empty()).then(|| v.to_string())
    })
}

/// Which values (of `wanted`) a blob's cases reference, with how many cases each.
fn cases_in(
    bytes: &[u8],
    path_format: Format,
    field: &str,
    wanted: &BTreeSet<String>,
) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let Ok(text) = std::str::from_utf8(bytes) else {
        return out;
    };
    let mut hit = |r: Option<String>| {
        if let Some(r) = r
            && wanted.contains(&r)
        {
            *out.entry(r).or_default() += 1;
        }
    };
    match path_format {
        Format::JsonLines => {
            for line in text.lines() {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
                    hit(reference(&v, field));
                }
            }
        }
        Format::Json => {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
                match &v {
                    serde_json::Value::Array(items) => {
                        for i in items {
                            hit(reference(i, field));
                        }
                    }
                    _ => hit(reference(&v, field)),
                }
            }
        }
        Format::Yaml => hit(yaml_reference(text, field)),
    }
    out
}

/// A dataset file without the cases of `wanted`: `None` when the whole file goes.
fn without(
    bytes: &[u8],
    format: Format,
    field: &str,
    wanted: &BTreeSet<String>,
) -> Option<Vec<u8>> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Some(bytes.to_vec());
    };
    match format {
        Format::JsonLines => {
            let mut out = String::with_capacity(text.len());
            for line in text.split_inclusive('\n') {
                let keep = match serde_json::from_str::<serde_json::Value>(line.trim_end()) {
                    Ok(v) => !reference(&v, field).is_some_and(|r| wanted.contains(&r)),
                    Err(_) => true,
                };
                if keep {
                    out.push_str(line);
                }
            }
            Some(out.into_bytes())
        }
        Format::Json => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Array(items)) => {
                let kept: Vec<serde_json::Value> = items
                    .into_iter()
                    .filter(|i| !reference(i, field).is_some_and(|r| wanted.contains(&r)))
                    .collect();
                let mut s = serde_json::to_string_pretty(&kept).unwrap_or_default();
                s.push('\n');
                Some(s.into_bytes())
            }
            Ok(v) if reference(&v, field).is_some_and(|r| wanted.contains(&r)) => None,
            _ => Some(bytes.to_vec()),
        },
        Format::Yaml => {
            if yaml_reference(text, field).is_some_and(|r| wanted.contains(&r)) {
                None
            } else {
                Some(bytes.to_vec())
            }
        }
    }
}

/// One history rewrite.
struct Rewrite<'r> {
    store: &'r GitStore,
    repo: &'r Repository,
    wanted: BTreeSet<String>,
    trees: HashMap<(Oid, String), Option<Oid>>,
    /// Distinct cases removed, per subject value (by the case's text).
    removed: BTreeMap<String, BTreeSet<Vec<u8>>>,
}

impl Rewrite<'_> {
    fn tree(&mut self, id: Oid, prefix: &str) -> Result<Oid> {
        if let Some(Some(t)) = self.trees.get(&(id, prefix.to_string())) {
            return Ok(*t);
        }
        let repo = self.repo;
        let tree = repo
            .find_tree(id)
            .map_err(|e| self.store.err("reading a tree", e))?;
        let mut builder = repo
            .treebuilder(Some(&tree))
            .map_err(|e| self.store.err("rewriting a tree", e))?;
        let mut changed = false;
        for entry in tree.iter() {
            let Some(name) = entry.name() else { continue };
            let path = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}/{name}")
            };
            match entry.kind() {
                Some(ObjectType::Tree) => {
                    let new = self.tree(entry.id(), &path)?;
                    if new != entry.id() {
                        builder
                            .insert(name, new, entry.filemode())
                            .map_err(|e| self.store.err("rewriting a tree", e))?;
                        changed = true;
                    }
                }
                Some(ObjectType::Blob) if self.store.in_dataset(&path) => {
                    let blob = repo
                        .find_blob(entry.id())
                        .map_err(|e| self.store.err("reading a blob", e))?;
                    let fmt = format_of(&path);
                    let found = cases_in(blob.content(), fmt, &self.store.field, &self.wanted);
                    if found.is_empty() {
                        continue;
                    }
                    self.note_removed(blob.content(), fmt);
                    changed = true;
                    match without(blob.content(), fmt, &self.store.field, &self.wanted) {
                        Some(bytes) => {
                            let new = repo
                                .blob(&bytes)
                                .map_err(|e| self.store.err("writing a blob", e))?;
                            builder
                                .insert(name, new, entry.filemode())
                                .map_err(|e| self.store.err("rewriting a tree", e))?;
                        }
                        None => {
                            builder
                                .remove(name)
                                .map_err(|e| self.store.err("rewriting a tree", e))?;
                        }
                    }
                }
                _ => {}
            }
        }
        let out = if changed {
            builder
                .write()
                .map_err(|e| self.store.err("writing a tree", e))?
        } else {
            id
        };
        self.trees.insert((id, prefix.to_string()), Some(out));
        Ok(out)
    }

    fn note_removed(&mut self, bytes: &[u8], fmt: Format) {
        let field = self.store.field.clone();
        let Ok(text) = std::str::from_utf8(bytes) else {
            return;
        };
        let mut note = |r: Option<String>, case: &[u8]| {
            if let Some(r) = r
                && self.wanted.contains(&r)
            {
                self.removed.entry(r).or_default().insert(case.to_vec());
            }
        };
        match fmt {
            Format::JsonLines => {
                for line in text.lines() {
                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
                        note(reference(&v, &field), line.as_bytes());
                    }
                }
            }
            Format::Json => {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
                    match &v {
                        serde_json::Value::Array(items) => {
                            for i in items {
                                note(reference(i, &field), i.to_string().as_bytes());
                            }
                        }
                        _ => note(reference(&v, &field), bytes),
                    }
                }
            }
            Format::Yaml => note(yaml_reference(text, &field), bytes),
        }
    }
}

/// Text folded for matching without regard to case: each character lowercased on its own
/// (Unicode's lowercase mapping, which may change a character's byte length: `İ` becomes two
/// characters, the Kelvin sign one ASCII byte), with, for every byte of the folded text, the
/// index of the character of the original text it came from.
fn fold(text: &str) -> (String, Vec<usize>) {
    let mut folded = String::with_capacity(text.len());
    let mut origin = Vec::with_capacity(text.len());
    for (k, c) in text.chars().enumerate() {
        for l in c.to_lowercase() {
            folded.push(l);
            origin.extend(std::iter::repeat_n(k, l.len_utf8()));
        }
    }
    (folded, origin)
}

/// `text` folded as [`fold`] folds it, without the positions.
fn folded(text: &str) -> String {
    fold(text).0
}

/// A commit or tag message with every identifying value replaced by `[erased]`, matched
/// without regard to case ([`fold`]). Every occurrence of every value counts, overlapping ones
/// too; a match is mapped back to the characters of the original message it covers (a match
/// that covers part of a character's lowercase form takes the whole character), overlapping
/// and adjacent ranges are merged, and the message is rebuilt in one pass over the original:
/// the replacement text is never searched again, so a value inside `[erased]` can't loop.
fn scrub(message: &str, traces: &[String]) -> String {
    let (text, origin) = fold(message);
    // Character ranges [start, end) of the original to replace.
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for t in traces {
        let needle = folded(t);
        if needle.is_empty() {
            continue;
        }
        let mut from = 0;
        while let Some(i) = text[from..].find(&needle) {
            let start = from + i;
            let end = start + needle.len();
            ranges.push((origin[start], origin[end - 1] + 1));
            // The next match may overlap this one: search again one character on.
            from = start + text[start..].chars().next().map_or(1, char::len_utf8);
        }
    }
    if ranges.is_empty() {
        return message.to_string();
    }
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (s, e) in ranges {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let mut out = String::with_capacity(message.len());
    let mut next = merged.iter().peekable();
    let mut skip_until = None;
    for (k, c) in message.chars().enumerate() {
        if let Some(end) = skip_until {
            if k < end {
                continue;
            }
            skip_until = None;
        }
        if let Some(&&(s, e)) = next.peek()
            && s == k
        {
            out.push_str("[erased]");
            skip_until = Some(e);
            next.next();
            continue;
        }
        out.push(c);
    }
    out
}

/// A remote URL without credentials.
fn safe_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        Err(_) => url.to_string(),
    }
}

impl GitStore {
    fn delete_blocking(&self, subjects: &[StoreSubject]) -> Result<Deleted> {
        let repo = self.open_repo()?;
        if !repo.is_bare() {
            let mut opts = git2::StatusOptions::new();
            opts.include_untracked(false);
            let dirty = repo
                .statuses(Some(&mut opts))
                .map_err(|e| self.err("reading the work tree's status", e))?
                .iter()
                .any(|s| {
                    s.status() != git2::Status::CURRENT && s.status() != git2::Status::IGNORED
                });
            if dirty {
                return Err(error(
                    &self.name,
                    format!(
                        "{} has uncommitted changes: commit or discard them first (nothing was changed)",
                        self.repo.display()
                    ),
                ));
            }
        }
        let wanted: BTreeSet<String> = subjects.iter().flat_map(|s| s.values.clone()).collect();
        let traces: Vec<String> = subjects
            .iter()
            .flat_map(|s| s.traces.iter())
            .filter(|t| t.chars().count() >= 6)
            .cloned()
            .collect();
        let mut rw = Rewrite {
            store: self,
            repo: &repo,
            wanted,
            trees: HashMap::new(),
            removed: BTreeMap::new(),
        };
        // Every ref and what it points at.
        let mut refs: Vec<(String, Oid)> = Vec::new();
        let mut dropped: Vec<String> = Vec::new();
        for r in repo.references().map_err(|e| self.err("listing refs", e))? {
            let r = r.map_err(|e| self.err("listing refs", e))?;
            let Some(name) = r.name().map(str::to_string) else {
                continue;
            };
            if name == "refs/stash" || name.starts_with("refs/original/") {
                dropped.push(name);
                continue;
            }
            if let Some(t) = r.target() {
                refs.push((name, t));
            }
        }
        // Commits, parents first.
        let mut walk = repo.revwalk().map_err(|e| self.err("walking history", e))?;
        walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
            .map_err(|e| self.err("walking history", e))?;
        for (_, t) in &refs {
            if let Ok(c) = repo.find_object(*t, None).and_then(|o| o.peel_to_commit()) {
                walk.push(c.id())
                    .map_err(|e| self.err("walking history", e))?;
            }
        }
        let mut map: HashMap<Oid, Oid> = HashMap::new();
        let mut rewritten = 0usize;
        for id in walk {
            let id = id.map_err(|e| self.err("walking history", e))?;
            let c = repo
                .find_commit(id)
                .map_err(|e| self.err("reading a commit", e))?;
            let tree = rw.tree(c.tree_id(), "")?;
            let parents: Vec<Oid> = c.parent_ids().map(|p| *map.get(&p).unwrap_or(&p)).collect();
            let raw_message = String::from_utf8_lossy(c.message_raw_bytes()).into_owned();
            let message = scrub(&raw_message, &traces);
            if tree == c.tree_id()
                && message == raw_message
                && parents.iter().eq(c.parent_ids().collect::<Vec<_>>().iter())
            {
                map.insert(id, id);
                continue;
            }
            let tree = repo
                .find_tree(tree)
                .map_err(|e| self.err("reading a tree", e))?;
            let parents: Vec<git2::Commit> = parents
                .iter()
                .map(|p| repo.find_commit(*p))
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| self.err("reading a commit", e))?;
            let new = repo
                .commit(
                    None,
                    &c.author(),
                    &c.committer(),
                    &message,
                    &tree,
                    &parents.iter().collect::<Vec<_>>(),
                )
                .map_err(|e| self.err("writing a commit", e))?;
            map.insert(id, new);
            rewritten += 1;
        }
        // Move every ref; re-create annotated tags.
        let mut moved_remotes: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, target) in &refs {
            let obj = repo
                .find_object(*target, None)
                .map_err(|e| self.err("reading a ref's target", e))?;
            let new_target = match obj.kind() {
                Some(ObjectType::Commit) => map.get(target).copied().unwrap_or(*target),
                Some(ObjectType::Tag) => {
                    let tag = obj.as_tag().expect("a tag object");
                    let peeled = tag
                        .target()
                        .and_then(|o| o.peel_to_commit())
                        .map_err(|e| self.err("reading a tag", e))?;
                    match map.get(&peeled.id()) {
                        Some(n) if *n != peeled.id() => {
                            let new_obj = repo
                                .find_object(*n, None)
                                .map_err(|e| self.err("reading a commit", e))?;
                            let tagger = match tag.tagger() {
                                Some(t) => t.to_owned(),
                                None => repo
                                    .signature()
                                    .or_else(|_| git2::Signature::now("lethe", "lethe@localhost"))
                                    .map_err(|e| self.err("a tagger", e))?,
                            };
                            repo.tag_annotation_create(
                                tag.name().unwrap_or_default(),
                                &new_obj,
                                &tagger,
                                &scrub(tag.message().unwrap_or_default(), &traces),
                            )
                            .map_err(|e| self.err("re-creating a tag", e))?
                        }
                        _ => *target,
                    }
                }
                _ => *target,
            };
            if new_target != *target {
                repo.reference(name, new_target, true, "lethe: erasure")
                    .map_err(|e| self.err("moving a ref", e))?;
                if let Some(rest) = name.strip_prefix("refs/remotes/")
                    && let Some((remote, branch)) = rest.split_once('/')
                {
                    moved_remotes
                        .entry(remote.to_string())
                        .or_default()
                        .push(branch.to_string());
                }
            }
        }
        for name in &dropped {
            if let Ok(mut r) = repo.find_reference(name) {
                r.delete().map_err(|e| self.err("removing a ref", e))?;
            }
        }
        if !repo.is_bare() && rewritten > 0 {
            repo.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))
                .map_err(|e| self.err("checking out the rewritten HEAD", e))?;
        }
        self.expire_and_prune(&repo)?;
        let mut unreachable = Vec::new();
        for (remote, branches) in &moved_remotes {
            let url = repo
                .find_remote(remote)
                .ok()
                .and_then(|r| r.url().map(safe_url))
                .unwrap_or_else(|| "(no URL)".into());
            unreachable.push(format!(
                "Git remote `{remote}` ({url}) still holds the old history: after review, `git push --force {remote} {}` and have its host purge unreachable objects",
                branches.join(" ")
            ));
        }
        if self.git_dir(&repo).join("objects/info/alternates").exists() {
            unreachable.push(format!(
                "{}: objects in alternate object stores (objects/info/alternates) were not changed",
                self.repo.display()
            ));
        }
        let records = subjects
            .iter()
            .map(|s| {
                s.values
                    .iter()
                    .map(|v| rw.removed.get(v).map_or(0, |c| c.len() as u64))
                    .sum()
            })
            .collect();
        Ok(Deleted {
            action: StoreAction::RewriteHistory,
            mechanism: format!(
                "Git: cases removed from every reachable commit ({rewritten} commit(s) rewritten), reflogs expired, objects repacked and unreachable ones pruned"
            ),
            records,
            unreachable,
        })
    }

    fn git_dir(&self, repo: &Repository) -> PathBuf {
        repo.path().to_path_buf()
    }

    /// Expires every reflog and keeps only objects reachable from the refs, in one new pack.
    fn expire_and_prune(&self, repo: &Repository) -> Result<()> {
        let git = self.git_dir(repo);
        let io = |p: &Path, e: std::io::Error| crate::Error::io(p.display().to_string(), e);
        let logs = git.join("logs");
        if logs.exists() {
            std::fs::remove_dir_all(&logs).map_err(|e| io(&logs, e))?;
        }
        for f in [
            "ORIG_HEAD",
            "FETCH_HEAD",
            "MERGE_HEAD",
            "CHERRY_PICK_HEAD",
            "REVERT_HEAD",
        ] {
            let p = git.join(f);
            if p.exists() {
                std::fs::remove_file(&p).map_err(|e| io(&p, e))?;
            }
        }
        let mut pb = repo
            .packbuilder()
            .map_err(|e| self.err("packing objects", e))?;
        let mut walk = repo.revwalk().map_err(|e| self.err("walking history", e))?;
        let mut any = false;
        for r in repo.references().map_err(|e| self.err("listing refs", e))? {
            let r = r.map_err(|e| self.err("listing refs", e))?;
            let Some(t) = r.target() else { continue };
            let obj = repo
                .find_object(t, None)
                .map_err(|e| self.err("reading a ref's target", e))?;
            if obj.kind() == Some(ObjectType::Tag) {
                pb.insert_object(t, None)
                    .map_err(|e| self.err("packing objects", e))?;
            }
            if let Ok(c) = obj.peel_to_commit() {
                walk.push(c.id())
                    .map_err(|e| self.err("walking history", e))?;
                any = true;
            } else if let Ok(tree) = obj.peel_to_tree() {
                pb.insert_tree(tree.id())
                    .map_err(|e| self.err("packing objects", e))?;
            } else {
                pb.insert_object(obj.id(), None)
                    .map_err(|e| self.err("packing objects", e))?;
            }
        }
        if any {
            pb.insert_walk(&mut walk)
                .map_err(|e| self.err("packing objects", e))?;
        }
        // The index's entries (staged = HEAD's, as the work tree is clean).
        if !repo.is_bare()
            && let Ok(index) = repo.index()
        {
            for e in index.iter() {
                let _ = pb.insert_object(e.id, None);
            }
        }
        let pack_dir = git.join("objects/pack");
        std::fs::create_dir_all(&pack_dir).map_err(|e| io(&pack_dir, e))?;
        let old: Vec<PathBuf> = std::fs::read_dir(&pack_dir)
            .map_err(|e| io(&pack_dir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        pb.write(&pack_dir, 0o444)
            .map_err(|e| self.err("writing the pack", e))?;
        let name = pb.name().map(str::to_string).unwrap_or_default();
        let keep = format!("pack-{name}");
        for p in old {
            let stem = p
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            if stem != keep {
                std::fs::remove_file(&p).map_err(|e| io(&p, e))?;
            }
        }
        let objects = git.join("objects");
        for e in std::fs::read_dir(&objects).map_err(|e| io(&objects, e))? {
            let p = e.map_err(|e| io(&objects, e))?.path();
            let n = p.file_name().and_then(|s| s.to_str()).unwrap_or_default();
            if n.len() == 2 && n.chars().all(|c| c.is_ascii_hexdigit()) && p.is_dir() {
                std::fs::remove_dir_all(&p).map_err(|e| io(&p, e))?;
            }
        }
        for f in ["objects/info/commit-graph", "objects/info/packs"] {
            let p = git.join(f);
            if p.exists() {
                std::fs::remove_file(&p).map_err(|e| io(&p, e))?;
            }
        }
        let graphs = git.join("objects/info/commit-graphs");
        if graphs.exists() {
            std::fs::remove_dir_all(&graphs).map_err(|e| io(&graphs, e))?;
        }
        Ok(())
    }

    /// Per subject: objects of the object database (loose and packed) holding one of its cases
    /// or one of its identifying values.
    fn probe_blocking(&self, subjects: &[StoreSubject]) -> Result<Vec<u64>> {
        let repo = self.open_repo()?;
        let odb = repo
            .odb()
            .map_err(|e| self.err("opening the object database", e))?;
        let mut ids = Vec::new();
        odb.foreach(|id| {
            ids.push(*id);
            true
        })
        .map_err(|e| self.err("listing objects", e))?;
        let wanted: Vec<BTreeSet<String>> = subjects
            .iter()
            .map(|s| s.values.iter().cloned().collect())
            .collect();
        let traces: Vec<Vec<String>> = subjects
            .iter()
            .map(|s| {
                s.traces
                    .iter()
                    .filter(|t| t.chars().count() >= 6)
                    .map(|t| folded(t))
                    .collect()
            })
            .collect();
        let mut out = vec![0u64; subjects.len()];
        for id in ids {
            let obj = odb.read(id).map_err(|e| self.err("reading an object", e))?;
            let data = obj.data();
            let lower = folded(&String::from_utf8_lossy(data));
            for (i, w) in wanted.iter().enumerate() {
                let holds_case = obj.kind() == ObjectType::Blob
                    && [Format::JsonLines, Format::Json, Format::Yaml]
                        .iter()
                        .any(|f| !cases_in(data, *f, &self.field, w).is_empty());
                let holds_value = traces[i].iter().any(|t| lower.contains(t.as_str()));
                if holds_case || holds_value {
                    out[i] += 1;
                }
            }
        }
        Ok(out)
    }

    fn values_blocking(&self) -> Result<Vec<String>> {
        let repo = self.open_repo()?;
        let Ok(head) = repo.head().and_then(|h| h.peel_to_tree()) else {
            return Ok(Vec::new());
        };
        let mut out = BTreeSet::new();
        let mut err = None;
        head.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            let path = format!("{dir}{}", entry.name().unwrap_or_default());
            if entry.kind() == Some(ObjectType::Blob) && self.in_dataset(&path) {
                match repo.find_blob(entry.id()) {
                    Ok(b) => {
                        if let Ok(text) = std::str::from_utf8(b.content()) {
                            match format_of(&path) {
                                Format::Yaml => out.extend(yaml_reference(text, &self.field)),
                                Format::Json => {
                                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
                                        match &v {
                                            serde_json::Value::Array(items) => out.extend(
                                                items
                                                    .iter()
                                                    .filter_map(|i| reference(i, &self.field)),
                                            ),
                                            _ => out.extend(reference(&v, &self.field)),
                                        }
                                    }
                                }
                                Format::JsonLines => {
                                    for l in text.lines() {
                                        if let Ok(v) = serde_json::from_str::<serde_json::Value>(l)
                                        {
                                            out.extend(reference(&v, &self.field));
                                        }
                                    }
                                }
                            }
                        }
                    }
                    Err(e) => err = Some(e),
                }
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(|e| self.err("reading HEAD", e))?;
        if let Some(e) = err {
            return Err(self.err("reading a blob", e));
        }
        Ok(out.into_iter().collect())
    }
}

/// The message of the drill's seeding commit.
const DRILL_MESSAGE: &str = "lethe drill: a synthetic case\n";

impl GitStore {
    fn seed_blocking(&self, subject: &StoreSubject, _key: i64) -> Result<Seeded> {
        let value = subject.values.first().ok_or_else(|| {
            error(
                &self.name,
                "the synthetic subject has no value for this store",
            )
        })?;
        let repo = self.open_repo()?;
        let Some(workdir) = repo.workdir().map(Path::to_path_buf) else {
            return Err(error(
                &self.name,
                "a bare repository: the drill seeds through a work tree",
            ));
        };
        let head = repo
            .head()
            .and_then(|h| h.peel_to_commit())
            .map_err(|e| self.err("reading HEAD", e))?;
        let tree = head
            .tree()
            .map_err(|e| self.err("reading HEAD's tree", e))?;
        let mut found: Option<String> = None;
        tree.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
            let path = format!("{root}{}", entry.name().unwrap_or(""));
            if entry.kind() == Some(ObjectType::Blob)
                && self.in_dataset(&path)
                && format_of(&path) == Format::JsonLines
            {
                found = Some(path);
                return git2::TreeWalkResult::Abort;
            }
            git2::TreeWalkResult::Ok
        })
        .ok();
        let path = found.ok_or_else(|| {
            error(
                &self.name,
                "no JSON-lines file of the dataset at HEAD to copy a case from",
            )
        })?;
        let blob = tree
            .get_path(Path::new(&path))
            .and_then(|e| e.to_object(&repo))
            .and_then(|o| o.peel_to_blob())
            .map_err(|e| self.err("reading a blob", e))?;
        let text = String::from_utf8_lossy(blob.content()).into_owned();
        let template = text
            .lines()
            .find_map(|l| {
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(l).ok()
            })
            .ok_or_else(|| error(&self.name, format!("{path} holds no case to copy")))?;
        let mut case = serde_json::Map::new();
        for (k, v) in template {
            let nv = if k == self.field {
                match (&v, value.parse::<i64>()) {
                    (serde_json::Value::Number(_), Ok(i)) => serde_json::Value::from(i),
                    _ => serde_json::Value::from(value.as_str()),
                }
            } else if v.is_string() {
                serde_json::Value::from(super::synthetic_text(subject, &k))
            } else {
                serde_json::Value::Null
            };
            case.insert(k, nv);
        }
        let mut content = text;
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&serde_json::Value::Object(case).to_string());
        content.push('\n');
        let file = workdir.join(&path);
        std::fs::write(&file, &content)
            .map_err(|e| crate::Error::io(file.display().to_string(), e))?;
        let mut index = repo.index().map_err(|e| self.err("reading the index", e))?;
        index
            .add_path(Path::new(&path))
            .map_err(|e| self.err("staging the synthetic case", e))?;
        index
            .write()
            .map_err(|e| self.err("writing the index", e))?;
        let tree = index
            .write_tree()
            .and_then(|t| repo.find_tree(t))
            .map_err(|e| self.err("writing a tree", e))?;
        let sig = git2::Signature::now("lethe drill", "lethe-drill@localhost")
            .map_err(|e| self.err("signing the commit", e))?;
        let oid = repo
            .commit(Some("HEAD"), &sig, &sig, DRILL_MESSAGE, &tree, &[&head])
            .map_err(|e| self.err("committing the synthetic case", e))?;
        Ok(Seeded {
            records: 1,
            places: vec![SeededPlace {
                place: path,
                key: Some(("commit".into(), oid.to_string())),
            }],
        })
    }

    fn unseed_blocking(&self) -> Result<u64> {
        let repo = self.open_repo()?;
        let mut head = repo.head().map_err(|e| self.err("reading HEAD", e))?;
        let c = head
            .peel_to_commit()
            .map_err(|e| self.err("reading HEAD", e))?;
        let empty = c.parent_count() == 1
            && c.parent(0).is_ok_and(|p| p.tree_id() == c.tree_id())
            && c.message_raw() == Some(DRILL_MESSAGE);
        if !empty {
            return Ok(0);
        }
        let parent = c.parent_id(0).map_err(|e| self.err("reading HEAD", e))?;
        if head.is_branch() {
            head.set_target(parent, "lethe drill: drop the drill's emptied commit")
                .map_err(|e| self.err("moving the branch", e))?;
        } else {
            repo.set_head_detached(parent)
                .map_err(|e| self.err("moving HEAD", e))?;
        }
        Ok(1)
    }
}

#[async_trait]
impl Store for GitStore {
    fn name(&self) -> &str {
        &self.name
    }

    async fn delete(&self, subjects: &[StoreSubject]) -> Result<Deleted> {
        let (s, subjects) = (self.clone(), subjects.to_vec());
        blocking(move || s.delete_blocking(&subjects)).await
    }

    async fn probe(&self, subjects: &[StoreSubject]) -> Result<Vec<u64>> {
        let (s, subjects) = (self.clone(), subjects.to_vec());
        blocking(move || s.probe_blocking(&subjects)).await
    }

    async fn subject_values(&self) -> Result<Option<Vec<String>>> {
        let s = self.clone();
        Ok(Some(blocking(move || s.values_blocking()).await?))
    }

    async fn seed(&self, subject: &StoreSubject, key: i64) -> Result<Seeded> {
        let (s, subject) = (self.clone(), subject.clone());
        blocking(move || s.seed_blocking(&subject, key)).await
    }

    async fn unseed(&self, _seeded: &Seeded) -> Result<u64> {
        let s = self.clone();
        blocking(move || s.unseed_blocking()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_cases_are_found_and_removed_by_reference() {
        let text = b"{\"id\":1,\"learner_id\":3590,\"q\":\"a\"}\n{\"id\":2,\"learner_id\":7,\"q\":\"b\"}\nnot json\n";
        let w: BTreeSet<String> = ["3590".to_string()].into();
        assert_eq!(
            cases_in(text, Format::JsonLines, "learner_id", &w)["3590"],
            1
        );
        let kept = without(text, Format::JsonLines, "learner_id", &w).unwrap();
        assert_eq!(
            String::from_utf8(kept).unwrap(),
            "{\"id\":2,\"learner_id\":7,\"q\":\"b\"}\nnot json\n"
        );
        let y = b"id: 4\nlearner_id: 3590 # the case\nquestion: x\n";
        assert_eq!(cases_in(y, Format::Yaml, "learner_id", &w)["3590"], 1);
        assert!(without(y, Format::Yaml, "learner_id", &w).is_none());
    }

    fn commit_file(repo: &Repository, path: &str, text: &str, msg: &str) -> Oid {
        let mut index = repo.index().unwrap();
        let blob = repo.blob(text.as_bytes()).unwrap();
        index
            .add(&git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode: 0o100644,
                uid: 0,
                gid: 0,
                file_size: text.len() as u32,
                id: blob,
                flags: path.len() as u16,
                flags_extended: 0,
                path: path.as_bytes().to_vec(),
            })
            .unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        let parents: Vec<git2::Commit> = repo
            .head()
            .ok()
            .and_then(|h| h.peel_to_commit().ok())
            .into_iter()
            .collect();
        repo.commit(
            Some("HEAD"),
            &sig,
            &sig,
            msg,
            &tree,
            &parents.iter().collect::<Vec<_>>(),
        )
        .unwrap()
    }

    fn cat_all(dir: &Path) -> String {
        let out = std::process::Command::new("git")
            .args(["cat-file", "--batch-all-objects", "--batch", "--unordered"])
            .current_dir(dir)
            .output()
            .expect("git (the test reads every object with git cat-file)");
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// History, a tag, a second branch, a stash-like ref and a remote: after the delete no
    /// object of the repository holds the case (every object read by `git cat-file`), the
    /// remote is named with the force-push it needs, and the probe agrees.
    #[tokio::test]
    async fn history_is_rewritten_and_pruned_so_no_object_holds_the_case() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("evals");
        let repo = Repository::init(&path).unwrap();
        let secret = "{\"case\":\"c-77\",\"learner_id\":3590,\"q\":\"Zelda Q. Marsh asked\"}\n";
        let keep = "{\"case\":\"c-1\",\"learner_id\":12,\"q\":\"fine\"}\n";
        commit_file(&repo, "cases/a.jsonl", keep, "first");
        let with = commit_file(
            &repo,
            "cases/a.jsonl",
            &format!("{keep}{secret}"),
            "add the case of ZELDA Q. MARSH",
        );
        repo.tag_lightweight("light", &repo.find_object(with, None).unwrap(), false)
            .unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        repo.tag(
            "v1",
            &repo.find_object(with, None).unwrap(),
            &sig,
            "v1",
            false,
        )
        .unwrap();
        repo.branch("side", &repo.find_commit(with).unwrap(), false)
            .unwrap();
        commit_file(
            &repo,
            "cases/a.jsonl",
            keep,
            "drop the case on main (history keeps it)",
        );
        repo.remote("origin", "https://user:hunter2@git.example/org/evals.git")
            .unwrap();
        repo.reference("refs/remotes/origin/main", with, true, "fetched")
            .unwrap();
        repo.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))
            .unwrap();
        assert!(cat_all(&path).contains("c-77"));
        let store = GitStore {
            name: "evals".into(),
            repo: path.clone(),
            globs: vec![glob::Pattern::new("cases/*.jsonl").unwrap()],
            field: "learner_id".into(),
        };
        let subject = [StoreSubject {
            request: "r1".into(),
            values: vec!["3590".into()],
            traces: vec!["Zelda Q. Marsh".into()],
        }];
        assert!(store.probe(&subject).await.unwrap()[0] > 0);
        let d = store.delete(&subject).await.unwrap();
        assert_eq!(d.records, vec![1]);
        assert_eq!(d.unreachable.len(), 1, "{:?}", d.unreachable);
        assert!(
            d.unreachable[0].contains("git push --force origin main"),
            "{:?}",
            d.unreachable
        );
        assert!(
            !d.unreachable[0].contains("hunter2"),
            "no credential in evidence"
        );
        let all = cat_all(&path);
        assert!(
            !all.contains("c-77") && !all.contains("Zelda"),
            "an object still holds the case:\n{all}"
        );
        assert!(
            all.contains("add the case of [erased]"),
            "messages are scrubbed"
        );
        assert!(all.contains("c-1"));
        assert_eq!(store.probe(&subject).await.unwrap(), vec![0]);
        let fsck = std::process::Command::new("git")
            .args(["fsck", "--full", "--strict", "--no-dangling"])
            .current_dir(&path)
            .output()
            .unwrap();
        assert!(
            fsck.status.success(),
            "{}",
            String::from_utf8_lossy(&fsck.stderr)
        );
        for r in ["refs/tags/v1", "refs/tags/light", "refs/heads/side"] {
            assert!(
                Repository::open(&path).unwrap().find_reference(r).is_ok(),
                "{r} kept"
            );
        }
        // A second delete finds nothing and changes nothing.
        assert_eq!(store.delete(&subject).await.unwrap().records, vec![0]);
    }

    #[test]
    fn messages_lose_identifying_values() {
        assert_eq!(
            scrub(
                "Case from Zelda Q. Marsh (zelda@x.example)",
                &["zelda q. marsh".into(), "ZELDA@X.EXAMPLE".into()]
            ),
            "Case from [erased] ([erased])"
        );
    }

    /// Regression (issue 44 item 4): letters whose lowercase form has another byte length
    /// (`İ` two characters, `ẞ` → `ß`, the Kelvin sign → `k`) left the message unscrubbed.
    #[test]
    fn scrubbing_matches_values_whose_lowercase_changes_byte_length() {
        assert_eq!(
            scrub(
                "İstanbul office: case from Zelda Marsh",
                &["zelda marsh".into()]
            ),
            "İstanbul office: case from [erased]"
        );
        assert_eq!(
            scrub("Case from İLKAY", &["İlkay".into()]),
            "Case from [erased]"
        );
        assert_eq!(
            scrub("Case from İlkay", &["\u{307}lkay".into()]),
            "Case from [erased]",
            "a match covering part of İ's lowercase form takes the whole İ"
        );
        assert_eq!(
            scrub("İlkay STRAẞE wrote", &["straße".into()]),
            "İlkay [erased] wrote"
        );
        assert_eq!(
            scrub("temp 5 \u{212a}elvin-Kelvin", &["kelvin".into()]),
            "temp 5 [erased]-[erased]"
        );
        assert_eq!(scrub("İİİ x", &["i̇i̇".into()]), "[erased] x");
    }

    /// Regression (issue 44 item 4): a value found inside the replacement text looped forever.
    #[test]
    fn scrubbing_a_value_inside_the_replacement_text_ends() {
        assert_eq!(
            scrub("erased by Erased", &["erased".into()]),
            "[erased] by [erased]"
        );
        assert_eq!(scrub("[erased] x", &["[erased]".into()]), "[erased] x");
        assert_eq!(scrub("a]b", &["d]".into(), "]".into()]), "a[erased]b");
        assert_eq!(scrub("abc", &["".into()]), "abc");
    }

    /// Overlapping occurrences of two values are both erased: none is left half in place.
    #[test]
    fn scrubbing_erases_overlapping_values_whole() {
        assert_eq!(
            scrub("x abcde y", &["abc".into(), "cde".into()]),
            "x [erased] y"
        );
        assert_eq!(scrub("aaaa", &["aa".into()]), "[erased]");
    }

    /// Property: for random messages and values (over an alphabet of letters whose case
    /// mappings change byte lengths), the scrub ends, keeps every character no occurrence of a
    /// value covers, and leaves no occurrence of a value in the text it keeps.
    #[test]
    fn scrubbing_random_messages_leaves_no_value_and_keeps_the_rest() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let seed = std::env::var("LETHE_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(44_004u64);
        eprintln!("seed: {seed} (set LETHE_TEST_SEED to replay)");
        let mut rng = StdRng::seed_from_u64(seed);
        let alphabet: Vec<char> =
            "aAiIkKsS \u{130}\u{131}\u{212a}\u{1e9e}\u{df}\u{3a3}\u{3c3}\u{3c2}[]ed"
                .chars()
                .collect();
        let word = |rng: &mut StdRng, lo: usize, hi: usize| -> String {
            (0..rng.random_range(lo..hi))
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect()
        };
        for round in 0..5_000 {
            let message = word(&mut rng, 0, 40);
            let values: Vec<String> = (0..rng.random_range(1..4))
                .map(|_| word(&mut rng, 1, 5))
                .collect();
            let out = scrub(&message, &values);
            // Which characters of the message an occurrence of a value covers.
            let (text, origin) = fold(&message);
            let mut covered = vec![false; message.chars().count()];
            for v in &values {
                let needle = folded(v);
                for (i, _) in text.char_indices() {
                    if text[i..].starts_with(&needle) {
                        for c in &mut covered[origin[i]..=origin[i + needle.len() - 1]] {
                            *c = true;
                        }
                    }
                }
            }
            // The expected output: kept characters as they were, each covered run one marker.
            let mut want = String::new();
            for (k, c) in message.chars().enumerate() {
                if !covered[k] {
                    want.push(c);
                } else if k == 0 || !covered[k - 1] {
                    want.push_str("[erased]");
                }
            }
            assert_eq!(
                out, want,
                "seed {seed} round {round}: message {message:?} values {values:?}"
            );
            // No value is left in what was kept (between markers).
            let kept: Vec<&str> = out.split("[erased]").collect();
            for piece in &kept {
                for v in &values {
                    assert!(
                        !folded(piece).contains(&folded(v)),
                        "seed {seed} round {round}: {v:?} left in {out:?} (message {message:?})"
                    );
                }
            }
        }
    }

    #[test]
    fn remote_urls_lose_their_credentials() {
        assert_eq!(
            safe_url("https://user:s3cret@git.example/org/evals.git"),
            "https://git.example/org/evals.git"
        );
        assert_eq!(
            safe_url("git@git.example:org/e.git"),
            "git@git.example:org/e.git"
        );
    }
}
