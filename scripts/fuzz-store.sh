#!/usr/bin/env bash
# Builds the TCP store's libFuzzer target (tests/fuzz/fuzz_store.cpp) with clang, ASan and UBSan, and runs it on
# the seed corpus (tests/fuzz/make_seeds.py). Needs clang and libclang-rt-14-dev (scripts/install-deps.sh).
#   scripts/fuzz-store.sh --time 60        run for 60 s (the CI smoke run)
#   scripts/fuzz-store.sh --runs 10000000  run 10 million inputs
# Extra arguments go to libFuzzer. Exits 77 when clang's fuzzer runtime is missing, non-zero on a crash, a leak or
# the memory limit (the crashing input is left in build-fuzz/). Memory is bounded with -rss_limit_mb.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=(-max_total_time=60)
case "${1:-}" in
  --time) limit=(-max_total_time="$2"); shift 2 ;;
  --runs) limit=(-runs="$2"); shift 2 ;;
esac
CXX=${FUZZ_CXX:-clang++}
out=${FUZZ_OUT:-build-fuzz}  # the meson test puts it in the build directory
mkdir -p "$out"
if ! command -v "$CXX" >/dev/null || ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
    | "$CXX" -x c++ -fsanitize=fuzzer - -o "$out/probe" 2>/dev/null; then
  echo "fuzz-store: $CXX with -fsanitize=fuzzer is not available (install clang and libclang-rt-14-dev); skipped"
  exit 77
fi
srcs=(tests/fuzz/fuzz_store.cpp rendezvous/protocol.cpp rendezvous/hello.cpp rendezvous/secret.cpp
      rendezvous/store_service.cpp rendezvous/kv_table.cpp common/error.cpp common/types.cpp common/env.cpp
      common/log.cpp common/deadline.cpp)
bin=$out/fuzz_store
# Rebuild only when a source changed.
if [ ! -x "$bin" ] || [ -n "$(find "${srcs[@]}" rendezvous/*.hpp common/*.hpp include -newer "$bin" -print -quit)" ]; then
  echo "fuzz-store: building $bin"
  "$CXX" -std=c++20 -O2 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I. -Iinclude "${srcs[@]}" -lfmt -pthread -o "$bin"
fi
corpus=$out/corpus
rm -rf "$out/seeds" && python3 tests/fuzz/make_seeds.py "$out/seeds"
mkdir -p "$corpus"
echo "fuzz-store: running ${limit[*]}"
# New inputs go to $corpus (kept between runs); the seeds are read too. rss_limit bounds memory: a run that grows
# past it fails like a crash. Leak detection is on (ASan's default with libFuzzer).
"$bin" "${limit[@]}" -rss_limit_mb=512 -malloc_limit_mb=256 -max_len=4096 -print_final_stats=1 \
  -artifact_prefix="$out/" "$@" "$corpus" "$out/seeds"
