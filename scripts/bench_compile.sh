#!/bin/bash
# Compile time before and after the crate split (issue 13), BENCHMARKS.md section 12.
# Expects two detached worktrees: /tmp/cbench/before (a4b69ba, before the split) and
# /tmp/cbench/after (b8e16de, the split), e.g.
#   git worktree add --detach /tmp/cbench/before a4b69ba
#   git worktree add --detach /tmp/cbench/after b8e16de
# Results are appended to /tmp/cbench/results.txt.
# Clean build (cargo test --no-run, as .ci/run builds) of the commit before and after the crate
# split, each from an empty target dir, CARGO_INCREMENTAL=0 as CI; then an incremental rebuild
# after an edit in the erasure crate (dev profile defaults).
for v in before after; do
  cd /tmp/cbench/$v
  export CARGO_TARGET_DIR=/tmp/cbench/target-$v
  rm -rf $CARGO_TARGET_DIR
  CARGO_INCREMENTAL=0 /usr/bin/time -f "$v clean: %e s wall, %U s user, %S s sys, %M kB" nice -n 19 cargo test --workspace --features lethe-cli/failpoints --no-run > /tmp/cbench/$v-clean.log 2>&1
  tail -1 /tmp/cbench/$v-clean.log >> /tmp/cbench/results.txt
  # incremental: dev defaults (incremental on); first a warm incremental build, then an edit
  nice -n 19 cargo test --workspace --features lethe-cli/failpoints --no-run > /dev/null 2>&1
  if [ $v = before ]; then f=crates/lethe/src/plan.rs; else f=crates/lethe/src/erasure/plan/mod.rs; fi
  cp $f /tmp/cbench/orig.rs
  printf '\n/// bench touch\npub fn bench_touch() -> usize { 1 }\n' >> $f
  /usr/bin/time -f "$v incremental after an edit in the erasure crate: %e s wall, %U s user, %S s sys" nice -n 19 cargo test --workspace --features lethe-cli/failpoints --no-run > /tmp/cbench/$v-incr.log 2>&1
  tail -1 /tmp/cbench/$v-incr.log >> /tmp/cbench/results.txt
  cp /tmp/cbench/orig.rs $f
  rm -rf $CARGO_TARGET_DIR
done
echo done >> /tmp/cbench/results.txt
