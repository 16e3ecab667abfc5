#!/usr/bin/env bash
# python.sh — the Python client's pytest suite (clients/python/tests) as TAP.
#
# pytest starts its own daemons on loopback (clients/python/tests/conftest.py)
# from $BUILD/spmvd, and its conftest writes one line per test to
# $SPMVD_TAP_FILE: PASS, FAIL or SKIP, the test id, the detail. Each becomes
# an ok / not ok / # SKIP line here, so pytest's counts are part of
# tests/run.sh's one summary line. pytest's exit status is checked too: 5
# (no tests collected) and any failure pytest reports without a test line
# (an internal error, a crash) are failures, never a silent pass. A host
# without the Python packages fails with the bootstrap line to run.
. "$(dirname "$0")/lib.sh"

# the interpreter with the Debian packages tools/bootstrap.sh installs
PY=${SPMVD_PYTHON:-$PYTHON}
if ! missing=$("$PY" - <<'PY' 2>&1
import importlib, sys
need = ["numpy", "pytest", "scipy", "matplotlib"]
gone = [m for m in need if importlib.util.find_spec(m) is None]
print(" ".join(gone)); sys.exit(1 if gone else 0)
PY
); then
  not_ok "Python modules for the client's tests: missing $missing" \
    "run tools/bootstrap.sh as root (python3-numpy python3-scipy python3-matplotlib python3-pytest)"
  done_testing; exit
fi

export SPMVD_TAP_FILE=$E2E_TMP/pytest.tap SPMVD="$SPMVD" MATRICES="$MATRICES"
: >"$SPMVD_TAP_FILE"
export PYTHONPATH="$SPMV_ROOT/clients/python${PYTHONPATH:+:$PYTHONPATH}"
export MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE=1
diag "pytest with $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
(cd "$SPMV_ROOT/clients/python" && timeout 900 "$PY" -m pytest -p no:cacheprovider -q -rfEs tests) \
  >"$E2E_TMP/pytest.out" 2>&1
rc=$?

fails=0
while IFS=$'\t' read -r kind id detail; do
  case $kind in
    PASS) ok "$id" ;;
    SKIP) skip "$id: $detail" ;;
    FAIL) not_ok "$id" "$detail"; fails=$((fails + 1)) ;;
  esac
done <"$SPMVD_TAP_FILE"

summary=$(grep -E '^=*.*[0-9]+ (passed|failed|error|skipped).* in [0-9.]+s' "$E2E_TMP/pytest.out" | tail -1)
diag "pytest: ${summary:-no summary line} (exit status $rc)"
if [ "$rc" -eq 5 ]; then
  not_ok "pytest collected no tests (exit status 5)" "$(tail -5 "$E2E_TMP/pytest.out")"
elif [ "$rc" -ne 0 ] && [ "$fails" -eq 0 ]; then
  not_ok "pytest exited with status $rc without a failing test line" "$(tail -15 "$E2E_TMP/pytest.out")"
elif [ "$rc" -eq 0 ] && [ "$T_COUNT" -eq 0 ]; then
  not_ok "pytest passed but reported no tests to TAP (conftest's reporter missing?)"
fi
if [ "$rc" -ne 0 ]; then
  sed 's/^/#   /' "$E2E_TMP/pytest.out" | tail -60
fi
done_testing
