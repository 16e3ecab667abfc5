#!/usr/bin/env bash
# crash.sh — kill -9 spmvd at random moments (100 rounds), restart it each
# time, and check that the store holds exactly what was answered.
#
# The work is done by crash.py (same directory): several concurrent clients
# upload, delete, multiply and start bench jobs while the daemon is killed;
# after every restart each matrix answered 201 (and not deleted with 204)
# is there and multiplies correctly, no deleted one came back, nothing
# half-written was loaded or moved aside, and no temp file is left in the
# state directory. CRASH_ROUNDS and CRASH_CLIENTS change the size; the
# seed is printed (SPMV_SEED repeats a run).
. "$(dirname "$0")/lib.sh"

"$PYTHON" "$(dirname "$0")/crash.py" "$SPMVD"
