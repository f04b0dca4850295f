#!/usr/bin/env bash
# Coverage-guided fuzzing of the compiled twins' C code, under AddressSanitizer + UBSan.
#
#   scripts/fuzz-native.sh [HARNESS|all] [SECONDS] [-- libFuzzer flags]
#
# 1. Copies the sources into $KAFKALOG_NATIVE_DIR/tree (default /tmp/kl-native; the in-place
#    .so files under src/ are never touched) and builds the extensions with clang:
#    -fsanitize=fuzzer-no-link (SanitizerCoverage: inline 8-bit edge counters, PC tables,
#    comparison tracing) plus address,undefined, and Cython's bounds/wraparound checks
#    (KAFKALOG_CYTHON_DEBUG=1).
# 2. Links one shared library out of clang's own runtime archives: ASan (with UBSan's
#    handlers) and libFuzzer without its main(), i.e. what atheris calls asan_with_fuzzer.so.
#    Preloaded, it gives the process a single libFuzzer that sees both the Python coverage
#    (atheris's bytecode instrumentation) and the C edge coverage of _batch/_legacy/_arrow/...
# 3. Runs fuzz/run.py for each harness with that library preloaded; a sanitizer report or a
#    broken invariant stops the run and leaves the input as $KAFKALOG_FUZZ_DIR/corpus/../<h>-crash-*.
#
# Needs clang (with its compiler-rt: Debian's clang + libclang-rt-dev) and atheris.
# Env: KAFKALOG_NATIVE_REUSE=1 keeps an existing build of the .pyx files (Python files are
# copied afresh); KAFKALOG_FUZZ_DIR (default
# /tmp/kafkalog-fuzz-native): corpora, seeded on first use and grown across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
PY="${PYTHON:-python3}"
CLANG="${CLANG:-clang}"
OUT="${KAFKALOG_NATIVE_DIR:-/tmp/kl-native}"
HARNESSES=(varint records arrow index checkpoint snapshot segment decoders)
which="${1:-all}"
seconds="${2:-60}"
shift $(( $# > 2 ? 2 : $# )) || true
extra=()
if [[ "${1:-}" == "--" ]]; then shift; extra=("$@"); fi
if [[ "$which" == "all" ]]; then list=("${HARNESSES[@]}"); else list=("$which"); fi

command -v "$CLANG" >/dev/null || { echo "fuzz-native: $CLANG not found"; exit 2; }
"$PY" -c "import atheris" 2>/dev/null || { echo "fuzz-native: pip install atheris"; exit 2; }
RT="$("$CLANG" -print-resource-dir)/lib/linux"
[[ -f "$RT/libclang_rt.fuzzer_no_main-x86_64.a" && -f "$RT/libclang_rt.asan-x86_64.a" ]] \
    || { echo "fuzz-native: clang's compiler-rt archives are missing in $RT"; exit 2; }

mkdir -p "$OUT"
if [[ -n "${KAFKALOG_NATIVE_REUSE:-}" ]] && ls "$OUT"/tree/src/kafkalog/_batch*.so >/dev/null 2>&1 \
        && [[ -f "$OUT/asan_with_fuzzer.so" ]]; then
    echo "== reusing the build in $OUT (Python files refreshed from src/)"
    tar -C src --exclude='__pycache__' --exclude='*.so' --exclude='*.c' --exclude='*.pyx' \
        --exclude='*.pxd' -cf - kafkalog | tar -C "$OUT/tree/src" -xf -
else
    rm -rf "$OUT/tree" "$OUT/rt"
    mkdir -p "$OUT/tree/src" "$OUT/rt"
    cp setup.py pyproject.toml README.md "$OUT/tree/"
    tar -C src --exclude='__pycache__' --exclude='*.so' --exclude='kafkalog/_*.c' -cf - kafkalog \
        | tar -C "$OUT/tree/src" -xf -
    echo "== building the instrumented extensions in $OUT/tree (log: $OUT/build.log)"
    SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=alignment,function"
    (
        cd "$OUT/tree" &&
        CC="$CLANG" LDSHARED="$CLANG -shared" KAFKALOG_CYTHON_DEBUG=1 \
        KAFKALOG_EXTRA_CFLAGS="-O1 -g -fno-omit-frame-pointer $SAN" \
        KAFKALOG_EXTRA_LDFLAGS="$SAN" \
        "$PY" setup.py build_ext --inplace -j 2
    ) > "$OUT/build.log" 2>&1 || { echo "== BUILD FAILED"; tail -30 "$OUT/build.log"; exit 2; }
    # asan_preinit.o has a .preinit_array, which a shared library may not carry.
    cp "$RT/libclang_rt.asan-x86_64.a" "$OUT/rt/asan.a"
    ar d "$OUT/rt/asan.a" asan_preinit.cpp.o
    "$CLANG"++ -shared -o "$OUT/asan_with_fuzzer.so" -Wl,--whole-archive "$OUT/rt/asan.a" \
        "$RT/libclang_rt.asan_cxx-x86_64.a" "$RT/libclang_rt.fuzzer_no_main-x86_64.a" \
        -Wl,--no-whole-archive -lpthread -ldl -lrt -lm -lstdc++
fi

export PYTHONPATH="$OUT/tree/src"
export LD_PRELOAD="$OUT/asan_with_fuzzer.so"
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:quarantine_size_mb=16:malloc_context_size=8:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export KAFKALOG_FUZZ_REQUIRE_COMPILED=1
export KAFKALOG_FUZZ_DIR="${KAFKALOG_FUZZ_DIR:-/tmp/kafkalog-fuzz-native}"
export KAFKALOG_CONFORMANCE="${KAFKALOG_CONFORMANCE:-$(cd "$REPO/.." && pwd)/shared/conformance}"

status=0
for h in "${list[@]}"; do
    echo "== native fuzz harness $h for ${seconds}s"
    "$PY" fuzz/run.py "$h" --seconds "$seconds" -- -rss_limit_mb=6144 ${extra[@]+"${extra[@]}"} \
        || { status=$?; echo "== $h FAILED (exit $status)"; }
done
exit $status
