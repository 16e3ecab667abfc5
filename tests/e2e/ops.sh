#!/usr/bin/env bash
# ops.sh — POST /v1/ops on a CPU daemon: every step type against values
# computed in Python, steps in order, a CG solve done with two ops requests
# per iteration (docs/krylov.md) matching the same recurrence run locally,
# and every refused request (ids, lengths, dtypes, k, limits, names,
# scalars) answered with its 4xx while no vector changes. The checks live
# in tests/e2e/ops_check.py (plain Python, no NumPy); the daemon runs with
# small max_ops_steps and max_request_work so both limits are reached.
# The GPU side (409 wrong_device between two devices, a step failing on the
# device) needs a GPU host: tools/bundle/api_test_vectors.py.
. "$(dirname "$0")/lib.sh"

SEED=${SPMV_SEED:-$RANDOM}
diag "seed $SEED"
MAX_STEPS=16 MAX_WORK=1500
start_spmvd --max-ops-steps $MAX_STEPS --max-request-work $MAX_WORK \
  || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts (max_ops_steps $MAX_STEPS, max_request_work $MAX_WORK)"
SPMV_SEED=$SEED "$PYTHON" "$(dirname "$0")/ops_check.py" "$SPMVD_URL" $MAX_STEPS $MAX_WORK >"$E2E_TMP/ops.tap" 2>&1
relay_tap "$E2E_TMP/ops.tap" $? ops_check.py
check "the daemon is still up" alive "$SPMVD_PID"
done_testing
