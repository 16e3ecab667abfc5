#!/usr/bin/env bash
# batch.sh — dynamic batching: batch_window_us (daemon/batch.c). The key's
# bounds at start-up; batch_check.py on a daemon with a window; a daemon
# without one answers without `batched`.
. "$(dirname "$0")/lib.sh"

need_scipy
SEED=${SPMV_SEED:-$RANDOM}
diag "seed $SEED"
for bad in -1 1000001 2x; do
  out=$("$SPMVD" --check-config --batch-window-us "$bad" 2>&1); rc=$?
  that "--batch-window-us $bad is refused, naming the key" '[ $rc -ne 0 ] && grep -q batch_window_us <<<"$out"'
done
WINDOW=300000
start_spmvd --threads 8 --batch-window-us $WINDOW || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts with a window of $WINDOW us"
req GET /v1/info
that "GET /v1/info shows the window" '[ "$(jget "d[\"limits\"][\"batch_window_us\"]")" = $WINDOW ]'
SPMVD_URL=$SPMVD_URL "$PYTHON" "$SPMV_ROOT/tests/e2e/batch_check.py" "$SEED" $WINDOW >"$E2E_TMP/batch.tap" 2>&1
relay_tap "$E2E_TMP/batch.tap" $? "batch_check.py"
curl -s "$SPMVD_URL/metrics" >"$E2E_TMP/metrics"
b=$(awk '$1 == "spmvd_batches_total" {print $2}' "$E2E_TMP/metrics")
p=$(awk '$1 == "spmvd_batched_products_total" {print $2}' "$E2E_TMP/metrics")
that "/metrics counts the batches ($b) and their products ($p): at least 2 each" '[ "${b:-0}" -ge 1 ] && [ "${p:-0}" -ge $((2 * b)) ]'
part() { awk -v p="spmvd_batch_part_seconds_total{part=\"$1\"}" '$1 == p {print $2}' "$E2E_TMP/metrics"; }
that "/metrics has the batches' time by part, five parts, spmm and host timed on the CPU" \
  '[ "$(grep -c "^spmvd_batch_part_seconds_total{" "$E2E_TMP/metrics")" = 5 ] && awk "BEGIN {exit !($(part spmm) > 0 && $(part host) > 0)}"'
grep -q "spmv: batch of .*(h2d .*, layout .*, spmm .*, d2h .*, host .*)" "$SPMVD_LOG"; logged=$?
that "the log says each batch's parts" '[ $logged = 0 ]'
stop_spmvd

start_spmvd || { not_ok "spmvd starts without a window" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
req POST "/v1/matrices?generate=poisson2d&n=10"
id=$(jget 'd["id"]')
req POST "/v1/matrices/$id/spmv" -d "{\"x\": [$(seq -s, 1 100)], \"kernel\": \"cpu.csr.serial\"}"
that "without a window an answer says nothing of batching" '[ "$CODE" = 200 ] && ! grep -q batched "$BODY_FILE"'
that "and /metrics counts no batch" '[ "$(curl -s "$SPMVD_URL/metrics" | awk "\$1 == \"spmvd_batches_total\" {print \$2}")" = 0 ]'
stop_spmvd
done_testing
