# clients.mk — libspmvclient, spmvctl and the example programs.
#
#   make                      also builds $(BUILD)/libspmvclient.{so,a}, spmvctl, cg_solve, and
#                             spmvclient-uninstalled.pc (PKG_CONFIG_PATH=$(BUILD): no install needed)
#   make install PREFIX=DIR   header, libraries, spmvclient.pc and spmvctl into $(DESTDIR)DIR
#   make uninstall PREFIX=DIR removes them again
#
# The library is every clients/*.c but spmvctl*.c (the transport, one file
# per resource), each compiled once, position-independent, with
# -fvisibility=hidden: only what spmvclient.h marks SPMV_CLIENT_API is
# exported; the same objects go into the archive and the shared library. The shared library carries the soname libspmvclient.so.0 (ABI
# major 0) and the file name libspmvclient.so.$(CLIENT_VERSION) (minor 2 added the calls
# of resident vectors, ops and solvers, minor 3 those of shared-memory
# regions, minor 4 the JSON solve and the default URL, minor 5 spmv_client_set_stat, minor 6 spmv_client_bench_start_json, minor 7 spmv_client_solve_shm; nothing changed or went);
# the tools link the static archive so they run from the build folder
# without LD_LIBRARY_PATH.
# Other areas add their own pieces to install/uninstall as install-<area>.

CLIENT_VERSION := 0.7.0
CLIENT_SOMAJOR := 0
CLIENT_PKGS    := libcurl jansson
CLIENT_CFLAGS  := -std=c11 -D_GNU_SOURCE -O2 -g $(WARN) -fPIC -fvisibility=hidden -Iclients -MMD -MP \
                  $(SANFLAGS) $(shell pkg-config --cflags $(CLIENT_PKGS) 2>/dev/null)
CLIENT_LIBS    := $(shell pkg-config --libs $(CLIENT_PKGS) 2>/dev/null) -lm

CLIENT_SRC    := $(filter-out clients/spmvctl%.c,$(wildcard clients/*.c))
CLIENT_OBJ    := $(patsubst clients/%.c,$(BUILD)/clients/%.o,$(CLIENT_SRC))
CLIENT_A      := $(BUILD)/libspmvclient.a
CLIENT_SO     := $(BUILD)/libspmvclient.so.$(CLIENT_VERSION)
CLIENT_SONAME := libspmvclient.so.$(CLIENT_SOMAJOR)
CLIENT_PC     := $(BUILD)/spmvclient.pc
# For programs built against the build folder, without `make install`:
# pkg-config prefers NAME-uninstalled.pc when PKG_CONFIG_PATH names its folder.
CLIENT_PC_UNINSTALLED := $(BUILD)/spmvclient-uninstalled.pc
SPMVCTL       := $(BUILD)/spmvctl
CG_SOLVE      := $(BUILD)/cg_solve
# The docs' example programs (clients/examples/*.c but cg_solve) build too.
CLIENT_EXAMPLES := $(patsubst clients/examples/%.c,$(BUILD)/examples/%,$(filter-out clients/examples/cg_solve.c,$(wildcard clients/examples/*.c)))
CLIENT_ALL    := $(CLIENT_A) $(CLIENT_SO) $(BUILD)/$(CLIENT_SONAME) $(BUILD)/libspmvclient.so $(CLIENT_PC) \
                 $(CLIENT_PC_UNINSTALLED) $(SPMVCTL) $(CG_SOLVE) $(CLIENT_EXAMPLES)

EXTRA_ALL += $(CLIENT_ALL)
# all: was read before this file, so its prerequisites were already fixed;
# name ours here as well so that plain `make` and `make test` build them.
ifneq ($(SAN),1)
all: $(CLIENT_ALL)
endif
all-for-test: $(CLIENT_ALL)

.PHONY: clients install uninstall install-clients uninstall-clients
clients: $(CLIENT_ALL)

$(BUILD)/clients/%.o: clients/%.c clients/spmvclient.h clients/client_internal.h
	@mkdir -p $(dir $@)
	$(CC) $(CLIENT_CFLAGS) -c $< -o $@

$(CLIENT_A): $(CLIENT_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(CLIENT_SO): $(CLIENT_OBJ)
	$(CC) -shared -Wl,-soname,$(CLIENT_SONAME) -Wl,--no-undefined $(SANFLAGS) -o $@ $^ $(CLIENT_LIBS)

$(BUILD)/$(CLIENT_SONAME) $(BUILD)/libspmvclient.so: $(CLIENT_SO)
	ln -sf $(notdir $(CLIENT_SO)) $(BUILD)/$(CLIENT_SONAME)
	ln -sf $(CLIENT_SONAME) $(BUILD)/libspmvclient.so

$(CLIENT_PC): clients/spmvclient.pc.in mk/clients.mk
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(CLIENT_VERSION)|g' $< > $@

# The header in clients/, the libraries in the build folder (absolute
# paths, and an rpath so the program runs without LD_LIBRARY_PATH).
$(CLIENT_PC_UNINSTALLED): mk/clients.mk
	@mkdir -p $(dir $@)
	printf '%s\n' 'Name: spmvclient' 'Description: spmvd C client library (uninstalled: $(abspath $(BUILD)))' \
	    'Version: $(CLIENT_VERSION)' 'Requires.private: libcurl jansson' 'Cflags: -I$(abspath clients)' \
	    'Libs: -L$(abspath $(BUILD)) -Wl,-rpath,$(abspath $(BUILD)) -lspmvclient' 'Libs.private: -lm' > $@

$(SPMVCTL): $(BUILD)/clients/spmvctl.o $(BUILD)/clients/spmvctl_study.o $(CLIENT_A)
	$(CC) $(SANFLAGS) -o $@ $(filter %.o,$^) $(CLIENT_A) $(CLIENT_LIBS)

$(CG_SOLVE): $(BUILD)/clients/examples/cg_solve.o $(CLIENT_A)
	$(CC) $(SANFLAGS) -o $@ $< $(CLIENT_A) $(CLIENT_LIBS)

$(BUILD)/examples/%: $(BUILD)/clients/examples/%.o $(CLIENT_A)
	@mkdir -p $(dir $@)
	$(CC) $(SANFLAGS) -o $@ $< $(CLIENT_A) $(CLIENT_LIBS)

# The C end-to-end driver of tests/e2e/clients.sh: every library call.
CLIENT_CALLS := $(BUILD)/tests/e2e/client_calls
EXTRA_TEST_DEPS += $(CLIENT_CALLS)
all-for-test: $(CLIENT_CALLS)
ifneq ($(SAN),1)
all: $(CLIENT_CALLS)
endif
$(BUILD)/tests/e2e/client_calls.o: tests/e2e/client_calls.c tests/e2e/client_tap.h clients/spmvclient.h
	@mkdir -p $(dir $@)
	$(CC) $(CLIENT_CFLAGS) -c $< -o $@
$(CLIENT_CALLS): $(BUILD)/tests/e2e/client_calls.o $(CLIENT_A)
	$(CC) $(SANFLAGS) -o $@ $< $(CLIENT_A) $(CLIENT_LIBS)

# The C driver of tests/e2e/shm_clients.sh: the shared-memory calls.
SHM_CALLS := $(BUILD)/tests/e2e/shm_calls
EXTRA_TEST_DEPS += $(SHM_CALLS)
all-for-test: $(SHM_CALLS)
ifneq ($(SAN),1)
all: $(SHM_CALLS)
endif
$(BUILD)/tests/e2e/shm_calls.o: tests/e2e/shm_calls.c tests/e2e/client_tap.h clients/spmvclient.h
	@mkdir -p $(dir $@)
	$(CC) $(CLIENT_CFLAGS) -c $< -o $@
$(SHM_CALLS): $(BUILD)/tests/e2e/shm_calls.o $(CLIENT_A)
	$(CC) $(SANFLAGS) -o $@ $< $(CLIENT_A) $(CLIENT_LIBS)

# ---------------------------------------------------------------- install
# The .pc is written again at install time so that it names this PREFIX.
install: install-clients
uninstall: uninstall-clients

install-clients: $(CLIENT_A) $(CLIENT_SO) $(SPMVCTL)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 clients/spmvclient.h $(DESTDIR)$(PREFIX)/include/spmvclient.h
	install -m 644 $(CLIENT_A) $(DESTDIR)$(PREFIX)/lib/libspmvclient.a
	install -m 755 $(CLIENT_SO) $(DESTDIR)$(PREFIX)/lib/libspmvclient.so.$(CLIENT_VERSION)
	ln -sf libspmvclient.so.$(CLIENT_VERSION) $(DESTDIR)$(PREFIX)/lib/$(CLIENT_SONAME)
	ln -sf $(CLIENT_SONAME) $(DESTDIR)$(PREFIX)/lib/libspmvclient.so
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(CLIENT_VERSION)|g' clients/spmvclient.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/spmvclient.pc
	install -m 755 $(SPMVCTL) $(DESTDIR)$(PREFIX)/bin/spmvctl

uninstall-clients:
	rm -f $(DESTDIR)$(PREFIX)/include/spmvclient.h \
	      $(DESTDIR)$(PREFIX)/lib/libspmvclient.a \
	      $(DESTDIR)$(PREFIX)/lib/libspmvclient.so.$(CLIENT_VERSION) \
	      $(DESTDIR)$(PREFIX)/lib/$(CLIENT_SONAME) \
	      $(DESTDIR)$(PREFIX)/lib/libspmvclient.so \
	      $(DESTDIR)$(PREFIX)/lib/pkgconfig/spmvclient.pc \
	      $(DESTDIR)$(PREFIX)/bin/spmvctl

# tests/unit/test_client.c is built by the Makefile's test rule; it also
# needs the client library and libcurl/jansson on its link line.
$(BUILD)/tests/test_client: $(CLIENT_A)
$(BUILD)/tests/test_client: LDLIBS += $(CLIENT_A) $(CLIENT_LIBS) -lpthread
