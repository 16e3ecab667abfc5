#!/usr/bin/env bash
# solve.sh — the daemon's CG, BiCGSTAB and GMRES against SciPy's on the
# shared real matrices (tests/e2e/solve_scipy.py says how they are compared).
# Needs NumPy and SciPy (tools/bootstrap.sh installs python3-scipy); without
# them the suite says so and skips.
. "$(dirname "$0")/lib.sh"

if ! "$PYTHON" -c 'import numpy, scipy' 2>/dev/null; then
  skip "NumPy/SciPy are not installed (tools/bootstrap.sh installs python3-scipy)"
  done_testing
  exit
fi
start_spmvd || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts"
"$PYTHON" "$(dirname "$0")/solve_scipy.py" "$SPMVD_URL" "$MATRICES/real" >"$E2E_TMP/scipy.tap" 2>&1
rc=$?
while IFS= read -r line; do
  case "$line" in
    "ok "*) ok "${line#ok [0-9]* - }" ;;
    "not ok "*) not_ok "${line#not ok [0-9]* - }" ;;
    "#"*) echo "$line" ;;
  esac
done <"$E2E_TMP/scipy.tap"
check "solve_scipy.py exited 0 (rc $rc)" [ "$rc" -eq 0 ]
[ "$rc" -eq 0 ] || tail -5 "$E2E_TMP/scipy.tap" | sed 's/^/# /'
done_testing
