#!/usr/bin/env bash
# The whole test suite, as CI runs it: install kafkalog with its test dependencies (this
# builds the compiled twins), then run the suite twice - compiled twins, then pure Python.
# Extra arguments go to pytest (e.g. scripts/test.sh -k conformance).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

"$PY" -m pip install --quiet --disable-pip-version-check --upgrade ".[test]"

# Run from a directory where ./src is not importable, so the installed build is what loads.
status=0
echo "== kafkalog test suite: compiled twins"
"$PY" -m pytest -p no:cacheprovider "$@" || status=$?
echo "== kafkalog test suite: pure-Python twins (KAFKALOG_PURE_PYTHON=1)"
KAFKALOG_PURE_PYTHON=1 "$PY" -m pytest -p no:cacheprovider "$@" || status=$?
exit $status
