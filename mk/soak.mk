# mk/soak.mk — `make soak`: the load test (tests/soak/soak.py).
#
#   make soak                      64 clients for SOAK_SECONDS (30) against a fresh spmvd
#   make soak SOAK_SECONDS=600     the ten-minute run of docs/benchmarks/soak.md
#   make soak SOAK_CLIENTS=16      fewer clients
#
# The driver starts $(BUILD)/spmvd on a free loopback port with a temporary
# state directory, mixes uploads, JSON and binary multiplies, lists, reads
# and deletes from SOAK_CLIENTS threads, verifies every answer, samples the
# daemon's RSS, and fails on any unexpected answer (deliberate 503s are
# counted, not failed). Beside them run the attacks of issue 33 (slow
# clients from 127.0.0.2 and 127.0.0.3, uploads declaring big matrices) and
# a /v1/health prober whose p99 must stay under SOAK_HEALTH_P99_MS, with
# the RSS under SOAK_RSS_LIMIT_MIB; SOAK_ATTACKS=0 leaves the attacks out.
# The summary, RSS samples and health latencies included, goes to
# $(BUILD)/soak.json.

SOAK_SECONDS ?= 30
SOAK_CLIENTS ?= 64
SOAK_ATTACKS ?= 1
SOAK_HEALTH_P99_MS ?= 50
SOAK_RSS_LIMIT_MIB ?= 1024

.PHONY: soak
soak: $(SPMVD)
	python3 tests/soak/soak.py --spmvd $(SPMVD) --seconds $(SOAK_SECONDS) --clients $(SOAK_CLIENTS) \
	  --attacks $(SOAK_ATTACKS) --health-p99-ms $(SOAK_HEALTH_P99_MS) --rss-limit-mib $(SOAK_RSS_LIMIT_MIB) \
	  --json $(BUILD)/soak.json
