//! Graphviz DOT for a [`Walk`]: the walked subgraph, deterministic for a given graph and walk.
//!
//! Nodes are the reached datasets in walk order (sources first), filled red when they hold the
//! subject's rows, yellow when only shaped, outlined red when unresolved, bold when seeded, and
//! list their labelled fields. One arrow per pair of datasets carries its walked column edges
//! as lines `field -> field (TYPE/SUBTYPE)` (`*` for dataset-wide lineage); a dashed red arrow
//! per unresolved run names the job and why. Names are quoted and escaped; nothing else
//! (no values of the subject) is printed.

use std::fmt::Write;

use crate::walk::{Walk, WalkedArc};

/// The walked subgraph of `walk` in Graphviz DOT.
pub fn to_dot(walk: &Walk<'_>) -> String {
    let mut out = String::new();
    out.push_str("digraph lineage {\n  rankdir=LR;\n");
    out.push_str("  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n");
    out.push_str("  edge [fontname=\"Helvetica\", fontsize=9];\n");
    for d in walk.datasets() {
        let mut status = Vec::new();
        for (on, word) in [
            (d.is_seeded(), "seed"),
            (d.holds_rows(), "holds rows"),
            (d.is_shaped(), "shaped"),
            (d.is_unresolved(), "UNRESOLVED"),
            (d.is_external(), "external"),
        ] {
            if on {
                status.push(word);
            }
        }
        let mut lines = vec![d.name().to_owned(), status.join(", ")];
        lines.extend(d.labels().map(|l| format!("{} = {}", l.field, l.label)));
        let fill = if d.holds_rows() {
            "#f4cccc"
        } else if d.is_shaped() {
            "#fff2cc"
        } else {
            "#ffffff"
        };
        let style = if d.is_seeded() {
            "filled,bold"
        } else {
            "filled"
        };
        let border = if d.is_unresolved() {
            ", color=\"#cc0000\", penwidth=2"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  {} [label={}, style=\"{style}\", fillcolor=\"{fill}\"{border}];",
            quote(d.name()),
            quote_lines(&lines)
        );
    }
    // Arcs come sorted by (source, target) in walk order, column edges first: one DOT edge per
    // pair of datasets carries its column edges' labels; each unresolved run gets its own.
    let mut group: Option<(usize, usize, String, String)> = None;
    let mut lines: Vec<String> = Vec::new();
    let mut flows: Vec<(usize, usize, String, String, String)> = Vec::new();
    let flush = |out: &mut String,
                 group: &Option<(usize, usize, String, String)>,
                 lines: &mut Vec<String>| {
        if let Some((_, _, from, to)) = group {
            lines.sort_unstable();
            lines.dedup();
            let _ = writeln!(
                out,
                "  {} -> {} [label={}];",
                quote(from),
                quote(to),
                quote_lines(lines)
            );
        }
        lines.clear();
    };
    for (from, to, arc) in walk.walked_arcs() {
        let key = (from.node_index(), to.node_index());
        match arc {
            WalkedArc::Edge(e) => {
                if group.as_ref().map(|g| (g.0, g.1)) != Some(key) {
                    flush(&mut out, &group, &mut lines);
                    group = Some((key.0, key.1, from.name().to_owned(), to.name().to_owned()));
                }
                lines.push(e.label());
            }
            WalkedArc::Unresolved(reason) => {
                flows.push((
                    key.0,
                    key.1,
                    from.name().to_owned(),
                    to.name().to_owned(),
                    reason.to_string(),
                ));
            }
        }
    }
    flush(&mut out, &group, &mut lines);
    flows.dedup();
    for (_, _, from, to, reason) in &flows {
        let _ = writeln!(
            out,
            "  {} -> {} [label={}, style=dashed, color=\"#cc0000\", fontcolor=\"#cc0000\"];",
            quote(from),
            quote(to),
            quote(reason)
        );
    }
    out.push_str("}\n");
    out
}

fn escape(s: &str) -> String {
    let mut e = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => e.push_str("\\\""),
            '\\' => e.push_str("\\\\"),
            '\n' | '\r' => e.push(' '),
            c => e.push(c),
        }
    }
    e
}

fn quote(s: &str) -> String {
    format!("\"{}\"", escape(s))
}

/// A quoted label with one line per entry (DOT's `\n`).
fn quote_lines(lines: &[String]) -> String {
    let joined: Vec<String> = lines.iter().map(|l| escape(l)).collect();
    format!("\"{}\"", joined.join("\\n"))
}
