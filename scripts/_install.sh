# Sourced by scripts/run.sh and scripts/test.sh: install kafkalog with the given extras unless
# the installed build is current, and never wait in silence.
#   install_kafkalog EXTRAS      e.g. install_kafkalog "all,spark"
# "Current" means: the installed kafkalog recorded the same hash of its build inputs (setup.py,
# pyproject.toml, src/kafkalog) as this checkout has (python setup.py --source-hash), and every
# requirement of those extras is installed at a matching version.  Works in a virtual
# environment or without one (then pip installs for the interpreter $PYTHON names).
# _pip_build_mb SINCE: megabytes in pip's work directories made after the file SINCE
# (the progress of a wheel build)
_pip_build_mb() {
    find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'pip-*' -newer "$1" -print0 2>/dev/null \
        | du -smc --files0-from=- 2>/dev/null | tail -1 | cut -f1
}
install_kafkalog() {
    local extras="$1" want
    want="$("$PY" setup.py --source-hash)"
    if "$PY" - "$want" "$extras" <<'PYEOF' 2>/dev/null
import importlib.metadata as md, json, sys
try:
    from packaging.requirements import Requirement
except ImportError:  # a fresh venv: pip's own copy
    from pip._vendor.packaging.requirements import Requirement
want, extras = sys.argv[1], set(filter(None, sys.argv[2].split(",")))
dist = md.distribution("kafkalog")
info = json.loads(dist.locate_file("kafkalog/_build_info.json").read_text())
assert info["source_hash"] == want, "sources changed"
seen, todo = set(), set(extras)
while todo:
    extra = todo.pop(); seen.add(extra)
    for r in dist.requires or []:
        req = Requirement(r)
        if req.marker and not req.marker.evaluate({"extra": extra}):
            continue
        if req.name == "kafkalog":
            todo |= set(req.extras) - seen
            continue
        assert req.specifier.contains(md.version(req.name), prereleases=True), req
PYEOF
    then
        echo "== kafkalog is installed and current for [$extras] ($("$PY" -c 'import kafkalog,sys; print(kafkalog.IMPLEMENTATION, "twins, in", sys.prefix)')): no rebuild"
        return 0
    fi
    local log
    log="$(mktemp -t kafkalog-pip.XXXXXX.log)"
    echo "== installing kafkalog[$extras] for $("$PY" -c 'import sys; print(sys.executable)') (building the compiled twins takes ~2 min on 2 cores; pip's log: $log)"
    "$PY" -m pip install --disable-pip-version-check --progress-bar off --upgrade ".[$extras]" > "$log" 2>&1 &
    local pid=$! n=0
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1; n=$((n + 1))
        if (( n % 15 == 0 )); then
            local phase
            phase="$(grep -E '^ *(Collecting|Downloading|Building|Installing|Successfully)' "$log" | tail -1 | sed 's/^ *//')"
            case "$phase" in
                "Building wheel for pyspark"*started*)
                    # pyspark is published as an sdist only: the first install builds its ~456 MB
                    # wheel (1-3 min on 2 cores); pip caches it, so later installs skip this
                    phase="$phase: pyspark's first install builds its ~456 MB wheel; $(_pip_build_mb "$log") MB written so far" ;;
            esac
            echo "   ... ${n}s: $phase"
        fi
    done
    if ! wait "$pid"; then
        tail -30 "$log"; echo "== pip install failed; the whole log: $log" >&2; return 1
    fi
    grep -E "^Successfully installed" "$log" | cut -c1-300 || true
    echo "== installed: $("$PY" -m kafkalog --version 2>/dev/null || "$PY" -c 'import kafkalog; print(kafkalog.__version__, kafkalog.IMPLEMENTATION)')"
}
