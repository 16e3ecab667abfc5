# gpu.mk — the GPU backend's targets (included by the Makefile).
#
#   make gpu-test   builds and runs $(BUILD)/tests/test_gpu: every GPU kernel
#                   x dtype x parameter edge, the device conversions, memory
#                   accounting (every case is skipped, with the reason, on a
#                   host without a GPU)
#   make bundle     bundle/: what the GPU host needs to run the GPU tests and
#                   the end-to-end API test (tools/bundle/make-bundle.sh says
#                   what goes in); run there with `bash bundle/run.sh`
#
# Build the bundle from the default CUDA=auto build, e.g.
#   make BUILD=build-gpu bundle

.PHONY: gpu-test bundle

gpu-test: $(BUILD)/tests/test_gpu
	CMOCKA_MESSAGE_OUTPUT=TAP SPMV_ROOT=$(CURDIR) $(BUILD)/tests/test_gpu

BUNDLE ?= bundle

bundle: $(BUILD)/tests/test_gpu $(BUILD)/tests/test_gpu_spmspm $(BUILD)/tests/test_gpu_vectors $(BUILD)/tests/test_gpu_batch $(TOOL_BINS) $(if $(wildcard $(SPMVD_MAIN)),$(SPMVD))
	BUILD=$(BUILD) BUNDLE=$(BUNDLE) HAVE_CUDA=$(HAVE_CUDA) bash tools/bundle/make-bundle.sh
