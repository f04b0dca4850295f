"""The public surface: names, the implementation switch, and a light import."""
import os
import subprocess
import sys

import pytest

import kafkalog

from kl_support import PURE


def _run(code: str, **env):
    e = dict(os.environ)
    e.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=e, check=True
    ).stdout.strip()


def test_all_names_resolve():
    for name in kafkalog.__all__:
        assert hasattr(kafkalog, name), name
    assert (kafkalog.FALLBACK_REASON is None) == (kafkalog.IMPLEMENTATION == "cython" or PURE)


def test_implementation_value():
    assert kafkalog.IMPLEMENTATION in ("cython", "python")
    if PURE:
        assert kafkalog.IMPLEMENTATION == "python"


def test_import_is_light():
    out = _run(
        "import sys, kafkalog; "
        "print(sorted(m for m in ('pyarrow', 'pyspark', 'pandas', 'lz4', 'zstandard', 'snappy', "
        "'cramjam') if m in sys.modules))"
    )
    assert out == "[]"


@pytest.mark.parametrize("value,expected", [("1", "python"), ("true", "python"),
                                            (" YES ", "python"), ("on", "python")])
def test_env_var_forces_pure(value, expected):
    assert _run("import kafkalog; print(kafkalog.IMPLEMENTATION)",
                KAFKALOG_PURE_PYTHON=value) == expected


@pytest.mark.skipif(sys.implementation.name != "cpython",
                    reason="compiled twins are built for CPython only")
@pytest.mark.parametrize("value", ["0", "", "no", "false"])
def test_falsy_env_values_keep_compiled(value):
    # Only 1/true/yes/on force pure Python; '0' must not (a msgpack pitfall).
    assert _run("import kafkalog; print(kafkalog.IMPLEMENTATION)",
                KAFKALOG_PURE_PYTHON=value) == "cython"


@pytest.mark.skipif(PURE or sys.implementation.name != "cpython",
                    reason="checks the compiled build")
def test_compiled_modules_are_extensions():
    from kafkalog import _speedups

    for mod in (_speedups.batch, _speedups.varint, _speedups.crc, _speedups.legacy):
        assert not mod.__file__.endswith(".py"), mod.__file__
        assert mod.__name__ in ("kafkalog._batch", "kafkalog._varint", "kafkalog._crc",
                                "kafkalog._legacy")


def test_public_classes_come_from_one_twin():
    from kafkalog import _speedups

    assert kafkalog.MemoryRecords is _speedups.batch.MemoryRecords
    assert kafkalog.RecordBatch is _speedups.batch.RecordBatch
    assert kafkalog.LegacyRecordBatch is _speedups.legacy.LegacyRecordBatch


def test_error_hierarchy():
    from kafkalog import errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.KafkaLogError)
    e = errors.CorruptRecordError("bad crc", 17, 42, "/x/00000000000000000000.log")
    assert str(e) == "bad crc (file /x/00000000000000000000.log, position 17, offset 42)"
    assert isinstance(e, ValueError)
    import pickle

    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.position, e2.offset, e2.path) == (17, 42, "/x/00000000000000000000.log")


def test_unknown_compression_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"^unknown compression type 'zst': the types are "
                                         r"none, gzip, snappy, lz4, zstd$"):
        kafkalog.MemoryRecordsBuilder(2, "zst", 0)
    with pytest.raises(ValueError, match=r"^unknown compression type id 9: the ids are 0 \(none\), "
                                         r"1 \(gzip\), 2 \(snappy\), 3 \(lz4\), 4 \(zstd\)$"):
        kafkalog.MemoryRecordsBuilder(2, 9, 0)
