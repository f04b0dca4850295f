#!/usr/bin/env bash
# Lint and type checks: ruff (pyproject.toml [tool.ruff]: E, F, W and import order, lines of
# at most 100 characters) over the package, the tests and the benches, then mypy
# ([tool.mypy]: the storage engine and kafkalog.arrow).  Both come with the "lint" extra, which
# the test extra installs (pip install -e ".[test]").  Exits non-zero if either finds anything;
# runs both either way.  Extra arguments go to ruff (e.g. scripts/lint.sh --fix).
#
# scripts/test.sh runs it before the tests (the whole suite and the fast tier).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

for tool in ruff mypy; do
    "$PY" -m "$tool" --version >/dev/null 2>&1 || {
        echo "lint.sh: $tool is not installed for $PY (pip install \"kafkalog[lint]\")" >&2
        exit 2
    }
done

status=0
echo "== ruff check src tests bench"
"$PY" -m ruff check src tests bench "$@" || status=1
echo "== mypy ($("$PY" -m mypy --version))"
"$PY" -m mypy || status=1
exit $status
