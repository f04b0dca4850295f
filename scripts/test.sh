#!/usr/bin/env bash
# The whole test suite, as CI runs it: install kafkalog with its test dependencies (this
# builds the compiled twins), then run the suite twice - compiled twins, then pure Python -
# and, when no arguments are given, a 6-second fuzz smoke run of every fuzz harness and the
# packaging checks (scripts/package.sh: the wheel and the sdist built, checked and tested as users
# get them; KAFKALOG_SKIP_PACKAGE=1 skips them).  An install is skipped when the installed build
# is current (scripts/_install.sh).
# Extra arguments go to pytest (e.g. scripts/test.sh -k conformance).
#
# scripts/test.sh --fast: the fast tier only, in both twins at once (one process each), and no
# fuzz smoke run or packaging checks: no JVM (Spark, Kafka), no S3 test server, no long variants
# and no sweeps (the markers in pyproject.toml; CONTRIBUTING.md says what each tier holds).
# Further arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
FAST_TIER="not slow and not spark and not kafka and not cluster and not s3 and not sweep"
fast=""
if [[ "${1:-}" == "--fast" ]]; then
    fast=1
    shift
fi

source scripts/_install.sh
install_kafkalog "test,fuzz"

# Run from a directory where ./src is not importable, so the installed build is what loads.
status=0
# Lint and types first (scripts/lint.sh: ruff over src, tests and bench; mypy over storage and
# arrow), when the whole suite or the whole fast tier runs (not for a chosen subset of tests).
if [[ $# -eq 0 ]]; then
    echo "== lint and types (scripts/lint.sh)"
    PYTHON="$PY" bash scripts/lint.sh || status=1
fi
if [[ -n "$fast" ]]; then
    # the twins side by side (a machine of two cores runs the tier in the time of one pass),
    # each with its own temporary directory; their outputs are printed one after the other
    out="$(mktemp -d)"
    echo "== kafkalog fast tier ($FAST_TIER): compiled and pure-Python twins at once"
    "$PY" -m pytest -p no:cacheprovider --basetemp="$out/compiled" --durations=5 \
        -m "$FAST_TIER" "$@" > "$out/compiled.log" 2>&1 &
    compiled=$!
    KAFKALOG_PURE_PYTHON=1 "$PY" -m pytest -p no:cacheprovider --basetemp="$out/pure" \
        --durations=5 -m "$FAST_TIER" "$@" > "$out/pure.log" 2>&1 &
    pure=$!
    wait "$compiled" || status=$?
    wait "$pure" || status=$?
    echo "== compiled twins"
    cat "$out/compiled.log"
    echo "== pure-Python twins (KAFKALOG_PURE_PYTHON=1)"
    cat "$out/pure.log"
    rm -rf "$out"
    exit $status
fi
echo "== kafkalog test suite: compiled twins"
# (--durations: the 20 slowest tests of each pass, for whoever keeps CI within its 40 minutes)
"$PY" -m pytest -p no:cacheprovider --durations=20 "$@" || status=$?
echo "== kafkalog test suite: pure-Python twins (KAFKALOG_PURE_PYTHON=1)"
# (run once, in the compiled pass above: the standalone-cluster tests, marked "cluster", the tests
# of PySpark's own behaviour, marked "once", and every test against a real Kafka broker or Spark's
# Kafka connector, marked "kafka", ~5 min: the broker judges the compiled twins' bytes, and the
# pure twins are held to the compiled ones byte for byte and answer for answer by test_parity
# (builders, records, framing, varints, peer batches) over generated cases; the twins' Spark reads
# agree through tests/spark; so CI keeps within its 40-minute target)
KAFKALOG_PURE_PYTHON=1 "$PY" -m pytest -p no:cacheprovider --durations=20 -m "not slow and not cluster and not once and not kafka" "$@" || status=$?
# A short coverage-guided run of every fuzz harness (atheris where it installs, else the
# built-in mutator), on fresh corpora seeded from the conformance corpus and built inputs.
# Each harness checks its invariants (twins agree, round trips, only kafkalog errors).
if [[ $# -eq 0 ]]; then
    echo "== fuzz smoke: every harness for ${KAFKALOG_FUZZ_SMOKE_SECONDS:-6}s"
    fuzz_dir="$(mktemp -d)"
    KAFKALOG_FUZZ_DIR="$fuzz_dir" bash scripts/fuzz.sh all "${KAFKALOG_FUZZ_SMOKE_SECONDS:-6}" \
        > "$fuzz_dir/fuzz.log" 2>&1 || { status=1; tail -60 "$fuzz_dir/fuzz.log"; }
    grep -E "^== fuzz harness|DONE|FAILED" "$fuzz_dir/fuzz.log" || true
    rm -rf "$fuzz_dir"
    if [[ -z "${KAFKALOG_SKIP_PACKAGE:-}" ]]; then
        echo "== packaging: build, check and test the wheel and the sdist (scripts/package.sh)"
        PYTHON="$PY" bash scripts/package.sh || status=$?
    fi
fi
exit $status
