"""``kafkalog stats``: per-segment and per-partition figures, checked against the inputs."""
from __future__ import annotations

import json
import struct

from kafkalog import MemoryRecordsBuilder

from .conftest import BASE_TS, legacy_batch, make_log_dir, run_cli, v2_batch, write


def _marker(offset, commit=True, pid=7):
    b = MemoryRecordsBuilder(2, "none", offset, producer_id=pid, producer_epoch=0,
                             is_transactional=True,
                             is_control_batch=True)
    b.append(BASE_TS + 99, struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, 0))
    return b.build()


def test_stats_figures(tmp_path):
    vals = [b"a" * 200] * 10
    batches = [
        v2_batch([(BASE_TS + i, b"k%d" % (i % 4), v) for i, v in enumerate(vals)],
                 compression="gzip",
                 producer_id=7, producer_epoch=0, base_sequence=0, transactional=True),
        _marker(10),
        v2_batch([(BASE_TS + 50, None, b"x"), (BASE_TS + 51, b"k9", None)], base_offset=11,
                 producer_id=8,
                 producer_epoch=0, base_sequence=0),
        _marker(13, commit=False, pid=8),
    ]
    d = make_log_dir(tmp_path / "t-0", batches, segment_bytes=200)
    r = run_cli("stats", "--json", str(d))
    assert r.rc == 0, r
    objs = [json.loads(ln) for ln in r.lines]
    part = objs[-1]
    assert part["type"] == "partition" and part["segments"] == len(objs) - 1 >= 2
    assert part["batches"] == 4 and part["records"] == 14
    assert part["firstOffset"] == 0 and part["lastOffset"] == 13
    assert part["magic"] == {"2": 4} and part["codecs"] == {"gzip": 1, "none": 3}
    assert part["producers"] == 2 and part["producerIds"] == [7, 8]
    assert part["transactionalBatches"] == 3 and part["controlBatches"] == 2
    assert part["commitMarkers"] == 1 and part["abortMarkers"] == 1
    assert part["nullKeys"] == 1 and part["tombstones"] == 1
    assert part["distinctKeys"] == 5 and part["distinctKeysExact"] is True  # k0..k3 and k9
    assert part["minTimestamp"] == BASE_TS and part["maxTimestamp"] == BASE_TS + 99
    assert part["compressionRatio"] > 1.5  # 10 x 200 repeated bytes compress well
    assert part["fileBytes"] == sum(len(b) for b in batches) == part["validBytes"]
    seg_batches = sum(o["batches"] for o in objs[:-1])
    assert seg_batches == 4
    # the text form names the same figures
    t = run_cli("stats", str(d))
    assert t.rc == 0
    assert "batches 4, records 14," in t.text \
        and "producers 2, transactional batches 3, control batches 2 " \
        "(commit 1, abort 1)" in t.text \
        and "distinct keys 5, null keys 1, tombstones 1" in t.text
    # shallow: headers only
    s = json.loads(run_cli("stats", "--json", "--shallow", "--no-segments", str(d)).lines[-1])
    assert s["records"] == 14 and s["distinctKeys"] is None and s["compressionRatio"] is None


def test_stats_legacy_and_key_estimate(tmp_path):
    legacy = legacy_batch(1, [(BASE_TS, b"a", b"1"), (BASE_TS + 1, b"b", b"2")],
                          compression="snappy") + \
        legacy_batch(0, [(0, b"a", b"3")], base_offset=2)
    keys = [v2_batch([(BASE_TS, b"key-%d" % (i * 500 + j), b"v") for j in range(500)],
                     base_offset=3 + i * 500)
            for i in range(20)]
    write(tmp_path / "t-0" / "00000000000000000000.log", legacy, *keys)
    part = json.loads(run_cli("stats", "--json", "--no-segments", str(tmp_path / "t-0")).lines[-1])
    assert part["magic"] == {"0": 1, "1": 1, "2": 20}
    assert part["records"] == 3 + 10_000
    assert part["distinctKeysExact"] is False
    assert abs(part["distinctKeys"] - 10_002) < 10_002 * 0.05  # HyperLogLog, ~0.8% standard error


def test_stats_corpus(corpus):
    files_dir = corpus / "files"
    r = run_cli("stats", "--json", str(files_dir / "LDI-POC@8030792"))
    assert r.rc == 0
    parts = {o["name"].rsplit("/", 1)[-1]: o for o in map(json.loads,
                                                          r.lines) if o["type"] == "partition"}
    assert parts["__cluster_metadata-0"]["batches"] == 4814
    assert parts["__consumer_offsets-6"]["batches"] == 13
    assert parts["__consumer_offsets-6"]["distinctKeys"] == 5
