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
  The tests listed in ``SWEEPS`` are marked ``sweep``.  The fast tier
  (``scripts/test.sh --fast``) deselects all of them.
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

# The sweeps: tests that run one check over many generated cases (hypothesis models, a fault at
# every step, damage at every position, the fuzz harnesses, equivalence over many option
# combinations).  They are marked "sweep"; the fast tier leaves them out (the default run keeps
# them).  A file names all its tests; file::test names one test with all its parameters.
# tests/test_tiers.py checks that each entry still names something.
SWEEPS = (
    "tests/test_parity.py",  # hypothesis: both twins on generated and mutated batches
    "tests/test_fuzz_smoke.py",  # every fuzz harness on its seeds and mutations
    "tests/test_damage_everywhere.py",  # a damaged byte at every position of every structure
    "tests/test_argument_sweep.py",  # every public method with every kind of bad argument
    "tests/storage/test_faults.py",  # an I/O fault at every step of append, roll, recovery, ...
    "tests/storage/test_log_model.py",  # hypothesis: Log against a model
    "tests/storage/test_producer_state_machine.py",  # hypothesis: producer state against a model
    "tests/storage/test_transactions.py::TestCompactionVersusModel",  # hypothesis
    "tests/storage/test_log_crash.py::test_sigkill_during_appends",  # many SIGKILLed children
    "tests/storage/test_cleaner.py::test_crash_at_every_file_operation_of_compaction",
    "tests/storage/test_storage_model.py::test_thing_in_place_of_a_segment",  # every odd file
    "tests/storage/test_storage_model.py::test_thing_in_place_of_an_index",
    "tests/storage/test_log_view_planning.py::test_planning_answers_match_a_walk",  # 40 logs
    "tests/test_gzip_inflaters.py::test_same_answers_as_zlib",  # every inflater, many streams
    "tests/test_gzip_inflaters.py::test_bomb_is_refused_within_the_limit",
    "tests/remote/test_remote_read.py::test_offset_pruned_equals_filtered",
    "tests/remote/test_remote_read.py::test_tables_identical",
    "tests/spark/test_spark_pushdown.py::test_pushed_equals_unpushed_equals_python_filter",
    "tests/spark/test_spark_lso.py::test_last_stable_offset_matches_the_log",  # hypothesis
    "tests/spark/test_spark_commit_faults.py::test_commit_faults_leave_old_or_new_target",
    "tests/spark/test_spark_write_core.py::test_pieces_of_many_tasks_make_one_writers_log",
    # the compiled fast paths against the general one, over many files and flags
    "tests/cli/test_dump_fast_lines.py::test_fast_record_lines_equal_the_general_path",
    "tests/cli/test_stats_fast.py::test_walk_equals_the_general_path",
)


def _is_sweep(nodeid: str) -> bool:
    for s in SWEEPS:
        if nodeid == s or nodeid.startswith((s + "::", s + "[")):
            return True
    return False


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        names = getattr(item, "fixturenames", ())
        for fixture, marker in _FIXTURE_MARKERS.items():
            if fixture in names:
                item.add_marker(marker)
        if _is_sweep(item.nodeid):
            item.add_marker("sweep")


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
