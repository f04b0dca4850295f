"""An independent model of kafka-dump-log's output, for uncompressed logs.

Written from the format description (reference §16) without using kafkalog's decoding: batch
headers with ``struct``, records with a hand-rolled zig-zag varint reader, CRCs with the
``crc32c``/``zlib`` packages.  The tests compare ``kafkalog dump`` with it line by line on the
real broker files of the conformance corpus.  Control records: end-transaction markers,
SnapshotHeader/SnapshotFooter, KRaftVersion and LeaderChange (version 0).
"""
from __future__ import annotations

import struct
import zlib
from typing import List, Optional, Tuple

import crc32c

V2 = struct.Struct(">qiibIhiqqqhii")


def _varint(b: bytes, p: int) -> Tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        x = b[p]
        p += 1
        raw |= (x & 0x7F) << shift
        if not x & 0x80:
            break
        shift += 7
    return (raw >> 1) ^ -(raw & 1), p


def _uvarint(b: bytes, p: int) -> Tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        x = b[p]
        p += 1
        raw |= (x & 0x7F) << shift
        if not x & 0x80:
            return raw, p
        shift += 7


def _control(key: bytes, value: bytes) -> str:
    ctype = struct.unpack_from(">h", key, 2)[0]
    if ctype in (0, 1):
        epoch = struct.unpack_from(">i", value, 2)[0]
        return f" endTxnMarker: {'ABORT' if ctype == 0 else 'COMMIT'} coordinatorEpoch: {epoch}"
    version = struct.unpack_from(">h", value, 0)[0]
    if ctype == 3:
        ts = struct.unpack_from(">q", value, 2)[0]
        return f' SnapshotHeader {{"version":{version},"lastContainedLogTimestamp":{ts}}}'
    if ctype == 4:
        return f' SnapshotFooter {{"version":{version}}}'
    if ctype == 5:
        kv = struct.unpack_from(">h", value, 2)[0]
        return f' KRaftVersion {{"version":{version},"kRaftVersion":{kv}}}'
    if ctype == 2:
        leader = struct.unpack_from(">i", value, 2)[0]
        p = 6
        lists = []
        for _ in range(2):
            n, p = _uvarint(value, p)
            ids = []
            for _ in range(n - 1):
                ids.append(struct.unpack_from(">i", value, p)[0])
                p += 4
                tags, p = _uvarint(value, p)
                assert tags == 0
            lists.append(",".join(f'{{"voterId":{i}}}' for i in ids))
        return (f' LeaderChange: {{"version":{version},"leaderId":{leader},"voters":[{lists[0]}],'
                f'"grantingVoters":[{lists[1]}]}}')
    raise AssertionError(f"control type {ctype} not modelled")


def _text(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace")


def dump_lines(data: bytes, base_offset: int, deep: bool, print_data: bool,
               name: str = "") -> List[str]:
    """Expected stdout (after the ``Dumping`` line) of ``--files X.log`` with the options."""
    out = [f"Log starting offset: {base_offset}"]
    pos = 0
    n = len(data)
    deep = deep or print_data
    while pos < n - 17:
        offset, length = struct.unpack_from(">qi", data, pos)
        assert length >= 14
        if pos > n - 12 - length:
            break
        size = length + 12
        magic = data[pos + 16]
        if magic == 2:
            (base, _l, ple, _m, crc, attrs, lod, base_ts, max_ts, pid, epoch, bseq,
             count) = V2.unpack_from(data, pos)
            assert attrs & 0x07 == 0, "the oracle models uncompressed batches only"
            last = base + lod
            lseq = -1 if bseq == -1 else bseq + lod
            valid = crc32c.crc32c(data[pos + 21 : pos + size]) == crc
            tstype = "LogAppendTime" if attrs & 0x08 else "CreateTime"
            dh = f"OptionalLong[{base_ts}]" if attrs & 0x40 else "OptionalLong.empty"
            out.append(
                f"baseOffset: {base} lastOffset: {last} count: {count} baseSequence: {bseq} "
                f"lastSequence: {lseq} producerId: {pid} producerEpoch: {epoch} "
                f"partitionLeaderEpoch: {ple} isTransactional: {str(bool(attrs & 0x10)).lower()} "
                f"isControl: {str(bool(attrs & 0x20)).lower()} deleteHorizonMs: {dh} position: "
                f"{pos} {tstype}: {max_ts} size: {size} magic: 2 compresscodec: none crc: {crc} "
                f"isvalid: {str(valid).lower()}"
            )
            if deep:
                p = pos + 61
                for _ in range(count):
                    rlen, p = _varint(data, p)
                    end = p + rlen
                    p += 1  # attributes
                    tsd, p = _varint(data, p)
                    od, p = _varint(data, p)
                    klen, p = _varint(data, p)
                    key = None if klen < 0 else data[p : p + klen]
                    p += max(klen, 0)
                    vlen, p = _varint(data, p)
                    val = None if vlen < 0 else data[p : p + vlen]
                    p += max(vlen, 0)
                    hc, p = _varint(data, p)
                    hkeys = []
                    for _ in range(hc):
                        hkl, p = _varint(data, p)
                        hkeys.append(_text(data[p : p + hkl]))
                        p += hkl
                        hvl, p = _varint(data, p)
                        p += max(hvl, 0)
                    assert p == end
                    ts = max_ts if attrs & 0x08 else base_ts + tsd
                    seq = -1 if bseq < 0 else bseq + od
                    line = (f"| offset: {base + od} {tstype}: {ts} keySize: "
                            f"{klen if klen >= 0 else -1} "
                            f"valueSize: {vlen if vlen >= 0 else -1} sequence: {seq} "
                            f"headerKeys: [{','.join(hkeys)}]")
                    if attrs & 0x20:
                        line += _control(key, val)
                    elif print_data:
                        if key is not None:
                            line += " key: " + _text(key)
                        if val is not None:
                            line += " payload: " + _text(val)
                    out.append(line)
        else:
            crc, m, attrs = struct.unpack_from(">IBB", data, pos + 12)
            assert attrs & 0x07 == 0
            valid = zlib.crc32(data[pos + 16 : pos + size]) == crc
            if magic == 1:
                ts = struct.unpack_from(">q", data, pos + 18)[0]
                tstype = "LogAppendTime" if attrs & 0x08 else "CreateTime"
                p = pos + 26
            else:
                ts, tstype, p = -1, "NoTimestampType", pos + 18
            out.append(f"offset: {offset} position: {pos} {tstype}: {ts} size: {size} magic: "
                       f"{magic} compresscodec: none crc: {crc} isvalid: {str(valid).lower()}")
            if deep:
                klen = struct.unpack_from(">i", data, p)[0]
                key = None if klen < 0 else data[p + 4 : p + 4 + klen]
                p += 4 + max(klen, 0)
                vlen = struct.unpack_from(">i", data, p)[0]
                val = None if vlen < 0 else data[p + 4 : p + 4 + vlen]
                line = (f"| offset: {offset} {tstype}: {ts} keySize: {klen if klen >= 0 else -1} "
                        f"valueSize: {vlen if vlen >= 0 else -1} isValid: {str(valid).lower()} "
                        f"crc: {crc}}}")
                if print_data:
                    if key is not None:
                        line += " key: " + _text(key)
                    if val is not None:
                        line += " payload: " + _text(val)
                out.append(line)
        pos += size
    if pos < n:
        out.append(f"Found {n - pos} invalid bytes at the end of {name}")
    return out
