#!/usr/bin/env bash
# Installs every Debian package cclod needs to build, test and run the demo. Idempotent:
# installs only what is missing, and runs apt-get update only when something is.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-rules-java g++ protobuf-compiler protobuf-compiler-grpc
  libprotobuf-dev libgrpc++-dev libabsl-dev libspdlog-dev libfmt-dev libyaml-cpp-dev
  libcli11-dev libssl-dev prometheus-cpp-dev libsystemd-dev libibverbs-dev
  libgtest-dev libgmock-dev libbenchmark-dev iproute2 procps openssl prometheus
  openmpi-bin libopenmpi-dev libgloo-dev iperf3
)

missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
