#!/usr/bin/env bash
# make-bundle.sh — builds bundle/, the folder that travels to the GPU host
# (`make bundle`, which passes BUILD and BUNDLE).
#
# The GPU host is Ubuntu 24.04 with the CUDA 13 toolkit and driver but
# without this project's Debian libraries, and it reaches no network. So the
# bundle holds:
#   bin/real/  test_gpu, test_gpu_spmspm, test_gpu_vectors, test_gpu_wide, test_gpu_batch, test_gpu_payback, spmvd (when the daemon is built), the tools,
#              mpi_cluster (an MPI build)
#   bin/       one wrapper script per binary that puts lib/ on
#              LD_LIBRARY_PATH for that binary alone (the host's own curl
#              and python3 must keep the host's libcurl and libssl)
#   lib/       every shared library those binaries load that is not glibc,
#              the C++ runtime or CUDA's (ldd decides); not Open MPI's,
#              which must be the host's, the same as its mpirun
#              (libmpi.so.40: Open MPI 4.x): those go to lib-mpi/ for a host
#              without Open MPI; nor NCCL, which goes to lib-nccl/ (the CUDA
#              toolkit's libnccl.so.2, 218 MB; BUNDLE_NCCL=0 leaves it out)
#              for a host without its own (cluster-gpu.sh uses it then). The
#              device tool carries at most 64 MiB, so a bundle sent that way
#              leaves lib-nccl/ behind: its GPU hosts have NCCL 2.28 in
#              /usr/lib/x86_64-linux-gnu.
#   e2e/       tests/e2e/lib.sh, cluster.sh, cluster_vectors.py, cluster_solve.sh and .py (cluster-gpu.sh runs them),
#              wide.sh and wide_check.py (wide-gpu.sh runs them), batch_check.py (batch-gpu.sh)
#   shared/matrices/{real,conformance/invalid}  the test matrices, laid out
#              as ../shared/matrices is beside the repository, with
#   work/      an empty folder that serves as SPMV_ROOT (tests find the
#              matrices at $SPMV_ROOT/../shared/matrices)
#   client/    the Python client (clients/python/spmvd), for edges-gpu.sh
#   run.sh, api_test.py  (from tools/bundle/); wrk (bin/, when this host has
#              it) with bench-batch.sh for batch-gpu.sh
# Binaries built here (Debian 12, glibc 2.36) run on the newer glibc there.
set -euo pipefail
BUILD=${BUILD:-build}
BUNDLE=${BUNDLE:-bundle}
SHARED=${SPMV_SHARED:-../shared}
[ "${HAVE_CUDA:-1}" = 1 ] || { echo "make-bundle: this build has no CUDA (nvcc missing or CUDA=0)" >&2; exit 1; }

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE"/bin/real "$BUNDLE"/lib "$BUNDLE"/lib-mpi "$BUNDLE"/lib-nccl "$BUNDLE"/e2e "$BUNDLE"/work "$BUNDLE"/shared/matrices/conformance

bins=("$BUILD/tests/test_gpu")
[ -x "$BUILD/tests/test_gpu_spmspm" ] && bins+=("$BUILD/tests/test_gpu_spmspm")
[ -x "$BUILD/tests/test_gpu_vectors" ] && bins+=("$BUILD/tests/test_gpu_vectors")
[ -x "$BUILD/tests/test_gpu_wide" ] && bins+=("$BUILD/tests/test_gpu_wide")
[ -x "$BUILD/tests/test_gpu_batch" ] && bins+=("$BUILD/tests/test_gpu_batch")
[ -x "$BUILD/tests/test_gpu_payback" ] && bins+=("$BUILD/tests/test_gpu_payback")
[ -x "$BUILD/tests/mpi_cluster" ] && bins+=("$BUILD/tests/mpi_cluster")
for b in spmvd spmv-gen spmv-kernels spmvctl bench-spmspm cg_solve cg-ref spmv-copyrate spmv-gatherrate spmv-cgbench \
  amg-profile halo-latency; do
  [ -x "$BUILD/$b" ] && bins+=("$BUILD/$b")
done
wrk=$(command -v wrk || true) # make bench-api's load generator, for batch-gpu.sh
[ -n "$wrk" ] && bins+=("$wrk")
cp "${bins[@]}" "$BUNDLE/bin/real/"
for b in "${bins[@]}"; do
  n=$(basename "$b")
  printf '#!/bin/sh\n# Runs real/%s with the bundle'"'"'s libraries.\nd=$(dirname "$0")\nLD_LIBRARY_PATH="$d/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/real/%s" "$@"\n' \
    "$n" "$n" >"$BUNDLE/bin/$n"
  chmod +x "$BUNDLE/bin/$n"
done

# Libraries the host has (or must provide itself): glibc's, the compiler
# runtime, and the CUDA driver/toolkit libraries that match its driver.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libutil\.|libresolv\.|libstdc\+\+|libgcc_s|libcuda|libcudart|libcusparse|libcublas|libnvJitLink|libnvrtc|libnccl)'
mpi='^(libmpi|libopen-rte|libopen-pal|libhwloc|libevent|libpmix|libfabric|libucp|libucs|libuct|libucm|libpsm|libibverbs|librdmacm|libmunge)'
for b in "${bins[@]}"; do
  ldd "$b" | awk '/=> \// { print $1, $3 }'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ ^libnccl ]]; then
    [ "${BUNDLE_NCCL:-1}" = 1 ] && cp -L "$path" "$BUNDLE/lib-nccl/$name"
    continue
  fi
  if [[ "$name" =~ $skip ]]; then continue; fi
  if [[ "$name" =~ $mpi ]]; then cp -L "$path" "$BUNDLE/lib-mpi/$name"; continue; fi
  cp -L "$path" "$BUNDLE/lib/$name"
done

cp -r "$SHARED/matrices/real" "$BUNDLE/shared/matrices/"
cp -r "$SHARED/matrices/conformance/invalid" "$BUNDLE/shared/matrices/conformance/"
cp tools/bundle/run.sh tools/bundle/common.sh tools/bundle/shm-gpu.sh tools/bundle/api_test.py tools/bundle/api_test_vectors.py tools/bundle/bench_remote.py \
  tools/bundle/spmvd_http.py tools/bundle/bench_memory.py tools/bundle/padding.py tools/bench-upload.sh tools/bench_roundtrip.py \
  tests/e2e/shm_check.py tests/e2e/tap.py tests/e2e/mixed_check.py tools/bundle/packed-gpu.sh tools/bundle/cluster-gpu.sh \
  tools/bundle/bench_scaling.py tools/bundle/wide-gpu.sh tools/bundle/wide_goal.py tools/bundle/solve-gpu.sh tools/bundle/check-gpu.sh \
  tools/bundle/solve_fused_check.py \
  tools/bench_solve.py tools/bench_solve_cupy.py tools/solve_problems.py tools/bench-batch.sh tools/bench-api-spmv.lua \
  tools/bundle/batch-gpu.sh tools/bundle/edges-gpu.sh tools/bundle/study-gpu.sh tools/bench_solve_cpu.py \
  tools/bundle/realistic-gpu.sh tools/bench_realistic.py tools/bundle/kernels-gpu.sh "$BUNDLE/"
cp tests/e2e/lib.sh tests/e2e/cluster_lib.sh tests/e2e/cluster.sh tests/e2e/cluster_vectors.py tests/e2e/cluster_solve.sh \
  tests/e2e/cluster_solve.py tests/e2e/tap.py tests/e2e/wide.sh \
  tests/e2e/wide_check.py tests/e2e/preconds_check.py tests/e2e/sparse_util.py tests/e2e/batch_check.py "$BUNDLE/e2e/"
mkdir -p "$BUNDLE/client" && cp -r clients/python/spmvd "$BUNDLE/client/" && rm -rf "$BUNDLE/client/spmvd/__pycache__"
chmod +x "$BUNDLE/run.sh"

echo "bundle: $(ls "$BUNDLE/bin/real" | tr '\n' ' ')"
echo "bundle libs: $(ls "$BUNDLE/lib" | tr '\n' ' ')"
du -sh "$BUNDLE"
