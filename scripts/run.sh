#!/usr/bin/env bash
# The main job on the embedded default: install kafkalog (building the compiled twins), write
# a sample log root with every message format and codec, dump it, then read it with a local
# Spark through the "kafkalog" data source and write Parquet, printing counts per
# topic/partition.  Arguments go to `python -m kafkalog.demo` (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
source scripts/_install.sh
install_kafkalog "all,spark"
exec "$PY" -m kafkalog.demo "$@"
