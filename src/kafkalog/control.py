"""Control records: what the records of a control batch (attribute bit 5) mean.

A control record's key is always ``version int16 | type int16`` (Kafka's ``ControlRecordType``);
its value depends on the type:

* ABORT (0) / COMMIT (1) - the end-transaction marker (``EndTransactionMarker``):
  ``version int16 | coordinatorEpoch int32`` (6 bytes; trailing bytes are tolerated).
* The KRaft types are flexible-version messages whose first field is their own ``Version``:
  LEADER_CHANGE (2, ``LeaderChangeMessage``: LeaderId, Voters[], GrantingVoters[]),
  SNAPSHOT_HEADER (3, ``SnapshotHeaderRecord``: LastContainedLogTimestamp),
  SNAPSHOT_FOOTER (4, ``SnapshotFooterRecord``), KRAFT_VERSION (5, ``KRaftVersionRecord``:
  KRaftVersion) and KRAFT_VOTERS (6, ``VotersRecord``: Voters[] with directory id, endpoints
  and supported kraft.version range).  Kafka reads them with schema version 0 (the only one);
  compact arrays and strings, and a tagged-field section at the end of each struct (skipped).
* Any other type id is UNKNOWN: the key parses, the value is kept as raw bytes, nothing fails
  (clients ignore such records).

Malformed keys and values raise :class:`~kafkalog.errors.InvalidRecordError` (a
:class:`~kafkalog.errors.CorruptRecordError`), as Kafka raises InvalidRecordException.
This module is pure Python and shared by both twins.
"""
from __future__ import annotations

import enum
import struct
import time
import uuid
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from .errors import InvalidRecordError

__all__ = [
    "ControlRecordType",
    "ControlRecord",
    "Voter",
    "VoterEndpoint",
    "parse_control_key",
    "parse_control_record",
    "parse_end_txn_marker",
    "control_type_id",
    "end_txn_marker_fields",
    "control_key",
    "end_txn_marker_value",
    "build_end_txn_marker",
    "CURRENT_CONTROL_RECORD_KEY_VERSION",
    "CURRENT_END_TXN_MARKER_VERSION",
]

CURRENT_CONTROL_RECORD_KEY_VERSION = 0
CURRENT_CONTROL_RECORD_KEY_SIZE = 4
CURRENT_END_TXN_MARKER_VERSION = 0
CURRENT_END_TXN_MARKER_VALUE_SIZE = 6

_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class ControlRecordType(enum.IntEnum):
    """Kafka's ControlRecordType ids (UNKNOWN = -1 for any id Kafka does not know)."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6

    @classmethod
    def from_id(cls, type_id: int) -> "ControlRecordType":
        """The type for a key's type id; UNKNOWN for ids Kafka does not define."""
        if 0 <= type_id <= 6:
            return cls(type_id)
        return cls.UNKNOWN


@dataclass(frozen=True)
class VoterEndpoint:
    """One listener of a KRaft voter (``VotersRecord.Voters[].Endpoints[]``)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True)
class Voter:
    """A voter of a ``VotersRecord``: id, directory id, endpoints, supported kraft.version range."""

    voter_id: int
    directory_id: uuid.UUID
    endpoints: Tuple[VoterEndpoint, ...]
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True)
class ControlRecord:
    """A decoded control record.

    ``type`` is the :class:`ControlRecordType` (UNKNOWN for other ids, whose raw id is
    ``type_id``), ``version`` the key's version.  ``value_version`` is the version field at the
    start of the value (None for UNKNOWN).  The other fields are set for the types that carry
    them and None otherwise:

    * ABORT / COMMIT: ``coordinator_epoch``
    * LEADER_CHANGE: ``leader_id``, ``voters`` and ``granting_voters`` (tuples of voter ids)
    * SNAPSHOT_HEADER: ``last_contained_log_timestamp``
    * KRAFT_VERSION: ``kraft_version``
    * KRAFT_VOTERS: ``voters`` (ids) and ``voter_set`` (:class:`Voter` details)

    ``value`` keeps the raw value bytes.
    """

    type: ControlRecordType
    version: int
    type_id: int
    value_version: Optional[int] = None
    coordinator_epoch: Optional[int] = None
    leader_id: Optional[int] = None
    voters: Optional[Tuple[int, ...]] = None
    granting_voters: Optional[Tuple[int, ...]] = None
    last_contained_log_timestamp: Optional[int] = None
    kraft_version: Optional[int] = None
    voter_set: Optional[Tuple[Voter, ...]] = None
    value: Optional[bytes] = None

    @property
    def is_transaction_marker(self) -> bool:
        return self.type in (ControlRecordType.ABORT, ControlRecordType.COMMIT)


def _bytes(x, what: str) -> bytes:
    if x is None:
        raise InvalidRecordError(f"Control record {what} is null")
    if isinstance(x, bytes):
        return x
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    raise TypeError(f"control record {what} must be bytes, not {type(x).__name__}")


def parse_control_key(key) -> Tuple[int, int]:
    """``(version, type)`` of a control record key (Kafka's ``ControlRecordType.parse``).

    ``type`` is the :class:`ControlRecordType` member for the ids Kafka defines (an IntEnum, so
    it equals its id) and the raw int id otherwise, so nothing is lost;
    ``ControlRecordType.from_id(type)`` maps any id to a member (UNKNOWN for the others).
    A key shorter than 4 bytes or with a negative version is invalid; a newer version is read
    with the version-0 layout, as Kafka does.
    """
    version, ctype, type_id = _parse_key(key)
    return version, (type_id if ctype is ControlRecordType.UNKNOWN else ctype)


def is_abort_marker(key) -> bool:
    """Whether ``key`` (a control record's key, or None) is that of an ABORT marker: type 0
    in the version-0 layout, which later versions keep (what a read_committed fetch drops
    the aborted data by)."""
    if key is None or len(key) < CURRENT_CONTROL_RECORD_KEY_SIZE:
        return False
    return _KEY.unpack_from(bytes(key[:CURRENT_CONTROL_RECORD_KEY_SIZE]), 0)[1] \
        == ControlRecordType.ABORT


def end_txn_marker_fields(key, value) -> Optional[Tuple[int, int]]:
    """``(type id, coordinator epoch)`` of a control record read leniently, as the producer
    state reads a control batch's first record for a transaction marker: None where the key is
    missing, shorter than 4 bytes or of a negative version; the epoch (bytes 2-5 of the value,
    whatever the type and the marker version) is -1 where the value is missing or shorter than
    a marker's 6 bytes.  The caller judges the type (ABORT 0 and COMMIT 1 are markers)."""
    if key is None or len(key) < CURRENT_CONTROL_RECORD_KEY_SIZE:
        return None
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        return None
    epoch = -1
    if value is not None and len(value) >= CURRENT_END_TXN_MARKER_VALUE_SIZE:
        epoch = _MARKER.unpack_from(value, 0)[1]
    return type_id, epoch


def control_type_id(key) -> Optional[int]:
    """The type id of a control record's key read leniently (as ``kafkalog stats`` counts the
    markers): None where the key is missing or shorter than 4 bytes; the version is not
    judged.  ABORT is 0, COMMIT 1."""
    if key is None or len(key) < CURRENT_CONTROL_RECORD_KEY_SIZE:
        return None
    return _KEY.unpack_from(key, 0)[1]


def parse_end_txn_marker(value) -> Tuple[int, int]:
    """``(version, coordinator epoch)`` of an ABORT/COMMIT marker's value (Kafka's
    ``EndTransactionMarker.deserializeValue``): a value shorter than 6 bytes or of a negative
    version raises :class:`~kafkalog.errors.InvalidRecordError`; a newer version is read with
    the version-0 layout, trailing bytes ignored."""
    value = _bytes(value, "value")
    if len(value) < CURRENT_END_TXN_MARKER_VALUE_SIZE:
        raise InvalidRecordError(
            f"Invalid value size found for end transaction marker. Must have at least "
            f"{CURRENT_END_TXN_MARKER_VALUE_SIZE} bytes, but found only {len(value)}"
        )
    mversion, epoch = _MARKER.unpack_from(value, 0)
    if mversion < 0:
        raise InvalidRecordError(
            f"Invalid version found for end transaction marker: {mversion}. "
            f"May indicate data corruption"
        )
    return mversion, epoch


def _parse_key(key) -> Tuple[int, ControlRecordType, int]:
    key = _bytes(key, "key")
    if len(key) < CURRENT_CONTROL_RECORD_KEY_SIZE:
        raise InvalidRecordError(
            f"Invalid value size found for end control record key. Must have at least "
            f"{CURRENT_CONTROL_RECORD_KEY_SIZE} bytes, but found only {len(key)}"
        )
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidRecordError(
            f"Invalid version found for control record: {version}. May indicate data corruption"
        )
    return version, ControlRecordType.from_id(type_id), type_id


class _Reader:
    """Reads the flexible-version (KIP-482) encoding of a KRaft control value."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.what = what

    def _need(self, n: int) -> int:
        p = self.pos
        if n < 0 or n > len(self.buf) - p:
            raise InvalidRecordError(
                f"Invalid {self.what} control record value: needs {n} bytes at byte {p}, "
                f"{len(self.buf) - p} left"
            )
        self.pos = p + n
        return p

    def int16(self) -> int:
        return _I16.unpack_from(self.buf, self._need(2))[0]

    def uint16(self) -> int:
        return _U16.unpack_from(self.buf, self._need(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.buf, self._need(4))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.buf, self._need(8))[0]

    def uuid(self) -> uuid.UUID:
        p = self._need(16)
        return uuid.UUID(bytes=self.buf[p : p + 16])

    def uvarint(self) -> int:
        value = 0
        shift = 0
        for _ in range(5):
            b = self.buf[self._need(1)]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise InvalidRecordError(
            f"Invalid {self.what} control record value: unsigned varint is too long"
        )

    def array_len(self) -> int:
        n = self.uvarint() - 1  # compact array: length + 1, 0 = null
        if n < 0:
            raise InvalidRecordError(f"Invalid {self.what} control record value: null array")
        if n > len(self.buf) - self.pos:
            raise InvalidRecordError(
                f"Invalid {self.what} control record value: array of {n} elements is longer "
                f"than the {len(self.buf) - self.pos} bytes left"
            )
        return n

    def string(self) -> str:
        n = self.uvarint() - 1  # compact string: length + 1, 0 = null
        if n < 0:
            raise InvalidRecordError(f"Invalid {self.what} control record value: null string")
        p = self._need(n)
        try:
            return self.buf[p : p + n].decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRecordError(
                f"Invalid {self.what} control record value: string is not UTF-8"
            ) from None

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._need(self.uvarint())  # size, then skip the data


def _voter_ids(r: _Reader) -> Tuple[int, ...]:
    out = []
    for _ in range(r.array_len()):
        out.append(r.int32())
        r.tagged_fields()
    return tuple(out)


def parse_control_record(key, value) -> ControlRecord:
    """Decode a control record's key and value into a :class:`ControlRecord`."""
    version, ctype, type_id = _parse_key(key)
    if ctype == ControlRecordType.UNKNOWN:
        raw = None if value is None else bytes(value)
        return ControlRecord(ctype, version, type_id, value=raw)
    value = _bytes(value, "value")
    if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        mversion, epoch = parse_end_txn_marker(value)
        return ControlRecord(
            ctype, version, type_id, mversion, coordinator_epoch=epoch, value=value
        )
    r = _Reader(value, ctype.name)
    vversion = r.int16()
    if ctype == ControlRecordType.LEADER_CHANGE:
        leader = r.int32()
        voters = _voter_ids(r)
        granting = _voter_ids(r)
        r.tagged_fields()
        return ControlRecord(
            ctype, version, type_id, vversion, leader_id=leader, voters=voters,
            granting_voters=granting, value=value,
        )
    if ctype == ControlRecordType.SNAPSHOT_HEADER:
        ts = r.int64()
        r.tagged_fields()
        return ControlRecord(
            ctype, version, type_id, vversion, last_contained_log_timestamp=ts, value=value
        )
    if ctype == ControlRecordType.SNAPSHOT_FOOTER:
        r.tagged_fields()
        return ControlRecord(ctype, version, type_id, vversion, value=value)
    if ctype == ControlRecordType.KRAFT_VERSION:
        kv = r.int16()
        r.tagged_fields()
        return ControlRecord(ctype, version, type_id, vversion, kraft_version=kv, value=value)
    # KRAFT_VOTERS
    voter_set: List[Voter] = []
    for _ in range(r.array_len()):
        vid = r.int32()
        dir_id = r.uuid()
        endpoints = []
        for _e in range(r.array_len()):
            name = r.string()
            host = r.string()
            port = r.uint16()
            r.tagged_fields()
            endpoints.append(VoterEndpoint(name, host, port))
        vmin = r.int16()
        vmax = r.int16()
        r.tagged_fields()  # of KRaftVersionFeature
        r.tagged_fields()  # of the voter
        voter_set.append(Voter(vid, dir_id, tuple(endpoints), vmin, vmax))
    r.tagged_fields()
    return ControlRecord(
        ctype, version, type_id, vversion, voters=tuple(v.voter_id for v in voter_set),
        voter_set=tuple(voter_set), value=value,
    )


def control_key(control_type: int, version: int = CURRENT_CONTROL_RECORD_KEY_VERSION) -> bytes:
    """The 4-byte key of a control record of ``control_type``."""
    return _KEY.pack(version, int(control_type))


def end_txn_marker_value(
    coordinator_epoch: int, version: int = CURRENT_END_TXN_MARKER_VERSION
) -> bytes:
    """The 6-byte value of an ABORT/COMMIT marker."""
    return _MARKER.pack(version, coordinator_epoch)


def build_end_txn_marker(
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: Optional[int] = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """An end-transaction marker batch, as the transaction coordinator has it written
    (Kafka's ``MemoryRecords.withEndTransactionMarker``): magic 2, uncompressed, transactional
    and control bits set, the transaction's producer id and epoch, base sequence -1, one record
    (key ``00 00 00 0X``, value ``00 00`` + coordinator epoch).  78 bytes.

    ``timestamp`` defaults to the current time in ms; ``partition_leader_epoch`` to -1 (none;
    a broker writes its current leader epoch).
    """
    from .records import MemoryRecordsBuilder

    if timestamp is None:
        timestamp = int(time.time() * 1000)
    ctype = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    builder = MemoryRecordsBuilder(
        2,
        "none",
        base_offset,
        "create_time",
        producer_id,
        producer_epoch,
        -1,
        is_transactional=True,
        partition_leader_epoch=partition_leader_epoch,
        is_control_batch=True,
    )
    builder.append(timestamp, control_key(ctype), end_txn_marker_value(coordinator_epoch))
    return builder.build()


def aborted_by_markers(buf, start: int = 0, stop: Optional[int] = None,
                       open_txn: Optional[Dict[int, int]] = None) -> List[Tuple[int, int, int]]:
    """Aborted transactions visible in a buffer of log entries without its log's transaction
    index (a loose segment file or bytes): ``(producer id, first offset of the transaction in
    the data, offset of its ABORT marker)``, from ``start`` up to ``stop``.  ``open_txn``
    carries the transactions still open from one piece of a segment to the next."""
    from .errors import KafkaLogError
    from .records import RecordBatch

    mv = memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    n = len(mv)
    stop = n if stop is None else min(stop, n)
    if open_txn is None:
        open_txn = {}
    out = []
    pos = start
    while pos < stop and n - pos >= 61:
        offset, size = struct.unpack_from(">qi", mv, pos)
        if size < 14 or n - pos < size + 12:
            break
        if mv[pos + 16] == 2 and size + 12 >= 61:
            attrs = mv[pos + 22]
            if attrs & 0x10:
                pid = struct.unpack_from(">q", mv, pos + 43)[0]
                if attrs & 0x20:
                    try:
                        recs = RecordBatch(mv, pos, check_crc=False).records()
                    except KafkaLogError:
                        recs = []
                    key = recs[0].key if recs else None
                    first = open_txn.pop(pid, None)
                    if is_abort_marker(key) and first is not None:
                        out.append((pid, first, offset))
                else:
                    open_txn.setdefault(pid, offset)
        pos += size + 12
    return out
