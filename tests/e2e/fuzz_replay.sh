#!/usr/bin/env bash
# fuzz_replay.sh — every fuzz finding stays fixed: replays the inputs of
# tests/fuzz/regressions/<target>/ and the seed corpus tests/fuzz/corpus/<target>/
# through the daemon's fuzz targets (fuzz_multipart, fuzz_json, fuzz_vector,
# fuzz_store, fuzz_npz, fuzz_shard), built without libFuzzer by mk/fuzz.mk as
# $BUILD/fuzz-replay/<target> (with sanitizers under `make SAN=1`). A
# target aborts on a finding (a crash, a sanitizer report, a 500 or no
# answer from the daemon), so a clean exit is the test.
. "$(dirname "$0")/lib.sh"

for t in fuzz_multipart fuzz_json fuzz_vector fuzz_store fuzz_npz fuzz_shard; do
  bin=$BUILD_DIR/fuzz-replay/$t
  if [ ! -x "$bin" ]; then skip "$t: $bin not built"; continue; fi
  dirs=()
  for d in "$SPMV_ROOT/tests/fuzz/regressions/$t" "$SPMV_ROOT/tests/fuzz/corpus/$t"; do [ -d "$d" ] && dirs+=("$d"); done
  out=$("$bin" "${dirs[@]}" 2>&1); rc=$?
  n=$(printf '%s\n' "$out" | sed -n 's/^\([0-9]*\) inputs replayed$/\1/p')
  if [ "$rc" -eq 0 ] && [ "${n:-0}" -gt 0 ]; then ok "$t: $n regression and seed inputs replayed cleanly"
  else not_ok "$t: replaying its regressions and seeds (exit $rc)" "$(printf '%s\n' "$out" | tail -8)"; fi
done
done_testing
