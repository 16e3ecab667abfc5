# benchapi_gpu.mk — spmv-copyrate (tools/copyrate.cu), the pinned copy rate
# beside the large round trips of tools/bench_roundtrip.py (issue 17), and
# spmv-gatherrate (tools/gatherrate.cu), the random-gather floor beside
# bench-gpu's pattern-only graphs (issue 14, tools/bundle/packed-gpu.sh), and
# spmv-cgbench (tools/cgbench.cu), CG's fused path against the host-scalar
# one on the engine's own solver (issue 29: `bin/spmv-cgbench --n 1000`).
# Built by every CUDA build (all-for-test: they keep compiling where no GPU
# runs them) and carried by the bundle; without nvcc they are absent and the benchmark compares with host memory copies instead.
ifeq ($(HAVE_CUDA),1)
$(BUILD)/spmv-copyrate: tools/copyrate.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -o $@ $<

$(BUILD)/spmv-gatherrate: tools/gatherrate.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -o $@ $<

$(BUILD)/spmv-cgbench: tools/cgbench.cu $(LIBSPMV)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -o $@ $< $(LIBSPMV) -Xcompiler -fopenmp -lcusparse -lcublas -lzip -lcrypto -lz -lm

bundle: $(BUILD)/spmv-copyrate $(BUILD)/spmv-gatherrate $(BUILD)/spmv-cgbench
all-for-test: $(BUILD)/spmv-copyrate $(BUILD)/spmv-gatherrate $(BUILD)/spmv-cgbench
endif
