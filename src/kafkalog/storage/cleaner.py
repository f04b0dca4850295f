"""Log compaction: Kafka's log cleaner (``kafka.log.LogCleaner``'s ``Cleaner``) for one log.

* :class:`CleanerConfig` -- the cleaner's broker settings (``log.cleaner.dedupe.buffer.size``,
  ``log.cleaner.io.buffer.load.factor``, ``log.cleaner.io.buffer.size``, ...).  The per-topic
  settings (``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``, ``max.compaction.lag.ms``,
  ``delete.retention.ms``, ``segment.bytes``, ``segment.index.bytes``) come from the log's
  :class:`~kafkalog.storage.log.LogConfig`.
* :class:`SkimpyOffsetMap` (alias :class:`OffsetMap`) -- the bounded key -> offset map: a
  fixed-size open-addressing table of ``MD5(key) (16 bytes) + offset (int64)`` entries in one
  ``bytearray``; only ``slots * load_factor`` entries are inserted, then the pass stops.
* :class:`Cleaner` -- ``clean(log)`` runs one cleaning round (Kafka's ``doClean``): build the
  offset map over the dirty range ``[firstDirtyOffset, firstUncleanableOffset)`` (stopping early
  when the map is full), then rewrite every segment from the log start to the end of the mapped
  range in groups (``groupSegmentsBySize``) keeping the latest record per key, and swap each
  cleaned group in (``.cleaned`` -> ``.swap`` -> final name) with :meth:`Log.replace_segments`.

Record rules (``MemoryRecords.filterTo`` + ``LogCleaner``): offsets are never rewritten; a batch
whose records all survive is copied byte for byte; otherwise it is rebuilt with the same
producer id/epoch/base sequence, flags, codec, leader epoch, base offset and last offset delta;
tombstones get a delete horizon (attribute bit 6, ``baseTimestamp = now + delete.retention.ms``)
on the first cleaning that retains them and are dropped by a cleaning after the horizon;
batches of aborted transactions are dropped, their ABORT marker is kept while any of their
batches were still seen in the cleaned range; COMMIT markers of transactions with no batch left
and ABORT markers with no batch left get a delete horizon and are then dropped (the transaction
state is carried through all the groups of a round); an emptied batch is kept as an empty header
when it is the last data batch of an active producer (or a marker of the producer's current
epoch) or the batch that ends at the high watermark; a group whose records all went becomes an
empty segment.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple

from .._format import V2_HEADER, TimestampType
from .._speedups import crc as _crc
from ..control import control_type_id
from ..errors import KafkaLogError
from ..records import MemoryRecordsBuilder
from . import files as _files
from ._log_common import hook
from .txn_index import AbortedTxn

__all__ = [
    "CleanerConfig",
    "SkimpyOffsetMap",
    "OffsetMap",
    "Cleaner",
    "CleanerStats",
    "LogToClean",
    "cleanable_offsets",
]

_INT32_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
_V2_HEADER = V2_HEADER  # 61 bytes
_Q = struct.Struct(">q")
_DELETE_HORIZON_FLAG = 0x40
_TXN_FLAG = 0x10
_CONTROL_FLAG = 0x20
_LOG_APPEND_TIME_FLAG = 0x08
_ABORT = 0
_COMMIT = 1


class CleanerConfig:
    """Broker-level cleaner settings (Kafka's ``CleanerConfig``).

    ``dedupe_buffer_size``: bytes of the offset map (``log.cleaner.dedupe.buffer.size``, default
    128 MiB; Kafka divides it by the thread count and caps it at 2 GiB).  ``load_factor``:
    ``log.cleaner.io.buffer.load.factor`` (0.9).  ``io_buffer_size``:
    ``log.cleaner.io.buffer.size`` (512 KiB; the read chunk).  ``hash_algorithm``: ``"MD5"``.
    """

    def __init__(
        self,
        dedupe_buffer_size: int = 128 * 1024 * 1024,
        load_factor: float = 0.9,
        io_buffer_size: int = 512 * 1024,
        max_message_size: int = 32 * 1024 * 1024,
        num_threads: int = 1,
        hash_algorithm: str = "MD5",
        enable_cleaner: bool = True,
        backoff_ms: int = 15000,
    ) -> None:
        if dedupe_buffer_size < 24 * 2:
            raise ValueError(f"dedupe_buffer_size too small: {dedupe_buffer_size}")
        if not 0.0 < load_factor <= 1.0:
            raise ValueError(f"load_factor must be in (0, 1], not {load_factor}")
        self.dedupe_buffer_size = int(dedupe_buffer_size)
        self.load_factor = float(load_factor)
        self.io_buffer_size = int(io_buffer_size)
        self.max_message_size = int(max_message_size)
        self.num_threads = max(1, int(num_threads))
        self.hash_algorithm = hash_algorithm
        self.enable_cleaner = enable_cleaner
        self.backoff_ms = backoff_ms

    @classmethod
    def from_properties(cls, props: Dict[str, Any]) -> "CleanerConfig":
        """From broker property names (``log.cleaner.dedupe.buffer.size`` ...)."""
        m = {
            "log.cleaner.dedupe.buffer.size": "dedupe_buffer_size",
            "log.cleaner.io.buffer.load.factor": "load_factor",
            "log.cleaner.io.buffer.size": "io_buffer_size",
            "log.cleaner.threads": "num_threads",
            "log.cleaner.enable": "enable_cleaner",
            "log.cleaner.backoff.ms": "backoff_ms",
        }
        kw = {m[k]: v for k, v in props.items() if k in m}
        return cls(**kw)

    @property
    def map_memory(self) -> int:
        return min(self.dedupe_buffer_size // self.num_threads, _INT32_MAX)

    def __repr__(self) -> str:
        return (
            f"CleanerConfig(dedupe_buffer_size={self.dedupe_buffer_size}, "
            f"load_factor={self.load_factor}, io_buffer_size={self.io_buffer_size})"
        )


# -- offset map ------------------------------------------------------------------------------------
class SkimpyOffsetMap:
    """Kafka's ``SkimpyOffsetMap``: a bounded hash -> offset table in one bytearray of
    ``memory`` bytes.  Entry = hash (16 bytes for MD5) + big-endian int64 offset; an all-zero
    hash marks an empty slot.  Probe ``i`` reads the 4-byte int at ``min(i, hash_size - 4)`` of
    the hash plus ``max(0, i - hash_size + 4)``, modulo the slot count (as Kafka)."""

    def __init__(self, memory: int, hash_algorithm: str = "MD5") -> None:
        self._algo = hash_algorithm.lower()
        self.hash_size = hashlib.new(self._algo).digest_size
        self.bytes_per_entry = self.hash_size + 8
        self.slots = memory // self.bytes_per_entry
        if self.slots < 1:
            raise ValueError(f"offset map memory {memory} holds no entry")
        self.memory = memory
        self._buf = bytearray(self.slots * self.bytes_per_entry)
        self._zero = bytes(self.hash_size)
        self._size = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0
        self._md5 = hashlib.md5 if self._algo == "md5" else None

    def _hash(self, key) -> bytes:
        if self._md5 is not None:
            h = self._md5(key).digest()
        else:
            h = hashlib.new(self._algo, key).digest()
        if h == self._zero:  # never store the empty-slot marker
            h = b"\x00" * (self.hash_size - 1) + b"\x01"
        return h

    def _slot(self, h: bytes, attempt: int) -> int:
        hs = self.hash_size
        i = min(attempt, hs - 4)
        probe = int.from_bytes(h[i : i + 4], "big", signed=True) + max(0, attempt - hs + 4)
        return (probe & 0x7FFFFFFF) % self.slots  # Kafka's Utils.abs(...) % slots

    def put(self, key, offset: int) -> None:
        h = self._md5(key).digest() if self._md5 is not None else self._hash(key)
        if h == self._zero:
            h = self._hash(key)
        buf = self._buf
        hs = self.hash_size
        pos = ((int.from_bytes(h[:4], "big") & 0x7FFFFFFF) % self.slots) * self.bytes_per_entry
        cur = buf[pos : pos + hs]
        self.lookups += 1
        if cur == h:
            _Q.pack_into(buf, pos + hs, offset)
        elif cur == self._zero:
            buf[pos : pos + hs] = h
            _Q.pack_into(buf, pos + hs, offset)
            self._size += 1
        else:
            attempt = 1
            bpe = self.bytes_per_entry
            while True:
                pos = self._slot(h, attempt) * bpe
                cur = buf[pos : pos + hs]
                if cur == self._zero:
                    buf[pos : pos + hs] = h
                    _Q.pack_into(buf, pos + hs, offset)
                    self._size += 1
                    break
                if cur == h:
                    _Q.pack_into(buf, pos + hs, offset)
                    break
                attempt += 1
                self.probes += 1
                if attempt > self.slots + hs:
                    raise KafkaLogError("offset map is full")
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key) -> int:
        """The offset stored for ``key``, or -1."""
        h = self._md5(key).digest() if self._md5 is not None else self._hash(key)
        if h == self._zero:
            h = self._hash(key)
        buf = self._buf
        hs = self.hash_size
        self.lookups += 1
        pos = ((int.from_bytes(h[:4], "big") & 0x7FFFFFFF) % self.slots) * self.bytes_per_entry
        cur = buf[pos : pos + hs]
        if cur == h:
            return _Q.unpack_from(buf, pos + hs)[0]
        if cur == self._zero:
            return -1
        attempt = 1
        bpe = self.bytes_per_entry
        while True:
            pos = self._slot(h, attempt) * bpe
            cur = buf[pos : pos + hs]
            if cur == h:
                return _Q.unpack_from(buf, pos + hs)[0]
            if cur == self._zero:
                return -1
            attempt += 1
            self.probes += 1
            if attempt > self.slots + hs:
                return -1

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def clear(self) -> None:
        if self._size:
            self._buf = bytearray(len(self._buf))  # calloc'd: cheaper than zeroing in place
        self._size = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    @property
    def size(self) -> int:
        return self._size

    def __len__(self) -> int:
        return self._size

    @property
    def utilization(self) -> float:
        return self._size / self.slots

    def __repr__(self) -> str:
        return (f"SkimpyOffsetMap(slots={self.slots}, size={self._size}, "
                f"latest_offset={self.latest_offset})")


OffsetMap = SkimpyOffsetMap


# -- transaction tracking --------------------------------------------------------------------------
def _control_type(batch) -> Optional[int]:
    for r in batch:
        return control_type_id(r.key)
    return None


class _CleanedTransactionMetadata:
    """Kafka's ``CleanedTransactionMetadata``."""

    def __init__(self, aborted: Iterable[AbortedTxn] = (), cleaned_index=None) -> None:
        self.ongoing_committed: set = set()
        self.ongoing_aborted: Dict[int, list] = {}  # pid -> [AbortedTxn, last observed offset]
        self.aborted = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self.cleaned_index = cleaned_index

    def add_aborted(self, txns) -> None:
        self.aborted = sorted(list(self.aborted[self._next :]) + list(txns),
                              key=lambda t: t.first_offset)
        self._next = 0

    def _consume_upto(self, offset: int) -> None:
        a = self.aborted
        while self._next < len(a) and a[self._next].first_offset <= offset:
            t = a[self._next]
            self._next += 1
            if t.producer_id not in self.ongoing_aborted:
                self.ongoing_aborted[t.producer_id] = [t, None]

    def on_control_batch_read(self, batch) -> bool:
        """True when the marker may be removed (once past its delete horizon)."""
        self._consume_upto(batch.last_offset)
        ctype = _control_type(batch)
        pid = batch.producer_id
        if ctype == _ABORT:
            meta = self.ongoing_aborted.pop(pid, None)
            if meta is not None and meta[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta[0])
                return False
            return True
        if ctype == _COMMIT:
            if pid in self.ongoing_committed:
                self.ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, batch) -> bool:
        """True when the batch belongs to an aborted transaction."""
        self._consume_upto(batch.last_offset)
        if batch.is_transactional:
            meta = self.ongoing_aborted.get(batch.producer_id)
            if meta is not None:
                meta[1] = batch.last_offset
                return True
            self.ongoing_committed.add(batch.producer_id)
        return False


# -- stats / cleanable range -----------------------------------------------------------------------
class CleanerStats:
    """Counters of a cleaning (Kafka's ``CleanerStats``)."""

    def __init__(self) -> None:
        self.bytes_read = 0
        self.bytes_written = 0
        self.map_bytes_read = 0
        self.map_messages_read = 0
        self.messages_read = 0
        self.messages_written = 0
        self.invalid_messages = 0
        self.passes = 0
        self.segments_cleaned = 0
        self.start = time.monotonic()
        self.map_complete = 0.0
        self.end = 0.0

    def merge(self, other: "CleanerStats") -> None:
        for k in (
            "bytes_read",
            "bytes_written",
            "map_bytes_read",
            "map_messages_read",
            "messages_read",
            "messages_written",
            "invalid_messages",
            "passes",
            "segments_cleaned",
        ):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.end = other.end

    @property
    def elapsed_s(self) -> float:
        return (self.end or time.monotonic()) - self.start

    def __repr__(self) -> str:
        return (
            f"CleanerStats(passes={self.passes}, bytes_read={self.bytes_read}, "
            f"bytes_written={self.bytes_written}, messages_read={self.messages_read}, "
            f"messages_written={self.messages_written}, elapsed_s={self.elapsed_s:.3f})"
        )


class LogToClean(NamedTuple):
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    dirty_ratio: float
    needs_compaction_now: bool  # max.compaction.lag.ms exceeded

    @property
    def eligible(self) -> bool:
        return self.cleanable_bytes > 0


def cleanable_offsets(log, first_dirty: int, now: int) -> Tuple[int, int, bool]:
    """(firstDirtyOffset, firstUncleanableOffset, max-lag exceeded), Kafka's ``cleanableOffsets``:
    never the active segment, never at or past the last stable offset, never a segment younger
    than ``min.compaction.lag.ms``.  The uncleanable bound is rounded down to a segment base (a
    segment holding the last stable offset is not cleaned)."""
    segs = log._segments
    log_start = log.log_start_offset
    if first_dirty < log_start or first_dirty > log.log_end_offset:
        first_dirty = log_start
    cands = [log.last_stable_offset, segs[-1].base_offset]
    c = log.config
    lag = c.min_compaction_lag_ms
    dirty_base = _floor_base(log, first_dirty) or 0
    dirty_non_active = [s for s in segs[:-1] if s.base_offset >= dirty_base]
    if lag > 0:
        for s in dirty_non_active:
            if s.largest_timestamp > now - lag:
                cands.append(s.base_offset)
                break
    unclean = min(cands)
    fb = _floor_base(log, unclean)
    if fb is not None:
        unclean = fb
    if unclean < first_dirty:
        unclean = first_dirty
    needs_now = False
    max_lag = c.max_compaction_lag_ms
    if max_lag < _LONG_MAX and unclean > first_dirty:
        for s in dirty_non_active:
            if s.base_offset >= unclean:
                break
            ts = _first_batch_timestamp(s)
            if ts is not None and ts >= 0 and ts < now - max_lag:
                needs_now = True
                break
    return first_dirty, unclean, needs_now


def _floor_base(log, offset: int) -> Optional[int]:
    best = None
    for s in log._segments:
        if s.base_offset <= offset:
            best = s.base_offset
        else:
            break
    return best


def _first_batch_timestamp(seg) -> Optional[int]:
    for _pos, b in seg.iter_batches(0):
        return b.max_timestamp
    return None


# -- batch writing helpers -------------------------------------------------------------------------
def _empty_batch(batch) -> bytes:
    """Kafka's ``DefaultRecordBatch.writeEmptyHeader`` for a batch whose records all went: no
    codec, base timestamp -1, the batch's max timestamp, offsets and producer fields kept."""
    attrs = batch.attributes & (_TXN_FLAG | _CONTROL_FLAG | _LOG_APPEND_TIME_FLAG)
    hdr = bytearray(
        _V2_HEADER.pack(
            batch.base_offset,
            61 - 12,
            batch.partition_leader_epoch,
            2,
            0,
            attrs,
            batch.last_offset - batch.base_offset,
            -1,  # no first timestamp (NO_TIMESTAMP)
            batch.max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            0,
        )
    )
    struct.pack_into(">I", hdr, 17, _crc.crc32c(bytes(hdr[21:])))
    return bytes(hdr)


def _rebuild_v2(batch, retained, delete_horizon: Optional[int]) -> bytes:
    ts_type = batch.timestamp_type
    b = MemoryRecordsBuilder(
        2,
        batch.compression_type,
        batch.base_offset,
        ts_type,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        batch.is_transactional,
        batch.partition_leader_epoch,
        is_control_batch=batch.is_control_batch,
        log_append_time=batch.max_timestamp if ts_type == TimestampType.LOG_APPEND_TIME else None,
        delete_horizon_ms=delete_horizon,
    )
    for r in retained:
        b.append_with_offset(r.offset, r.timestamp, r.key, r.value, r.headers)
    data = bytearray(b.build())
    # keep the original last offset (lastOffsetDelta) so producer state survives
    struct.pack_into(">i", data, 23, batch.last_offset - batch.base_offset)
    struct.pack_into(">I", data, 17, _crc.crc32c(bytes(data[21:])))
    return bytes(data)


def _rebuild_legacy(batch, retained) -> bytes:
    b = MemoryRecordsBuilder(
        batch.magic,
        batch.compression_type,
        retained[0].offset,
        batch.timestamp_type,
    )
    for r in retained:
        b.append_with_offset(r.offset, r.timestamp, r.key, r.value, getattr(r, "headers", ()))
    return b.build()


# -- the cleaner -----------------------------------------------------------------------------------
class Cleaner:
    """Cleans compacted logs (one round per :meth:`clean`).  ``clock``: ms since the epoch."""

    def __init__(self, config: Optional[CleanerConfig] = None, clock=None) -> None:
        self.config = config or CleanerConfig()
        self.offset_map = SkimpyOffsetMap(self.config.map_memory, self.config.hash_algorithm)
        self._clock = clock

    # -- choosing ----------------------------------------------------------------------------
    def log_to_clean(self, log, now: Optional[int] = None) -> LogToClean:
        now = self._now(log) if now is None else now
        first_dirty, unclean, needs_now = cleanable_offsets(log, log.cleaner_checkpoint(), now)
        clean_bytes = sum(s.size for s in log._segments if _seg_end(log, s) <= first_dirty)
        cleanable = sum(
            s.size
            for s in log._segments[:-1]
            if s.base_offset >= (_floor_base(log, first_dirty) or 0)
            and _seg_end(log, s) <= max(unclean, first_dirty)
            and s.base_offset < unclean
        )
        total = clean_bytes + cleanable
        ratio = cleanable / total if total else 0.0
        return LogToClean(first_dirty, unclean, clean_bytes, cleanable, ratio, needs_now)

    def needs_cleaning(self, log, now: Optional[int] = None) -> bool:
        """Kafka's eligibility: dirty ratio above ``min.cleanable.dirty.ratio``, or
        ``max.compaction.lag.ms`` exceeded with cleanable bytes."""
        ltc = self.log_to_clean(log, now)
        if ltc.cleanable_bytes <= 0:
            return False
        return ltc.dirty_ratio > log.config.min_cleanable_dirty_ratio or ltc.needs_compaction_now

    def _now(self, log) -> int:
        if self._clock is not None:
            return self._clock()
        return log._clock()

    # -- one round ---------------------------------------------------------------------------------
    def clean(self, log, now: Optional[int] = None) -> Tuple[int, CleanerStats]:
        """One cleaning round (Kafka's ``doClean``); returns (end of the cleaned range, stats).
        Nothing happens (end = first dirty offset) when there is nothing cleanable."""
        if not log.config.compact:
            raise ValueError(f"log {log.dir} does not have cleanup.policy=compact")
        now = self._now(log) if now is None else now
        stats = CleanerStats()
        with log._lock:
            log._check_writable()
            try:
                first_dirty, upper, _ = cleanable_offsets(log, log.cleaner_checkpoint(), now)
                if upper <= first_dirty:
                    stats.end = time.monotonic()
                    return first_dirty, stats
                segs = list(log._segments)
                # legacy (v0/v1) tombstone horizon: mtime of the last clean segment - retention
                clean_segs = [s for s in segs
                              if s.base_offset < first_dirty and _seg_end(log, s) <= first_dirty]
                legacy_horizon = (clean_segs[-1].last_modified - log.config.delete_retention_ms
                                  if clean_segs else 0)
                m = self.offset_map
                m.clear()
                self._build_offset_map(log, first_dirty, upper, m, stats)
                end = m.latest_offset + 1
                if end <= first_dirty:
                    raise KafkaLogError(
                        f"the offset map ({m.slots} slots) cannot hold the keys of one batch at "
                        f"offset {first_dirty} of {log.dir}; raise dedupe_buffer_size"
                    )
                stats.map_complete = time.monotonic()
                to_clean = [s for s in log._segments if s.base_offset < end]
                active_producers = {
                    pid: (e.last_offset if e.last_offset >= 0 else None, e.producer_epoch)
                    for pid, e in log.producer_state.producers.items()
                }
                # one transaction state for the whole round: a transaction's batches and its
                # marker may fall in different groups
                txn = _CleanedTransactionMetadata()
                hw = log.high_watermark
                for group in self._group_segments(log, to_clean, upper):
                    self._clean_segments(log, group, m, now, legacy_horizon, active_producers,
                                         stats, hw, txn)
                log._set_cleaner_checkpoint(end)
                stats.passes = 1
            except OSError as e:
                log._io_error(e, "compacting")  # the log goes offline, as Kafka's does
        stats.end = time.monotonic()
        return end, stats

    def _build_offset_map(self, log, start: int, end: int, m: SkimpyOffsetMap, stats) -> None:
        segs = [s for s in log._segments if s.base_offset < end and _seg_end(log, s) > start]
        txn = _CleanedTransactionMetadata(log.collect_aborted_transactions(start, end))
        max_entries = int(m.slots * self.config.load_factor)
        for k, seg in enumerate(segs):
            nxt = segs[k + 1].base_offset if k + 1 < len(segs) else log._segments[
                log._segments.index_of(seg) + 1
            ].base_offset
            pos = 0
            if start > seg.base_offset:
                found = seg.translate_offset(start)
                if found is None:
                    m.update_latest_offset(nxt - 1)
                    continue
                pos = found.position
            for _p, batch in seg.iter_batches(pos):
                stats.map_bytes_read += batch.size_in_bytes
                if batch.magic >= 2 and batch.is_control_batch:
                    txn.on_control_batch_read(batch)
                else:
                    aborted = batch.magic >= 2 and txn.on_batch_read(batch)
                    if not aborted:
                        for r in batch:
                            stats.map_messages_read += 1
                            if r.key is not None and r.offset >= start:
                                if m._size < max_entries:
                                    m.put(r.key, r.offset)
                                else:
                                    return
                if batch.last_offset >= start:
                    m.update_latest_offset(batch.last_offset)
            m.update_latest_offset(nxt - 1)

    def _group_segments(self, log, segs, first_uncleanable: int) -> List[list]:
        max_size = log.config.segment_bytes
        max_index = log.config.segment_index_bytes
        groups = []
        i = 0
        while i < len(segs):
            g = [segs[i]]
            size = segs[i].size
            oi = segs[i].offset_index.entries * 8
            ti = segs[i].time_index.entries * 12
            i += 1
            while i < len(segs):
                s = segs[i]
                nxt_oi = s.offset_index.entries * 8
                nxt_ti = s.time_index.entries * 12
                if i + 1 < len(segs):
                    last_est = segs[i + 1].base_offset - 1
                else:
                    last_est = max(first_uncleanable - 1, s.base_offset)
                if (
                    size + s.size <= max_size
                    and oi + nxt_oi <= max_index
                    and ti + nxt_ti <= max_index
                    and (s.size == 0 or last_est - g[0].base_offset <= _INT32_MAX)
                ):
                    g.append(s)
                    size += s.size
                    oi += nxt_oi
                    ti += nxt_ti
                    i += 1
                else:
                    break
            groups.append(g)
        return groups

    def _clean_segments(self, log, group, m, now, legacy_horizon, active_producers, stats,
                        high_watermark: int, txn: "_CleanedTransactionMetadata") -> None:
        """Kafka's ``cleanSegments``: ``group`` into one ``.cleaned`` segment, swapped in.
        ``high_watermark``: the log's (the batch that ends there is kept, empty if need be);
        ``txn``: the round's transaction state."""
        base = group[0].base_offset
        d = log.dir
        for fn in (
            _files.log_file,
            _files.offset_index_file,
            _files.time_index_file,
            _files.transaction_index_file,
        ):
            try:
                os.unlink(fn(d, base, _files.CLEANED_FILE_SUFFIX))
            except FileNotFoundError:
                pass
        cleaned = log._open_segment(base, _files.CLEANED_FILE_SUFFIX)
        try:
            txn.cleaned_index = cleaned.txn_index
            retention = log.config.delete_retention_ms
            for k, seg in enumerate(group):
                # the aborted transactions of the whole segment (its cleaned index is rebuilt)
                seg_upper = (group[k + 1].base_offset if k + 1 < len(group)
                             else seg.read_next_offset())
                txn.add_aborted(log.collect_aborted_transactions(seg.base_offset, seg_upper))
                retain_legacy_deletes = seg.last_modified > legacy_horizon
                for _pos, batch in seg.iter_batches(0):
                    stats.bytes_read += batch.size_in_bytes
                    out = self._filter_batch(
                        batch, m, now, retention, retain_legacy_deletes, txn, active_producers,
                        stats, high_watermark,
                    )
                    if out is not None:
                        data, last_off, max_ts, max_ts_off = out
                        cleaned.append_patched(data, last_off, max_ts, max_ts_off)
                        stats.bytes_written += len(data)
            # A group whose records all went stays an empty segment, as Kafka's does (a swap
            # segment that holds no batch is never completed by the loader).
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            mtime = group[-1].last_modified / 1000.0
            os.utime(cleaned.log_path, (mtime, mtime))
        except BaseException:
            try:
                cleaned.delete()
            except OSError:
                pass  # the loader deletes a .cleaned file that stays
            raise
        hook("cleaned")
        log.replace_segments([cleaned], group)
        stats.segments_cleaned += len(group)

    def _filter_batch(self, batch, m, now, retention, retain_legacy_deletes, txn, active, stats,
                      high_watermark: int):
        """Kafka's ``checkBatchRetention`` + ``shouldRetainRecord`` + ``filterTo`` for one batch:
        (bytes, max timestamp, offset of max timestamp) to write, or None."""
        latest = m.latest_offset
        v2 = batch.magic >= 2
        if v2:
            if batch.is_control_batch:
                can_discard = txn.on_control_batch_read(batch)
                hz = batch.delete_horizon_ms
                discard_records = can_discard and hz is not None and hz <= now
            else:
                can_discard = txn.on_batch_read(batch)
                discard_records = can_discard
            retain_empty = False
            pid = batch.producer_id
            if pid >= 0 and pid in active:
                last_data, epoch = active[pid]
                if last_data is not None:
                    retain_empty = batch.last_offset == last_data
                else:
                    retain_empty = batch.is_control_batch and batch.producer_epoch == epoch
            if batch.last_offset + 1 == high_watermark:
                # the log's last batch keeps the log's last offset (KAFKA-17076; Kafka 4.4
                # compares with the high watermark, not with the round's upper bound)
                retain_empty = True
            if not retain_empty and discard_records:
                return None  # DELETE
            marker_for_empty_txn = can_discard and batch.is_control_batch
        else:
            marker_for_empty_txn = False
            retain_empty = False
            discard_records = False
        retained = []
        write_original = True
        tombstones = False
        hz = batch.delete_horizon_ms if v2 else None
        n = 0
        for r in batch:
            n += 1
            if v2 and discard_records:
                keep = False  # kept only as an empty header for the producer's sequence
            elif v2 and batch.is_control_batch:
                keep = True
            elif r.offset > latest:
                keep = True
            elif r.key is None:
                stats.invalid_messages += 1
                keep = False
            else:
                keep = r.offset >= m.get(r.key)
                if keep and r.value is None:
                    if v2:
                        keep = hz is None or now < hz
                    else:
                        keep = retain_legacy_deletes
            if keep:
                retained.append(r)
                if r.value is None:
                    tombstones = True
            else:
                write_original = False
        stats.messages_read += n
        if v2 and n == 0 and not retain_empty:
            return None  # an empty batch that is no longer needed
        if retained:
            stats.messages_written += len(retained)
            need_horizon = v2 and (tombstones or marker_for_empty_txn) and hz is None
            if write_original and not need_horizon:
                data = bytes(batch.view())
                return data, batch.last_offset, batch.max_timestamp, batch.last_offset
            if v2:
                new_hz = now + retention if need_horizon else hz
                data = _rebuild_v2(batch, retained, new_hz)
                if batch.timestamp_type == TimestampType.LOG_APPEND_TIME:
                    max_ts = batch.max_timestamp
                else:
                    max_ts = max(r.timestamp for r in retained)
                return data, batch.last_offset, max_ts, batch.last_offset
            data = _rebuild_legacy(batch, retained)
            ts = max(r.timestamp for r in retained)
            return data, retained[-1].offset, ts, retained[-1].offset
        if v2 and retain_empty:
            return _empty_batch(batch), batch.last_offset, batch.max_timestamp, batch.last_offset
        return None


def _seg_end(log, seg) -> int:
    """Offset after the segment: the next segment's base, or the log end offset."""
    segs = log._segments
    try:
        i = segs.index_of(seg)
    except ValueError:
        return seg.read_next_offset()
    if i + 1 < len(segs):
        return segs[i + 1].base_offset
    return log.log_end_offset
