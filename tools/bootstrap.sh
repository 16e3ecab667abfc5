#!/usr/bin/env bash
# bootstrap.sh — installs the Debian packages spmvd builds and tests with.
#
# Called by `make run` and `make test`. As root it installs what is missing
# with apt-get (updating the package lists once if they are empty or an
# install fails); as another user it prints the exact command to run and
# fails, so nothing half-builds.
set -euo pipefail

# Build: compiler, make, pkg-config and the -dev packages the build links (README.md, docs/operations.md).
# Tests: curl (end-to-end), systemd (systemd-socket-activate, systemd-analyze),
# clang with libFuzzer, openssl (a self-signed certificate for the TLS test).
# NumPy and SciPy (solve.sh checks the daemon's solvers against SciPy's) and
# the Python client's tests (tests/e2e/python.sh, clients/python): requests,
# matplotlib, pytest and tqdm, all from Debian, so pip is never needed.
# Open MPI (the cluster, issue 16: mpirun and the C bindings; NCCL comes
# with the CUDA toolkit).
PACKAGES=(
  build-essential pkg-config
  libmicrohttpd-dev libjansson-dev uuid-dev libsystemd-dev zlib1g-dev libzip-dev libssl-dev
  libpng-dev libcurl4-openssl-dev libcmocka-dev
  curl systemd clang libclang-rt-14-dev openssl python3 wrk
  python3-numpy python3-scipy python3-requests python3-matplotlib python3-pytest python3-tqdm
  openmpi-bin libopenmpi-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "spmvd needs these Debian packages: ${missing[*]}" >&2
  echo "install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "bootstrap: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
  apt-get update >&2
  apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi
