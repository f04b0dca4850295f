"""Resource bounds: lengths and counts near 2^31 and decompression bombs must fail fast and
small.  Each input is parsed in a child process (the twin this suite run loads, so the two
suite runs cover both twins), which reports, per case, the outcome, the peak-RSS growth
(VmHWM, reset before each case) and the time.  The assertions: only a kafkalog error (of the
expected class) escapes, RSS grows by less than 64 MiB, and each case finishes within 10 s
(a generous bound that only proves there is no hang; timings are not otherwise asserted)."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import zlib

import pytest

from kafkalog import compression
from kafkalog._crc_py import crc32c
from kafkalog._format import CompressionType

from kl_support import PURE

MiB = 1 << 20
RSS_LIMIT = 64 * MiB
CASE_TIMEOUT_S = 10.0
BOMB_SIZE = 192 * MiB  # decompressed size of each bomb ...
BOMB_LIMIT = 4 * MiB  # ... against this max_decompressed_size
I32_MAX = 2**31 - 1

# ------------------------------------------------------------------------------------------------
# byte builders (independent of the library's builder, so any field can be set)
# ------------------------------------------------------------------------------------------------


def _zz(v: int) -> bytes:
    """A zigzag varint/varlong."""
    u = (v << 1) ^ (v >> 63)
    u &= (1 << 64) - 1
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _record(key=b"k", value=b"v", headers=((b"h", b"x"),), *, length=None, key_len=None,
            value_len=None, header_count=None, hkey_len=None, hval_len=None) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += _zz(0) + _zz(0)  # timestamp delta, offset delta
    body += _zz(len(key) if key_len is None else key_len) + key
    body += _zz(len(value) if value_len is None else value_len) + value
    body += _zz(len(headers) if header_count is None else header_count)
    for hk, hv in headers:
        body += _zz(len(hk) if hkey_len is None else hkey_len) + hk
        body += _zz(len(hv) if hval_len is None else hval_len) + hv
    return _zz(len(body) if length is None else length) + bytes(body)


def _batch(records: bytes, count: int = 1, *, codec: int = 0, length=None) -> bytes:
    """A v2 batch (CRC valid) around an already encoded (maybe compressed) records section."""
    after_crc = struct.pack(">hiqqqhii", codec, max(count - 1, 0), 1000, 1000, -1, -1, -1, count)
    after_crc += records
    crc = crc32c(after_crc)
    body = struct.pack(">ibI", 0, 2, crc) + after_crc  # leader epoch, magic, crc
    size = len(body) if length is None else length
    return struct.pack(">qi", 0, size) + body


def _legacy(magic: int, key=b"k", value=b"v", *, codec: int = 0, key_len=None, value_len=None,
            size=None, offset: int = 0) -> bytes:
    msg = struct.pack(">bb", magic, codec)
    if magic == 1:
        msg += struct.pack(">q", 1000)
    msg += struct.pack(">i", len(key) if key_len is None else key_len) + key
    msg += struct.pack(">i", len(value) if value_len is None else value_len) + value
    msg = struct.pack(">I", zlib.crc32(msg)) + msg
    return struct.pack(">qi", offset, len(msg) if size is None else size) + msg


def _bomb(codec: int, magic: int) -> bytes:
    """BOMB_SIZE zero bytes compressed with ``codec`` in Kafka's framing for ``magic``."""
    chunk = bytes(8 * MiB)
    if codec == CompressionType.GZIP:
        c = zlib.compressobj(1, zlib.DEFLATED, 31)
        return b"".join([c.compress(chunk) for _ in range(BOMB_SIZE // len(chunk))] + [c.flush()])
    if codec == CompressionType.ZSTD:
        import zstandard

        c = zstandard.ZstdCompressor(level=1).compressobj()  # no content size in the header
        return b"".join([c.compress(chunk) for _ in range(BOMB_SIZE // len(chunk))] + [c.flush()])
    if codec == CompressionType.SNAPPY:
        # xerial framing (what Kafka writes): header, then [length][raw snappy block] chunks;
        # one 32 KiB block of zeros repeated
        block = compression.compress(CompressionType.SNAPPY, bytes(32 * 1024), magic=magic)
        head, chunk_bytes = block[:16], block[16:]
        return head + chunk_bytes * (BOMB_SIZE // (32 * 1024))
    if codec == CompressionType.LZ4:
        # Kafka's framing (incl. the magic-0 header-checksum quirk) from the library's own
        # frame of 64 KiB zeros: header, then its first (independent) block repeated, end mark
        frame = compression.compress(CompressionType.LZ4, bytes(64 * 1024), magic=magic)
        flg = frame[4]
        hdr_len = 4 + 2 + (8 if flg & 0x08 else 0) + 1
        (bsize,) = struct.unpack_from("<I", frame, hdr_len)
        assert not flg & 0x10 and not bsize & 0x80000000  # no block checksums, compressed
        block = frame[hdr_len : hdr_len + 4 + bsize]
        return frame[:hdr_len] + block * (BOMB_SIZE // (64 * 1024)) + bytes(4)
    raise AssertionError(codec)


# ------------------------------------------------------------------------------------------------
# the cases: name -> (input bytes, kind, expected error class name or "truncated"/"ok")
# ------------------------------------------------------------------------------------------------
def _cases(tmp_path):
    cases = []

    def add(name, data, kind="records", expect=("CorruptRecordError",), **extra):
        path = tmp_path / f"{name}.bin"
        if isinstance(data, bytes):
            path.write_bytes(data)
        cases.append({"name": name, "path": str(path), "kind": kind, "expect": list(expect),
                      **extra})

    good = _record()
    # v2 batch framing
    add("v2-batch-length-i32max", _batch(good, length=I32_MAX), expect=("truncated",))
    add("v2-batch-length-i32max-minus-12", _batch(good, length=I32_MAX - 12), expect=("truncated",))
    add("v2-batch-length-negative", _batch(good, length=-1))
    add("v2-batch-length-i32min", _batch(good, length=-(2**31)))
    # v2 record fields
    add("v2-record-length-i32max", _batch(_record(length=I32_MAX)))
    add("v2-record-length-negative", _batch(_record(length=-(2**31))))
    add("v2-key-length-i32max", _batch(_record(key_len=I32_MAX)))
    add("v2-value-length-i32max", _batch(_record(value_len=I32_MAX)))
    add("v2-key-length-negative", _batch(_record(key_len=-2)))
    add("v2-header-count-i32max", _batch(_record(header_count=I32_MAX)))
    add("v2-header-count-negative", _batch(_record(header_count=-(2**31))))
    add("v2-header-key-length-i32max", _batch(_record(hkey_len=I32_MAX)))
    add("v2-header-value-length-i32max", _batch(_record(hval_len=I32_MAX)))
    add("v2-records-count-i32max", _batch(good, count=I32_MAX))
    add("v2-records-count-negative", _batch(good, count=-1))
    add("v2-records-count-i32max-gzip",
        _batch(compression.compress(CompressionType.GZIP, good), count=I32_MAX,
               codec=CompressionType.GZIP))
    # legacy messages
    for m in (0, 1):
        add(f"v{m}-entry-size-i32max", _legacy(m, size=I32_MAX), expect=("truncated",))
        add(f"v{m}-key-length-i32max", _legacy(m, key_len=I32_MAX))
        add(f"v{m}-value-length-i32max", _legacy(m, value_len=I32_MAX))
        add(f"v{m}-key-length-negative", _legacy(m, key_len=-5))
        inner = _legacy(m, size=I32_MAX)
        add(f"v{m}-gzip-wrapper-inner-size-i32max",
            _legacy(m, key=b"", key_len=-1, codec=CompressionType.GZIP,
                    value=compression.compress(CompressionType.GZIP, inner, magic=m)))
    # decompression bombs: v2 for every codec, legacy wrappers for every codec they allow
    for codec in (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
                  CompressionType.ZSTD):
        name = CompressionType(codec).name.lower()
        add(f"bomb-v2-{name}", _batch(_bomb(codec, 2), count=1000, codec=codec),
            expect=("DecompressedSizeError",))
        if codec != CompressionType.ZSTD:
            for m in (0, 1):
                add(f"bomb-v{m}-{name}",
                    _legacy(m, key=b"", key_len=-1, codec=codec, value=_bomb(codec, m)),
                    expect=("DecompressedSizeError",))
    # indexes: a 1 GiB sparse offset/time index (a preallocated file) opened read-only
    for suffix in ("index", "timeindex"):
        path = tmp_path / f"00000000000000000000.{suffix}"
        with open(path, "wb") as f:
            f.write(struct.pack(">ii", 1, 0) if suffix == "index" else struct.pack(">qi", 5, 1))
            f.truncate((1 << 30) // 24 * 24)  # a multiple of both entry sizes
        cases.append({"name": f"sparse-1GiB-{suffix}", "path": str(path), "kind": suffix,
                      "expect": ["ok"]})
    # a 96 MiB transaction index (34-byte entries, version 0, all zero: valid)
    path = tmp_path / "00000000000000000000.txnindex"
    with open(path, "wb") as f:
        f.truncate((96 * MiB) // 34 * 34)
    cases.append({"name": "txnindex-96MiB-open", "path": str(path), "kind": "txnindex",
                  "expect": ["ok"]})
    # producer snapshot with an entry count of 2^31-1 (CRC valid)
    body = struct.pack(">i", I32_MAX) + bytes(46)
    add("snapshot-count-i32max", struct.pack(">hI", 1, crc32c(body)) + body, kind="snapshot",
        expect=("CorruptSnapshotError",))
    body = struct.pack(">i", -(2**31)) + bytes(46)
    add("snapshot-count-negative", struct.pack(">hI", 1, crc32c(body)) + body, kind="snapshot",
        expect=("CorruptSnapshotError",))
    # checkpoints with huge counts
    add("checkpoint-count-i32max", b"0\n2147483647\nfoo 0 1\n", kind="checkpoint",
        expect=("CorruptCheckpointError",))
    add("checkpoint-count-huge", b"0\n" + b"9" * 4000 + b"\nfoo 0 1\n", kind="checkpoint",
        expect=("CorruptCheckpointError",))
    add("epoch-checkpoint-count-i32max", b"0\n2147483647\n0 0\n", kind="epoch-checkpoint",
        expect=("CorruptCheckpointError",))
    return cases


_CHILD = textwrap.dedent(
    r"""
    import json, os, resource, sys, time
    import kafkalog
    from kafkalog import errors
    from kafkalog.records import MemoryRecords

    def hwm():
        try:
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def reset_hwm():
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def run(case, data):
        kind = case["kind"]
        if kind == "records":
            mr = MemoryRecords(data, max_decompressed_size=case["limit"])
            n = 0
            for b in mr.batches():
                for _r in b:
                    n += 1
            return "truncated" if mr.truncated_bytes else "ok"
        if kind in ("index", "timeindex"):
            from kafkalog.storage.index import OffsetIndex, TimeIndex
            cls = OffsetIndex if kind == "index" else TimeIndex
            idx = cls(case["path"], 0, writable=False)
            try:
                idx.sanity_check()
                idx.lookup(10**6)
                idx.entries
            finally:
                idx.close()
            return "ok"
        if kind == "txnindex":
            from kafkalog.storage.txn_index import TransactionIndex
            idx = TransactionIndex(0, case["path"], writable=False)
            try:
                idx.last_offset  # opening it should read only the last entry
            finally:
                idx.close()
            return "ok"
        if kind == "snapshot":
            from kafkalog.storage.producer_state import decode_snapshot
            decode_snapshot(data)
            return "ok"
        if kind == "checkpoint":
            from kafkalog.storage.checkpoints import read_offset_checkpoint
            read_offset_checkpoint(case["path"])
            return "ok"
        if kind == "epoch-checkpoint":
            from kafkalog.storage.checkpoints import read_leader_epoch_checkpoint
            read_leader_epoch_checkpoint(case["path"])
            return "ok"
        raise AssertionError(kind)

    cases = json.loads(sys.stdin.read())
    print(json.dumps({"implementation": kafkalog.IMPLEMENTATION}), flush=True)
    for case in cases:
        data = None
        if case["kind"] not in ("index", "timeindex", "txnindex"):
            with open(case["path"], "rb") as f:
                data = f.read()
        exact = reset_hwm()
        before = hwm()
        t0 = time.perf_counter()
        mro = []
        msg = ""
        try:
            outcome = run(case, data)
        except errors.KafkaLogError as e:
            outcome = type(e).__name__
            mro = [k.__name__ for k in type(e).__mro__]
            msg = str(e)[:300]
        except BaseException as e:
            outcome = "ESCAPED " + type(e).__name__ + ": " + str(e)[:200]
        dt = time.perf_counter() - t0
        grow = hwm() - before
        del data
        print(json.dumps({"name": case["name"], "outcome": outcome, "mro": mro or [outcome],
                          "message": msg, "rss_growth": grow,
                          "seconds": dt, "exact_rss": exact}), flush=True)
    """
)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bounds")
    cases = _cases(tmp)
    for c in cases:
        c["limit"] = BOMB_LIMIT
    script = tmp / "child.py"
    script.write_text(_CHILD)
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env=env,
        timeout=CASE_TIMEOUT_S * len(cases) + 30,
    )
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert lines, f"child failed: {proc.stderr[-2000:]}"
    header, rows = lines[0], {r["name"]: r for r in lines[1:]}
    expected_impl = "python" if PURE else header["implementation"]
    assert header["implementation"] == expected_impl
    return {c["name"]: (c, rows.get(c["name"]), proc.stderr) for c in cases}


CASE_NAMES = [
    "v2-batch-length-i32max", "v2-batch-length-i32max-minus-12", "v2-batch-length-negative",
    "v2-batch-length-i32min", "v2-record-length-i32max", "v2-record-length-negative",
    "v2-key-length-i32max", "v2-value-length-i32max", "v2-key-length-negative",
    "v2-header-count-i32max", "v2-header-count-negative", "v2-header-key-length-i32max",
    "v2-header-value-length-i32max", "v2-records-count-i32max", "v2-records-count-negative",
    "v2-records-count-i32max-gzip",
    *[f"v{m}-{s}" for m in (0, 1) for s in (
        "entry-size-i32max", "key-length-i32max", "value-length-i32max", "key-length-negative",
        "gzip-wrapper-inner-size-i32max")],
    *[f"bomb-v2-{c}" for c in ("gzip", "snappy", "lz4", "zstd")],
    *[f"bomb-v{m}-{c}" for m in (0, 1) for c in ("gzip", "snappy", "lz4")],
    "sparse-1GiB-index", "sparse-1GiB-timeindex", "txnindex-96MiB-open",
    "snapshot-count-i32max", "snapshot-count-negative",
    "checkpoint-count-i32max", "checkpoint-count-huge", "epoch-checkpoint-count-i32max",
]


# Known bugs (see the hardening report): strict, so fixing one makes its test fail until the
# mark goes.
XFAIL: dict = {}  # name -> reason, for a bound known to be broken (none now)


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=XFAIL[n])) if n in XFAIL else n
     for n in CASE_NAMES],
)
def test_bounded(results, name):
    case, row, stderr = results[name]
    assert row is not None, f"{name}: the child died or hung before reporting: {stderr[-2000:]}"
    assert not row["outcome"].startswith("ESCAPED"), f"{name}: {row['outcome']}"
    assert set(row["mro"]) & set(case["expect"]), (
        f"{name}: got {row['outcome']} ({row['message']}), want {case['expect']}"
    )
    assert row["rss_growth"] < RSS_LIMIT, (
        f"{name}: peak RSS grew by {row['rss_growth'] / MiB:.1f} MiB (limit {RSS_LIMIT // MiB})"
    )
    assert row["seconds"] < CASE_TIMEOUT_S, f"{name}: took {row['seconds']:.1f}s (a hang?)"


def test_case_list_complete(results):
    assert sorted(results) == sorted(CASE_NAMES)
