"""A snappy or lz4 batch read where that codec's library is missing: the compiled decoders
could decode it without the library, but both twins answer alike, with the MissingCodecError
that names the extra to install (records as objects and as Arrow columns).  The same
assertions run in the compiled and in the pure suite run, so they hold the twins together."""
import pytest

from kafkalog import MemoryRecords, MemoryRecordsBuilder, compression
from kafkalog.errors import MissingCodecError

CASES = [("snappy", ("cramjam", "snappy"), "snappy"), ("lz4", ("lz4",), "lz4")]


def _batches(codec):
    out = bytearray()
    for base in (0, 40):
        b = MemoryRecordsBuilder(2, codec, base)
        for i in range(40):
            b.append(1_700_000_000_000 + i, b"k%d" % i, b"value " * (i % 7 + 1), [("h", b"x")])
        out += b.build()
    return bytes(out)


@pytest.fixture
def blocked(monkeypatch):
    real = compression._import
    names = set()

    def fake(name):
        if name.split(".")[0] in names:
            raise ImportError(f"No module named {name!r}")
        return real(name)

    monkeypatch.setattr(compression, "_import", fake)
    compression._reset_libraries()
    yield names
    monkeypatch.undo()
    compression._reset_libraries()


def _records(data):
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
            for b in MemoryRecords(data).batches() for r in b]


@pytest.mark.parametrize("codec,modules,extra", CASES, ids=[c[0] for c in CASES])
def test_objects_need_the_library(blocked, codec, modules, extra):
    pytest.importorskip(modules[0])
    data = _batches(codec)
    expected = _records(data)
    assert len(expected) == 80
    blocked.update(modules)
    compression._reset_libraries()
    with pytest.raises(MissingCodecError, match=r"kafkalog\[" + extra):
        _records(data)
    blocked.clear()
    compression._reset_libraries()
    assert _records(data) == expected


@pytest.mark.parametrize("codec,modules,extra", CASES, ids=[c[0] for c in CASES])
def test_arrow_needs_the_library(blocked, codec, modules, extra):
    pytest.importorskip(modules[0])
    pytest.importorskip("pyarrow")
    from kafkalog.arrow import to_arrow

    data = _batches(codec)
    expected = to_arrow(data)
    assert expected.num_rows == 80
    blocked.update(modules)
    compression._reset_libraries()
    with pytest.raises(MissingCodecError, match=r"kafkalog\[" + extra):
        to_arrow(data)
    blocked.clear()
    compression._reset_libraries()
    assert to_arrow(data).equals(expected)


def test_uncompressed_data_never_loads_a_codec_library(blocked, monkeypatch):
    """Records of uncompressed batches decode without asking for any codec library (a broken
    one that raises on import must not matter to them), as objects and as Arrow columns."""
    data = _batches("none")
    asked = []

    def broken(name):
        asked.append(name)
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(compression, "_import", broken)
    compression._reset_libraries()
    assert len(_records(data)) == 80
    try:
        from kafkalog.arrow import to_arrow
    except ImportError:
        pass
    else:
        assert to_arrow(data).num_rows == 80
    assert asked == []
