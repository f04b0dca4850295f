"""Packaging facts the artifacts depend on: how kafkalog reports a build without its compiled
twins, the build-input hash the scripts use to skip a rebuild, and the project metadata.
The artifacts themselves are built and tested by scripts/package.sh."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = Path(__import__("kafkalog").__file__).parent

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


def _pure_copy(tmp_path, build_info):
    """A copy of the kafkalog package with no compiled modules, as a no-compiler install has."""
    dest = tmp_path / "site" / "kafkalog"
    shutil.copytree(PKG, dest, ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", "*.c",
                                                             "_build_info.json"))
    if build_info is not None:
        (dest / "_build_info.json").write_text(json.dumps(build_info))
    return dest.parent


def _run(site, code, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("KAFKALOG_PURE_PYTHON", "PYTHONPATH")}
    e.update(env, PYTHONPATH=str(site))
    return subprocess.run([sys.executable, "-c", code], env=e, cwd=str(site), capture_output=True,
                          text=True, check=True).stdout


def test_build_without_twins_reports_the_recorded_reason(tmp_path):
    why = "the C build failed (CompileError: command '/bin/false' failed with exit code 1)"
    site = _pure_copy(tmp_path, {"compiled": False, "reason": why, "source_hash": "x"})
    out = _run(site, "import kafkalog; print(kafkalog.__file__); print(kafkalog.IMPLEMENTATION); "
               "print(kafkalog.FALLBACK_REASON)")
    path, impl, reason = out.splitlines()
    assert path.startswith(str(site)), path
    assert impl == "python"
    assert reason == f"built without the compiled twins: {why}"
    version = _run(site, "import sys; sys.argv=['kafkalog', '--version']; from kafkalog.tools.cli "
                   "import main; main()")
    # argparse may wrap the line
    assert " ".join(version.split()) == (
        f"kafkalog {_run(site, 'import kafkalog; print(kafkalog.__version__)').strip()} "
        f"(implementation: python; built without the compiled twins: {why})")


def test_missing_twins_without_build_record_name_the_missing_module(tmp_path):
    # before: "cannot import name '_batch' from partially initialized module 'kafkalog'
    # (most likely due to a circular import)" - a false reason
    site = _pure_copy(tmp_path, None)
    reason = _run(site, "import kafkalog; print(kafkalog.FALLBACK_REASON)").strip()
    assert "circular import" not in reason and "partially initialized" not in reason, reason
    assert "No module named 'kafkalog._batch'" in reason, reason


def test_pure_request_is_not_a_fallback(tmp_path):
    site = _pure_copy(tmp_path, {"compiled": False, "reason": "KAFKALOG_PURE_PYTHON was set at "
                                 "build time", "source_hash": "x"})
    out = _run(site, "import kafkalog; print(kafkalog.IMPLEMENTATION, kafkalog.FALLBACK_REASON)",
               KAFKALOG_PURE_PYTHON="1")
    assert out.split() == ["python", "None"]


def test_source_hash_is_stable_and_sees_a_source_change(tmp_path):
    def h(root):
        return subprocess.run([sys.executable, "setup.py", "--source-hash"], cwd=str(root),
                              capture_output=True, text=True, check=True).stdout.strip()
    copy = tmp_path / "tree"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__", "build",
                                                              "dist", ".git", "tests", "bench",
                                                              "fuzz", "docs"))
    first = h(copy)
    assert len(first) == 64 and first == h(copy)
    (copy / "src" / "kafkalog" / "_csrc" / "crc32c.h").write_text("/* changed */\n",
                                                                  encoding="utf-8")
    assert h(copy) != first


@pytest.mark.skipif(tomllib is None, reason="tomllib needs Python 3.11")
def test_metadata():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project = meta["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").lstrip().startswith("Apache License")
    assert any(r.startswith("setuptools>=77") for r in meta["build-system"]["requires"])
    assert "pandas>=2.0,<3" in project["optional-dependencies"]["spark"]
    assert project["dynamic"] == ["version"]  # the version lives in kafkalog/_version.py only
    low = project["requires-python"].removeprefix(">=")
    pythons = {c.rsplit(" :: ", 1)[1] for c in project["classifiers"]
               if c.startswith("Programming Language :: Python :: 3.")}
    built = {f"3.{b[3:]}" for b in meta["tool"]["cibuildwheel"]["build"].replace("-*", "").split()}
    assert pythons == built and min(pythons, key=lambda v: int(v.split(".")[1])) == low
    assert {"Homepage", "Source", "Changelog"} <= set(project["urls"])
    from kafkalog import __version__
    assert f"## {__version__}" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
