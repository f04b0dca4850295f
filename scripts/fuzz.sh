#!/usr/bin/env bash
# Run kafkalog's fuzz harnesses (fuzz/harnesses.py).
#
#   scripts/fuzz.sh [HARNESS|all] [SECONDS] [-- libFuzzer flags]
#
# HARNESS: varint, records, arrow, index, checkpoint, snapshot, segment, decoders, or all (default).
# SECONDS: per harness (default 30).  With atheris installed (pip install atheris) the run is
# coverage-guided (libFuzzer); without it, fuzz/run.py's random mutator runs instead.
# Corpora and crash files go to $KAFKALOG_FUZZ_DIR (default /tmp/kafkalog-fuzz): corpus/<harness>/
# is seeded from the conformance corpus ($KAFKALOG_CONFORMANCE or ../shared/conformance) on
# first use, and grows across runs.  Set KAFKALOG_FUZZ_NO_ATHERIS=1 to force the mutator.
# The kafkalog imported is the one on PYTHONPATH / installed, else the in-tree build in src/.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
HARNESSES=(varint records arrow index checkpoint snapshot segment decoders)
which="${1:-all}"
seconds="${2:-30}"
shift $(( $# > 2 ? 2 : $# )) || true
extra=()
if [[ "${1:-}" == "--" ]]; then shift; extra=("--" "$@"); fi
if [[ "$which" == "all" ]]; then list=("${HARNESSES[@]}"); else list=("$which"); fi
flags=()
if [[ -n "${KAFKALOG_FUZZ_NO_ATHERIS:-}" ]]; then flags+=(--no-atheris); fi
status=0
for h in "${list[@]}"; do
    echo "== fuzz harness $h for ${seconds}s"
    "$PY" fuzz/run.py "$h" --seconds "$seconds" "${flags[@]}" "${extra[@]}" || { status=$?; echo "== $h FAILED (exit $status)"; }
done
exit $status
