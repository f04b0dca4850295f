"""Helpers shared by test modules (importable by name: test sub-packages have conftests of
their own, so ``from conftest import ...`` would be ambiguous)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, Optional

ROOT = Path(__file__).resolve().parent.parent
PURE = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")

CONFORMANCE_SKIP_REASON = (
    "conformance corpus not found: set KAFKALOG_CONFORMANCE to the directory holding "
    "vectors.jsonl and files/ (looked at $KAFKALOG_CONFORMANCE and ../shared/conformance; "
    "what it is: README.md, 'The conformance corpus')"
)


def conformance_dir() -> Optional[Path]:
    """The conformance corpus: ``$KAFKALOG_CONFORMANCE``, else ``../shared/conformance``."""
    env = os.environ.get("KAFKALOG_CONFORMANCE")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared" / "conformance")
    for c in candidates:
        if (c / "vectors.jsonl").is_file():
            return c
    return None


def conformance_vectors() -> Dict[str, dict]:
    """The corpus's vectors by id (``vectors.jsonl``), or ``{}`` where the corpus is absent."""
    d = conformance_dir()
    if d is None:
        return {}
    with (d / "vectors.jsonl").open() as f:
        return {v["id"]: v for v in map(json.loads, filter(str.strip, f))}


# -- small logs built through Log (tests/storage/test_read_model.py, tests/spark/...) ------------
LOG_TS = 1_700_000_000_000
TXN_PID = 7


def append_plain(log, n: int, value: bytes = b"v"):
    """Append one non-transactional batch of ``n`` records (values ``value`` + their offset)."""
    from kafkalog import MemoryRecordsBuilder

    b = MemoryRecordsBuilder()
    for i in range(n):
        b.append(LOG_TS + log.log_end_offset + i, None, value + b"%d" % (log.log_end_offset + i))
    return log.append(b.build())


def append_txn(log, n: int, seq: int = 0):
    """Append one transactional batch of ``n`` records of producer ``TXN_PID``."""
    from kafkalog import MemoryRecordsBuilder

    b = MemoryRecordsBuilder(producer_id=TXN_PID, producer_epoch=0, base_sequence=seq,
                             is_transactional=True)
    for i in range(n):
        b.append(LOG_TS + i, None, b"t%d" % i)
    return log.append(b.build())


def append_marker(log, commit: bool):
    """Append the COMMIT or ABORT marker of producer ``TXN_PID``, as its coordinator does."""
    from kafkalog.control import build_end_txn_marker

    return log.append(build_end_txn_marker(commit, TXN_PID, 0, 0, timestamp=LOG_TS),
                      origin="coordinator")


def entry_positions(path):
    """``(position, offset, total size)`` of each log entry of a segment file, as its headers
    say (a test's view of what it is about to damage)."""
    import struct

    data = open(path, "rb").read()
    pos, out = 0, []
    while pos + 12 <= len(data):
        off, size = struct.unpack_from(">qi", data, pos)
        out.append((pos, off, size + 12))
        pos += size + 12
    return out
