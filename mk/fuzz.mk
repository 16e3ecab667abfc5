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
# conformance files (plain and gzip-compressed) and tests/fuzz/regressions/.
# A crash leaves its input as $(BUILD)/fuzz/crash-*: copy it into
# tests/fuzz/regressions/ once fixed; tests/unit/test_mmio.c replays them.

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
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(FUZZ_SRCS) -lz -lm

# Each seed gets three leading option bytes (chunk cuts, options) so the
# target reads it as the file it is.
fuzz-corpus:
	@mkdir -p $(FUZZ_CORPUS)
	@find $(FUZZ_SEEDS) -name '*.mtx' 2>/dev/null | while read -r f; do \
	  n=$$(echo "$$f" | tr '/' '_'); \
	  { printf '\100\200\000'; cat "$$f"; } > "$(FUZZ_CORPUS)/$$n"; \
	  { printf '\007\033\001'; gzip -c "$$f"; } > "$(FUZZ_CORPUS)/$$n.gz"; \
	done
	@if [ -d tests/fuzz/regressions ]; then cp tests/fuzz/regressions/* $(FUZZ_CORPUS)/ 2>/dev/null || true; fi

fuzz: $(FUZZ_BIN) fuzz-corpus
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -rss_limit_mb=4096 -timeout=10 \
	  $(if $(FUZZ_JOBS),-jobs=$(FUZZ_JOBS) -workers=$(FUZZ_JOBS)) \
	  -artifact_prefix=$(FUZZ_DIR)/ -print_final_stats=1 $(FUZZ_CORPUS)
