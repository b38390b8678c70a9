#!/usr/bin/env bash
# Gathers the headers dcomm builds with (fmt, nlohmann-json, CLI11, Catch2) into .gpukit/include, so that a machine
# without the Debian -dev packages (the GPU machine of the device tool) can build with
# `meson setup -Dheader_kit=.gpukit/include` (fmt then compiles header-only). Run it here, then carry .gpukit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh >/dev/null
rm -rf .gpukit
mkdir -p .gpukit/include
for d in fmt nlohmann CLI catch2; do
  cp -r "/usr/include/$d" .gpukit/include/
done
du -sh .gpukit
