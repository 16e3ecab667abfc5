# cluster.mk — the cluster's MPI test binaries (issue 16), and the halo
# latency probe (issue 32).
#
#   make $(BUILD)/tests/mpi_cluster     tests/mpi/mpi_cluster.c, linked like a unit test
#   make $(BUILD)/halo-latency          tools/halo-latency.cu (CUDA + MPI + NCCL builds):
#                                       `mpirun -np 2 halo-latency` on a 2-GPU host
#
# tests/mpi/*.c are cmocka tests that run under mpirun: tests/run.sh starts
# each with 1, 2 and 3 ranks (--oversubscribe) as suites mpi_NAME_npN, and
# reports them skipped, with the reason, in a build without MPI or on a
# host without mpirun. They are built only when the build has MPI, and
# travel in the GPU bundle (tools/bundle/cluster-gpu.sh runs them there).

MPI_TEST_SRCS := $(wildcard tests/mpi/*.c)
MPI_TEST_BINS := $(MPI_TEST_SRCS:tests/mpi/%.c=$(BUILD)/tests/%)

ifeq ($(HAVE_MPI),1)
all-for-test: $(MPI_TEST_BINS)
bundle: $(MPI_TEST_BINS)
ifneq ($(SAN),1)
all: $(MPI_TEST_BINS)
endif
endif

$(BUILD)/tests/mpi_%: $(BUILD)/tests/mpi/mpi_%.o $(TEST_SUPPORT_OBJS) $(LIBSPMVD) $(LIBSPMV)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(TEST_SUPPORT_OBJS) $(LIBSPMVD) $(ALL_LIBS) -lcmocka

ifeq ($(HAVE_CUDA)$(HAVE_MPI),11)
all-for-test: $(BUILD)/halo-latency
bundle: $(BUILD)/halo-latency
$(BUILD)/halo-latency: tools/halo-latency.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 -gencode=arch=compute_90,code=sm_90 $(MPI_CFLAGS) -o $@ $< $(MPI_LIBS) -lnccl
endif
