# benchapi.mk — make bench-api (issue 3): the HTTP API benchmark. Reports, never asserts.
#
#   make bench-api                          small JSON spmv requests/s at 1, 8, 64
#                                           connections (wrk), 1 M-row spmv round
#                                           trips in JSON and binary vs the kernel;
#                                           markdown to the terminal and to
#                                           $(BUILD)/bench-api.md (docs/benchmarks/api.md
#                                           is made from it)
#   make bench-api BENCH_API_ENV='DURATION=2 REPS=3 BIG_N=300'   a quick smoke run
#   make bench-api-batch                    only its last section: dynamic batching
#                                           (batch_window_us 0 and on, 32 clients;
#                                           tools/bench-batch.sh) to $(BUILD)/bench-batch.md
#
# Needs wrk (tools/bootstrap.sh installs it). The status of the script is
# kept through the tee.

BENCH_API_ENV ?=

.PHONY: bench-api bench-api-batch
bench-api: $(SPMVD) $(BUILD)/spmv-gen
	@{ env BUILD=$(BUILD) $(BENCH_API_ENV) bash tools/bench-api.sh; echo $$? > $(BUILD)/bench-api.rc; } | tee $(BUILD)/bench-api.md
	@echo "report: $(BUILD)/bench-api.md"
	@exit $$(cat $(BUILD)/bench-api.rc)

bench-api-batch: $(SPMVD) $(BUILD)/spmv-gen
	@{ env BUILD=$(BUILD) $(BENCH_API_ENV) bash tools/bench-batch.sh; echo $$? > $(BUILD)/bench-api.rc; } | tee $(BUILD)/bench-batch.md
	@echo "report: $(BUILD)/bench-batch.md"
	@exit $$(cat $(BUILD)/bench-api.rc)
