#!/usr/bin/env bash
# The main job on the embedded default: install kafkalog (building the compiled twins), write
# a sample log directory with every message format and codec, dump it, verify it and decode
# it to Arrow.  Arguments go to `python -m kafkalog.demo` (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
"$PY" -m pip install --quiet --disable-pip-version-check --upgrade ".[all]"
exec "$PY" -m kafkalog.demo "$@"
