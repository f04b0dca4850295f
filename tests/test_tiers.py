"""The fast tier stays what CONTRIBUTING.md says: scripts/test.sh --fast deselects every marker
of a test that starts a JVM, a broker or a server, the long variants and the sweeps, and each
sweep tests/conftest.py names still names a test (a renamed test would silently join the fast
tier).  Reads source text only."""
from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# tests/conftest.py by its path: the name "conftest" is taken by whichever conftest.py of a
# directory without __init__.py was imported first
_spec = importlib.util.spec_from_file_location("_kl_tests_conftest",
                                               ROOT / "tests" / "conftest.py")
conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conftest)


def _top_level_names(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_every_sweep_names_a_test():
    missing = []
    for entry in conftest.SWEEPS:
        path, _, name = entry.partition("::")
        p = ROOT / path
        if not p.is_file():
            missing.append(f"{entry}: no such file")
        elif name and name.split("::")[0] not in _top_level_names(p):
            missing.append(f"{entry}: no such test in {path}")
    assert missing == []


def test_the_fast_tier_leaves_out_every_heavy_marker():
    text = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    m = re.search(r'^FAST_TIER="([^"]+)"$', text, re.M)
    assert m, "scripts/test.sh defines FAST_TIER"
    excluded = set(re.findall(r"not (\w+)", m.group(1)))
    assert excluded == {"slow", "spark", "kafka", "cluster", "s3", "sweep"}
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for marker in excluded:
        assert re.search(r'^\s*"%s: ' % marker, pyproject, re.M), f"{marker} is registered"


def test_sweeps_are_marked():
    """The hook marks a listed test and leaves others alone."""
    assert conftest._is_sweep("tests/test_parity.py::test_round_trip")
    assert conftest._is_sweep(
        "tests/storage/test_storage_model.py::test_thing_in_place_of_a_segment[fifo]")
    assert not conftest._is_sweep("tests/storage/test_storage_model.py::test_unreadable_segment")
    assert not conftest._is_sweep("tests/test_parity_other.py::test_x")
