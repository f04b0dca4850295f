"""Only the storage model lists directories or opens files: ``kafkalog.storage.fs`` (byte
access), ``kafkalog.storage.logdir`` (the directory model) and ``kafkalog.storage.files`` (names
and the atomic write helpers).  Everything else goes through them, so that the rules (regular files only, one
grammar, KafkaStorageError) hold everywhere and a new backend needs no change above them."""
from __future__ import annotations

import ast
import os

PKG = os.path.join(os.path.dirname(__file__), "..", "src", "kafkalog")

# calls that list a directory or open a file
LISTING_AND_OPENING = {
    "os.listdir", "os.scandir", "os.walk", "os.open", "open", "io.open", "glob.glob",
    "glob.iglob", "_glob.glob", "_glob.iglob", "Path.open", "iterdir",
}
MODEL = {"storage/fs.py", "storage/logdir.py", "storage/files.py"}
# (module, call) -> why it may stay.  Keep it short; each entry must still be needed.
ALLOWED = {
    ("tools/cli.py", "os.open"): "os.devnull for a closed stdout, not a log file",
    ("_speedups.py", "open"): "the build's own _build_info.json, not a log file",
    ("storage/log.py", "os.open"): "the partition directory's own flock (Kafka's .lock), not a read",
    ("storage/index.py", "os.open"): "fsync of the index a writer owns",
}


def _name(func) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        base = func.value
        if isinstance(base, ast.Name):
            return f"{base.id}.{func.attr}"
        return func.attr  # e.g. path.iterdir()
    return ""


def _calls():
    for dirpath, _dirs, names in os.walk(PKG):
        for n in names:
            if not n.endswith(".py"):
                continue
            path = os.path.join(dirpath, n)
            rel = os.path.relpath(path, PKG).replace(os.sep, "/")
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), rel)
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    name = _name(node.func)
                    if name in LISTING_AND_OPENING:
                        yield rel, name, node.lineno


def test_only_the_storage_model_lists_and_opens():
    found = [(rel, name, line) for rel, name, line in _calls() if rel not in MODEL]
    stray = [f"{rel}:{line}: {name}()" for rel, name, line in found if (rel, name) not in ALLOWED]
    assert stray == [], ("list and open through kafkalog.storage.logdir / kafkalog.storage.fs "
                         "instead:\n" + "\n".join(stray))
    unused = set(ALLOWED) - {(rel, name) for rel, name, _ in found}
    assert unused == set(), f"allow-list entries no longer needed: {sorted(unused)}"


def test_the_check_sees_calls():
    """The scan itself works: the model's own calls are found."""
    seen = {(rel, name) for rel, name, _ in _calls()}
    assert ("storage/fs.py", "os.scandir") in seen and ("storage/fs.py", "os.open") in seen
