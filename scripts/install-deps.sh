#!/usr/bin/env bash
# Installs what dcomm needs to build and test, from Debian's packages. Idempotent: installs only what is missing.
set -euo pipefail
pkgs=(meson ninja-build g++ pkg-config cmake catch2 libfmt-dev nlohmann-json3-dev libcli11-dev
      libucx-dev ucx-utils openmpi-bin libopenmpi-dev iproute2 python3 python3-matplotlib git procps
      clang libclang-rt-14-dev)  # clang: the store's fuzz target (scripts/fuzz-store.sh)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "dcomm: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
