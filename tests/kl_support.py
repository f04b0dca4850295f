"""Helpers shared by test modules (importable by name: test sub-packages have conftests of
their own, so ``from conftest import ...`` would be ambiguous)."""
from __future__ import annotations

import os
from pathlib import Path
import json
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
