#!/usr/bin/env bash
# upload_threads.sh — uploads are read and built off the HTTP threads
# (issue 33, What to build 3).
#
# The HTTP threads only spool an upload's bytes; the parse, the build and
# the store run on the upload workers. Eight uploads at once of gzip files
# that take seconds each to parse, on a daemon with 2 HTTP threads and 2
# upload workers: /v1/health must keep answering meanwhile (the checks,
# and the latencies, are in tests/e2e/upload_threads_check.py). Then the
# spool files are gone, and the log shows the uploads ran on upload0/1.
. "$(dirname "$0")/lib.sh"

start_spmvd --threads 2 --upload-workers 2 --log-level info ||
  { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts with 2 HTTP threads and 2 upload workers"
"$PYTHON" "$(dirname "$0")/upload_threads_check.py" "$SPMVD_URL" "${UPLOAD_LINES:-4000000}" >"$E2E_TMP/up.tap" 2>&1
relay_tap "$E2E_TMP/up.tap" $? upload_threads_check.py
check "no spool file is left in the state directory" bash -c "! ls -A '$SPMVD_STATE' | grep -q '^\.upload-'"
req GET /v1/matrices
check "the 8 matrices are listed" [ "$(jget 'd["count"]')" = 8 ]
stop_spmvd
check "spmvd stops cleanly" [ $? -eq 0 ]
done_testing
