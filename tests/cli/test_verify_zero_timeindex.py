"""``kafkalog verify`` and a time index that is all zeros (preallocated, never written, never
trimmed).  Only the active (last) segment's, after an unclean stop, is what a broker rebuilds;
a rolled segment's, or any after a clean stop (the broker's ``.kafka_cleanshutdown`` in the log
root), stays as it is, and timestamp lookups then skip the segment: an error."""
from __future__ import annotations

import pytest

from .conftest import BASE_TS, make_log_dir, run_cli, v2_batch


def _root(tmp_path, clean: bool):
    batches = [v2_batch([(BASE_TS + 3 * i + j, b"k%d" % j, b"v" * 20) for j in range(3)],
                        base_offset=3 * i) for i in range(40)]
    d = make_log_dir(tmp_path / "t-0", batches, index_interval=100, segment_bytes=2000)
    if clean:  # a broker's clean stop: the marker is in the log root
        (tmp_path / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":7}')
    tidx = sorted(d.glob("*.timeindex"))
    assert len(tidx) >= 3
    return d, tidx


def _zero(path, entries=10):
    path.write_bytes(bytes(path.stat().st_size or 12 * entries))


def _problems(r):
    return [ln for ln in r.lines if not ln.startswith(("OK:", "FAILED:"))]


@pytest.mark.parametrize("clean", [False, True])
@pytest.mark.parametrize("given", ["root", "partition", "file"])
def test_rolled_segment_with_a_zero_time_index_is_an_error(tmp_path, clean, given):
    d, tidx = _root(tmp_path, clean)
    _zero(tidx[1])
    path = {"root": tmp_path, "partition": d, "file": tidx[1].with_suffix(".log")}[given]
    r = run_cli("verify", str(path))
    if given == "file":  # a segment alone: nothing says it was rolled, only the marker can
        if not clean:
            assert r.rc == 0, r
            return
    assert r.rc == 1, r
    probs = _problems(r)
    assert len(probs) == 1, probs
    assert probs[0].startswith(f"{tidx[1]}: error: time index is all zeros and holds no entry"), \
        probs
    assert r.lines[-1].startswith("FAILED:"), r


def test_last_segment_after_a_clean_stop_is_an_error(tmp_path):
    d, tidx = _root(tmp_path, clean=True)
    _zero(tidx[-1], entries=341)
    r = run_cli("verify", str(tmp_path))
    assert r.rc == 1, r
    assert [p.split(": error: ")[0] for p in _problems(r)] == [str(tidx[-1])]
    assert ".kafka_cleanshutdown in the log root" in r.text


def test_last_segment_after_an_unclean_stop_is_a_warning(tmp_path):
    d, tidx = _root(tmp_path, clean=False)
    _zero(tidx[-1], entries=341)
    r = run_cli("verify", str(tmp_path))
    assert r.rc == 0, r
    assert _problems(r) == [f"{tidx[-1]}: warning: time index is preallocated and holds no entry "
                            "(not trimmed: the broker did not shut down cleanly; a broker "
                            "rebuilds it)"]
    assert run_cli("verify", "--strict", str(tmp_path)).rc == 1
