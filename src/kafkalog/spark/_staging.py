"""A write task's staging (the connector's ``DataWriter``): the rows one Spark task receives,
written into partition logs of its own under
``<path>/.kafkalog-staging/<job id>/<task>/<topic>-<partition>/`` with
:class:`kafkalog.storage.log.Log` (v2 batches built by :func:`kafkalog.arrow.from_arrow`;
segments rolled at ``segmentBytes``; ``.index``/``.timeindex``/``leader-epoch-checkpoint``
written by the Log), closed cleanly, and described to the driver as :class:`StagedPartition`
pieces (the commit message; the driver's commit is :mod:`kafkalog.spark._write`).

Every topic of the ``topic`` column is checked as Kafka checks a topic name before a directory
is made for it; a staging directory that resolves outside ``<path>`` (a planted symbolic link)
is refused; a task of an aborted job fails instead of re-creating the staging tree."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .._format import ENTRY_HEADER
from ..partitioner import partition_of
from ..storage import commit as _commit
from ..storage import files as _files
from ._write_options import WriteError, WriteOptions, check_topic

STAGING_DIR = ".kafkalog-staging"
_FLUSH_BYTES = 8 * 1024 * 1024
_MAX_PENDING_BYTES = 256 * 1024 * 1024
_ENTRY = ENTRY_HEADER


def partition_column(keys, values, partitions, num_partitions: int):
    """A partition array for an Arrow batch: the given partition where not null, else Kafka's
    default partitioner on the key (``toPositive(murmur2(key)) % n``), and for a record with
    no key the same hash of its value (``kafkalog.spark.write``'s rule: Kafka's producer
    spreads unkeyed records arbitrarily; here a Spark stage retry routes every row as the first
    attempt did; :func:`kafkalog.partitioner.partition_of`)."""
    import pyarrow as pa

    kl = keys.to_pylist() if keys is not None else None
    vl = values.to_pylist() if values is not None else None
    pl = partitions.to_pylist() if partitions is not None else None
    n = len(kl) if kl is not None else (len(pl) if pl is not None else len(vl))
    out = []
    for i in range(n):
        p = pl[i] if pl is not None else None
        if p is None:
            p = partition_of(kl[i] if kl is not None else None,
                             vl[i] if vl is not None else None, num_partitions)
        out.append(p)
    return pa.array(out, pa.int32())


def _stamp(data, now_ms: Optional[int] = None):
    """``data`` with every record that has no timestamp (no ``timestamp`` column, or a null)
    stamped with the write time in ms, as a producer stamps ``CreateTime`` at send time."""
    import pyarrow as pa

    names = data.schema.names
    if "timestamp" in names and not data.column("timestamp").null_count:
        return data
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    if "timestamp" not in names:
        ts = pa.array([now_ms] * data.num_rows, pa.int64())
        return pa.RecordBatch.from_arrays(
            list(data.columns) + [ts], names=names + ["timestamp"]
        )
    ts = data.column("timestamp")
    if pa.types.is_timestamp(ts.type):
        ts = ts.cast(pa.timestamp("ms", tz=ts.type.tz), safe=False).view(pa.int64())
    elif pa.types.is_date(ts.type):
        ts = ts.cast(pa.timestamp("ms")).view(pa.int64())
    elif pa.types.is_integer(ts.type):
        ts = ts.cast(pa.int64())
    else:
        raise WriteError(
            f"column 'timestamp' must be a timestamp or an integer (ms), not {ts.type}"
        )
    import pyarrow.compute as pc

    ts = pc.fill_null(ts, pa.scalar(now_ms, pa.int64()))
    cols = list(data.columns)
    cols[names.index("timestamp")] = ts
    return pa.RecordBatch.from_arrays(cols, names=names)


@dataclass
class StagedPartition:
    """What a task staged of one partition (part of its commit message to the driver)."""

    topic: str
    partition: int
    directory: str  # staged <topic>-<partition> directory
    first_offset: int  # log start offset of the staged log
    end_offset: int  # log end offset
    records: int
    nbytes: int
    # offsets assigned by the task (no offset column): commit numbers the pieces of a
    # partition one after another, in task order, from the log end (or 0)
    assigned: bool = False
    task_index: int = 0  # the Spark partition the task wrote (orders assigned pieces)
    shift: int = 0  # set by commit: what it adds to the staged offsets


@dataclass
class _TPState:
    log: Any
    next_offset: int
    assigned: bool = False
    first_offset: Optional[int] = None
    records: int = 0
    nbytes: int = 0
    pending: List[Any] = field(default_factory=list)
    pending_bytes: int = 0


def existing_log_end(root: str, topic: str, partition: int) -> Optional[int]:
    """The log end offset of ``<root>/<topic>-<partition>`` if it exists (None otherwise)."""
    return _commit.log_end_offset(os.path.join(root, _files.partition_dir_name(topic, partition)))


class TaskWriter:
    """Writes the rows of one task into staged partition logs."""

    def __init__(
        self, opts: WriteOptions, job_id: str, task_name: str, overwrite: bool, task_index: int = 0
    ) -> None:
        self.opts = opts
        self.overwrite = overwrite
        self.task_index = task_index
        self.stage = os.path.join(opts.path, STAGING_DIR, job_id, task_name)
        self.tps: Dict[Tuple[str, int], _TPState] = {}
        self.total_pending = 0
        self._valid_topics: set = set()

    # -- input ------------------------------------------------------------------------------------
    def write_batch(self, rb) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        n = rb.num_rows
        if n == 0:
            return
        names = rb.schema.names
        if "value" not in names:
            raise WriteError("Required attribute 'value' not found")
        if self.opts.topic is not None:
            topics = None
            topic_const = self.opts.topic
        else:
            if "topic" not in names:
                raise WriteError("topic option required when no 'topic' attribute is present")
            topics = rb.column("topic")
            if topics.null_count:
                raise WriteError(
                    "null topic for a record: set the topic column or the topic option"
                )
            if not pa.types.is_string(topics.type):
                topics = topics.cast(pa.string())
            topic_const = None
            mm = pc.min_max(topics)
            if mm["min"].as_py() == mm["max"].as_py():
                topic_const = mm["min"].as_py()
                topics = None
            else:
                # every topic of the batch is checked before any directory is made for one
                for t in pc.unique(topics).to_pylist():
                    if t not in self._valid_topics:
                        check_topic(t)
                        self._valid_topics.add(t)
        if topic_const not in self._valid_topics and topic_const is not None:
            check_topic(topic_const)
            self._valid_topics.add(topic_const)
        parts = rb.column("partition") if "partition" in names else None
        if parts is not None and not pa.types.is_int32(parts.type):
            parts = parts.cast(pa.int32())
        if parts is None or parts.null_count:
            if self.opts.num_partitions is not None:
                parts = partition_column(
                    rb.column("key") if "key" in names else None,
                    rb.column("value") if "value" in names else None, parts,
                    self.opts.num_partitions)
            elif parts is None:
                parts = pa.repeat(pa.scalar(0, pa.int32()), n)
            else:
                raise WriteError(
                    "null partition for a record: set the numPartitions option to use Kafka's "
                    "default partitioner"
                )
        pmm = pc.min_max(parts)
        if pmm["min"].as_py() < 0:
            raise WriteError(f"negative partition {pmm['min'].as_py()}")
        known = self.opts.num_partitions
        if known is not None and pmm["max"].as_py() >= known:
            raise WriteError(
                f"partition {pmm['max'].as_py()} is not in the range [0...{known}) that "
                f"numPartitions={known} gives the topic (Kafka's producer refuses a record for a "
                "partition the topic does not have)"
            )
        keep = [
            c
            for c in ("key", "value", "offset", "timestamp", "timestampType", "headers")
            if c in names
        ]
        data = _stamp(rb.select(keep))
        if topics is None and pmm["min"].as_py() == pmm["max"].as_py():
            self._add(topic_const, pmm["min"].as_py(), data)
            return
        # several partitions in this batch: group (order within each group is kept)
        if topics is None:
            topics = pa.repeat(pa.scalar(topic_const, pa.string()), n)
        t = pa.table({"t": topics, "p": parts})
        groups = t.group_by(["t", "p"], use_threads=False).aggregate([]).to_pylist()
        for g in groups:
            mask = pc.and_(
                pc.equal(topics, pa.scalar(g["t"], pa.string())),
                pc.equal(parts, pa.scalar(g["p"], pa.int32())),
            )
            self._add(g["t"], g["p"], data.filter(mask))

    def _state(
        self, topic: str, partition: int, offsets_given: bool, first: Optional[int]
    ) -> _TPState:
        from ..storage.log import Log

        key = (topic, partition)
        st = self.tps.get(key)
        if st is not None:
            return st
        check_topic(topic)
        try:
            name = _files.partition_dir_name(topic, partition)
        except ValueError as e:
            raise WriteError(str(e)) from None
        d = os.path.join(self.stage, name)
        # mkdir, not makedirs: once abort_job has removed the job's directory a straggling
        # task must fail here instead of re-creating the staging tree
        try:
            if not os.path.isdir(self.stage):
                os.mkdir(self.stage)
            _files.check_inside(self.stage, self.opts.path)  # no planted link out of <path>
            os.mkdir(d)
        except FileNotFoundError:
            raise WriteError(
                f"the write job was aborted (no {os.path.dirname(self.stage)})"
            ) from None
        topic_id = None
        if self.opts.topic_id:
            topic_id = _files.topic_id_from_string(self.opts.topic_id)
        log = Log.open(d, self.opts.log_config(), topic_id=topic_id)
        if offsets_given:
            start = first
        else:
            start = 0
            if not self.overwrite:
                end = existing_log_end(self.opts.path, topic, partition)
                if end is not None:
                    start = end
        if start:
            log.truncate_fully_and_start_at(start)
        st = _TPState(log, start, assigned=not offsets_given)
        self.tps[key] = st
        return st

    def _add(self, topic: str, partition: int, data) -> None:
        import pyarrow.compute as pc

        if data.num_rows == 0:
            return
        offsets_given = "offset" in data.schema.names and self.opts.preserve_offsets is not False
        if offsets_given:
            offs = data.column("offset")
            if offs.null_count:
                raise WriteError(
                    f"null offsets for {topic}-{partition}: give every record an offset, drop the "
                    "offset column, or set preserveOffsets=false"
                )
            first = pc.min(offs).as_py()
        else:
            if "offset" in data.schema.names:
                data = data.drop_columns(["offset"])
            first = None
        st = self._state(topic, partition, offsets_given, first)
        st.pending.append(data)
        size = data.nbytes
        st.pending_bytes += size
        self.total_pending += size
        if st.pending_bytes >= _FLUSH_BYTES:
            self._flush(topic, partition)
        elif self.total_pending >= _MAX_PENDING_BYTES:
            for k in sorted(self.tps, key=lambda k: -self.tps[k].pending_bytes)[:4]:
                self._flush(*k)

    def _flush(self, topic: str, partition: int) -> None:
        import pyarrow as pa

        from .. import arrow as ka
        from ..errors import InvalidOffsetError

        st = self.tps[(topic, partition)]
        if not st.pending:
            return
        try:
            table = (
                pa.Table.from_batches(st.pending)
                if len(st.pending) > 1
                else pa.Table.from_batches([st.pending[0]])
            )
        except pa.ArrowInvalid:
            table = pa.concat_tables(
                [pa.Table.from_batches([b]) for b in st.pending], promote_options="permissive"
            )
        self.total_pending -= st.pending_bytes
        st.pending = []
        st.pending_bytes = 0
        n = table.num_rows
        try:
            data = ka.from_arrow(
                table,
                compression=self.opts.compression,
                compression_level=self.opts.compression_level,
                batch_bytes=self.opts.batch_bytes,
                batch_records=self.opts.batch_records,
                base_offset=st.next_offset,
                partition_leader_epoch=self.opts.leader_epoch,
            )
        except (InvalidOffsetError, ValueError) as e:
            raise WriteError(
                f"cannot encode the records of {topic}-{partition}: {e} (offsets must increase "
                "within a partition: use kafkalog.spark.write(df, path), which sorts by offset)"
            ) from e
        mv = memoryview(data)
        pos = 0
        total = len(mv)
        while pos + 12 <= total:
            size = _ENTRY.unpack_from(mv, pos)[1] + 12
            try:
                info = st.log.append_as_follower(mv[pos : pos + size])
            except InvalidOffsetError as e:
                raise WriteError(
                    f"records of {topic}-{partition} are not in offset order or repeat "
                    f"offsets: {e} "
                    "(use kafkalog.spark.write(df, path), which sorts by offset, or drop the "
                    "offset column to assign new offsets)"
                ) from e
            if st.first_offset is None:
                st.first_offset = info.first_offset
            pos += size
        st.next_offset = st.log.log_end_offset
        st.records += n
        st.nbytes += total

    # -- end of task ------------------------------------------------------------------------------
    def finish(self) -> List[StagedPartition]:
        out = []
        for topic, partition in list(self.tps):
            self._flush(topic, partition)
        for (topic, partition), st in self.tps.items():
            log = st.log
            start = log.log_start_offset
            end = log.log_end_offset
            log.close()
            out.append(
                StagedPartition(
                    topic, partition, log.dir, start, end, st.records, st.nbytes,
                    assigned=st.assigned, task_index=self.task_index,
                )
            )
        return out

    def cleanup(self) -> None:
        for st in self.tps.values():
            try:
                st.log.close()
            except Exception:
                pass
        shutil.rmtree(self.stage, ignore_errors=True)

