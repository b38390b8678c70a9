#!/usr/bin/env bash
# Configures (once) and builds dcomm into ./build. CUDA is picked up from /usr/local/cuda when present.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d /usr/local/cuda/bin ] && ! command -v nvcc >/dev/null; then export PATH=/usr/local/cuda/bin:$PATH; fi
if [ ! -f build/build.ninja ]; then
  meson setup build "$@"
fi
ninja -C build -j"$(nproc)" >/dev/null || ninja -C build -j1
