# cluster.mk — the cluster's MPI test binaries (issue 16).
#
#   make $(BUILD)/tests/mpi_cluster     tests/mpi/mpi_cluster.c, linked like a unit test
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
