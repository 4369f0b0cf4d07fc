//! Fuzz `Policy::parse` on `governance/policy.toml`: any UTF-8 text; no panic, and every error
//! names the file, a line of the text and a key (`lethe_fuzz::check`).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(text) = lethe_fuzz::text(data) else {
        return;
    };
    let path = Path::new("governance/policy.toml");
    lethe_fuzz::check(path, text, lethe::access::policy::Policy::parse(path, text));
});
