#!/usr/bin/env bash
# shm.sh — shared-memory regions (/v1/shm, operands in regions) end to end:
# three CPU daemons (allow_shm on; off; on with max_shm_regions 2 and
# max_body_bytes 8192) driven by
# shm_check.py, which makes POSIX objects, compares every y with SciPy and
# checks every refusal (its docstring lists them). The seed is printed.
. "$(dirname "$0")/lib.sh"

if ! "$PYTHON" -c 'import numpy, scipy' 2>/dev/null; then
  skip "SciPy is not installed (tools/bootstrap.sh installs python3-scipy)"; done_testing; exit
fi
if [ ! -d /dev/shm ]; then
  skip "no /dev/shm on this host"; done_testing; exit
fi
SEED=${SPMV_SEED:-$RANDOM}
start_spmvd --allow-shm true || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ON_URL=$SPMVD_URL ON_PID=$SPMVD_PID
SPMVD_STATE= start_spmvd || { not_ok "spmvd starts (allow_shm off)"; done_testing; exit; }
OFF_URL=$SPMVD_URL
SPMVD_STATE= start_spmvd --allow-shm true --max-shm-regions 2 --max-body-bytes 8192 || { not_ok "spmvd starts (2 regions)"; done_testing; exit; }
SMALL_URL=$SPMVD_URL
ok "three daemons start"
SPMV_SEED=$SEED "$PYTHON" "$(dirname "$0")/shm_check.py" "$ON_URL" "$OFF_URL" "$SMALL_URL" "$MATRICES" \
  >"$E2E_TMP/shm.tap" 2>&1
relay_tap "$E2E_TMP/shm.tap" $? shm_check.py
check "the daemon is still up" alive "$ON_PID"

# SIGHUP: allow_shm off in the file unregisters every region; on again, none come back
CONF=$E2E_TMP/shm.json
echo '{"allow_shm": true}' >"$CONF"
SPMVD_STATE= start_spmvd --config "$CONF" || { not_ok "spmvd starts (--config)"; done_testing; exit; }
"$PYTHON" - "$SPMVD_URL" "$CONF" "$SPMVD_PID" >"$E2E_TMP/hup.tap" 2>&1 <<'PY'
import json, os, signal, sys, time, urllib.request, urllib.error
from multiprocessing import shared_memory
url, conf, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
def call(m, p, body=None):
    r = urllib.request.Request(url + p, method=m, data=json.dumps(body).encode() if body else None,
                               headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r) as a:
            return a.status, json.loads(a.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
m = shared_memory.SharedMemory(create=True, size=4096)
try:
    st, _ = call("POST", "/v1/shm", {"name": m.name, "size": 4096})
    print("ok 1 - region registered" if st == 201 else "not ok 1 - region registered (%d)" % st)
    open(conf, "w").write('{"allow_shm": false}')
    os.kill(pid, signal.SIGHUP)
    for _ in range(100):
        st, b = call("GET", "/v1/shm")
        if st == 403:
            break
        time.sleep(0.05)
    print("ok 2 - after SIGHUP with allow_shm false: 403 shm_disabled" if st == 403 and b["error"]["code"] == "shm_disabled"
          else "not ok 2 - after SIGHUP with allow_shm false: %d %s" % (st, b))
    open(conf, "w").write('{"allow_shm": true}')
    os.kill(pid, signal.SIGHUP)
    for _ in range(100):
        st, b = call("GET", "/v1/shm")
        if st == 200:
            break
        time.sleep(0.05)
    print("ok 3 - on again: the region was unregistered, not kept" if st == 200 and b["regions"] == []
          else "not ok 3 - on again: %d %s" % (st, b))
finally:
    m.close()
    m.unlink()
PY
relay_tap "$E2E_TMP/hup.tap" $? "the SIGHUP check"
done_testing
