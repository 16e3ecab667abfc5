# formats.mk — targets of the formats/kernel-registry area.
#
#   make kernels-doc    rewrite the generated catalogue block of docs/kernels.md
#                       from the kernel table (engine/registry.c); test_registry
#                       fails until the doc and the table agree

.PHONY: kernels-doc
kernels-doc: $(BUILD)/spmv-kernels
	$(BUILD)/spmv-kernels --update docs/kernels.md
