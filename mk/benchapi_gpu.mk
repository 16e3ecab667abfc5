# benchapi_gpu.mk — spmv-copyrate (tools/copyrate.cu), the pinned copy rate
# beside the large round trips of tools/bench_roundtrip.py (issue 17). Built
# with the CUDA build and carried by the bundle; without nvcc it is absent
# and the benchmark compares with host memory copies instead.
ifeq ($(HAVE_CUDA),1)
$(BUILD)/spmv-copyrate: tools/copyrate.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -o $@ $<

bundle: $(BUILD)/spmv-copyrate
endif
