# benchsolve.mk — `make bench-solve` (issue 29; included by the Makefile).
#
#   make bench-solve   the bundle, with the PyPI wheels the GPU host lacks
#                      (pyamg, scikit-fem: `pip download` into .whl/ when
#                      missing, unpacked into bundle/pyx); on the GPU host
#                      `bash bundle/solve-gpu.sh` then runs the GPU tests of
#                      the preconditioners and the fused path, e2e
#                      preconds_check.py against a GPU daemon, spmv-cgbench,
#                      and tools/bench_solve.py: time to 1e-8 on 3-D Poisson,
#                      log-normal finite-volume diffusion and P2 elasticity
#                      for every preconditioner of the daemon, CuPy's cg on
#                      the same GPU and PyAMG on the host's cores
#                      (docs/benchmarks/solve.md). On a host without a GPU,
#                      BENCH_SOLVE_CPU=1 runs bench_solve.py against a local
#                      daemon on the CPU instead (no CuPy).

.PHONY: bench-solve
BENCH_SOLVE_WHEELS = pyamg==5.4.1 scikit-fem==12.0.2

.whl/.stamp:
	@mkdir -p .whl
	@ls .whl/pyamg-*.whl .whl/scikit_fem-*.whl >/dev/null 2>&1 || \
	  pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
	    -d .whl $(BENCH_SOLVE_WHEELS)
	@touch $@

ifeq ($(BENCH_SOLVE_CPU),1)
bench-solve: $(SPMVD)
	bash tools/bench-solve-cpu.sh $(SPMVD)
else ifeq ($(HAVE_CUDA),1)
bench-solve: bundle .whl/.stamp
	@rm -rf $(BUNDLE)/pyx && mkdir -p $(BUNDLE)/pyx
	@for w in .whl/pyamg-*.whl .whl/scikit_fem-*.whl; do python3 -m zipfile -e $$w $(BUNDLE)/pyx; done
	@echo "bench-solve: on the GPU host run: bash $(BUNDLE)/solve-gpu.sh (results under \$$OUT)"
else
bench-solve:
	@echo "bench-solve: needs a CUDA build and a GPU host (or BENCH_SOLVE_CPU=1 for the CPU)"
endif

# make bench-realistic — issue 30's realistic benchmark set
# (tools/bench_realistic.py): the same bundle and wheels; on the GPU host
# `bash bundle/realistic-gpu.sh` (docs/benchmarks/realistic.md).
.PHONY: bench-realistic
ifeq ($(HAVE_CUDA),1)
bench-realistic: bench-solve
	@echo "bench-realistic: on the GPU host run: bash $(BUNDLE)/realistic-gpu.sh (results under \$$OUT)"
else
bench-realistic:
	@echo "bench-realistic: needs a CUDA build and a GPU host; on this host's CPU kernels:" \
	  "python3 tools/bench_realistic.py URL OUT --device cpu --size small"
endif
