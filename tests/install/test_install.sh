#!/usr/bin/env bash
# A new user's install: dcomm installed into a prefix that is then moved elsewhere; an outside program built
# against the moved copy with pkg-config, meson's dependency('dcomm') and CMake's find_package(dcomm), each with
# no flags of its own (the C++20 requirement comes from dcomm); each run on 2 ranks by the moved prefix's
# dcomm-run, which must start with no LD_LIBRARY_PATH (its RPATH is $ORIGIN-relative). dcomm-plot is installed.
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
# Move the installed tree: nothing in it may remember where it was installed.
moved="$tmp/moved/dcomm"
mkdir -p "$tmp/moved"
mv "$tmp/root$prefix" "$moved"
rm -rf "$tmp/root"
unset LD_LIBRARY_PATH
export PKG_CONFIG_PATH="$moved/$libdir/pkgconfig"
cp -r "$src/tests/install/app" "$tmp/app"
run=("$moved/bin/dcomm-run" --nproc-per-node 2 --)

fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== the moved tools start without LD_LIBRARY_PATH"
for tool in dcomm-run dcomm-bench dcomm-demo; do
  if ldd "$moved/bin/$tool" | grep 'not found'; then fail "$tool cannot find its libraries"; fi
done
"$moved/bin/dcomm-run" --help >/dev/null
[ -x "$moved/bin/dcomm-plot" ] || fail "dcomm-plot is not installed in $moved/bin"

echo "== dcomm.pc"
pc="$PKG_CONFIG_PATH/dcomm.pc"
pkg-config --cflags dcomm | grep -q -- '-std=c++20' || fail "no -std=c++20 in Cflags: $(pkg-config --cflags dcomm)"
[ "$(pkg-config --variable=libdir dcomm)" -ef "$moved/$libdir" ] || fail "libdir is not the moved one"
if grep -q '^Requires' "$pc"; then fail "Requires in dcomm.pc: $(grep '^Requires' "$pc")"; fi
pkg-config --static --libs dcomm | tr ' ' '\n' | sort | uniq -d | grep . && fail "duplicated Libs.private"

echo "== pkg-config"
# shellcheck disable=SC2046
g++ "$tmp/app/app.cpp" -o "$tmp/app_pc" $(pkg-config --cflags --libs dcomm)
# The program itself finds libdcomm as any program linked by pkg-config does: on the loader's path.
"${run[@]}" env LD_LIBRARY_PATH="$moved/$libdir" "$tmp/app_pc" | tee "$tmp/out_pc"
[ "$(grep -c "all_reduce ok" "$tmp/out_pc")" = 2 ] || fail "pkg-config program: want 2 ranks ok"

echo "== the README's example, warning-free under -Wall -Wextra"
python3 - "$src/README.md" > "$tmp/readme.cpp" <<'PY'
import re, sys
print(re.search(r"```cpp\n(.*?)```", open(sys.argv[1]).read(), re.S).group(1))
PY
# shellcheck disable=SC2046
g++ -Wall -Wextra -Werror -c "$tmp/readme.cpp" -o "$tmp/readme.o" $(pkg-config --cflags dcomm)

echo "== meson dependency('dcomm')"
meson setup "$tmp/app_meson" "$tmp/app" >/dev/null
ninja -C "$tmp/app_meson" >/dev/null
[ "$("${run[@]}" "$tmp/app_meson/app" | grep -c "all_reduce ok")" = 2 ] || fail "meson program"

echo "== cmake find_package(dcomm)"
cmake -S "$tmp/app" -B "$tmp/app_cmake" -DCMAKE_PREFIX_PATH="$moved" >/dev/null
cmake --build "$tmp/app_cmake" >/dev/null
[ "$("${run[@]}" "$tmp/app_cmake/app" | grep -c "all_reduce ok")" = 2 ] || fail "cmake program"
echo ok
