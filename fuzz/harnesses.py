"""Fuzz harnesses for kafkalog: one ``check(data: bytes)`` per target, plus seed generators.

Each check raises :class:`InvariantError` (or lets an unexpected exception escape) when an
invariant breaks; it returns normally for every input kafkalog handles correctly, including
inputs it rejects with a :class:`kafkalog.errors.KafkaLogError`.  The checks are plain Python,
so they run under atheris (``fuzz/run.py``), under the pure-Python mutator in ``fuzz/run.py``
and in ``tests/test_fuzz_smoke.py``.

Invariants (see fuzz/README.md):
* only ``KafkaLogError`` subclasses escape parsing of bytes (the dump decoders may also raise
  their documented ``DecodeError`` for a missing key);
* the compiled and the pure twin agree: the same records, or the same error class;
* records that decode re-encode (``MemoryRecordsBuilder``) to bytes that decode to the same
  records; snapshots and checkpoints round-trip through their writers.
"""
from __future__ import annotations

import importlib
import json
import os
import struct
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

from kafkalog import errors as _errors

KafkaLogError = _errors.KafkaLogError


class InvariantError(AssertionError):
    """A fuzz invariant broke (the message says which and how)."""


def _load_twins(name: str) -> list[tuple[str, object]]:
    """[(label, module)] for the compiled and the pure twin of ``kafkalog.<name>`` (the
    compiled one only when it imports; ``KAFKALOG_FUZZ_PURE_ONLY=1`` skips it)."""
    out = []
    if os.environ.get("KAFKALOG_FUZZ_PURE_ONLY", "") not in ("1", "true", "yes", "on"):
        try:
            out.append(("cython", importlib.import_module(f"kafkalog.{name}")))
        except ImportError as e:
            # A build meant to be fuzzed (scripts/fuzz-native.sh sets this) must not quietly
            # fall back to comparing the pure twin with itself.
            if os.environ.get("KAFKALOG_FUZZ_REQUIRE_COMPILED", "") in ("1", "true", "yes", "on"):
                raise SystemExit(f"compiled twin kafkalog.{name} does not import: {e}")
    out.append(("python", importlib.import_module(f"kafkalog.{name}_py")))
    return out


VARINT = _load_twins("_varint")
BATCH = _load_twins("_batch")
HAVE_COMPILED = len(BATCH) == 2


def _outcome(fn: Callable[[], object]):
    """("ok", value) or ("err", ExceptionClassName); non-kafkalog errors re-raise."""
    try:
        return ("ok", fn())
    except KafkaLogError as e:
        return ("err", type(e).__name__)


def _agree(what: str, outcomes: list[tuple[str, object]], data: bytes) -> None:
    first_label, first = outcomes[0]
    for label, other in outcomes[1:]:
        if other != first:
            raise InvariantError(
                f"{what}: twins disagree on {data[:64].hex()}...({len(data)} bytes):\n"
                f"  {first_label}: {_short(first)}\n  {label}: {_short(other)}"
            )


def _short(x, n: int = 600) -> str:
    s = repr(x)
    return s if len(s) <= n else s[:n] + "..."


# ------------------------------------------------------------------------------------------------
# varint
# ------------------------------------------------------------------------------------------------
_VARINT_READERS = (
    ("read_varint", "write_varint", -(2**31), 2**31 - 1, 5),
    ("read_varlong", "write_varlong", -(2**63), 2**63 - 1, 10),
    ("read_unsigned_varint", "write_unsigned_varint", 0, 2**32 - 1, 5),
)


def check_varint(data: bytes) -> None:
    """Every reader at position 0 and at a data-chosen position: twins agree; a value read is
    in range, consumed at most 5/10 bytes and re-encodes to a varint that reads back the same."""
    positions = [0]
    if data:
        positions.append(data[0] % (len(data) + 2))  # sometimes past the end
    for pos in positions:
        for reader, writer, lo, hi, max_len in _VARINT_READERS:
            outs = []
            for label, mod in VARINT:
                try:
                    outs.append((label, ("ok", getattr(mod, reader)(data, pos))))
                except KafkaLogError as e:
                    outs.append((label, ("err", type(e).__name__)))
                except (ValueError, IndexError) as e:
                    # position past the end: a bad *argument*, allowed as ValueError/IndexError,
                    # but only there
                    if pos <= len(data):
                        raise
                    outs.append((label, ("argerr", type(e).__name__)))
            _agree(f"{reader}@{pos}", outs, data)
            kind, res = outs[0][1]
            if kind != "ok":
                continue
            value, nxt = res
            if not lo <= value <= hi or not pos < nxt <= pos + max_len or nxt > len(data):
                raise InvariantError(f"{reader}@{pos}: bad result {res} for {data[:16].hex()}")
            for label, mod in VARINT:
                enc = getattr(mod, writer)(value)
                back = getattr(mod, reader)(enc, 0)
                if back != (value, len(enc)) or len(enc) > nxt - pos:
                    raise InvariantError(f"{label} {writer}({value}) -> {enc.hex()} -> {back}")


def seeds_varint() -> Iterator[bytes]:
    mod = VARINT[-1][1]
    for v in (0, 1, -1, 63, -64, 64, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)):
        yield mod.write_varlong(v)
    yield b"\x80" * 10 + b"\x01"
    yield b"\xff\xff\xff\xff\x0f"
    yield b"\xff\xff\xff\xff\x1f"


# ------------------------------------------------------------------------------------------------
# MemoryRecords (every magic, every codec)
# ------------------------------------------------------------------------------------------------
def _fix_crcs(buf: bytearray) -> None:
    """Recompute the CRC of every complete log entry so mutations get past the CRC check."""
    import zlib

    from kafkalog._crc_py import crc32c

    pos = 0
    n = len(buf)
    while pos + 17 <= n:
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        if size < 14 or pos + 12 + size > n:
            break
        magic = buf[pos + 16]
        end = pos + 12 + size
        if magic == 2 and size >= 49:
            struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : end])))
        elif magic in (0, 1):
            struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16 : end])))
        pos = end


def _rec_tuple(r) -> tuple:
    return (r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers))


def _batch_summary(b) -> tuple:
    base = b.base_offset  # decompresses a legacy wrapper (KB1 crashed here once)
    return (
        b.magic,
        base,
        b.last_offset,
        b.size_in_bytes,
        int(b.compression_type),
        int(b.timestamp_type),
        bool(b.is_control_batch) if hasattr(b, "is_control_batch") else False,
    )


def _decode_all(mod, data: bytes, check_crcs: bool, max_decompressed: int):
    """Walk the buffer; per batch its summary and records (or the error class of that step)."""
    mr = mod.MemoryRecords(data, check_crcs=check_crcs, max_decompressed_size=max_decompressed)
    out = []
    try:
        for b in mr.batches():
            s = _batch_summary(b)
            valid = _outcome(b.is_valid)
            recs = _outcome(lambda b=b: [_rec_tuple(r) for r in b])
            out.append((s, valid, recs))
    except KafkaLogError as e:
        out.append(("stop", type(e).__name__))
    return out, (mr.valid_bytes if not (out and out[-1][0] == "stop") else None)


def _reencode(mod, batch_summary: tuple, records: list):
    """Build the records again; None when the builder rightly refuses (e.g. offsets that go
    backwards, a field out of range, a LogAppendTime/control batch)."""
    magic, _base, _last, _size, _codec, _ts_type, control = batch_summary
    if control or not records:
        return None
    offsets = [r[0] for r in records]
    if any(b <= a for a, b in zip(offsets, offsets[1:])):
        return None
    try:
        builder = mod.MemoryRecordsBuilder(
            magic=magic if magic is not None else 1,
            compression_type=0,
            base_offset=offsets[0],
            timestamp_type=0,  # CreateTime keeps each record's timestamp as decoded
        )
        for off, ts, key, value, headers in records:
            builder.append_with_offset(off, ts, key, value, headers)
        return builder.build()
    except (ValueError, TypeError, OverflowError, KafkaLogError):
        return None


def check_records(data: bytes) -> None:
    """MemoryRecords batch iteration + record decoding over the bytes after a 1-byte flag
    (bit 0: check CRCs; bit 1: fix up the CRCs first; bit 2: small decompression limit)."""
    if not data:
        return
    flags, body = data[0], bytearray(data[1:])
    if flags & 2:
        _fix_crcs(body)
    body = bytes(body)
    check_crcs = bool(flags & 1)
    max_dec = 4096 if flags & 4 else 1 << 20
    outs = [(label, _decode_all(mod, body, check_crcs, max_dec)) for label, mod in BATCH]
    _agree("MemoryRecords", outs, body)
    # re-encode every decoded batch, in each twin, and decode again
    batches, _ = outs[0][1]
    for entry in batches:
        if entry[0] == "stop":
            continue
        summary, _valid, (kind, recs) = entry
        if kind != "ok":
            continue
        for label, mod in BATCH:
            built = _reencode(mod, summary, recs)
            if built is None:
                continue
            again = [
                _rec_tuple(r) for b in mod.MemoryRecords(built).batches() for r in b
            ]
            want = recs
            if summary[0] == 0:  # magic 0 has no timestamps
                want = [(o, -1, k, v, h) for o, _t, k, v, h in recs]
            if again != want:
                raise InvariantError(
                    f"{label}: re-encoded records differ:\n  {_short(want)}\n  {_short(again)}"
                )


def _built_logs(base_offset: int, value_tail: bytes, headers) -> Iterator[bytes]:
    """Three records built with MemoryRecordsBuilder for every magic and codec (the pure twin)."""
    mod = BATCH[-1][1]
    for magic in (0, 1, 2):
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            try:
                b = mod.MemoryRecordsBuilder(magic=magic, compression_type=codec,
                                             base_offset=base_offset)
                b.append(1000, b"k", b"v" * 40)
                b.append(1001, None, value_tail, headers if magic == 2 else ())
                b.append(1002, b"key2", None)
                yield b.build()
            except (KafkaLogError, ValueError):  # e.g. zstd needs magic 2
                continue


def _corpus_logs(blob_flags: bytes, file_flag: bytes) -> Iterator[bytes]:
    """The conformance corpus's batches, message sets and small segment files, each behind
    each of ``blob_flags`` (files behind ``file_flag``)."""
    for blob in _conformance_blobs(("v2_batch", "message_set", "records_blob", "segment_log")):
        for flag in blob_flags:
            yield bytes([flag]) + blob
    for path in _conformance_files(".log"):
        raw = path.read_bytes()
        if len(raw) <= 64 * 1024:
            yield file_flag + raw


def seeds_records() -> Iterator[bytes]:
    for raw in _built_logs(5, b"hello world " * 3, [("h", b"x")]):
        yield b"\x03" + raw
        yield b"\x02" + raw
    yield from _corpus_logs(b"\x03\x02", b"\x03")


# ------------------------------------------------------------------------------------------------
# indexes
# ------------------------------------------------------------------------------------------------
_TMP: str | None = None


def _tmpdir() -> str:
    global _TMP
    if _TMP is None:
        _TMP = tempfile.mkdtemp(prefix="kafkalog-fuzz-")
        import atexit
        import shutil

        atexit.register(shutil.rmtree, _TMP, True)
    return _TMP


def _write(name: str, data: bytes) -> str:
    path = os.path.join(_tmpdir(), name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def check_index(data: bytes) -> None:
    """Open the bytes as an offset, time and transaction index (read-only), sanity-check them
    and look up a few targets.  Only KafkaLogError may escape; a lookup returns an entry at or
    below its target (or the documented default) and the index's own entries."""
    from kafkalog.storage.index import OffsetIndex, TimeIndex
    from kafkalog.storage.txn_index import TransactionIndex

    base = 100
    probes = [0, base, base + 1, base + 1000, 2**31, -1, 2**62]
    p = _write("00000000000000000100.index", data)
    idx = OffsetIndex(p, base, writable=False)
    try:
        try:
            idx.sanity_check(full=True)
            checked = True
        except _errors.CorruptIndexError:
            checked = False
        n = idx.entries
        ents = [idx.entry(i) for i in range(min(n, 64))]
        for t in probes:
            op = idx.lookup(t)
            if checked and op.offset > t and op != (base, 0):
                raise InvariantError(f"OffsetIndex.lookup({t}) -> {op} above the target")
            if checked and op != (base, 0) and n <= 64 and op not in ents:
                raise InvariantError(f"OffsetIndex.lookup({t}) -> {op} not an entry")
    finally:
        idx.close()
    p = _write("00000000000000000100.timeindex", data)
    tix = TimeIndex(p, base, writable=False)
    try:
        try:
            tix.sanity_check(full=True)
            checked = True
        except _errors.CorruptIndexError:
            checked = False
        for i in range(min(tix.entries, 64)):
            tix.entry(i)
        for t in probes:
            to = tix.lookup(t)
            if checked and to.timestamp > t and to.timestamp != -1:
                raise InvariantError(f"TimeIndex.lookup({t}) -> {to} above the target")
    finally:
        tix.close()
    p = _write("00000000000000000100.txnindex", data)
    txn = TransactionIndex(base, p, writable=False)
    try:
        try:
            txn.sanity_check()
        except _errors.CorruptIndexError:
            pass
        try:
            aborted = txn.all_aborted_txns()
        except _errors.CorruptIndexError:
            return
        if len(aborted) != len(data) // 34:
            raise InvariantError(f"TransactionIndex: {len(aborted)} entries in {len(data)} bytes")
        txn.collect_aborted_txns(base, base + 1000)
    finally:
        txn.close()


def seeds_index() -> Iterator[bytes]:
    yield struct.pack(">ii", 1, 0) + struct.pack(">ii", 5, 4096)
    yield struct.pack(">qi", 1000, 1) + struct.pack(">qi", 2000, 7)
    yield struct.pack(">hqqqq", 0, 7, 100, 150, 140)
    for suf in (".index", ".timeindex", ".txnindex"):
        for path in _conformance_files(suf):
            raw = path.read_bytes()
            # trim a preallocated zero tail but keep a little of it
            stripped = raw.rstrip(b"\0")
            yield raw[: len(stripped) + 24][:16384]


# ------------------------------------------------------------------------------------------------
# checkpoints (kafkalog.storage.files)
# ------------------------------------------------------------------------------------------------
def check_checkpoint(data: bytes) -> None:
    """Each checkpoint reader over the bytes: only KafkaLogError escapes, and what reads back
    round-trips through the matching writer."""
    from kafkalog.storage import checkpoints as files

    p = _write("checkpoint", data)
    q = os.path.join(_tmpdir(), "checkpoint.out")
    try:
        offsets = files.read_offset_checkpoint(p)
    except _errors.CorruptCheckpointError:
        offsets = None
    if offsets is not None:
        try:
            files.write_offset_checkpoint(q, offsets, fsync=False)
        except ValueError:
            pass  # e.g. a topic name the writer refuses; fine
        else:
            if files.read_offset_checkpoint(q) != offsets:
                raise InvariantError(f"offset checkpoint round trip: {offsets}")
    try:
        epochs = files.read_leader_epoch_checkpoint(p)
    except _errors.CorruptCheckpointError:
        epochs = None
    if epochs is not None:
        files.write_leader_epoch_checkpoint(q, epochs, fsync=False)
        if files.read_leader_epoch_checkpoint(q) != epochs:
            raise InvariantError(f"leader-epoch checkpoint round trip: {epochs}")
    try:
        meta = files.read_partition_metadata(p)
    except _errors.CorruptCheckpointError:
        meta = None
    if meta is not None:
        files.write_partition_metadata(q, meta.topic_id, fsync=False)
        if files.read_partition_metadata(q) != meta:
            raise InvariantError(f"partition.metadata round trip: {meta}")
    try:
        files.read_clean_shutdown_file(p)
    except _errors.CorruptCheckpointError:
        pass


def seeds_checkpoint() -> Iterator[bytes]:
    yield b"0\n2\nfoo 0 10\nbar 3 42\n"
    yield b"0\n1\n0 0\n"
    yield b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"
    yield b'{"version":0,"brokerEpoch":7}'
    names = ("checkpoint", "partition.metadata", ".kafka_cleanshutdown", "quorum-state")
    d = _conf_root()
    if d is not None:
        for path in sorted((d / "files").rglob("*")):
            if path.is_file() and any(n in path.name for n in names):
                yield path.read_bytes()[:4096]


# ------------------------------------------------------------------------------------------------
# producer snapshots
# ------------------------------------------------------------------------------------------------
def check_snapshot(data: bytes) -> None:
    """decode_snapshot over the bytes after a flag byte (bit 0: fix the CRC first): only
    CorruptSnapshotError escapes, and what decodes re-encodes to the same bytes."""
    from kafkalog.storage import producer_state as ps
    from kafkalog._crc_py import crc32c

    if not data:
        return
    flags, body = data[0], bytearray(data[1:])
    if flags & 1 and len(body) >= 6:
        struct.pack_into(">I", body, 2, crc32c(bytes(body[6:])))
    body = bytes(body)
    try:
        entries = ps.decode_snapshot(body)
    except _errors.CorruptSnapshotError:
        return
    again = ps.encode_snapshot(entries)
    if again != body:
        raise InvariantError(f"snapshot round trip: {body.hex()} -> {again.hex()}")


def seeds_snapshot() -> Iterator[bytes]:
    from kafkalog.storage import producer_state as ps

    yield b"\x01" + ps.encode_snapshot([])
    yield b"\x01" + ps.encode_snapshot(
        [ps.ProducerStateEntry(7, 1, 10, 100, 3, 1700000000000, -1, -1),
         ps.ProducerStateEntry(8, 0, 0, 5, 0, 1, 2, 4)]
    )
    for path in _conformance_files(".snapshot"):
        yield b"\x00" + path.read_bytes()[:8192]


# ------------------------------------------------------------------------------------------------
# segment recovery (kafkalog.storage.segment / kafkalog.storage.log)
# ------------------------------------------------------------------------------------------------
def check_segment(data: bytes) -> None:
    """Write the bytes after a flag byte as a segment's .log (flag bit 1: fix up CRCs), then
    recover it writable (bit 0 clear) or open it as a Log read-only (bit 0 set).  Only
    KafkaLogError escapes; after recovery the .log holds exactly the valid prefix that
    MemoryRecords reports, every batch in it reads, and the rebuilt indexes pass sanity checks."""
    from kafkalog.storage.segment import Segment

    if not data:
        return
    flags, body = data[0], bytearray(data[1:])
    if flags & 2:
        _fix_crcs(body)
    body = bytes(body)
    d = os.path.join(_tmpdir(), "seg")
    if os.path.isdir(d):
        for n in os.listdir(d):
            os.unlink(os.path.join(d, n))
    else:
        os.makedirs(d)
    with open(os.path.join(d, "00000000000000000000.log"), "wb") as f:
        f.write(body)
    if flags & 1:
        from kafkalog.storage.log import Log

        try:
            log = Log.open(d, read_only=True)
        except KafkaLogError:
            return
        try:
            end = log.log_end_offset
            if end < 0:
                raise InvariantError(f"log end offset {end}")
        finally:
            log.close()
        return
    seg = Segment.open(d, 0, index_interval_bytes=64, max_index_size=4096)
    try:
        try:
            truncated = seg.recover()
        except _errors.InvalidOffsetError:
            return  # documented: offsets going backwards at an index entry
        if seg.size + truncated != len(body):
            raise InvariantError(f"recover: size {seg.size} + truncated {truncated} != {len(body)}")
        seg.offset_index.sanity_check()
        seg.time_index.sanity_check()
        for _b in seg.iter_batches():
            pass
        seg.read_next_offset()
    finally:
        seg.close()  # must not raise (KB2: it did after recovering backwards offsets)


def seeds_segment() -> Iterator[bytes]:
    for s in seeds_records():
        yield b"\x00" + s[1:]
        yield b"\x01" + s[1:]


# ------------------------------------------------------------------------------------------------
# dump decoders (kafkalog.tools.decoders)
# ------------------------------------------------------------------------------------------------
class _FakeRecord:
    __slots__ = ("headers", "key", "offset", "timestamp", "value")

    def __init__(self, key, value) -> None:
        self.offset = 42
        self.timestamp = 0
        self.key = key
        self.value = value
        self.headers = ()


def check_decoders(data: bytes) -> None:
    """The dump CLI's decoders over a key/value split of the bytes: every parser returns text
    (or None) and JSON-able objects; only DecodeError (documented: a missing key) or
    KafkaLogError escape."""
    from kafkalog.tools import decoders as dec

    if len(data) < 2:
        return
    split = data[0] % len(data)
    key: bytes | None = data[1 : 1 + split]
    value: bytes | None = data[1 + split :]
    if data[0] & 0x80:
        key = None
    if data[-1] == 0xFF:
        value = None
    rec = _FakeRecord(key, value)
    parsers = [
        dec.OffsetsMessageParser(),
        dec.TransactionLogMessageParser(),
        dec.ClusterMetadataMessageParser(),
    ]
    for name in dec.KEY_VALUE_DECODERS:
        vd = dec.ValueDecoder(name)
        parsers.append(dec.DecoderMessageParser(vd, vd))
    for p in parsers:
        for fn in (p.parse, p.parse_obj):
            try:
                k, v = fn(rec)
            except (dec.DecodeError, KafkaLogError):  # documented: dump prints these
                continue
                continue
            if fn is p.parse:
                for t in (k, v):
                    if t is not None and not isinstance(t, str):
                        raise InvariantError(f"{type(p).__name__}.parse -> {type(t)}")
            else:
                json.dumps([k, v])
    for fn, args in (
        (dec.read_metadata_record, (data,)),
        (dec.control_record_text, (key, value)),
        (dec.control_record_object, (key, value)),
    ):
        try:
            fn(*args)
        except (dec.DecodeError, KafkaLogError):
            pass


def seeds_decoders() -> Iterator[bytes]:
    yield b"\x05" + b"\x00\x01\x00\x03foo" + b"\x00\x03\x00\x00\x00\x00\x00\x00\x00\x01"
    yield b"\x04" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00\x00\x00"
    yield b"\x00" + b"\x01\x00\x00" + b"\xff"
    # records of the conformance segments (offsets, metadata, transaction topics included)
    mod = BATCH[-1][1]
    n = 0
    for path in _conformance_files(".log"):
        try:
            for b in mod.MemoryRecords(path.read_bytes()).batches():
                for r in b:
                    k = r.key or b""
                    v = r.value or b""
                    if len(k) < 128:
                        yield bytes([len(k)]) + k + v[:4096]
                        n += 1
                    if n > 200:
                        return
        except KafkaLogError:
            continue


# ------------------------------------------------------------------------------------------------
# Arrow columnar decoder (kafkalog._arrow / _arrow_py) and encoder
# ------------------------------------------------------------------------------------------------
ARROW = _load_twins("_arrow")
# the encoder twin of each decoder twin (from_arrow), by the decoder's IMPLEMENTATION
_ARROW_ENCODERS = {mod.IMPLEMENTATION: mod for _label, mod in _load_twins("_arrow_encode")}
_ARROW_COLUMN_SETS = (
    None,
    ["offset", "value"],
    ["key", "headers"],
    ["timestamp", "timestampType", "offset"],
)


def _arrow_run(mod, fn):
    """``fn()`` with ``kafkalog.arrow`` switched to the columnar core ``mod`` (and the encoder
    twin of the same implementation)."""
    import kafkalog.arrow as ka

    saved = ka._core, ka._encoder
    ka._core = mod
    ka._encoder = _ARROW_ENCODERS[mod.IMPLEMENTATION]
    try:
        return _outcome(fn)
    finally:
        ka._core, ka._encoder = saved


def _arrow_reference(body: bytes, check_crcs: bool, include_control: bool, max_dec: int):
    """The record decoder's rows, as to_arrow lays them out (header keys decoded as Java does)."""
    mod = BATCH[-1][1]
    rows = []
    for batch in mod.MemoryRecords(body, check_crcs=check_crcs,
                                   max_decompressed_size=max_dec).batches():
        if batch.is_control_batch and not include_control:
            if check_crcs:
                batch.ensure_valid()
            continue
        tt = int(batch.timestamp_type)
        for r in batch.records():
            heads = [
                {"key": k.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                 "value": v}
                for k, v in r.headers
            ]
            rows.append({"key": r.key, "value": r.value, "offset": r.offset,
                         "timestamp": r.timestamp, "timestampType": tt,
                         "headers": heads or None})
    return rows


def check_arrow(data: bytes) -> None:
    """``kafkalog.arrow.to_arrow`` over the bytes after a 1-byte flag, on both columnar twins.

    Flag bits: 0 check CRCs; 1 fix up the CRCs first; 2 keep control batches; 3 a 4 KiB
    decompression limit; 4 batch metadata columns; 5-6 a column projection; 7 decode in
    bounded chunks (``iter_batches`` with 3 rows / 64 bytes per chunk).
    Invariants: only KafkaLogError escapes; the twins give equal tables or the same error class
    and message; with every default column the table equals the record decoder's records (or
    both fail); a decoded table re-encodes (``from_arrow``) to the same bytes in both twins, and
    those bytes decode to the same rows.
    """
    if not data:
        return
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - the harness needs the [arrow] extra
        return
    import kafkalog.arrow as ka

    flags, body = data[0], bytearray(data[1:])
    if flags & 2:
        _fix_crcs(body)
    body = bytes(body)
    cols = _ARROW_COLUMN_SETS[(flags >> 5) & 3]
    kw = dict(
        check_crcs=bool(flags & 1),
        include_control=bool(flags & 4),
        max_decompressed_size=4096 if flags & 8 else 1 << 20,
        batch_metadata=bool(flags & 16),
        timestamp_unit=None,
    )
    if flags & 128:
        def decode():
            chunks = list(ka.iter_batches(body, cols, max_rows=3, max_bytes=64, **kw))
            return pa.Table.from_batches(chunks, schema=ka.schema(cols, **_schema_kw(kw)))
    else:
        def decode():
            return ka.to_arrow(body, cols, **kw)

    outs = [(label, _arrow_run(mod, decode)) for label, mod in ARROW]
    first_label, first = outs[0]
    for label, out in outs[1:]:
        if out[0] != first[0] or (out[0] == "err" and out[1] != first[1]) or (
            out[0] == "ok" and not out[1].equals(first[1])
        ):
            raise InvariantError(
                f"to_arrow: {first_label} and {label} differ on {_short(body)}:\n"
                f"  {_short(first)}\n  {_short(out)}"
            )
    if cols is None and not kw["batch_metadata"]:
        ref = _outcome(lambda: _arrow_reference(body, kw["check_crcs"], kw["include_control"],
                                                kw["max_decompressed_size"]))
        if ref[0] != first[0]:
            raise InvariantError(
                f"to_arrow and the record decoder disagree on {_short(body)}:\n"
                f"  {_short(ref)}\n  {_short(first)}"
            )
        if ref[0] == "ok" and first[1].to_pylist() != ref[1]:
            raise InvariantError(
                f"to_arrow rows differ from the records on {_short(body)}:\n"
                f"  {_short(ref[1])}\n  {_short(first[1].to_pylist())}"
            )
    if first[0] != "ok" or first[1].num_rows == 0 or cols is not None:
        return
    table = first[1]
    # re-encode: both twins write the same bytes, and they decode to the same rows
    def encode():
        try:
            return ("ok", ka.from_arrow(table))
        except (ValueError, TypeError, OverflowError) as e:  # a table it rightly refuses
            return ("err", type(e).__name__, str(e))

    enc = [(label, _arrow_run(mod, encode)[1]) for label, mod in ARROW]
    if len({repr(e) for _l, e in enc}) != 1:
        raise InvariantError(f"from_arrow: the twins differ: {_short(enc)}")
    if enc[0][1][0] != "ok":
        return  # e.g. a negative timestamp, which from_arrow rightly refuses
    encoded = enc[0][1][1]
    again = ka.to_arrow(encoded, timestamp_unit=None, include_control=True)
    want = table.select(["key", "value", "offset", "timestamp", "headers"]).to_pylist()
    got = again.select(["key", "value", "offset", "timestamp", "headers"]).to_pylist()
    if got != want:
        raise InvariantError(f"from_arrow/to_arrow round trip differs:\n  {_short(want)}\n"
                             f"  {_short(got)}")


def _schema_kw(kw: dict) -> dict:
    return {"timestamp_unit": kw["timestamp_unit"], "batch_metadata": kw["batch_metadata"]}


def seeds_arrow() -> Iterator[bytes]:
    for raw in _built_logs(7, b"value", [("h\xff", b"x"), ("k", None)]):
        yield b"\x03" + raw
        yield b"\x83" + raw
        yield b"\x13" + raw
    yield from _corpus_logs(b"\x03\x07", b"\x03")


def _v2_with_section(section: bytes, count: int, codec: int) -> bytes:
    """A v2 batch at offset 0 (valid CRC) whose records section is ``section`` as given."""
    body = struct.pack(">hiqqqhii", codec, count - 1, 1000, 1000, -1, -1, -1, count) + section
    from kafkalog._crc_py import crc32c

    return struct.pack(">qiibI", 0, 9 + len(body), 0, 2, crc32c(body)) + body


def _lz4_frame(blocks: list, block_checksum: bool) -> bytes:
    from kafkalog.compression import _lz4_hc, xxh32

    flg, bd = 0x60 | (0x10 if block_checksum else 0), 0x40
    out = bytearray(struct.pack("<I", 0x184D2204) + bytes((flg, bd, _lz4_hc(bytes((flg, bd))))))
    for blk, stored in blocks:
        out += struct.pack("<I", len(blk) | (0x80000000 if stored else 0)) + blk
        if block_checksum:
            out += struct.pack("<I", xxh32(blk))
    return bytes(out + struct.pack("<I", 0))


def check_arrow_codec(data: bytes) -> None:
    """Crafted LZ4 and snappy blocks in a well-formed batch, through ``check_arrow``'s
    invariants (twin parity of the columnar path, agreement with the record decoder).

    ``data[0]``: check_arrow's flag byte (its CRC fix-up bit is cleared: the CRC is made
    valid here).  ``data[1]``: bit 0 codec (0 lz4, 1 snappy); bits 1-2 records declared
    (1-4); bit 3 lz4: split the payload into two blocks at a data-chosen point, snappy: xerial
    framing; bit 4 lz4 block checksums; bit 5 lz4: the first block stored uncompressed.
    ``data[2:]``: the raw block bytes (the fuzzer mutates them, not the framing).
    """
    if len(data) < 3:
        return
    flags, mode, payload = data[0] & ~2, data[1], data[2:]
    count = 1 + ((mode >> 1) & 3)
    if mode & 1:
        if mode & 8:
            section = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(
                ">i", len(payload)) + payload
        else:
            section = payload
        codec = 2
    else:
        if mode & 8 and len(payload) > 1:
            cut = 1 + payload[0] % (len(payload) - 1)
            blocks = [(payload[1:cut], bool(mode & 32)), (payload[cut:], False)]
        else:
            blocks = [(payload, bool(mode & 32))]
        section = _lz4_frame(blocks, bool(mode & 16))
        codec = 3
    check_arrow(bytes((flags,)) + _v2_with_section(section, count, codec))


def seeds_arrow_codec() -> Iterator[bytes]:
    from kafkalog import MemoryRecordsBuilder

    for values in ([b"value"], [b"x" * 300, b"y"], [bytes(range(256)) * 3, b"a" * 1000]):
        for codec, mode in (("lz4", 0), ("snappy", 1)):
            try:
                b = MemoryRecordsBuilder(2, codec, 0)
            except Exception:  # pragma: no cover - codec library missing
                continue
            for i, v in enumerate(values):
                b.append(1000 + i, b"k", v, [("h", b"v")])
            section = b.build()[61:]
            mode |= (len(values) - 1) << 1
            if codec == "lz4":  # the first block of Kafka's frame (header 7 bytes)
                size = struct.unpack_from("<I", section, 7)[0] & 0x7FFFFFFF
                raw = section[11 : 11 + size]
            else:
                raw = section
            for flags in (0x01, 0x09, 0x81):
                yield bytes((flags, mode)) + raw
    # blocks at LZ4's end-of-block limits: a long match whose length bytes reach the last 5
    # input bytes, and a last sequence with fewer than 5 literals
    for tail in (0, 1, 2, 4, 5):
        lit = b"\x00" * 4
        block = bytes([0x4F]) + lit + b"\x01\x00" + b"\xff\xff\xff\x05" + bytes([tail << 4])
        yield bytes((0x01, 0)) + block + b"a" * tail


# ------------------------------------------------------------------------------------------------
# conformance corpus
# ------------------------------------------------------------------------------------------------
def _conf_root() -> Path | None:
    env = os.environ.get("KAFKALOG_CONFORMANCE")
    cands = [Path(env)] if env else []
    cands.append(Path(__file__).resolve().parent.parent.parent / "shared" / "conformance")
    cands.append(Path("/work/shared/conformance"))
    for c in cands:
        if (c / "vectors.jsonl").is_file():
            return c
    return None


def _conformance_blobs(kinds) -> Iterator[bytes]:
    d = _conf_root()
    if d is None:
        return
    with open(d / "vectors.jsonl") as f:
        for line in f:
            v = json.loads(line)
            if v.get("kind") in kinds and v.get("hex"):
                yield bytes.fromhex(v["hex"])


def _conformance_files(suffix: str) -> Iterator[Path]:
    d = _conf_root()
    if d is None:
        return
    for path in sorted((d / "files").rglob("*" + suffix)):
        if path.is_file():
            yield path


# ------------------------------------------------------------------------------------------------
HARNESSES: dict[str, tuple[Callable[[bytes], None], Callable[[], Iterator[bytes]]]] = {
    "varint": (check_varint, seeds_varint),
    "records": (check_records, seeds_records),
    "index": (check_index, seeds_index),
    "checkpoint": (check_checkpoint, seeds_checkpoint),
    "snapshot": (check_snapshot, seeds_snapshot),
    "segment": (check_segment, seeds_segment),
    "decoders": (check_decoders, seeds_decoders),
    "arrow": (check_arrow, seeds_arrow),
    "arrow_codec": (check_arrow_codec, seeds_arrow_codec),
}


def seeds(name: str) -> list[bytes]:
    """The harness's seed corpus, deduplicated, in a stable order."""
    out, seen = [], set()
    for s in HARNESSES[name][1]():
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def write_seeds(name: str, directory: str) -> int:
    os.makedirs(directory, exist_ok=True)
    import hashlib

    n = 0
    for s in seeds(name):
        with open(os.path.join(directory, "seed-" + hashlib.sha1(s).hexdigest()[:16]), "wb") as f:
            f.write(s)
        n += 1
    return n


if __name__ == "__main__":  # pragma: no cover
    for name in sys.argv[1:] or HARNESSES:
        print(name, len(seeds(name)))
