"""Shared test set-up.

* The suite runs twice (see ``scripts/test.sh``): once with the compiled twins, once with
  ``KAFKALOG_PURE_PYTHON=1``.  On CPython without that variable the compiled twins MUST be the
  ones loaded: a broken build fails here instead of passing silently as pure Python.
* ``conformance_dir()`` finds the conformance corpus at ``$KAFKALOG_CONFORMANCE`` or at
  ``../shared/conformance`` next to the repository; tests that need it skip with the reason.
* Property tests (hypothesis) run derandomized: the same examples on every run and machine, so
  CI's verdict is the one a local run gives.  ``KAFKALOG_HYPOTHESIS=explore`` draws new
  examples each run (with hypothesis's example database) to search further.
* Markers (pyproject.toml): a test that takes the ``spark`` fixture (tests/spark) is marked
  ``spark``, and one that takes the S3 test server (``s3_server``, also through ``s3_env`` and
  the roots uploaded to it; tests/remote) is marked ``s3``, here, before ``-m`` selects; tests
  that start a JVM or a broker in another way carry ``spark``/``kafka``/``cluster`` themselves.
  The fast tier (``scripts/test.sh --fast``) deselects all of them.
"""
from __future__ import annotations

import os
import platform

import pytest

try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # the test extra installs it; tests that need it skip without it
    _hypothesis_settings = None
else:
    _hypothesis_settings.register_profile("kafkalog", derandomize=True)
    _hypothesis_settings.register_profile("explore", derandomize=False)
    _hypothesis_settings.load_profile(os.environ.get("KAFKALOG_HYPOTHESIS", "kafkalog"))

import kafkalog

from kl_support import CONFORMANCE_SKIP_REASON, PURE, conformance_dir


def pytest_report_header(config):
    return [
        f"kafkalog {kafkalog.__version__}: implementation={kafkalog.IMPLEMENTATION}"
        + (f" (fallback: {kafkalog.FALLBACK_REASON})" if kafkalog.FALLBACK_REASON else ""),
        f"conformance corpus: {conformance_dir() or 'absent'}",
    ]


# fixture -> the marker every test that uses it (directly or through another fixture) carries
_FIXTURE_MARKERS = {"spark": "spark", "s3_server": "s3"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        names = getattr(item, "fixturenames", ())
        for fixture, marker in _FIXTURE_MARKERS.items():
            if fixture in names:
                item.add_marker(marker)


def pytest_sessionstart(session):
    if PURE:
        assert kafkalog.IMPLEMENTATION == "python"
    elif platform.python_implementation() == "CPython":
        assert kafkalog.IMPLEMENTATION == "cython", (
            "the compiled twins did not load: " + str(kafkalog.FALLBACK_REASON)
        )


@pytest.fixture(scope="session")
def corpus():
    d = conformance_dir()
    if d is None:
        pytest.skip(CONFORMANCE_SKIP_REASON)
    return d


@pytest.fixture
def no_logs(tmp_path):
    """A directory of subdirectories and no Kafka log anywhere below it (every reader refuses
    it, naming it: storage.logdir.locate)."""
    x = tmp_path / "x"
    (x / "backup-2024").mkdir(parents=True)
    (x / "site-1").mkdir()
    return x
