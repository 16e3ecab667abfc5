# spmvd — the one build entry.
#
#   make              engine library, daemon, tools, tests into $(BUILD)/
#   make test         bootstrap, build, run every test suite; ends "N passed, N failed"
#   make run          bootstrap, build, start the daemon on 127.0.0.1:8080 (state in ./state)
#   make SAN=1        the same build with ASan+UBSan (into build-san/), then its tests
#   make CUDA=0       CPU-only build (CUDA=auto, the default, builds the GPU backend when nvcc is found)
#   make MPI=0        a build without the cluster (MPI=auto, the default, builds it when Open MPI is found)
#
# Sources are found by wildcard: a new .c file under engine/, api/, daemon/
# or tests/unit/ needs no edit here. Area-specific targets (bench, fuzz,
# bundle, install, clients) live in mk/*.mk, included at the end; an mk file
# that builds more for `make` / `make test` adds prerequisites to the `all`
# and `all-for-test` targets itself (`all: $(MY_BINS)`).

BUILD   ?= build
CUDA    ?= auto
SAN     ?= 0
PREFIX  ?= /usr/local
DESTDIR ?=
NVCC    ?= nvcc
CUDA_HOME ?= /usr/local/cuda
MPI     ?= auto
CC      ?= gcc
ifeq ($(origin CC),default)
CC := gcc
endif

ifeq ($(CUDA),auto)
HAVE_CUDA := $(if $(shell command -v $(NVCC) 2>/dev/null),1,0)
else
HAVE_CUDA := $(CUDA)
endif

# MPI (issue 16, cluster/): Open MPI's C bindings through pkg-config, like
# every other dependency. NCCL, which the GPU ranks exchange x over, comes
# with the CUDA toolkit and is linked only into builds with both.
ifeq ($(MPI),auto)
HAVE_MPI := $(if $(shell pkg-config --exists ompi-c 2>/dev/null && echo yes),1,0)
else
HAVE_MPI := $(MPI)
endif

ifeq ($(SAN),1)
override BUILD := $(BUILD)-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif

WARN    := -Wall -Wextra -Wshadow
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE $(WARN) -fopenmp -fPIC -I. -Iengine -MMD -MP $(SANFLAGS)
LDFLAGS += -fopenmp $(SANFLAGS)
LDLIBS  := -lz -lm

# Every dependency is a Debian package found through pkg-config.
PKGS      := libmicrohttpd jansson uuid libsystemd libpng zlib libzip libcrypto
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

# CUDA: sm_90 machine code plus compute_90 PTX as a fallback for later chips.
NVCCFLAGS := -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90 \
             -Xcompiler -fPIC,-Wall,-Wextra -Iengine -I. --expt-relaxed-constexpr -lineinfo
ifeq ($(HAVE_CUDA),1)
CFLAGS    += -DSPMV_HAVE_CUDA=1
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcusparse -lcublas -lcudart -lstdc++
GPU_SRCS  := $(wildcard engine/gpu/*.cu)
GPU_OBJS  := $(GPU_SRCS:%.cu=$(BUILD)/%.o)
GPU_CSRCS :=
else
CUDA_LIBS :=
GPU_OBJS  :=
GPU_CSRCS := engine/gpu/absent.c engine/gpu/absent_spmspm.c
endif

ifeq ($(HAVE_MPI),1)
MPI_CFLAGS := -DSPMV_HAVE_MPI=1 $(shell pkg-config --cflags ompi-c)
MPI_LIBS   := $(shell pkg-config --libs ompi-c)
CFLAGS     += $(MPI_CFLAGS)
endif
ifeq ($(HAVE_CUDA)$(HAVE_MPI),11)
NVCCFLAGS  += -DSPMV_HAVE_MPI=1
CUDA_LIBS  += -lnccl
else
GPU_SRCS   := $(filter-out engine/gpu/comm.cu,$(GPU_SRCS))
GPU_OBJS   := $(GPU_SRCS:%.cu=$(BUILD)/%.o)
GPU_CSRCS  += engine/gpu/absent_comm.c
endif

# The top-level folders are layers (docs/architecture.md): api/ (HTTP) over
# daemon/ (state, queues, workers, task bodies) over engine/ (formats,
# kernels, solvers), with cluster/ a backend beside the engine.
ENGINE_SRCS := $(wildcard engine/*.c engine/cpu/*.c) $(GPU_CSRCS)
ENGINE_OBJS := $(ENGINE_SRCS:%.c=$(BUILD)/%.o) $(GPU_OBJS)
LIBSPMV     := $(BUILD)/libspmv.a

# The daemon's code and the API's, less main(), is a library too, so unit
# tests link it. cluster/ (issue 16) goes with it: its MPI files compile to
# nothing without MPI, and cluster/absent.c answers instead.
SPMVD_MAIN  := api/main.c
DAEMON_SRCS := $(filter-out $(SPMVD_MAIN),$(wildcard api/*.c daemon/*.c cluster/*.c))
DAEMON_OBJS := $(DAEMON_SRCS:%.c=$(BUILD)/%.o)
LIBSPMVD    := $(BUILD)/libspmvd.a
SPMVD       := $(BUILD)/spmvd

TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
TEST_SUPPORT_SRCS := $(filter-out $(TEST_SRCS),$(wildcard tests/unit/*.c))
TEST_SUPPORT_OBJS := $(TEST_SUPPORT_SRCS:%.c=$(BUILD)/%.o)

# Command-line tools: tools/NAME.c becomes $(BUILD)/NAME, linked with the engine.
TOOL_SRCS := $(wildcard tools/*.c)
TOOL_BINS := $(TOOL_SRCS:tools/%.c=$(BUILD)/%)

ALL_LIBS = $(LIBSPMV) $(PKG_LIBS) $(MPI_LIBS) $(CUDA_LIBS) $(LDLIBS)

.PHONY: all test run bootstrap clean tests
ifeq ($(SAN),1)
all: test
else
all: $(LIBSPMV) $(if $(wildcard $(SPMVD_MAIN)),$(SPMVD)) $(TOOL_BINS) $(TEST_BINS)
endif

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -c $< -o $@

$(BUILD)/engine/gpu/%.o: engine/gpu/%.cu engine/spmv.h $(wildcard engine/gpu/*.h engine/gpu/*.cuh)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(LIBSPMV): $(ENGINE_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(LIBSPMVD): $(DAEMON_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(SPMVD): $(BUILD)/api/main.o $(LIBSPMVD) $(LIBSPMV)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBSPMVD) $(ALL_LIBS)

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(TEST_SUPPORT_OBJS) $(if $(DAEMON_OBJS),$(LIBSPMVD)) $(LIBSPMV)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(TEST_SUPPORT_OBJS) $(if $(DAEMON_OBJS),$(LIBSPMVD)) $(ALL_LIBS) -lcmocka

$(BUILD)/%: $(BUILD)/tools/%.o $(LIBSPMV)
	$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS)

tests: $(TEST_BINS)

bootstrap:
	@bash tools/bootstrap.sh

# make test / make run build on every core unless the caller gave -j.
NPROC    := $(shell nproc 2>/dev/null || echo 2)
PARALLEL  = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))

test: bootstrap
	@$(MAKE) $(PARALLEL) --no-print-directory all-for-test
	@BUILD=$(BUILD) HAVE_CUDA=$(HAVE_CUDA) SAN=$(SAN) bash tests/run.sh

.PHONY: all-for-test
all-for-test: $(LIBSPMV) $(if $(wildcard $(SPMVD_MAIN)),$(SPMVD)) $(TOOL_BINS) $(TEST_BINS)

RUN_ARGS ?=
run: bootstrap
	@$(MAKE) $(PARALLEL) --no-print-directory $(SPMVD)
	@mkdir -p state
	$(SPMVD) --state-dir ./state $(RUN_ARGS)

clean:
	rm -rf build build-san build-*

-include mk/*.mk
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
