//! What the config fuzz targets (`fuzz_targets/config_*_toml.rs`) hold every parser of a
//! user-supplied file to: it never panics (libFuzzer reports a panic as a crash), and every
//! error it returns is an [`Error::Config`] that names the file it was given, a line of the
//! text (1-based, within the text) and a non-empty key — one TOML reads, when the text is a
//! TOML document — rendered `file:line: key: message`.

use std::path::Path;

use lethe::error::Error;

/// The input as text; `None` (skip the input) when it isn't UTF-8, as no reader of these
/// files accepts other bytes (`read_to_string` fails first).
pub fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// Asserts the contract on a parser's result for `text` read from `path`.
pub fn check<T>(path: &Path, text: &str, result: Result<T, Error>) {
    let Err(err) = result else {
        return;
    };
    let shown = err.to_string();
    let Error::Config {
        file,
        line,
        key,
        message,
    } = &err
    else {
        panic!("the error does not name file, line and key: {err:?} ({shown})");
    };
    assert_eq!(file, path, "the error names another file: {shown}");
    let lines = text.matches('\n').count() + 1;
    assert!(
        (1..=lines).contains(line),
        "line {line} is not a line of the {lines}-line text: {shown}"
    );
    assert!(!key.trim().is_empty(), "the error names no key: {shown}");
    assert!(
        !message.trim().is_empty(),
        "the error says nothing: {shown}"
    );
    // A key the file can be searched for: when the text is a TOML document, the key is one
    // TOML reads (a name holding a quote or a dot is quoted as the file spells it); "(file)"
    // and "(top level)" stand for the file as a whole.
    if !key.starts_with('(') && toml::de::DeTable::parse(text).is_ok() {
        assert!(
            toml::from_str::<toml::Table>(&format!("{key} = 0")).is_ok(),
            "`{key}` is not a TOML key: {shown}"
        );
    }
    let prefix = format!("{}:{line}: {key}: ", path.display());
    assert!(shown.starts_with(&prefix), "not `{prefix}...`: {shown}");
}
