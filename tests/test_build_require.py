"""KAFKALOG_REQUIRE_COMPILED: a build that cannot compile the twins fails instead of falling
back to the pure ones (which, in an in-place build, leaves compiled modules of an older
source in place)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytest.importorskip("Cython", reason="Cython is not installed (the test extra installs it)")


def _setuptools_ok() -> bool:
    import setuptools

    return int(setuptools.__version__.split(".")[0]) >= 77


pytestmark = pytest.mark.skipif(
    not _setuptools_ok(), reason="setup.py needs setuptools>=77 (the test extra installs it)")


def _tree(tmp_path):
    """A source tree whose only .pyx does not translate."""
    for name in ("setup.py", "pyproject.toml", "README.md", "LICENSE"):
        if os.path.exists(os.path.join(ROOT, name)):
            shutil.copy(os.path.join(ROOT, name), tmp_path / name)
    pkg = tmp_path / "src" / "kafkalog"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_varint.pyx").write_text("def broken(:\n    pass\n")
    return tmp_path


@pytest.mark.parametrize("require", [False, True])
def test_require_compiled_fails_the_build(tmp_path, require):
    tree = _tree(tmp_path)
    env = dict(os.environ)
    env.pop("KAFKALOG_PURE_PYTHON", None)
    env.pop("KAFKALOG_REQUIRE_COMPILED", None)
    if require:
        env["KAFKALOG_REQUIRE_COMPILED"] = "1"
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree,
                       env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    if require:
        assert r.returncode != 0, out[-2000:]
        assert "KAFKALOG_REQUIRE_COMPILED is set" in out and "translate" in out, out[-2000:]
    else:
        assert r.returncode == 0, out[-2000:]
        assert "WITHOUT its compiled twins" in out, out[-2000:]
