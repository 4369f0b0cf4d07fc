"""Seed corpora for the config fuzz targets (fuzz/fuzz_targets/config_*_toml.rs).

Usage: python scripts/fuzz_config_seeds.py DEMO_DIR CORPUS_ROOT

Each target KIND (lethe, subjects, retention, metadata, holds, stores, policy) gets
CORPUS_ROOT/KIND_toml/ holding: the file a demo built by `lethe demo init` wrote
(DEMO_DIR/lethe.toml, DEMO_DIR/governance/KIND.toml; the demo writes no holds.toml), and
every TOML example in the docs (fenced blocks in README.md and docs/*.md, ```toml blocks in
the doc comments of crates/lethe/src) that parses as TOML — every example goes to every
target, since a file's keys are the mutations another file's parser needs least, and the
cost is a few dozen seeds. Seeds are named by their SHA-1, as libFuzzer names its corpus.
"""

import glob
import hashlib
import os
import re
import sys
import tomllib

KINDS = ["lethe", "subjects", "retention", "metadata", "holds", "stores", "policy"]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def put(corpus, text):
    data = text.encode()
    with open(os.path.join(corpus, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def doc_examples():
    """TOML examples in the docs: fenced blocks of the Markdown files, ```toml blocks of the
    Rust doc comments; only those that parse as TOML and set at least one key."""
    blocks = []
    for md in [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        text = open(md, encoding="utf-8").read()
        blocks += re.findall(r"^```(?:toml)?\n(.*?)^```", text, re.S | re.M)
    for rs in sorted(glob.glob(os.path.join(ROOT, "crates", "lethe", "src", "**", "*.rs"), recursive=True)):
        lines = []
        inside = False
        for line in open(rs, encoding="utf-8"):
            s = line.strip()
            doc = s.startswith("//!") or s.startswith("///")
            body = s[3:][1:] if len(s) > 3 and s[3] == " " else s[3:]
            if doc and body.strip() == "```toml":
                inside, lines = True, []
            elif inside and (not doc or body.strip() == "```"):
                blocks.append("".join(lines))
                inside = False
            elif inside:
                lines.append(body + "\n")
    out = []
    for b in blocks:
        try:
            if tomllib.loads(b):
                out.append(b)
        except tomllib.TOMLDecodeError:
            pass
    return out


def main():
    demo, corpus_root = sys.argv[1], sys.argv[2]
    examples = doc_examples()
    for kind in KINDS:
        corpus = os.path.join(corpus_root, f"{kind}_toml")
        os.makedirs(corpus, exist_ok=True)
        own = os.path.join(demo, "lethe.toml") if kind == "lethe" else os.path.join(demo, "governance", f"{kind}.toml")
        n = 0
        if os.path.exists(own):
            put(corpus, open(own, encoding="utf-8").read())
            n += 1
        for e in examples:
            put(corpus, e)
        print(f"{corpus}: {n} demo file(s), {len(examples)} doc examples", file=sys.stderr)


if __name__ == "__main__":
    main()
