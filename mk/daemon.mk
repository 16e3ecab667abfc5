# daemon.mk — targets of the daemon (spmvd) beyond the Makefile's own.
#
#   make daemon          the spmvd binary alone
#   make e2e             the end-to-end suites (tests/e2e/*.sh) against it
#   make check-config    validates config/spmvd.json with this spmvd

.PHONY: daemon e2e check-config

daemon: $(SPMVD)

e2e: bootstrap
	@$(MAKE) --no-print-directory all-for-test
	@BUILD=$(BUILD) HAVE_CUDA=$(HAVE_CUDA) ONLY=e2e_ bash tests/run.sh

check-config: $(SPMVD)
	$(SPMVD) --check-config --config config/spmvd.json >/dev/null
