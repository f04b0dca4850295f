"""Pure-Python twin of :mod:`kafkalog._dump`: the record lines of ``kafkalog dump
--deep-iteration [--print-data-log]`` for one v2 data batch, runs of plain v2 batches with their
batch lines (``v2_dump_run``), and what ``kafkalog stats`` counts of them.

The caller (``kafkalog.tools.dump``) uses it for magic-2 data batches printed as text with the
string decoders, record metadata shown and no header values.  It returns None where it does not do
exactly what the general path does (a malformed record, a sequence number past Int.MAX); the
caller then formats that batch the general way, which also raises the right error.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

from ._batch_py import decode_records
from ._crc_py import crc32c
from ._format import INT32_MAX, INT64_MAX, V2_HEADER
from .errors import KafkaLogError

__all__ = ["v2_dump_run", "v2_record_lines", "v2_record_summary", "v2_stats_run", "hll_update"]

_V2 = V2_HEADER  # the 61-byte v2 header


def v2_record_lines(
    section,
    count: int,
    base_offset: int,
    base_ts: int,
    append_ts: Optional[int],
    base_seq: int,
    ts_name: bytes,
    contents: bool,
    last_offset: int,
    u8: Callable[[bytes], bytes],
) -> Optional[Tuple[bytes, int, List[Tuple[int, int]]]]:
    """The record lines of one v2 data batch, as ``(lines, last_offset, gaps)``, or None (see
    the compiled twin for the arguments)."""
    if count < 0:
        return None
    if count == 0:
        return (b"", last_offset, [])
    if count > len(section):
        return None
    try:
        recs = decode_records(section, count, base_offset, base_ts, append_ts, 0)
    except KafkaLogError:
        return None
    out: List[bytes] = []
    gaps: List[Tuple[int, int]] = []
    lo = last_offset
    head = b"| offset: %d " + ts_name + b": %d keySize: %d valueSize: %d sequence: %d headerKeys: ["
    for r in recs:
        o = r.offset
        if base_seq < 0:
            seq = -1
        else:
            delta = o - base_offset
            # a wrapped offset or a sequence past Int.MAX: the general path's business
            if not -(2**31) <= delta <= INT32_MAX or base_seq + delta > INT32_MAX:
                return None
            seq = base_seq + delta
        if o != (lo + 1 if lo != INT64_MAX else -INT64_MAX - 1):   # a Java long: MAX + 1 is MIN
            gaps.append((lo, o))
        lo = o
        k, v = r.key, r.value
        out.append(
            head % (o, r.timestamp, -1 if k is None else len(k), -1 if v is None else len(v), seq)
        )
        if r.headers:
            out.append(
                b",".join([_text(h[0].encode("utf-8", "surrogateescape"), u8) for h in r.headers])
            )
        out.append(b"]")
        if contents:
            if k is not None:
                out.append(b" key: " + _text(k, u8))
            if v is not None:
                out.append(b" payload: " + _text(v, u8))
        out.append(b"\n")
    return (b"".join(out), lo, gaps)


def v2_dump_run(
    buf,
    pos: int,
    end: int,
    last_offset: int,
    contents: bool,
    u8: Callable[[bytes], bytes],
    gaps: List[Tuple[int, int]],
    out: bytearray,
    limit: int,
    max_walk: int,
) -> Tuple[int, int, int]:
    """The batch and record lines of the plain v2 data batches from ``pos``, written to the
    start of ``out``, as ``(length of the text, pos, last_offset)`` (see the compiled twin for
    where it stops)."""
    if pos < 0 or end > len(buf):
        raise ValueError(f"pos {pos} and end {end} must lie within the buffer of {len(buf)} bytes")
    parts: List[bytes] = []
    size = 0
    start = pos
    lo = last_offset
    while pos < end - 17 and size < limit and pos - start < max_walk:
        (base, length, ple, magic, crc, attrs, lod, base_ts, max_ts, pid, epoch, base_seq,
         count) = _V2.unpack_from(buf, pos) if end - pos >= 61 else (0, 0) + (0,) * 11
        if length < 49 or pos > end - 12 - length or magic != 2 or attrs & 0x27:
            break
        bsize = length + 12
        if count < 0 or count > bsize - 61:
            break
        valid = crc == crc32c(buf[pos + 21 : pos + bsize])
        if base_seq == -1:
            last_seq = -1
        elif base_seq > INT32_MAX - lod:
            last_seq = lod - (INT32_MAX - base_seq) - 1
        else:
            last_seq = base_seq + lod
        ts_name = b"LogAppendTime" if attrs & 0x08 else b"CreateTime"
        head = (
            b"baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d "
            b"producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %s "
            b"isControl: false deleteHorizonMs: %s position: %d %s: %d size: %d magic: 2 "
            b"compresscodec: none crc: %d isvalid: %s\n"
            % (base, _wrap64(base + lod), count, base_seq, last_seq, pid, epoch, ple,
               b"true" if attrs & 0x10 else b"false",
               b"OptionalLong[%d]" % base_ts if attrs & 0x40 else b"OptionalLong.empty",
               pos, ts_name, max_ts, bsize, crc, b"true" if valid else b"false")
        )
        lines = b""
        if count:
            done = v2_record_lines(buf[pos + 61 : pos + bsize], count, base, base_ts,
                                   max_ts if attrs & 0x08 else None, base_seq, ts_name,
                                   contents, lo, u8)
            if done is None:
                break
            lines, lo, batch_gaps = done
            gaps.extend(batch_gaps)
        parts.append(head)
        parts.append(lines)
        size += len(head) + len(lines)
        pos += bsize
    out[:size] = b"".join(parts)
    return (size, pos, lo)


def _wrap64(x: int) -> int:
    return ((x + 2**63) % 2**64) - 2**63


def _text(b: bytes, u8: Callable[[bytes], bytes]) -> bytes:
    return b if b.isascii() else u8(b)


def v2_record_summary(section, count: int, base_ts: int, append_ts: Optional[int]):
    """What ``kafkalog stats`` counts of one v2 data batch's records, or None (see the compiled
    twin)."""
    if count < 0:
        return None
    if count == 0:
        return (0, 0, 0, None, None, [])
    if count > len(section):
        return None
    try:
        recs = decode_records(section, count, 0, base_ts, append_ts, 0)
    except KafkaLogError:
        return None
    keys = [r.key for r in recs if r.key is not None]
    tombstones = sum(1 for r in recs if r.value is None)
    ts = [r.timestamp for r in recs]
    return (len(recs), len(recs) - len(keys), tombstones, min(ts), max(ts), keys)


def hll_update(registers: bytearray, keys: List[bytes], p: int) -> None:
    """Add ``keys`` to the HyperLogLog ``registers`` (see the compiled twin)."""
    m = len(registers)
    if not 4 <= p <= 18 or m != 1 << p:
        raise ValueError(f"registers must hold 2**p bytes for p in [4, 18], not {m} for p={p}")
    width = 64 - p
    low = (1 << width) - 1
    for key in keys:
        x = hash(key) & 0xFFFFFFFFFFFFFFFF
        j = x >> width
        rho = width - (x & low).bit_length() + 1
        if rho > registers[j]:
            registers[j] = rho


def v2_stats_run(buf, pos: int, end: int, exact: Optional[set], cache: list, registers,
                 p: int, exact_limit: int, max_walk: int, producers: set):
    """What ``kafkalog stats`` counts of the plain v2 data batches from ``pos`` (see the
    compiled twin; ``cache`` is not used here)."""
    if exact is None:
        if not 4 <= p <= 18 or len(registers) != 1 << p:
            raise ValueError(f"registers must hold 2**p bytes for p in [4, 18], not "
                             f"{len(registers)} for p={p}")
    elif not cache or len(cache) & (len(cache) - 1):
        raise ValueError(f"cache must be a list of a power-of-two length, not {len(cache)}")
    if pos < 0 or end > len(buf):
        raise ValueError(f"pos {pos} and end {end} must lie within the buffer of {len(buf)} bytes")
    start = pos
    batches = records = tx = stored = nulls = tombs = 0
    first = last = tmin = tmax = None
    while end - pos > 17 and pos - start < max_walk:
        (bo, length, _ple, magic, _crc, attrs, lod, bts, mts, pid, _epoch, _seq,
         count) = _V2.unpack_from(buf, pos) if end - pos >= 61 else (0, 0) + (0,) * 11
        if length < 49 or length + 12 > end - pos or magic != 2 or attrs & 0x27:
            break
        bsize = length + 12
        if not -(2**63) <= bo + lod < 2**63 or count < 0 or count > bsize - 61:
            break
        summary = v2_record_summary(buf[pos + 61 : pos + bsize], count, bts,
                                    mts if attrs & 0x08 else None)
        if summary is None:
            break
        n, bn, bt, lo, hi, keys = summary
        if pid >= 0:
            producers.add(pid)
        if first is None:
            first = bo
        last = bo + lod
        batches += 1
        if attrs & 0x10:
            tx += 1
        stored += bsize - 61
        records += n
        nulls += bn
        tombs += bt
        if n:
            if lo >= 0 and (tmin is None or lo < tmin):
                tmin = lo
            if hi >= 0 and (tmax is None or hi > tmax):
                tmax = hi
        if exact is None:
            hll_update(registers, keys, p)
        else:
            exact.update(keys)
        pos += bsize
        if exact is not None and len(exact) > exact_limit:
            break
    return (pos, batches, records, first, last, tx, stored, nulls, tombs, tmin, tmax)
