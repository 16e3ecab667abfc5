# bench.mk — benchmark targets (issue 2). Benchmarks report, never assert.
#
#   make bench-cpu                 triad bandwidth, every CPU kernel on the generated
#                                  set, reader MB/s; markdown to the terminal and to
#                                  $(BUILD)/bench-cpu.md (docs/benchmarks/cpu.md is made
#                                  from it)
#   make bench-cpu BENCH_ARGS='--scale 0.05 --reader-mb 20'   a quick smoke run
#   make bench-cpu BENCH_ARGS='--stat mean --threads 1,2,4'    the studies' measures: means, a
#                                  thread sweep (default 1..the OpenMP threads) crossed with
#                                  --hack-sizes for cpu.hll.omp, efficiency vs cpu.csr.serial
#   make bench                     every benchmark this build can run (bench-gpu adds
#                                  itself to it from its own mk file)
#
# The tool exits non-zero only if something could not run or a kernel's y
# disagrees with cpu.csr.serial; the status is kept through the tee.

BENCH_ARGS ?=

.PHONY: bench bench-cpu
bench: bench-cpu

bench-cpu: $(BUILD)/bench-cpu
	@{ $(BUILD)/bench-cpu $(BENCH_ARGS); echo $$? > $(BUILD)/bench-cpu.rc; } | tee $(BUILD)/bench-cpu.md
	@echo "report: $(BUILD)/bench-cpu.md"
	@exit $$(cat $(BUILD)/bench-cpu.rc)
