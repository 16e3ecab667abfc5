# benchgpu.mk — the GPU benchmark (issue 5; included by the Makefile).
#
#   make bench-gpu          runs $(BUILD)/bench-gpu here when this host has a
#                           GPU (markdown to the terminal and $(BUILD)/bench-gpu.md,
#                           CSV to $(BUILD)/bench-gpu.csv); without one it says
#                           so and stops: use the bundle
#   make bench-gpu-bundle   `make bundle` plus bench-gpu, tools/bundle/bench.sh and
#                           tools/plot-bench.py, and the realistic set's scripts
#                           and scikit-fem (`make bench-realistic`), so the GPU host
#                           runs `bash bundle/bench.sh`: the synthetic set, then the
#                           realistic one (results under $OUT or bundle/out;
#                           docs/benchmarks/gpu.md and realistic.md are made from them)
#
# BENCH_GPU_ARGS passes options (e.g. '--quick --scale 0.1' for a smoke run).
# bench-gpu.c includes cuda_runtime_api.h for the copy-bandwidth measurement.

BENCH_GPU_ARGS ?=

ifeq ($(HAVE_CUDA),1)
$(BUILD)/tools/bench-gpu.o: CFLAGS += -I$(CUDA_HOME)/include
endif

.PHONY: bench-gpu bench-gpu-bundle
bench: bench-gpu

bench-gpu: $(BUILD)/bench-gpu
	@if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then \
	  echo "bench-gpu: needs a GPU (none on this host): run 'make bench-gpu-bundle' and 'bash bundle/bench.sh' on the GPU host"; \
	  exit 0; fi; \
	{ SPMV_ROOT=$(CURDIR) $(BUILD)/bench-gpu --csv $(BUILD)/bench-gpu.csv $(BENCH_GPU_ARGS); echo $$? > $(BUILD)/bench-gpu.rc; } \
	  | tee $(BUILD)/bench-gpu.md; exit $$(cat $(BUILD)/bench-gpu.rc)

bench-gpu-bundle: bundle $(BUILD)/bench-gpu bench-realistic
	cp $(BUILD)/bench-gpu $(BUNDLE)/bin/real/
	printf '#!/bin/sh\n# Runs real/bench-gpu with the bundle'"'"'s libraries.\nd=$$(dirname "$$0")\nLD_LIBRARY_PATH="$$d/../lib$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}" exec "$$d/real/bench-gpu" "$$@"\n' \
	  > $(BUNDLE)/bin/bench-gpu
	chmod +x $(BUNDLE)/bin/bench-gpu
	cp tools/bundle/bench.sh tools/plot-bench.py $(BUNDLE)/
