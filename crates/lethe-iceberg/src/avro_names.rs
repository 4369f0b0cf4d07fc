//! The Avro specification's name rules, checked without a regular expression.
//!
//! `apache-avro` checks every name, namespace, field name and enum symbol of every schema it
//! parses (each manifest and manifest list header, each manifest written) against the
//! specification's patterns with `regex-lite`, whose backtracking-free matcher was a tenth of
//! an erasure's CPU before manifest headers were cached ([`crate::manifest_avro`]), and still
//! shows. [`install`] puts in validators that accept and reject exactly what those patterns
//! do — a name `[A-Za-z_][A-Za-z0-9_]*`, a namespace of such names joined by dots (or empty),
//! a full name `namespace.name` split at its last dot — and fail with the same errors.
//! `apache-avro` takes validators once per process, before it first checks a name; if it
//! checked one first, its own stay and nothing changes but the speed.

use apache_avro::AvroResult;
use apache_avro::error::Details;
use apache_avro::schema::Namespace;
use apache_avro::validator::{
    EnumSymbolNameValidator, RecordFieldNameValidator, SchemaNameValidator,
    SchemaNamespaceValidator,
};

/// The specification's rules, by hand.
struct Spec;

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Names joined by dots, or nothing.
fn is_namespace(s: &str) -> bool {
    s.is_empty() || s.split('.').all(is_name)
}

impl SchemaNameValidator for Spec {
    fn validate(&self, schema_name: &str) -> AvroResult<(String, Namespace)> {
        // The pattern's greedy namespace takes everything before the last dot.
        let (ns, name) = match schema_name.rfind('.') {
            Some(i) => (Some(&schema_name[..i]), &schema_name[i + 1..]),
            None => (None, schema_name),
        };
        if is_name(name) && ns.is_none_or(is_namespace) {
            Ok((name.to_string(), ns.map(str::to_string)))
        } else {
            let regex = SchemaNameValidator::regex(self);
            Err(Details::InvalidSchemaName(schema_name.to_string(), regex.as_str()).into())
        }
    }
}

impl SchemaNamespaceValidator for Spec {
    fn validate(&self, ns: &str) -> AvroResult<()> {
        if is_namespace(ns) {
            Ok(())
        } else {
            let regex = SchemaNamespaceValidator::regex(self);
            Err(Details::InvalidNamespace(ns.to_string(), regex.as_str()).into())
        }
    }
}

impl EnumSymbolNameValidator for Spec {
    fn validate(&self, symbol: &str) -> AvroResult<()> {
        if is_name(symbol) {
            Ok(())
        } else {
            Err(Details::EnumSymbolName(symbol.to_string()).into())
        }
    }
}

impl RecordFieldNameValidator for Spec {
    fn validate(&self, name: &str) -> AvroResult<()> {
        if is_name(name) {
            Ok(())
        } else {
            Err(Details::FieldName(name.to_string()).into())
        }
    }
}

/// Installs the validators (once per process; later calls do nothing).
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Each fails only when apache-avro checked a name first: its own validator stays.
        let _ = apache_avro::validator::set_schema_name_validator(Box::new(Spec));
        let _ = apache_avro::validator::set_schema_namespace_validator(Box::new(Spec));
        let _ = apache_avro::validator::set_enum_symbol_name_validator(Box::new(Spec));
        let _ = apache_avro::validator::set_record_field_name_validator(Box::new(Spec));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string over a small alphabet that holds each character class the patterns
    /// distinguish (letters, digits, `_`, `.`, others), up to length 5: the validators
    /// accept exactly what the specification's patterns (apache-avro's own, through the
    /// traits' `regex()`) accept, and split full names as they do.
    #[test]
    fn the_validators_accept_what_the_patterns_accept() {
        let alphabet = ['a', 'Z', '0', '_', '.', '-', 'é'];
        let mut words = vec![String::new()];
        let mut frontier = vec![String::new()];
        for _ in 0..5 {
            let mut next = Vec::new();
            for w in &frontier {
                for c in alphabet {
                    next.push(format!("{w}{c}"));
                }
            }
            words.extend(next.iter().cloned());
            frontier = next;
        }
        let name_re = SchemaNameValidator::regex(&Spec);
        let ns_re = SchemaNamespaceValidator::regex(&Spec);
        let sym_re = EnumSymbolNameValidator::regex(&Spec);
        let field_re = RecordFieldNameValidator::regex(&Spec);
        for w in &words {
            let ours = SchemaNameValidator::validate(&Spec, w).ok();
            let theirs = name_re.captures(w).map(|c| {
                (
                    c["name"].to_string(),
                    c.name("namespace").map(|s| s.as_str().to_string()),
                )
            });
            assert_eq!(ours, theirs, "schema name {w:?}");
            assert_eq!(
                SchemaNamespaceValidator::validate(&Spec, w).is_ok(),
                ns_re.is_match(w),
                "namespace {w:?}"
            );
            assert_eq!(
                EnumSymbolNameValidator::validate(&Spec, w).is_ok(),
                sym_re.is_match(w),
                "symbol {w:?}"
            );
            assert_eq!(
                RecordFieldNameValidator::validate(&Spec, w).is_ok(),
                field_re.is_match(w),
                "field {w:?}"
            );
        }
        assert_eq!(
            words.len(),
            19_608,
            "every word of up to 5 of the 7 characters"
        );
    }
}
