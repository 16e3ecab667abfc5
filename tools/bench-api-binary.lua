-- bench-api-binary.lua — wrk script of tools/bench-batch.sh (make bench-api):
-- every request is one binary product, POST to the URL wrk was given
-- (…/v1/matrices/{id}/spmv?kernel=…) with the raw float64 x read from the
-- file $SPMV_X. At the end one machine-readable line, as
-- bench-api-spmv.lua prints it:
--   BENCH-API requests=N duration_s=S rps=R p50_ms=A p99_ms=B errors=E non2xx=F
local path = os.getenv("SPMV_X")
assert(path, "SPMV_X must name the file of x's raw values")
local f = assert(io.open(path, "rb"))
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.body = f:read("*a")
f:close()

function done(summary, latency, requests)
  local e = summary.errors
  local sock = e.connect + e.read + e.write + e.timeout
  local secs = summary.duration / 1e6
  io.write(string.format(
    "BENCH-API requests=%d duration_s=%.3f rps=%.1f p50_ms=%.3f p99_ms=%.3f errors=%d non2xx=%d\n",
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, sock + e.status, e.status))
end
