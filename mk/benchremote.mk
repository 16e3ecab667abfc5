# benchremote.mk — `make bench-remote` (issue 12; included by the Makefile).
#
#   make bench-remote   the bundle plus tools/cg-ref (CG written directly on
#                       cuSPARSE + cuBLAS: the floor) and cg_solve; on the GPU
#                       host `python3 bundle/bench_remote.py` runs remote CG four
#                       ways (vectors local, resident vectors with /v1/ops,
#                       server-side solve, the floor) on 2-D Poisson matrices
#                       of 1 M and 9 M rows, 500 iterations, and the SpMM sweep,
#                       writing bench-remote.md and .json under $OUT (reports,
#                       never asserts; docs/benchmarks/remote.md is made from it)
#
# cg-ref needs nvcc; without it the target says so.

.PHONY: bench-remote

ifeq ($(HAVE_CUDA),1)
$(BUILD)/cg-ref: tools/cg-ref.cu $(LIBSPMV)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -o $@ $< $(LIBSPMV) -Xcompiler -fopenmp -lcusparse -lcublas -lzip -lz -lm

bench-remote: bundle $(BUILD)/cg-ref $(BUILD)/cg_solve
	BUILD=$(BUILD) BUNDLE=$(BUNDLE) HAVE_CUDA=1 bash tools/bundle/make-bundle.sh
	@echo "bench-remote: on the GPU host run: python3 $(BUNDLE)/bench_remote.py (results under \$$OUT or $(BUNDLE)/out)"
else
bench-remote:
	@echo "bench-remote: needs a CUDA build (nvcc): the floor, tools/cg-ref.cu, is CUDA; run it on the GPU host"
endif
