# mk/fuzz.mk — `make fuzz`: the libFuzzer target of the Matrix Market reader.
#
#   make fuzz                    build $(BUILD)/fuzz/fuzz_mmio and run it FUZZ_SECONDS (60)
#   make fuzz FUZZ_SECONDS=600   longer
#   make fuzz-build              only build it
#   make fuzz FUZZ_JOBS=2        two fuzzing processes
#
# The target (tests/fuzz/fuzz_mmio.c) is built with clang's libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer over the CPU engine
# sources. The corpus lives in $(BUILD)/fuzz/corpus, seeded from the
# conformance files (plain and gzip-compressed) and
# tests/fuzz/regressions/fuzz_mmio/. A crash leaves its input as
# $(BUILD)/fuzz/crash-*: copy it into tests/fuzz/regressions/fuzz_mmio/ once
# fixed; tests/unit/test_mmio.c replays them.
# OpenMP threads sleep rather than spin between the many tiny parallel
# regions (OMP_WAIT_POLICY=passive): on a shared 2-core host spinning
# halves the executions per second.

FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_JOBS    ?=
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_BIN     := $(FUZZ_DIR)/fuzz_mmio
FUZZ_CORPUS  := $(FUZZ_DIR)/corpus
FUZZ_SEEDS   ?= ../shared/matrices/conformance
FUZZ_SRCS    := tests/fuzz/fuzz_mmio.c $(wildcard engine/*.c engine/cpu/*.c) engine/gpu/absent.c
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -g -O1 -fopenmp -Wall -I. -Iengine \
                -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined

.PHONY: fuzz fuzz-build fuzz-corpus

fuzz-build: $(FUZZ_BIN)

$(FUZZ_BIN): $(FUZZ_SRCS) $(wildcard engine/*.h)
	@mkdir -p $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(FUZZ_SRCS) -lzip -lcrypto -lz -lm

# Each seed gets three leading option bytes (chunk cuts, options) so the
# target reads it as the file it is.
fuzz-corpus:
	@mkdir -p $(FUZZ_CORPUS)
	@find $(FUZZ_SEEDS) -name '*.mtx' 2>/dev/null | while read -r f; do \
	  n=$$(echo "$$f" | tr '/' '_'); \
	  { printf '\100\200\000'; cat "$$f"; } > "$(FUZZ_CORPUS)/$$n"; \
	  { printf '\007\033\001'; gzip -c "$$f"; } > "$(FUZZ_CORPUS)/$$n.gz"; \
	done
	@cp tests/fuzz/regressions/fuzz_mmio/* $(FUZZ_CORPUS)/ 2>/dev/null || true

fuzz: $(FUZZ_BIN) fuzz-corpus
	OMP_WAIT_POLICY=passive $(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -rss_limit_mb=4096 -timeout=10 \
	  $(if $(FUZZ_JOBS),-jobs=$(FUZZ_JOBS) -workers=$(FUZZ_JOBS)) \
	  -artifact_prefix=$(FUZZ_DIR)/ -print_final_stats=1 $(FUZZ_CORPUS)

# ------------------------------------------------------------------------
# The daemon's targets (issue 9): fuzz_multipart (uploads through MHD's post
# processor and the raw-body path into the streaming reader), fuzz_json
# (the spmv/bench JSON decoders, upload options, job and matrix ids, the
# spy.png query), fuzz_vector (the binary x decoder) and fuzz_store (the
# store file loader). The first three talk HTTP to a spmvd started inside
# the fuzzing process (tests/fuzz/fuzz_http.c). `make fuzz` runs every
# target for FUZZ_SECONDS each; `make fuzz-one FUZZ_TARGET=fuzz_json` one.
# Corpora: $(BUILD)/fuzz/corpus-<target>, seeded from
# tests/fuzz/corpus/<target>/ and tests/fuzz/regressions/<target>/; a crash
# leaves $(BUILD)/fuzz/<target>-crash-*: once fixed, copy it into
# tests/fuzz/regressions/<target>/, which tests/e2e/fuzz_replay.sh replays
# in `make test` (through $(BUILD)/fuzz-replay/<target>, the same target
# built with the ordinary compiler and tests/fuzz/replay_main.c).

FUZZ_NET_TARGETS := fuzz_multipart fuzz_json fuzz_vector
FUZZ_TARGETS     := $(FUZZ_NET_TARGETS) fuzz_store fuzz_npz fuzz_shard
FUZZ_ENGINE_SRCS := $(wildcard engine/*.c engine/cpu/*.c engine/gpu/absent*.c)
FUZZ_DAEMON_SRCS := $(filter-out api/main.c,$(wildcard api/*.c daemon/*.c cluster/*.c))
FUZZ_PKG_LIBS     = $(shell pkg-config --libs libmicrohttpd jansson uuid libsystemd libpng zlib libzip libcrypto)
FUZZ_PKG_CFLAGS   = $(shell pkg-config --cflags libmicrohttpd jansson uuid libsystemd libpng zlib libzip libcrypto)

# The daemon and engine are compiled once into objects (instrumented for
# coverage, sanitizers on) that every target links: three targets do not
# compile the whole daemon three times.
comma           := ,
FUZZ_OBJ_DIR    := $(FUZZ_DIR)/obj
FUZZ_OBJ_CFLAGS := $(subst -fsanitize=fuzzer$(comma),-fsanitize=fuzzer-no-link$(comma),$(FUZZ_CFLAGS)) -MMD -MP
FUZZ_LIB_OBJS   := $(patsubst %.c,$(FUZZ_OBJ_DIR)/%.o,$(FUZZ_DAEMON_SRCS) $(FUZZ_ENGINE_SRCS) tests/fuzz/fuzz_http.c)

$(FUZZ_OBJ_DIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) $(FUZZ_PKG_CFLAGS) -c $< -o $@

$(FUZZ_NET_TARGETS:%=$(FUZZ_DIR)/%): $(FUZZ_DIR)/%: $(FUZZ_OBJ_DIR)/tests/fuzz/%.o $(FUZZ_LIB_OBJS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $^ $(FUZZ_PKG_LIBS) -lz -lm -lpthread

$(FUZZ_DIR)/fuzz_store: $(FUZZ_OBJ_DIR)/tests/fuzz/fuzz_store.o $(FUZZ_OBJ_DIR)/daemon/matfile.o \
    $(patsubst %.c,$(FUZZ_OBJ_DIR)/%.o,$(FUZZ_ENGINE_SRCS))
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $^ -lzip -lcrypto -lz -lm

$(FUZZ_DIR)/fuzz_npz: $(FUZZ_OBJ_DIR)/tests/fuzz/fuzz_npz.o $(patsubst %.c,$(FUZZ_OBJ_DIR)/%.o,$(FUZZ_ENGINE_SRCS))
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $^ -lzip -lcrypto -lz -lm

# fuzz_shard: a shard's wire form (cluster/partition.c, no MPI in it)
$(FUZZ_DIR)/fuzz_shard: $(FUZZ_OBJ_DIR)/tests/fuzz/fuzz_shard.o $(FUZZ_OBJ_DIR)/cluster/partition.o \
    $(patsubst %.c,$(FUZZ_OBJ_DIR)/%.o,$(FUZZ_ENGINE_SRCS))
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $^ -lzip -lcrypto -lz -lm

fuzz-build: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/%)

# One target: FUZZ_TARGET=fuzz_json. Leak checks stay on for fuzz_store;
# the network targets hold memory in the daemon's threads between inputs.
FUZZ_TARGET ?= fuzz_json
.PHONY: fuzz-one fuzz-daemon
fuzz-one: $(FUZZ_DIR)/$(FUZZ_TARGET)
	@mkdir -p $(FUZZ_DIR)/corpus-$(FUZZ_TARGET)
	@cp tests/fuzz/corpus/$(FUZZ_TARGET)/* tests/fuzz/regressions/$(FUZZ_TARGET)/* \
	  $(FUZZ_DIR)/corpus-$(FUZZ_TARGET)/ 2>/dev/null || true
	@echo "fuzzing $(FUZZ_TARGET) for $(FUZZ_SECONDS) s (log: $(FUZZ_DIR)/$(FUZZ_TARGET).log)"
	@LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp:print_suppressions=0 \
	  $(FUZZ_DIR)/$(FUZZ_TARGET) -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -rss_limit_mb=4096 -timeout=30 \
	  $(if $(filter $(FUZZ_TARGET),$(FUZZ_NET_TARGETS)),-detect_leaks=0) \
	  -artifact_prefix=$(FUZZ_DIR)/$(FUZZ_TARGET)- -print_final_stats=1 $(FUZZ_DIR)/corpus-$(FUZZ_TARGET) \
	  >$(FUZZ_DIR)/$(FUZZ_TARGET).log 2>&1; rc=$$?; \
	  grep -E '^(#[0-9]+ *(DONE|INITED)|stat::number_of_executed_units|stat::average_exec|SUMMARY|==[0-9]+==ERROR|.*Test unit written)' \
	    $(FUZZ_DIR)/$(FUZZ_TARGET).log; exit $$rc

fuzz-daemon: fuzz-build
	@for t in $(FUZZ_TARGETS); do $(MAKE) --no-print-directory fuzz-one FUZZ_TARGET=$$t || exit 1; done

fuzz: fuzz-daemon

# Replay binaries for `make test` (tests/e2e/fuzz_replay.sh).
FUZZ_REPLAY_DIR := $(BUILD)/fuzz-replay
$(FUZZ_NET_TARGETS:%=$(FUZZ_REPLAY_DIR)/%): $(FUZZ_REPLAY_DIR)/%: $(BUILD)/tests/fuzz/%.o \
    $(BUILD)/tests/fuzz/fuzz_http.o $(BUILD)/tests/fuzz/replay_main.o $(LIBSPMVD) $(LIBSPMV)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBSPMVD) $(ALL_LIBS)
$(FUZZ_REPLAY_DIR)/fuzz_store: $(BUILD)/tests/fuzz/fuzz_store.o $(BUILD)/tests/fuzz/replay_main.o $(LIBSPMVD) $(LIBSPMV)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBSPMVD) $(ALL_LIBS)
$(FUZZ_REPLAY_DIR)/fuzz_npz: $(BUILD)/tests/fuzz/fuzz_npz.o $(BUILD)/tests/fuzz/replay_main.o $(LIBSPMV)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LIBS)
$(FUZZ_REPLAY_DIR)/fuzz_shard: $(BUILD)/tests/fuzz/fuzz_shard.o $(BUILD)/tests/fuzz/replay_main.o $(LIBSPMVD) $(LIBSPMV)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBSPMVD) $(ALL_LIBS)
all-for-test: $(FUZZ_TARGETS:%=$(FUZZ_REPLAY_DIR)/%)
