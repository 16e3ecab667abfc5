-- bench-api-spmv.lua — the wrk script of tools/bench-api.sh and
-- tools/bench-batch.sh (make bench-api).
--
-- Every request is the same product, POST to the URL wrk was given
-- (…/v1/matrices/{id}/spmv, options in its query for the binary form):
--  - with SPMV_X naming a file, binary: its raw values are x
--    (Content-Type application/octet-stream; bench-batch.sh);
--  - else a small JSON spmv with x = [1, 1, ..., 1] of SPMV_COLS values,
--    kernel $SPMV_KERNEL (default cpu.csr.serial), runs 1, warmup 0.
-- At the end one machine-readable line is printed for the driver:
--   BENCH-API requests=N duration_s=S rps=R p50_ms=A p99_ms=B errors=E non2xx=F
-- errors counts socket errors (connect, read, write, timeout) and answers
-- whose status is not 2xx/3xx (wrk counts those as "status" errors).
local path = os.getenv("SPMV_X")
wrk.method = "POST"
if path then
  local f = assert(io.open(path, "rb"))
  wrk.headers["Content-Type"] = "application/octet-stream"
  wrk.body = f:read("*a")
  f:close()
else
  local cols = tonumber(os.getenv("SPMV_COLS") or "0")
  local kernel = os.getenv("SPMV_KERNEL") or "cpu.csr.serial"
  assert(cols and cols > 0, "SPMV_COLS must be the matrix's column count (or SPMV_X a file of x's raw values)")
  local xs = {}
  for i = 1, cols do xs[i] = "1" end
  wrk.headers["Content-Type"] = "application/json"
  wrk.body = '{"kernel":"' .. kernel .. '","runs":1,"warmup":0,"x":[' .. table.concat(xs, ",") .. ']}'
end

function done(summary, latency, requests)
  local e = summary.errors
  local sock = e.connect + e.read + e.write + e.timeout
  local secs = summary.duration / 1e6
  io.write(string.format(
    "BENCH-API requests=%d duration_s=%.3f rps=%.1f p50_ms=%.3f p99_ms=%.3f errors=%d non2xx=%d\n",
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, sock + e.status, e.status))
end
