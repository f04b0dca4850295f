"""Only the storage model lists directories or opens files: ``kafkalog.storage.fs`` (byte
access), ``kafkalog.storage.logdir`` (the directory model) and ``kafkalog.storage.files`` (names
and the atomic write helpers).  Everything else goes through them, so that the rules (regular
files only, one grammar, KafkaStorageError) hold everywhere and a new backend needs no change
above them."""
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
    ("storage/log.py",
     "os.open"): "the partition directory's own flock (Kafka's .lock), not a read",
    ("storage/txn_index.py", "os.open"): "fsync of the transaction index a writer owns",
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


# -- one read model (issue 27) -------------------------------------------------------------------
# What only the storage package may do: parse the bytes of .txnindex entries and control-record
# keys (their struct layouts, owned by storage/txn_index.py and control.py), and compute the log's
# read semantics (last stable offset, aborted transactions, log start/end, timestamp lookups),
# which storage/log_view.py answers for every reader.
READ_MODEL_MARKERS = {
    '">hqqqq"': "the .txnindex entry layout (storage/txn_index.py parses it)",
    '">hh"': "the control-record key layout (control.py parses it)",
    "first_unstable_offset(": "the last stable offset (LogView.last_stable_offset)",
    "collect_aborted_txns(": "aborted transactions (LogView.collect_aborted_transactions)",
    "all_aborted_txns(": "aborted transactions (LogView.collect_aborted_transactions)",
    "_entries_with_position(": "the .txnindex entries (storage/txn_index.py)",
    "iter_txn_entries(": "the .txnindex entries (storage/txn_index.py)",
    "_TXN_ENTRY": "the .txnindex entry layout (storage/txn_index.py parses it)",
    "find_offset_by_timestamp(": "timestamp lookups (LogView.offset_for_timestamp)",
    "translate_offset(": "offset to position (LogView.position_of)",
    "read_next_offset(": "the log end offset (LogView.log_end_offset)",
}
# The owners.  Every reader (arrow.py, tools/, the Spark connector in spark/) asks them.
READ_MODEL_OWNERS = ("storage/", "control.py")


def test_only_storage_computes_the_read_model():
    stray = []
    for dirpath, _dirs, names in os.walk(PKG):
        for n in names:
            if not n.endswith(".py"):
                continue
            path = os.path.join(dirpath, n)
            rel = os.path.relpath(path, PKG).replace(os.sep, "/")
            if rel.startswith(READ_MODEL_OWNERS):
                continue
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    for marker, what in READ_MODEL_MARKERS.items():
                        if marker in line:
                            stray.append(f"{rel}:{lineno}: {marker} -- {what}")
    assert stray == [], "ask kafkalog.storage (LogView, index.py, control.py):\n" + "\n".join(stray)
