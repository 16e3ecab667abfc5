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
# counted, not failed). The summary, RSS samples included, goes to
# $(BUILD)/soak.json.

SOAK_SECONDS ?= 30
SOAK_CLIENTS ?= 64

.PHONY: soak
soak: $(SPMVD)
	python3 tests/soak/soak.py --spmvd $(SPMVD) --seconds $(SOAK_SECONDS) --clients $(SOAK_CLIENTS) \
	  --json $(BUILD)/soak.json
