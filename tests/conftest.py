"""Shared test set-up.

* The suite runs twice (see ``scripts/test.sh``): once with the compiled twins, once with
  ``KAFKALOG_PURE_PYTHON=1``.  On CPython without that variable the compiled twins MUST be the
  ones loaded: a broken build fails here instead of passing silently as pure Python.
* ``conformance_dir()`` finds the conformance corpus at ``$KAFKALOG_CONFORMANCE`` or at
  ``../shared/conformance`` next to the repository; tests that need it skip with the reason.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Optional

import pytest

import kafkalog

ROOT = Path(__file__).resolve().parent.parent
PURE = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")


def conformance_dir() -> Optional[Path]:
    env = os.environ.get("KAFKALOG_CONFORMANCE")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared" / "conformance")
    for c in candidates:
        if (c / "vectors.jsonl").is_file():
            return c
    return None


CONFORMANCE_SKIP_REASON = (
    "conformance corpus not found: set KAFKALOG_CONFORMANCE to the directory holding "
    "vectors.jsonl and files/ (looked at $KAFKALOG_CONFORMANCE and ../shared/conformance)"
)


def pytest_report_header(config):
    return [
        f"kafkalog {kafkalog.__version__}: implementation={kafkalog.IMPLEMENTATION}"
        + (f" (fallback: {kafkalog.FALLBACK_REASON})" if kafkalog.FALLBACK_REASON else ""),
        f"conformance corpus: {conformance_dir() or 'absent'}",
    ]


def pytest_sessionstart(session):
    if PURE:
        assert kafkalog.IMPLEMENTATION == "python"
    elif platform.python_implementation() == "CPython":
        assert kafkalog.IMPLEMENTATION == "cython", (
            "the compiled twins did not load: " + str(kafkalog.FALLBACK_REASON)
        )


@pytest.fixture(scope="session")
def corpus() -> Path:
    d = conformance_dir()
    if d is None:
        pytest.skip(CONFORMANCE_SKIP_REASON)
    return d
