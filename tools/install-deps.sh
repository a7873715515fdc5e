#!/usr/bin/env bash
# Installs ccl's build and test dependencies from Debian's packages. Idempotent: does nothing
# (and needs no network) when everything is already installed. Run as root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libhwloc-dev libspdlog-dev libfmt-dev libfabric-dev libze-dev libgtest-dev
  # OpenSSL's libcrypto: HMAC-SHA-256 for the KVS handshake (src/kvs/secret.cpp)
  libssl-dev
  procps util-linux
  # fake nodes on one machine (tools/fakenodes, tests/multinode): ip for namespaces, veths, bridges
  iproute2
  # launchers the tests start ranks with (issue 7): MPICH's Hydra, Open MPI and its PMIx
  mpich openmpi-bin libpmix-dev
  # their compiler wrappers need the headers (tests/launch/mpi_and_ccl.sh builds an MPI program)
  libmpich-dev libopenmpi-dev
  # the PyTorch backend (bindings/torch) is built and tested against Debian's torch
  python3-torch libtorch-dev python3-setuptools python3-dev pybind11-dev
  # the plots of tools/plot_bench.py and tools/sweep.sh
  python3-matplotlib
  # the libFuzzer target of the KVS protocol (tests/fuzz): clang, and its fuzzer runtime, which
  # clang only recommends (and --no-install-recommends skips)
  clang libclang-rt-dev
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: need root to install: ${missing[*]}" >&2
  exit 1
fi
echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
