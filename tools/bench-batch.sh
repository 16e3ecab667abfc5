#!/usr/bin/env bash
# bench-batch.sh — dynamic batching (batch_window_us, issue 29) under many
# concurrent clients: the last section of make bench-api, or alone with
# make bench-api-batch. Reports, never asserts.
#
# A gather-bound matrix (spmv-gen --kind uniform: random columns,
# BATCH_ROWS rows x BATCH_PER_ROW entries, uploaded as .npz), then for
# each window of BATCH_WINDOWS (microseconds; 0 = off) a fresh daemon
# with it, and wrk with BATCH_CONNS connections sending binary products
# (tools/bench-api-spmv.lua) on BATCH_KERNEL for DURATION seconds:
# requests/s, p50 and p99 latency, errors, the mean batch from
# /metrics (spmvd_batched_products_total / spmvd_batches_total) and where
# a batch's time went, in ms a batch (spmvd_batch_part_seconds_total /
# spmvd_batches_total): h2d (the x to the device), layout (X to rows and
# Y to columns there), spmm, d2h (the y into the answers), host (the
# rest of the batch on the worker; for a CPU kernel the packing). The
# kernel defaults to cusparse.csr where the daemon has a GPU, else
# cpu.csr.omp. Markdown to stdout.
#
# Environment: BUILD, DURATION (10), BATCH_ROWS (200000; 1000000 on a GPU
# host gives 16 M entries), BATCH_PER_ROW (16), BATCH_WINDOWS ("0 100 500
# 2000"), BATCH_CONNS (32), BATCH_KERNEL, BATCH_THREADS (HTTP threads, 4),
# BATCH_WRK_THREADS (the client's threads, 2), BATCH_WARMUP (seconds of
# the same load before each measured run, not measured: 1; 0 none);
# in the GPU bundle (tools/bundle/batch-gpu.sh) also SPMV_E2E_LIB, WRK and
# BATCH_LUA, where its copies of lib.sh, wrk and the Lua script lie.
. "${SPMV_E2E_LIB:-$(dirname "$0")/../tests/e2e/lib.sh}"

DURATION=${DURATION:-10}
BATCH_ROWS=${BATCH_ROWS:-200000}
BATCH_PER_ROW=${BATCH_PER_ROW:-16}
BATCH_WINDOWS=${BATCH_WINDOWS:-0 100 500 2000}
BATCH_CONNS=${BATCH_CONNS:-32}
BATCH_THREADS=${BATCH_THREADS:-4}
BATCH_WRK_THREADS=${BATCH_WRK_THREADS:-2}
BATCH_WARMUP=${BATCH_WARMUP:-1}
LUA=${BATCH_LUA:-$SPMV_ROOT/tools/bench-api-spmv.lua}
WRK=${WRK:-wrk}
command -v "$WRK" >/dev/null || { echo "bench-batch: wrk is not installed (tools/bootstrap.sh)" >&2; exit 1; }
load() { uptime | sed 's/.*load average: //; s/,//g'; }
kv() { sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p"; }
metric() { curl -s "$SPMVD_URL/metrics" | awk -v n="$1" '$1 == n {print $2}'; }

M=$E2E_TMP/batch.npz
"$BUILD_DIR/spmv-gen" --kind uniform --n "$BATCH_ROWS" --per-row "$BATCH_PER_ROW" --seed 29 --npz --out "$M" >/dev/null ||
  { echo "bench-batch: spmv-gen failed" >&2; exit 1; }
X=$E2E_TMP/batch.x
"$PYTHON" -c 'import sys, numpy as np; np.random.default_rng(29).uniform(-1, 1, int(sys.argv[1])).astype("<f8").tofile(sys.argv[2])' \
  "$BATCH_ROWS" "$X"

echo
# The batches' time so far by part, in seconds: h2d layout spmm d2h host.
batch_parts() {
  curl -s "$SPMVD_URL/metrics" | awk -F'[{}" ]+' '$1 == "spmvd_batch_part_seconds_total" { v[$3] = $4 }
    END { printf "%s %s %s %s %s", v["h2d"] + 0, v["layout"] + 0, v["spmm"] + 0, v["d2h"] + 0, v["host"] + 0 }'
}

echo "## Dynamic batching: $BATCH_CONNS clients, binary products"
echo
first=1
for w in $BATCH_WINDOWS; do
  SPMVD_STATE=""
  start_spmvd --log-level warn --threads "$BATCH_THREADS" --batch-window-us "$w" ||
    { echo "bench-batch: spmvd did not start: $(tail -n 3 "$SPMVD_LOG")" >&2; exit 1; }
  upload_raw "$M" "name=batch"
  [ "$CODE" = 201 ] || { echo "bench-batch: upload failed: HTTP $CODE $(head -c 300 "$BODY_FILE")" >&2; exit 1; }
  nnz=$(jget 'd["nnz"]')
  if [ -z "${BATCH_KERNEL:-}" ]; then
    req GET /v1/info
    BATCH_KERNEL=$(jget '"cusparse.csr" if any(x.get("kind") == "gpu" for x in d["devices"]) else "cpu.csr.omp"')
  fi
  url="$SPMVD_URL/v1/matrices/$MATRIX_ID/spmv?kernel=$BATCH_KERNEL"
  curl -s -o /dev/null -H 'Content-Type: application/octet-stream' --data-binary "@$X" "$url" # formats built, warm
  if [ "$first" = 1 ]; then
    echo "Matrix: spmv-gen uniform (random columns), $BATCH_ROWS rows, $nnz entries, float64; kernel $BATCH_KERNEL;"
    echo "\`wrk -t $BATCH_WRK_THREADS -c $BATCH_CONNS -d ${DURATION}s --latency -s tools/bench-api-spmv.lua\`, a fresh daemon"
    echo "(\`--threads $BATCH_THREADS --batch-window-us W\`) for each window, after ${BATCH_WARMUP} s of the same load"
    echo "(not measured); mean batch = products answered from"
    echo "SpMMs / SpMMs run (/metrics); products that ran alone are not in it. A batch's parts, in ms a"
    echo "batch: h2d / layout / spmm / d2h / host (spmvd_batch_part_seconds_total, docs/api.md)."
    echo
    echo "| batch_window_us | requests/s | p50 ms | p99 ms | errors (non-2xx) | SpMMs | mean batch | ms a batch: h2d / layout / spmm / d2h / host | load before | load after |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"
    first=0
  fi
  if [ "$BATCH_WARMUP" != 0 ]; then # steady state: the batches' device blocks grown, cuSPARSE's SpMM prepared
    SPMV_X=$X "$WRK" -t "$BATCH_WRK_THREADS" -c "$BATCH_CONNS" -d "${BATCH_WARMUP}s" -s "$LUA" "$url" >/dev/null 2>&1
  fi
  b0=$(metric spmvd_batches_total); p0=$(metric spmvd_batched_products_total); parts0=$(batch_parts)
  l0=$(load)
  line=$(SPMV_X=$X "$WRK" -t "$BATCH_WRK_THREADS" -c "$BATCH_CONNS" -d "${DURATION}s" --latency -s "$LUA" "$url" 2>&1 | grep '^BENCH-API')
  l1=$(load)
  b=$(( $(metric spmvd_batches_total) - ${b0:-0} )); p=$(( $(metric spmvd_batched_products_total) - ${p0:-0} ))
  mean=$(awk -v b="${b:-0}" -v p="${p:-0}" 'BEGIN {if (b > 0) printf "%.1f", p / b; else print "-"}')
  parts=-
  if [ "${b:-0}" -gt 0 ]; then
    parts=$(echo "$parts0 $(batch_parts)" | awk -v b="$b" '{ printf "%.3f / %.3f / %.3f / %.3f / %.3f",
      1e3 * ($6 - $1) / b, 1e3 * ($7 - $2) / b, 1e3 * ($8 - $3) / b, 1e3 * ($9 - $4) / b, 1e3 * ($10 - $5) / b }')
  fi
  echo "| $w | $(kv rps <<<"$line") | $(kv p50_ms <<<"$line") | $(kv p99_ms <<<"$line") | $(kv errors <<<"$line") ($(kv non2xx <<<"$line")) | ${b:-0} | $mean | $parts | $l0 | $l1 |"
  stop_spmvd >/dev/null
done
