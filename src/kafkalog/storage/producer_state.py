"""Producer state: the ``.snapshot`` files of a partition directory and the in-memory state
they capture (a reduced Kafka ``ProducerStateManager``).

Snapshot file layout (Kafka's ``ProducerSnapshot`` message, version 1, big-endian)::

    version int16 (1) | crc uint32 (CRC-32C of everything after it) | count int32
    count x [ producerId int64 | producerEpoch int16 | lastSequence int32 | lastOffset int64
              | offsetDelta int32 | timestamp int64 | coordinatorEpoch int32
              | currentTxnFirstOffset int64 (-1 = none) ]                        (46 bytes each)

A snapshot named ``<offset>.snapshot`` holds the state of every producer after all batches
below ``offset`` (the "map end offset").  The log writes one at every roll (named after the new
segment's base offset), after recovering a segment and at a clean close.

What the manager tracks: per producer the epoch, last sequence/offset/timestamp, coordinator
epoch and the first offset of its ongoing transaction; the ongoing transactions (for the last
stable offset) and, on an end-transaction marker, the completed transaction that the log turns
into a transaction-index entry when it was aborted.

What the manager validates (Kafka's ``ProducerAppendInfo`` and
``UnifiedLog.analyzeAndValidateProducerState``), before a leader append is written:

* a client batch whose producer id, epoch and sequence range match one of the producer's last
  five batches (Kafka's ``BatchMetadata`` queue) is a retried duplicate: it is not appended
  again and the append reports the original offsets;
* the epoch: a data batch of an older epoch than the producer's raises
  :class:`~kafkalog.errors.InvalidProducerEpochError`;
* the sequence (client batches only): within the producer's epoch the batch must follow the
  last sequence (``2**31 - 1`` wraps to 0), a new epoch must start at 0, and a producer the
  log does not know (never seen, expired, or truncated away) may start anywhere; otherwise
  :class:`~kafkalog.errors.OutOfOrderSequenceError`;
* a non-transactional batch while the producer's transaction is ongoing raises
  :class:`~kafkalog.errors.InvalidTxnStateError`;
* an end-transaction marker needs an epoch no older than the producer's (strictly newer with
  transactions V2, KIP-890, whose coordinator bumps the epoch at every commit or abort; a
  retried V2 marker of the current epoch with no transaction ongoing is accepted) and a
  coordinator epoch no older than the last one
  (:class:`~kafkalog.errors.TransactionCoordinatorFencedError`).

Producers without an ongoing transaction whose last timestamp is ``producer_id_expiration_ms``
old expire (:meth:`ProducerStateManager.remove_expired_producers`, also applied to a snapshot as
it is loaded); snapshots written afterwards no longer hold them.  A snapshot keeps only each
producer's last batch (Kafka's format), so after a reopen the duplicate queue holds that batch
plus the batches replayed from the log after the snapshot.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from typing import Callable, Deque, Dict, Iterable, List, NamedTuple, Optional

from .._speedups import crc as _crc
from ..control import ControlRecordType, end_txn_marker_fields
from ..errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from . import files as _files

__all__ = [
    "ProducerStateEntry",
    "BatchMetadata",
    "CompletedTxn",
    "ProducerStateManager",
    "read_snapshot",
    "write_snapshot",
    "encode_snapshot",
    "decode_snapshot",
    "list_snapshot_offsets",
]

SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, count
_ENTRY = struct.Struct(">qhiqiqiq")
ENTRY_SIZE = _ENTRY.size  # 46
assert ENTRY_SIZE == 46
_CRC_START = 6  # the CRC covers the count and the entries
_CONTROL_ABORT = int(ControlRecordType.ABORT)
_CONTROL_COMMIT = int(ControlRecordType.COMMIT)
_INT32_MAX = 2**31 - 1
NUM_BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86400000  # Kafka's producer.id.expiration.ms


def _decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


class ProducerStateEntry:
    """One producer's state, as stored in a snapshot entry."""

    __slots__ = (
        "producer_id",
        "producer_epoch",
        "last_sequence",
        "last_offset",
        "offset_delta",
        "timestamp",
        "coordinator_epoch",
        "current_txn_first_offset",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = -1,
        last_sequence: int = -1,
        last_offset: int = -1,
        offset_delta: int = 0,
        timestamp: int = -1,
        coordinator_epoch: int = -1,
        current_txn_first_offset: int = -1,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.last_sequence = last_sequence
        self.last_offset = last_offset
        self.offset_delta = offset_delta
        self.timestamp = timestamp
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = current_txn_first_offset

    @property
    def first_sequence(self) -> int:
        """First sequence of the last batch (``lastSequence - offsetDelta``, wrapping)."""
        if self.last_sequence < 0:
            return -1
        return _decrement_sequence(self.last_sequence, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return -1 if self.last_offset < 0 else self.last_offset - self.offset_delta

    def _key(self):
        return tuple(getattr(self, s) for s in self.__slots__)

    def __eq__(self, other):
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> "ProducerStateEntry":
        return ProducerStateEntry(*self._key())

    def __repr__(self) -> str:
        fields = ", ".join(f"{s}={getattr(self, s)}" for s in self.__slots__)
        return f"ProducerStateEntry({fields})"


class BatchMetadata(NamedTuple):
    """One of a producer's recent batches, kept to recognise a retry (Kafka's BatchMetadata)."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


def _last_sequence(base_sequence: int, delta: int) -> int:
    """The sequence of a batch's last record (wrapping past ``2**31 - 1`` to 0)."""
    if base_sequence < 0:
        return -1
    if base_sequence <= _INT32_MAX - delta:
        return base_sequence + delta
    return delta - (_INT32_MAX - base_sequence) - 1


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at ``last_offset`` (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


# -- snapshot files ------------------------------------------------------------------------------
def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The bytes of a snapshot file holding ``entries``."""
    entries = list(entries)
    body = bytearray(_I32_pack(len(entries)))
    for e in entries:
        body += _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
    crc = _crc.crc32c(bytes(body))
    return struct.pack(">hI", SNAPSHOT_VERSION, crc) + bytes(body)


def _I32_pack(n: int) -> bytes:
    return struct.pack(">i", n)


def decode_snapshot(data: bytes, path: Optional[str] = None) -> List[ProducerStateEntry]:
    """Parse a snapshot; raises :class:`CorruptSnapshotError` like Kafka's ``readSnapshot``."""
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {len(data)} bytes, less than the "
            f"{_HEADER.size}-byte header",
            path=path,
        )
    version, stored, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(
            f"Snapshot contained an unknown file version {version}", path=path
        )
    computed = _crc.crc32c(bytes(data[_CRC_START:]))
    if stored != computed:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. "
            f"Computed crc: {computed}",
            path=path,
        )
    if count < 0 or _HEADER.size + count * ENTRY_SIZE != len(data):
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {count} entries do not fill "
            f"{len(data) - _HEADER.size} bytes",
            path=path,
        )
    return [
        ProducerStateEntry(*_ENTRY.unpack_from(data, _HEADER.size + i * ENTRY_SIZE))
        for i in range(count)
    ]


def read_snapshot(path: str, fs=None) -> List[ProducerStateEntry]:
    """Read the producer entries of a ``.snapshot`` file (``fs``: the
    :class:`~kafkalog.storage.fs.FileSystem` holding it, default the local one)."""
    from .logdir import read_file

    if fs is None:
        return decode_snapshot(read_file(path), path=os.fspath(path))
    return decode_snapshot(read_file(path, fs), path=os.fspath(path))


def write_snapshot(path: str, entries: Iterable[ProducerStateEntry], fsync: bool = True) -> None:
    """Write a ``.snapshot`` file atomically (temp file, fsync, rename); an I/O error raises
    KafkaStorageError naming the file."""
    try:
        _files.atomic_write(path, encode_snapshot(entries), fsync=fsync)
    except OSError as e:
        raise KafkaStorageError.from_os_error(e, "writing a producer snapshot", path=path)


def list_snapshot_offsets(directory: str, fs=None) -> List[int]:
    """Offsets of the ``<offset>.snapshot`` files in a directory, ascending (``fs``: the
    :class:`~kafkalog.storage.fs.FileSystem` holding it, default the local one)."""
    from .logdir import snapshot_files

    if fs is not None:
        return [offset for offset, _ in snapshot_files(directory, fs)]
    if not os.path.isdir(directory):
        return []
    return [offset for offset, _ in snapshot_files(directory)]


# -- manager ---------------------------------------------------------------------------------------
def _parse_end_txn_marker(batch) -> Optional[tuple]:
    """(control type, coordinator epoch) of the first record of a control batch, or None (as
    :func:`kafkalog.control.end_txn_marker_fields` reads it)."""
    for record in batch:
        return end_txn_marker_fields(record.key, record.value)
    return None


class ProducerStateManager:
    """Producer state of one partition, with its ``.snapshot`` files in ``directory``."""

    def __init__(
        self,
        directory: Optional[str],
        read_only: bool = False,
        clock: Optional[Callable[[], int]] = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        fs=None,
    ) -> None:
        """``fs``: the :class:`~kafkalog.storage.fs.FileSystem` holding ``directory``
        (default: the local one); one that is not local is only read (``read_only`` is
        implied) and listed once."""
        self.directory = directory
        self.read_only = read_only or directory is None or fs is not None
        self._fs = fs
        self._snapshot_offsets: Optional[List[int]] = None  # a store's listing, kept
        # read-only: the snapshots recovery takes, kept in memory (a writable open writes them,
        # and its final rebuild loads the newest: a read-only one must answer the same)
        self._memory: Dict[int, bytes] = {}
        self.producers: Dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: Dict[int, int] = {}  # first offset -> producer id
        self.map_end_offset = 0
        # producer id -> its last NUM_BATCHES_TO_RETAIN batches of the current epoch
        self.batches: Dict[int, Deque[BatchMetadata]] = {}
        #: milliseconds since the epoch, for expiring producers as a snapshot is loaded
        self.clock = clock
        self.producer_id_expiration_ms = producer_id_expiration_ms
        #: validate leader appends (off only to measure what validation costs)
        self.validation_enabled = True

    # -- validation (Kafka's ProducerAppendInfo) ----------------------------------------------
    def _where(self, pid: int, offset: int) -> str:
        return f"producer {pid} at offset {offset}"

    def check_data_batch(
        self,
        pid: int,
        epoch: int,
        base_sequence: int,
        delta: int,
        is_transactional: bool,
        offset: int,
        client: bool = True,
    ) -> Optional[BatchMetadata]:
        """Validate a data batch of producer ``pid`` about to be appended at ``offset`` (its
        records ``base_sequence`` .. ``base_sequence + delta``).  Returns the remembered batch
        when a client batch is a retry of one (nothing must be appended then), None when it
        may be appended; raises InvalidProducerEpochError, OutOfOrderSequenceError or
        InvalidTxnStateError.  ``client=False`` (a coordinator's batch) checks the epoch and
        the transaction state only."""
        entry = self.producers.get(pid)
        if entry is None:
            return None  # an unknown producer may start at any sequence
        current = entry.producer_epoch
        if (
            epoch == current
            and base_sequence == entry.last_sequence + 1
            and (is_transactional or entry.current_txn_first_offset < 0)
        ):
            # the common case, in sequence: no remembered batch can start there (the last five
            # batches would have to span all 2**31 sequences)
            return None
        if client and epoch == current:
            recent = self.batches.get(pid)
            if recent:
                last_seq = _last_sequence(base_sequence, delta)
                for meta in recent:
                    if meta.first_sequence == base_sequence and meta.last_sequence == last_seq:
                        return meta
        if epoch < current:
            raise InvalidProducerEpochError(
                f"Epoch of {self._where(pid, offset)} is {epoch}, which is smaller than the "
                f"last seen epoch {current}",
                offset=offset,
            )
        if client:
            if epoch != current:
                if base_sequence != 0 and current >= 0:
                    raise OutOfOrderSequenceError(
                        f"Invalid sequence number for new epoch of {self._where(pid, offset)}: "
                        f"{epoch} (request epoch), {base_sequence} (seq. number), {current} "
                        f"(current producer epoch)",
                        offset=offset,
                    )
            elif current >= 0:
                last = entry.last_sequence
                if not (
                    base_sequence == last + 1 or (base_sequence == 0 and last == _INT32_MAX)
                ):
                    raise OutOfOrderSequenceError(
                        f"Out of order sequence number for {self._where(pid, offset)}: "
                        f"{base_sequence} (incoming seq. number), {last} (current end "
                        f"sequence number)",
                        offset=offset,
                    )
        if entry.current_txn_first_offset >= 0 and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from {self._where(pid, offset)}: its transaction "
                f"started at offset {entry.current_txn_first_offset} is ongoing",
                offset=offset,
            )
        return None

    def check_end_txn_marker(
        self, pid: int, epoch: int, coordinator_epoch: int, transaction_version: int, offset: int
    ) -> None:
        """Validate an end-transaction marker of producer ``pid`` (Kafka's
        ``appendEndTxnMarker`` checks); raises InvalidProducerEpochError or
        TransactionCoordinatorFencedError."""
        entry = self.producers.get(pid)
        if entry is None:
            return
        current = entry.producer_epoch
        v2 = transaction_version >= 2
        if epoch <= current if v2 else epoch < current:
            # a retried V2 marker: same epoch, its transaction already ended
            if not (v2 and epoch == current and entry.current_txn_first_offset < 0):
                raise InvalidProducerEpochError(
                    f"Epoch of the transaction marker of {self._where(pid, offset)} is {epoch}, "
                    f"which is {'<=' if v2 else '<'} the last seen epoch {current} "
                    f"(transaction version {transaction_version})",
                    offset=offset,
                )
        if entry.coordinator_epoch > coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for {self._where(pid, offset)}: "
                f"{coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)",
                offset=offset,
            )

    def check_append(self, facts, origin: str, transaction_version: int, offset: int):
        """Validate the batch described by ``facts`` (producer id, epoch, base sequence, base and
        last offset, flags; iterable over its records for a marker) for a leader append from
        ``origin`` (``"client"`` or ``"coordinator"``); returns a remembered duplicate or None."""
        if facts.is_control_batch:
            marker = _parse_end_txn_marker(facts)
            if marker is not None and marker[0] in (_CONTROL_ABORT, _CONTROL_COMMIT):
                self.check_end_txn_marker(
                    facts.producer_id, facts.producer_epoch, marker[1], transaction_version, offset
                )
            return None
        return self.check_data_batch(
            facts.producer_id,
            facts.producer_epoch,
            facts.base_sequence,
            facts.last_offset - facts.base_offset,
            facts.is_transactional,
            offset,
            origin == "client",
        )

    def remove_expired_producers(self, now: int, expiration_ms: Optional[int] = None) -> List[int]:
        """Forget the producers without an ongoing transaction whose last timestamp is at least
        ``expiration_ms`` (default ``producer_id_expiration_ms``) before ``now`` (Kafka's
        ``removeExpiredProducers``); returns their ids."""
        if expiration_ms is None:
            expiration_ms = self.producer_id_expiration_ms
        gone = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now - e.timestamp >= expiration_ms
        ]
        for pid in gone:
            del self.producers[pid]
            self.batches.pop(pid, None)
        return gone

    # -- state updates ------------------------------------------------------------------------
    def update(self, batch) -> Optional[CompletedTxn]:
        """Apply one v2 batch (a RecordBatch); returns the completed transaction when the batch
        is an end-transaction marker.  Batches without a producer id only move the map end."""
        pid = batch.producer_id
        if pid < 0 or batch.magic < 2:
            last = batch.last_offset
            if last + 1 > self.map_end_offset:
                self.map_end_offset = last + 1
            return None
        completed = None
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        epoch = batch.producer_epoch
        if epoch != entry.producer_epoch:
            # a new epoch forgets the batches of the old one (Kafka's maybeUpdateProducerEpoch)
            entry.producer_epoch = epoch
            entry.last_sequence = -1
            entry.last_offset = -1
            entry.offset_delta = 0
            self.batches.pop(pid, None)
        if batch.is_control_batch:
            marker = _parse_end_txn_marker(batch)
            if marker is not None and marker[0] in (_CONTROL_ABORT, _CONTROL_COMMIT):
                ctype, coordinator_epoch = marker
                offset = batch.base_offset
                first = entry.current_txn_first_offset
                if first < 0:
                    first = offset
                else:
                    self.ongoing_txns.pop(first, None)
                entry.current_txn_first_offset = -1
                entry.coordinator_epoch = coordinator_epoch
                entry.timestamp = batch.max_timestamp
                completed = CompletedTxn(pid, first, offset, ctype == _CONTROL_ABORT)
        else:
            base_seq = batch.base_sequence
            delta = batch.last_offset - batch.base_offset
            entry.last_sequence = (
                -1
                if base_seq < 0
                else (
                    base_seq + delta
                    if base_seq <= _INT32_MAX - delta
                    else delta - (_INT32_MAX - base_seq) - 1
                )
            )
            entry.last_offset = batch.last_offset
            entry.offset_delta = delta
            entry.timestamp = batch.max_timestamp
            recent = self.batches.get(pid)
            if recent is None:
                recent = self.batches[pid] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
            recent.append(
                BatchMetadata(
                    base_seq, entry.last_sequence, batch.base_offset, batch.last_offset,
                    batch.max_timestamp,
                )
            )
            if batch.is_transactional and entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = batch.base_offset
                self.ongoing_txns[batch.base_offset] = pid
        last = batch.last_offset
        if last + 1 > self.map_end_offset:
            self.map_end_offset = last + 1
        return completed

    def first_unstable_offset(self) -> Optional[int]:
        return min(self.ongoing_txns) if self.ongoing_txns else None

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is done: the first offset of the earliest other ongoing
        transaction, else the marker's offset + 1."""
        others = [f for f, p in self.ongoing_txns.items() if p != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        if self.ongoing_txns.get(completed.first_offset) == completed.producer_id:
            del self.ongoing_txns[completed.first_offset]

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    # -- snapshots ---------------------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> str:
        if self.directory is None:
            raise ValueError("this producer state has no directory")
        return _files.producer_snapshot_file(self.directory, offset)

    def use_listed_snapshots(self, offsets: List[int]) -> None:
        """Read-only: the snapshots are the ones of the caller's listing of the directory (a
        read view loads from one listing), not listed again at each question."""
        if self.read_only:
            self._snapshot_offsets = sorted(offsets)

    def snapshot_offsets(self) -> List[int]:
        found = self._listed_snapshot_offsets()
        if self._memory:
            return sorted(set(found) | set(self._memory))
        return found

    def _listed_snapshot_offsets(self) -> List[int]:
        if self._snapshot_offsets is not None and self.read_only:
            return list(self._snapshot_offsets)
        if self._fs is not None and self.directory is not None:
            if self._snapshot_offsets is None:  # nothing here changes a store: list it once
                self._snapshot_offsets = list_snapshot_offsets(self.directory, self._fs)
            return list(self._snapshot_offsets)
        return [] if self.directory is None else list_snapshot_offsets(self.directory)

    def take_snapshot(self, fsync: bool = True) -> Optional[str]:
        """Write ``<map_end_offset>.snapshot`` unless it exists; returns its path.  A snapshot
        is derived data: one lost or torn in a crash (CRC) is ignored and rebuilt, so callers
        may skip the fsync."""
        entries = sorted(self.producers.values(), key=lambda e: e.producer_id)
        if self.read_only:  # kept in memory, as the file a writable open writes
            self._memory.setdefault(self.map_end_offset, encode_snapshot(entries))
            return None
        path = self.snapshot_path(self.map_end_offset)
        if os.path.exists(path):
            return path
        write_snapshot(path, entries, fsync=fsync)
        return path

    def load_snapshot(self, offset: int) -> None:
        """Replace the state with the snapshot at ``offset``."""
        kept = self._memory.get(offset)
        entries = (decode_snapshot(kept) if kept is not None
                   else read_snapshot(self.snapshot_path(offset), self._fs))
        self._reset(offset)
        now = self.clock() if self.clock is not None else None
        for e in entries:
            if (
                now is not None
                and e.current_txn_first_offset < 0
                and now - e.timestamp >= self.producer_id_expiration_ms
            ):
                continue  # expired (Kafka's loadFromSnapshot skips it)
            self.producers[e.producer_id] = e
            if e.last_offset >= 0:
                self.batches[e.producer_id] = deque(
                    (
                        BatchMetadata(
                            e.first_sequence, e.last_sequence, e.first_offset, e.last_offset,
                            e.timestamp,
                        ),
                    ),
                    maxlen=NUM_BATCHES_TO_RETAIN,
                )
            if e.current_txn_first_offset >= 0:
                self.ongoing_txns[e.current_txn_first_offset] = e.producer_id

    def _reset(self, offset: int) -> None:
        self.producers = {}
        self.ongoing_txns = {}
        self.batches = {}
        self.map_end_offset = offset

    def delete_snapshot(self, offset: int) -> None:
        self._memory.pop(offset, None)
        if self.read_only:
            return
        try:
            os.unlink(self.snapshot_path(offset))
        except FileNotFoundError:
            pass

    def load_latest_snapshot(self, upto: int, log_start_offset: int = 0) -> int:
        """Load the newest valid snapshot with ``log_start_offset <= offset <= upto``
        (a corrupt one is deleted and the next older one tried); with none, start empty at
        ``log_start_offset``.  Returns the resulting map end offset."""
        for offset in reversed(self.snapshot_offsets()):
            if offset > upto:
                continue
            if offset < log_start_offset:
                break
            try:
                self.load_snapshot(offset)
                return offset
            except (CorruptSnapshotError, OSError):
                self.delete_snapshot(offset)
        self._reset(log_start_offset)
        return log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> int:
        """Delete snapshots outside ``[log_start_offset, log_end_offset]`` and load the
        newest remaining one (Kafka's ``truncateAndReload``)."""
        for offset in self.snapshot_offsets():
            if offset > log_end_offset or offset < log_start_offset:
                self.delete_snapshot(offset)
        return self.load_latest_snapshot(log_end_offset, log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            self.delete_snapshot(off)
        self._reset(offset)

    def delete_snapshots_before(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off < offset:
                self.delete_snapshot(off)

    def remove_stray_snapshots(
        self, segment_base_offsets: Iterable[int], keep: Iterable[int] = ()
    ) -> None:
        """Delete snapshots that match no segment base offset, except the newest one (which
        may be the log end offset) and those in ``keep`` (Kafka's ``removeStraySnapshots``)."""
        bases = set(segment_base_offsets) | set(keep)
        offsets = self.snapshot_offsets()
        latest = offsets[-1] if offsets else None
        for off in offsets:
            if off not in bases and off != latest:
                self.delete_snapshot(off)

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager(directory={self.directory!r}, producers={len(self.producers)}, "
            f"map_end_offset={self.map_end_offset})"
        )
