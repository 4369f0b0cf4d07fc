//! The lineage algebra: what one value (a column of a plan node, or an expression)
//! depends on, in terms of base-table columns.
//!
//! A value has DIRECT sources (its content is derived from them) with exactly one subtype
//! per source column (the strongest seen: IDENTITY < TRANSFORMATION < AGGREGATION), and
//! INDIRECT sources keyed by (source column, subtype). Each entry remembers the opaque
//! functions it went through, so that opacity is never lost when entries merge.

use std::collections::{BTreeMap, BTreeSet};

use crate::lineage::Subtype;

/// A base-table column: the table as the query named it (without catalog) and the column.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Source {
    pub(crate) table: String,
    pub(crate) column: String,
}

/// Reasons an entry is opaque, e.g. `udf my_hash`. Empty when fully resolved.
pub(crate) type Reasons = BTreeSet<String>;

/// INDIRECT sources: (source, subtype) -> opacity reasons.
pub(crate) type Indirect = BTreeMap<(Source, Subtype), Reasons>;

/// One DIRECT source's subtype and opacity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    pub(crate) subtype: Subtype,
    pub(crate) opaque: Reasons,
}

/// What one value depends on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Deps {
    pub(crate) direct: BTreeMap<Source, Tag>,
    pub(crate) indirect: Indirect,
}

/// Adds `from` into `into`, uniting opacity reasons of equal keys.
pub(crate) fn merge_indirect(into: &mut Indirect, from: Indirect) {
    for (key, reasons) in from {
        into.entry(key).or_default().extend(reasons);
    }
}

impl Deps {
    /// The value of a base-table column, unchanged.
    pub(crate) fn identity(table: &str, column: &str) -> Self {
        let mut direct = BTreeMap::new();
        direct.insert(
            Source {
                table: table.to_owned(),
                column: column.to_owned(),
            },
            Tag {
                subtype: Subtype::Identity,
                opaque: Reasons::new(),
            },
        );
        Deps {
            direct,
            indirect: Indirect::new(),
        }
    }

    /// Unites `other` into `self`; a source seen DIRECT on both sides keeps the stronger subtype.
    pub(crate) fn merge(&mut self, other: Deps) {
        for (source, tag) in other.direct {
            match self.direct.get_mut(&source) {
                Some(mine) => {
                    mine.subtype = mine.subtype.max(tag.subtype);
                    mine.opaque.extend(tag.opaque);
                }
                None => {
                    self.direct.insert(source, tag);
                }
            }
        }
        merge_indirect(&mut self.indirect, other.indirect);
    }

    /// Raises every DIRECT subtype to at least `floor` (IDENTITY < TRANSFORMATION < AGGREGATION).
    pub(crate) fn at_least(mut self, floor: Subtype) -> Self {
        for tag in self.direct.values_mut() {
            tag.subtype = tag.subtype.max(floor);
        }
        self
    }

    /// The sources of this value when it is used in an INDIRECT role (filter, join key...):
    /// DIRECT sources take the role's subtype, INDIRECT ones keep theirs.
    pub(crate) fn into_indirect(self, role: Subtype) -> Indirect {
        let mut out = self.indirect;
        for (source, tag) in self.direct {
            out.entry((source, role)).or_default().extend(tag.opaque);
        }
        out
    }

    /// Marks every entry as having passed through the opaque `reason`.
    pub(crate) fn mark_opaque(&mut self, reason: &str) {
        for tag in self.direct.values_mut() {
            tag.opaque.insert(reason.to_owned());
        }
        for reasons in self.indirect.values_mut() {
            reasons.insert(reason.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(table: &str, column: &str) -> Source {
        Source {
            table: table.to_owned(),
            column: column.to_owned(),
        }
    }

    #[test]
    fn merge_keeps_the_strongest_direct_subtype() {
        let mut a = Deps::identity("t", "x").at_least(Subtype::Aggregation);
        a.merge(Deps::identity("t", "x"));
        a.merge(Deps::identity("t", "y"));
        assert_eq!(a.direct[&src("t", "x")].subtype, Subtype::Aggregation);
        assert_eq!(a.direct[&src("t", "y")].subtype, Subtype::Identity);
    }

    #[test]
    fn at_least_never_lowers() {
        let d = Deps::identity("t", "x")
            .at_least(Subtype::Aggregation)
            .at_least(Subtype::Transformation);
        assert_eq!(d.direct[&src("t", "x")].subtype, Subtype::Aggregation);
    }

    #[test]
    fn into_indirect_relabels_direct_and_keeps_indirect() {
        let mut d = Deps::identity("t", "x");
        d.indirect
            .insert((src("t", "w"), Subtype::Window), Reasons::new());
        let ind = d.into_indirect(Subtype::Filter);
        let keys: Vec<_> = ind.keys().cloned().collect();
        assert_eq!(
            keys,
            vec![
                (src("t", "w"), Subtype::Window),
                (src("t", "x"), Subtype::Filter)
            ]
        );
    }

    #[test]
    fn opacity_survives_merge_and_relabel() {
        let mut opaque = Deps::identity("t", "x").at_least(Subtype::Transformation);
        opaque.mark_opaque("udf f");
        let mut plain = Deps::identity("t", "x");
        plain.merge(opaque);
        assert!(plain.direct[&src("t", "x")].opaque.contains("udf f"));
        let ind = plain.into_indirect(Subtype::Filter);
        assert!(ind[&(src("t", "x"), Subtype::Filter)].contains("udf f"));
    }
}
