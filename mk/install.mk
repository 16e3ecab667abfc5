# install.mk — `make install` / `make uninstall` for the daemon side of spmvd.
#
# Installs the daemon binary, its systemd units (the service generated from
# systemd/spmvd.service.in with the install paths substituted), the sysusers.d
# entry for its user, the example configuration and the man pages, under
# $(DESTDIR)$(PREFIX). The client side (spmvctl, libspmvclient, header, .pc)
# is installed by install-clients in mk/clients.mk; `install` and `uninstall`
# depend on both (make merges the prerequisites of a target named twice).
#
#   make install PREFIX=/usr/local DESTDIR=/tmp/stage
#   make uninstall PREFIX=/usr/local DESTDIR=/tmp/stage
#
# Units and sysusers.d go under $(PREFIX)/lib (systemd searches /usr/local/lib
# too); with PREFIX=/usr they go where systemd.pc says. The configuration
# lives in /etc/spmvd whatever the prefix, because the unit's
# ConfigurationDirectory= is always there. uninstall removes exactly the files
# install wrote, except an /etc/spmvd/spmvd.json the administrator changed.

SBINDIR        ?= $(PREFIX)/sbin
MANDIR         ?= $(PREFIX)/share/man
SYSCONFDIR     ?= /etc
ifeq ($(PREFIX),/usr)
SYSTEMDUNITDIR ?= $(or $(shell pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null),/usr/lib/systemd/system)
SYSUSERSDIR    ?= $(or $(shell pkg-config --variable=sysusersdir systemd 2>/dev/null),/usr/lib/sysusers.d)
else
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR    ?= $(PREFIX)/lib/sysusers.d
endif

SPMVD_CONFDIR     := $(SYSCONFDIR)/spmvd
SPMVD_EXAMPLE_CFG := $(wildcard config/spmvd.json)
SPMVD_UNIT_GEN    := $(BUILD)/systemd/spmvd.service

# Every file install-daemon writes (the live spmvd.json aside: it is written
# only when absent and removed only when unchanged).
SPMVD_INSTALLED := \
	$(SBINDIR)/spmvd \
	$(SYSTEMDUNITDIR)/spmvd.service \
	$(SYSTEMDUNITDIR)/spmvd.socket \
	$(SYSUSERSDIR)/spmvd.conf \
	$(MANDIR)/man8/spmvd.8 \
	$(MANDIR)/man1/spmvctl.1 \
	$(if $(SPMVD_EXAMPLE_CFG),$(SPMVD_CONFDIR)/spmvd.json.example)

.PHONY: install uninstall install-daemon uninstall-daemon systemd-units FORCE
install: install-daemon
uninstall: uninstall-daemon

# Regenerated on every call: PREFIX may differ from the last run.
systemd-units: $(SPMVD_UNIT_GEN)
$(SPMVD_UNIT_GEN): systemd/spmvd.service.in FORCE
	@mkdir -p $(dir $@)
	sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' $< >$@.tmp
	@if grep -n '@[A-Z]*@' $@.tmp; then echo "unsubstituted variable in $@" >&2; rm -f $@.tmp; exit 1; fi
	mv $@.tmp $@

install-daemon: $(SPMVD) $(SPMVD_UNIT_GEN)
	install -D -m 0755 $(SPMVD) $(DESTDIR)$(SBINDIR)/spmvd
	install -D -m 0644 $(SPMVD_UNIT_GEN) $(DESTDIR)$(SYSTEMDUNITDIR)/spmvd.service
	install -D -m 0644 systemd/spmvd.socket $(DESTDIR)$(SYSTEMDUNITDIR)/spmvd.socket
	install -D -m 0644 systemd/spmvd.sysusers $(DESTDIR)$(SYSUSERSDIR)/spmvd.conf
	install -D -m 0644 docs/man/spmvd.8 $(DESTDIR)$(MANDIR)/man8/spmvd.8
	install -D -m 0644 docs/man/spmvctl.1 $(DESTDIR)$(MANDIR)/man1/spmvctl.1
ifneq ($(SPMVD_EXAMPLE_CFG),)
	install -D -m 0644 $(SPMVD_EXAMPLE_CFG) $(DESTDIR)$(SPMVD_CONFDIR)/spmvd.json.example
	@# The live configuration is the administrator's: written once, never replaced.
	@if [ ! -e $(DESTDIR)$(SPMVD_CONFDIR)/spmvd.json ]; then \
		echo "install -m 0640 $(SPMVD_EXAMPLE_CFG) $(DESTDIR)$(SPMVD_CONFDIR)/spmvd.json"; \
		install -m 0640 $(SPMVD_EXAMPLE_CFG) $(DESTDIR)$(SPMVD_CONFDIR)/spmvd.json; \
	else \
		echo "keeping the existing $(DESTDIR)$(SPMVD_CONFDIR)/spmvd.json"; \
	fi
else
	@echo "warning: config/spmvd.json is missing; no example configuration installed" >&2
endif
	@# On the live system (no DESTDIR) make the user and tell systemd; a
	@# staged install leaves both to the package's scripts.
	@if [ -z "$(DESTDIR)" ] && command -v systemd-sysusers >/dev/null; then \
		echo "systemd-sysusers $(SYSUSERSDIR)/spmvd.conf"; \
		systemd-sysusers $(SYSUSERSDIR)/spmvd.conf; \
		if [ -e $(SPMVD_CONFDIR)/spmvd.json ] && getent group spmvd >/dev/null; then \
			chgrp spmvd $(SPMVD_CONFDIR)/spmvd.json; fi; \
	fi
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		echo "systemctl daemon-reload"; systemctl daemon-reload; \
		echo "next: systemctl enable --now spmvd.socket spmvd.service"; \
	fi

uninstall-daemon:
	rm -f $(addprefix $(DESTDIR),$(SPMVD_INSTALLED))
	@# The live configuration goes only if it is still the shipped example.
	@cfg=$(DESTDIR)$(SPMVD_CONFDIR)/spmvd.json; \
	if [ -e "$$cfg" ]; then \
		if [ -n "$(SPMVD_EXAMPLE_CFG)" ] && cmp -s "$$cfg" $(SPMVD_EXAMPLE_CFG); then \
			echo "rm -f $$cfg"; rm -f "$$cfg"; \
		else \
			echo "keeping $$cfg: it differs from the shipped example"; \
		fi; \
	fi
	@rmdir $(DESTDIR)$(SPMVD_CONFDIR) 2>/dev/null || true
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi

FORCE:

# ------------------------------------------------------ test support
# tests/e2e/systemd.sh runs spmvd under the unit's system call filter with
# this LD_PRELOAD library (see tests/e2e/sandbox.c); the list of allowed
# calls is systemd's own, so it is built only where systemd-analyze is.
SANDBOX_SO  := $(BUILD)/tests/e2e/libspmvd_sandbox.so
SANDBOX_HDR := $(BUILD)/tests/e2e/sandbox_syscalls.h
ifneq ($(shell command -v systemd-analyze 2>/dev/null),)
all-for-test: $(SANDBOX_SO)
endif

# The PTX JIT probe of tests/e2e/systemd_gpu.sh, linked against the driver
# API's stub (the real libcuda.so.1 comes with the driver).
JITPROBE := $(BUILD)/tests/e2e/jitprobe
ifeq ($(HAVE_CUDA),1)
all-for-test: $(JITPROBE)
endif
$(JITPROBE): tests/e2e/jitprobe.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -g $(WARN) -I$(CUDA_HOME)/include -o $@ $< -L$(CUDA_HOME)/lib64/stubs -lcuda

$(SANDBOX_HDR): tests/e2e/sandbox-syscalls.sh
	@mkdir -p $(dir $@)
	sh $< >$@.tmp && mv $@.tmp $@

$(SANDBOX_SO): tests/e2e/sandbox.c $(SANDBOX_HDR)
	$(CC) -std=c11 -O2 -g $(WARN) -fPIC -shared -I$(dir $(SANDBOX_HDR)) -o $@ $<
