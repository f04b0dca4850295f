#!/usr/bin/env bash
# Build the compiled twins with AddressSanitizer + UndefinedBehaviorSanitizer and Cython's
# bounds/wraparound checks (KAFKALOG_CYTHON_DEBUG=1) into a SEPARATE tree, then run the test
# suite (both twins) and the fuzz corpora against that build.  The in-place .so files under
# src/kafkalog are never touched.
#
#   scripts/sanitize.sh [FUZZ_SECONDS_PER_HARNESS]     (default 20; 0 = corpus replay only)
#
# Env: KAFKALOG_ASAN_DIR (default /tmp/kl-asan): the copy and its build;
#      KAFKALOG_FUZZ_DIR (default /tmp/kafkalog-fuzz): fuzz corpora to replay (seeded if absent);
#      SANITIZE_TESTS: the test paths to run (default: the whole suite but tests/spark and
#      tests/test_bounds.py, about 10 minutes on 2 cores).  tests/spark is left out because the
#      preloaded ASan runtime would also be loaded into Spark's JVM; the Spark data source's
#      decoding is the same compiled code the rest of the suite drives.  test_bounds.py is left
#      out because ASan's quarantine and shadow memory make its RSS limits meaningless;
#      PYTEST_ARGS: extra pytest arguments (e.g. "-x -k batch");
#      KAFKALOG_ASAN_REUSE=1: keep an existing sanitizer build of the .pyx files (the Python
#      files are copied afresh);
#      KAFKALOG_ASAN_PURE=1: also run the suite with KAFKALOG_PURE_PYTHON=1 (the compiled
#      twins are not used then, so by default only the compiled-twin run is done).
# Exit status: non-zero when the build, a test, a fuzz check, or a sanitizer report fails.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
PY="${PYTHON:-python3}"
OUT="${KAFKALOG_ASAN_DIR:-/tmp/kl-asan}"
FUZZ_SECONDS="${1:-20}"
LOGDIR="$OUT/logs"

mkdir -p "$LOGDIR"
if [[ -n "${KAFKALOG_ASAN_REUSE:-}" ]] && ls "$OUT"/tree/src/kafkalog/_batch*.so >/dev/null 2>&1; then
    echo "== reusing the sanitizer build in $OUT/tree (Python files refreshed from src/)"
    tar -C src --exclude='__pycache__' --exclude='*.so' --exclude='*.c' --exclude='*.pyx' \
        --exclude='*.pxd' -cf - kafkalog | tar -C "$OUT/tree/src" -xf -
else
rm -rf "$OUT/tree"
mkdir -p "$OUT/tree"
# A copy of what the build needs: sources (no .so / generated .c), setup.py, pyproject.toml.
cp setup.py pyproject.toml README.md "$OUT/tree/"
mkdir -p "$OUT/tree/src"
tar -C src --exclude='__pycache__' --exclude='*.so' --exclude='kafkalog/_*.c' -cf - kafkalog \
    | tar -C "$OUT/tree/src" -xf -

echo "== building the sanitizer build in $OUT/tree (log: $LOGDIR/build.log)"
SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize=alignment"
(
    cd "$OUT/tree" &&
    KAFKALOG_CYTHON_DEBUG=1 \
    KAFKALOG_EXTRA_CFLAGS="-O1 -g $SAN" \
    KAFKALOG_EXTRA_LDFLAGS="-fsanitize=address,undefined" \
    "$PY" setup.py build_ext --inplace -j 2
) > "$LOGDIR/build.log" 2>&1 || { echo "== BUILD FAILED"; tail -30 "$LOGDIR/build.log"; exit 2; }
fi
ls "$OUT"/tree/src/kafkalog/*.so

export PYTHONPATH="$OUT/tree/src"
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1"
export PYTHONMALLOC=malloc   # let ASan see every Python allocation
export KAFKALOG_CONFORMANCE="${KAFKALOG_CONFORMANCE:-$(cd "$REPO/.." && pwd)/shared/conformance}"

"$PY" -c "import kafkalog, kafkalog._batch as b; assert kafkalog.IMPLEMENTATION == 'cython', kafkalog.FALLBACK_REASON; print('loaded', b.__file__)" \
    || { echo "== the sanitizer build does not import"; exit 2; }

status=0
# --continue-on-collection-errors: a module another engineer is half-way through must not
# stop the run; its collection error still fails the run (and shows in the log).
PYTEST=("$PY" -m pytest -q -p no:cacheprovider --continue-on-collection-errors)
DEFAULT_TESTS="tests --ignore=tests/spark --ignore=tests/test_bounds.py"
TESTS="${SANITIZE_TESTS:-$DEFAULT_TESTS}"
echo "== test suite, compiled twins (ASan+UBSan), log: $LOGDIR/tests-compiled.log"
"${PYTEST[@]}" ${PYTEST_ARGS:-} $TESTS > "$LOGDIR/tests-compiled.log" 2>&1 || status=1
tail -3 "$LOGDIR/tests-compiled.log"
if [[ -n "${KAFKALOG_ASAN_PURE:-}" ]]; then
    echo "== test suite, pure twins (ASan+UBSan), log: $LOGDIR/tests-pure.log"
    KAFKALOG_PURE_PYTHON=1 "${PYTEST[@]}" ${PYTEST_ARGS:-} $TESTS > "$LOGDIR/tests-pure.log" 2>&1 || status=1
    tail -3 "$LOGDIR/tests-pure.log"
fi

echo "== fuzz corpora + ${FUZZ_SECONDS}s of mutations per harness (no atheris under ASan)"
for h in varint records arrow index checkpoint snapshot segment decoders; do
    KAFKALOG_FUZZ_NO_ATHERIS=1 "$PY" fuzz/run.py "$h" --no-atheris --seconds "$FUZZ_SECONDS" \
        > "$LOGDIR/fuzz-$h.log" 2>&1 || { status=1; echo "   $h: FAILED (see $LOGDIR/fuzz-$h.log)"; }
    tail -1 "$LOGDIR/fuzz-$h.log"
done

if grep -l -E "ERROR: AddressSanitizer|runtime error:|SUMMARY: (Address|UndefinedBehavior)Sanitizer" "$LOGDIR"/*.log; then
    echo "== SANITIZER REPORTS FOUND (files above)"
    grep -h -E -A3 "ERROR: AddressSanitizer|runtime error:" "$LOGDIR"/*.log | head -60
    status=1
fi
[[ $status == 0 ]] && echo "== sanitize: OK" || echo "== sanitize: FAILED"
exit $status
