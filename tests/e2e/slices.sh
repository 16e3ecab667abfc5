#!/usr/bin/env bash
# slices.sh — long tasks run in slices (issue 33, What to build 1).
#
# An ops batch of axpby steps on two resident 2^22-value vectors, sized to
# run about 4 s, is one task on the CPU worker; small products sent while
# it runs are answered between two of its steps (the worker runs the short
# tasks waiting at each slice boundary), not after the batch: the slowest
# must take under a quarter of the batch's time (generous: one step is a
# few ms). Then a SIGTERM during such a batch stops it between two steps
# (503 shutting_down) and the daemon exits well before the batch would
# have ended. The checks are in tests/e2e/slices_check.py.
. "$(dirname "$0")/lib.sh"

start_spmvd --log-level info || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts"
upload_raw "$MATRICES/real/karate.mtx" "device=cpu"
expect_code "karate uploads" 201
"$PYTHON" "$(dirname "$0")/slices_check.py" "$SPMVD_URL" "$MATRIX_ID" delay >"$E2E_TMP/delay.tap" 2>&1
relay_tap "$E2E_TMP/delay.tap" $? "slices_check.py delay"

"$PYTHON" "$(dirname "$0")/slices_check.py" "$SPMVD_URL" "$MATRIX_ID" sigterm >"$E2E_TMP/sigterm.tap" 2>&1 &
driver=$!
for _ in $(seq 600); do grep -qs batch-started "$E2E_TMP/sigterm.tap" && break; sleep 0.1; done
t0=$(date +%s.%N)
stop_spmvd; rc=$?
t1=$(date +%s.%N)
wait "$driver"; drc=$?
grep -v batch-started "$E2E_TMP/sigterm.tap" >"$E2E_TMP/sigterm2.tap"
relay_tap "$E2E_TMP/sigterm2.tap" $drc "slices_check.py sigterm"
secs=$("$PYTHON" -c "print('%.1f' % ($t1 - $t0))")
check "SIGTERM during a long batch: spmvd exits 0 in ${secs} s (the batch alone runs about 4 s)" \
  bash -c "[ $rc -eq 0 ] && $PYTHON -c 'import sys; sys.exit(0 if $secs < 2.5 else 1)'"
done_testing
