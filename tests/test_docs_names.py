"""Every file, module and name the prose cites exists: README.md, CONTRIBUTING.md and docs/*.md
name files (``src/kafkalog/storage/log_view.py``, ``storage/segment.py``, ``tests/x.py::test_y``,
``bench/...py``, ``scripts/...sh``) and dotted names (``kafkalog.storage.files.exchange_paths``,
``storage.log_view.LogView``); a module that moves or a name that is renamed must take the docs
with it.

What counts: a path under one of the repository's own directories (checked from the repository
root), a path of the package's rooms (``storage/``, ``tools/``, ``spark/``; checked under
``src/kafkalog``), a ``::test`` after a test file (the test must be defined there), and a dotted
name starting with ``kafkalog.`` or with ``storage.``/``tools.``/``spark._`` (the longest prefix
that is a module must exist, and the next part must be defined or imported in it; what follows
that, an attribute of a class, is not checked; ``storage.x`` where ``x`` is no module but a
string the package uses is an option's name, such as the Spark source's ``storage.region``).
Paths with placeholders (``<...>``, ``*``, ``{...}``) and URLs are not checked. The check reads
source text only: nothing is imported.
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import List, Optional, Set

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "src" / "kafkalog"

DOCS = sorted(
    [p for p in (ROOT / "README.md", ROOT / "CONTRIBUTING.md") if p.exists()]
    + list((ROOT / "docs").glob("*.md"))
)

_EXT = r"(?:py|pyx|pxd|pyi|sh|md|yml|yaml|toml|java|xml|txt|json|jsonl|c|h)"
# a path under the repository's own top-level directories
REPO_PATH = re.compile(
    r"(?<![\w./-])((?:src|tests|bench|scripts|docs|fuzz|\.github)/[\w./-]*?\.%s)"
    r"(?:::(\w+))?(?![\w/-])" % _EXT
)
# a path of the package's rooms, relative to src/kafkalog (also written kafkalog/storage/x.py)
PKG_PATH = re.compile(r"(?<![\w./-])(?:kafkalog/)?((?:storage|tools|spark|_csrc)/\w+\.%s)"
                      r"(?![\w/-])" % _EXT)
# dotted names: kafkalog.x.y, or storage.x / tools.x / spark._x (the package's rooms)
DOTTED = re.compile(r"(?<![\w.])((?:kafkalog|storage|tools|spark(?=\._))(?:\.\w+)+)")


def _cited(text: str) -> List[str]:
    """The text with URLs removed (a URL's path is another repository's)."""
    return re.sub(r"https?://\S+", " ", text)


@functools.lru_cache(maxsize=None)
def _defined(path: Path) -> Set[str]:
    """Names a module defines or imports at any level (classes' members included: a name
    cited after a module may be a method the prose means)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)  # self.x = ... (an attribute a doc may cite)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif (isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
              and isinstance(node.value, (ast.List, ast.Tuple))):
            # a lazily imported public name (the package's __getattr__ loads it)
            names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
    return names


@functools.lru_cache(maxsize=None)
def _quoted_names() -> Set[str]:
    """Every string constant of the package's sources (option and key names)."""
    out: Set[str] = set()
    for f in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(node.value)
    return out


def _module_file(parts: List[str]) -> Optional[Path]:
    """The source of module kafkalog.<parts> (a .py, a package, or a compiled twin's .pyx)."""
    base = PKG.joinpath(*parts)
    for cand in (base.with_suffix(".py"), base / "__init__.py", base.with_suffix(".pyx")):
        if cand.is_file():
            return cand
    return None


def _check_dotted(name: str) -> Optional[str]:
    """None when ``name`` resolves, else why not."""
    parts = name.split(".")
    if parts[0] == "kafkalog":
        parts = parts[1:]
        if not parts:
            return None
    elif len(parts) == 2 and _module_file(parts) is None and parts[1] in _quoted_names():
        return None  # `storage.region`: an option's name (the Spark source's storage.* options)
    # the longest prefix that is a module of the package
    for n in range(len(parts), 0, -1):
        f = _module_file(parts[:n])
        if f is not None:
            break
    else:
        f, n = PKG / "__init__.py", 0  # kafkalog.Name: a name of the package itself
    rest = parts[n:]
    if not rest:
        return None
    if f.suffix == ".pyx":
        pure = f.with_name(f.stem + "_py.py")
        found = rest[0] in _defined(pure) if pure.exists() else True
    else:
        found = rest[0] in _defined(f)
    if not found:
        return f"{rest[0]!r} is not defined in {f.relative_to(ROOT)}"
    return None


def _problems(doc: Path) -> List[str]:
    text = _cited(doc.read_text(encoding="utf-8"))
    out = []
    for m in REPO_PATH.finditer(text):
        rel, test = m.group(1), m.group(2)
        p = ROOT / rel
        if not p.exists():
            out.append(f"{rel}: no such file")
        elif test and not re.search(r"^\s*(?:async\s+)?def %s\b" % re.escape(test),
                                    p.read_text(encoding="utf-8"), re.M):
            out.append(f"{rel}::{test}: no such test")
    for m in PKG_PATH.finditer(text):
        rel = m.group(1)
        if not (PKG / rel).exists():
            out.append(f"{rel} (src/kafkalog/{rel}): no such file")
    for m in DOTTED.finditer(text):
        name = m.group(1).rstrip(".")
        why = _check_dotted(name)
        if why:
            out.append(f"{name}: {why}")
    return sorted(set(out))


def test_docs_are_found():
    names = {p.name for p in DOCS}
    assert {"README.md", "architecture.md", "arrow.md", "cli.md", "spark.md"} <= names


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_file_and_name_exists(doc):
    problems = _problems(doc)
    assert not problems, f"{doc.relative_to(ROOT)} cites what is not there:\n  " + "\n  ".join(
        problems)


def test_the_checks_catch_what_they_are_for():
    """The patterns find stale citations of each kind, and pass the live ones."""
    assert _check_dotted("kafkalog.storage.log_view.LogView") is None
    assert _check_dotted("storage.files.exchange_paths") is None
    assert _check_dotted("kafkalog.MemoryRecords") is None
    assert _check_dotted("kafkalog.storage.log_view.NoSuchView") is not None
    assert _check_dotted("kafkalog.storage.nosuchmodule") is not None
    text = ("`src/kafkalog/storage/nosuch.py`, `storage/nosuch.py`, "
            "`tests/test_docs_names.py::test_nosuch`, `kafkalog.storage.nosuch`")
    found = (REPO_PATH.findall(text), PKG_PATH.findall(text), DOTTED.findall(text))
    assert found == ([("src/kafkalog/storage/nosuch.py", ""),
                      ("tests/test_docs_names.py", "test_nosuch")],
                     ["storage/nosuch.py"], ["kafkalog.storage.nosuch"])
