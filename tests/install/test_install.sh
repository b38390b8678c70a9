#!/usr/bin/env bash
# Installs dcomm into a staging root, then builds an outside program against it three ways: pkg-config by hand,
# meson's dependency('dcomm'), and CMake's find_package(dcomm). Each program must run and print "ok".
set -euo pipefail
build=${DCOMM_BUILD_DIR:?}
src=${DCOMM_SOURCE_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
meson install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet >/dev/null
read -r prefix libdir < <(python3 - "$build" <<'PY'
import json, sys
opts = {o["name"]: o["value"] for o in json.load(open(sys.argv[1] + "/meson-info/intro-buildoptions.json"))}
print(opts["prefix"], opts["libdir"])
PY
)
root="$tmp/root$prefix"
export PKG_CONFIG_PATH="$root/$libdir/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$tmp/root"
export LD_LIBRARY_PATH="$root/$libdir"
cp -r "$src/tests/install/app" "$tmp/app"

echo "== pkg-config"
# shellcheck disable=SC2046
g++ -std=c++20 "$tmp/app/app.cpp" -o "$tmp/app_pc" $(pkg-config --cflags --libs dcomm)
"$tmp/app_pc" | tee "$tmp/out_pc"
grep -q "all_reduce ok" "$tmp/out_pc"

echo "== meson dependency('dcomm')"
meson setup "$tmp/app_meson" "$tmp/app" >/dev/null
ninja -C "$tmp/app_meson" >/dev/null
"$tmp/app_meson/app" | grep "all_reduce ok"

echo "== cmake find_package(dcomm)"
cmake -S "$tmp/app" -B "$tmp/app_cmake" -DCMAKE_PREFIX_PATH="$root" >/dev/null
cmake --build "$tmp/app_cmake" >/dev/null
"$tmp/app_cmake/app" | grep "all_reduce ok"
