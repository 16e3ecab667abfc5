# benchmemory.mk — `make bench-memory` (issue 13; included by the Makefile).
#
#   make bench-memory   the bundle; on the GPU host
#                       `python3 bundle/bench_memory.py --bundle bundle --out DIR`
#                       uploads the generated set (spmv-gen: Poisson 4 M rows,
#                       power-law 2 M, uniform 3 M x 16, banded with a dense row)
#                       and every shared real matrix, and reports device bytes
#                       per matrix over its CSR bytes (default upload: CSR alone,
#                       and every format pinned), then for each padded kernel the
#                       first call (the build) and the second against an eager
#                       upload's median, writing memory.md and memory.json
#                       (reports, never asserts; docs/benchmarks/memory.md).

.PHONY: bench-memory

ifeq ($(HAVE_CUDA),1)
bench-memory: bundle
	@echo "bench-memory: on the GPU host run: python3 $(BUNDLE)/bench_memory.py --bundle $(BUNDLE) --out \$$OUT"
else
bench-memory:
	@echo "bench-memory: needs a CUDA build (nvcc) and a GPU host: device memory is what it measures"
endif

# `make bench-upload`: upload-to-resident of a .npz against reading its
# bytes (tools/bench-upload.sh; NNZ=... to size it, default 1e7 here).
.PHONY: bench-upload
NNZ ?= 10000000
bench-upload: $(SPMVD) $(BUILD)/spmv-gen
	bash tools/bench-upload.sh --nnz $(NNZ) --spmvd $(SPMVD) --gen $(BUILD)/spmv-gen
