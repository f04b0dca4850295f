"""Spark-free core of the ``kafkalog`` sink: per-task staging of partition logs and the
driver-side commit that moves them into place.

Protocol (one Spark write job):

1. Every task writes the rows it receives into partition logs of its own under
   ``<path>/.kafkalog-staging/<job id>/<task>/<topic>-<partition>/`` with
   :class:`kafkalog.storage.log.Log` (v2 batches built by :func:`kafkalog.arrow.from_arrow`; segments
   rolled at ``segmentBytes``; ``.index``/``.timeindex``/``leader-epoch-checkpoint`` written by
   the Log), closes them cleanly and returns what it staged (a commit message).
2. ``commit`` (driver) groups the staged pieces by partition and locks every partition it
   will write (:class:`kafkalog.storage.commit.RootCommit`; the lock every writer of a
   partition takes, :mod:`kafkalog.storage.partition_lock`) until its directory is swapped in
   and the checkpoints are written: a concurrent job committing to the same partition waits,
   then numbers its records after this one's.  Several pieces of one partition
   (from several tasks) are accepted when their offsets are preserved and do not overlap, or
   when their tasks assigned the offsets (the pieces are then numbered one after another in
   task order); they are joined into one log rolled at ``segmentBytes`` (a single piece that
   needs no renumbering is used as it is).  Each partition's final directory is assembled inside the
   staging area (hard links to the segments of an existing partition when appending) and then
   renamed into place (an existing one is swapped with it in one atomic
   ``renameat2(RENAME_EXCHANGE)`` on Linux; elsewhere two renames leave a moment without it),
   so a partition directory is always either the old one or the complete new one.  Root
   checkpoints (recovery point, log start offset, high watermark) are updated last (a
   log-start entry that would hide new records is lowered before the swap), and the staging
   area is removed.  This module keeps the orchestration (which pieces, their offsets, the
   staging area); the directory swap and its undo, the root checkpoints and the leader-epoch
   merge are the storage's (:mod:`kafkalog.storage.commit`, a broker's ``LogManager``).
3. ``abort`` (driver, failed job) deletes the staging area; the target is untouched.

A commit that fails (an I/O error, a full disk) puts back, before it raises
:class:`~kafkalog.errors.KafkaStorageError`, every partition directory it had already swapped
and every checkpoint entry it had changed, so the target is as it was before the job; the
previous directories are only deleted once the whole job is in place.  The error says whether
putting back worked, and if not where a previous directory is (``<topic>-<partition>.<id>-delete``
in ``<path>``).  Spark then aborts the job, which removes the staging area; a staging
directory left behind because that removal failed too is never read by kafkalog and can be
deleted, and so can a ``-delete`` directory whose removal after a successful commit failed.
A log-start-offset entry above where a new partition directory starts is lowered before any
swap, so a commit that stops half-way (a crash) never hides the new records, nor lets a
writable open delete them; at worst records below an old log start show again.

Filesystem safety: every topic name is checked as Kafka checks it
(:func:`kafkalog.storage.files.validate_topic`) before a directory is made for it, on the driver for
the ``topic`` option and in each task for the ``topic`` column (the :class:`WriteError` names
the topic); a staging directory that resolves outside ``<path>`` (a planted symbolic link) is
refused; the files of an existing partition that are symbolic links leading out of it are
refused rather than linked into the new directory; and a partition directory that is itself a
symbolic link is replaced by a real directory on commit (the link is removed, the directory it
pointed to is left as it was).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..storage import commit as _commit
from ..storage import files as _files
from ..storage import fs as _fs
from ..storage import partition_lock as _partition_lock
from ..errors import KafkaStorageError
from . import _errors, _options
from ._paths import local_path

STAGING_DIR = ".kafkalog-staging"
GiB = 1024 * 1024 * 1024
_FLUSH_BYTES = 8 * 1024 * 1024
_MAX_PENDING_BYTES = 256 * 1024 * 1024
_ENTRY = struct.Struct(">qi")
_BASE = struct.Struct(">q")


class WriteError(ValueError):
    """The rows cannot be written as asked (raised in a task or at commit)."""


class WriteOptionError(WriteError, _errors.OptionError):
    """A write option the sink refuses, raised on the driver when the options are parsed
    (before any task runs or anything is written); it names the option and what it accepts.
    The source's option error (:class:`~kafkalog.spark._errors.OptionError`) and a
    :class:`WriteError` both."""


INT32_MAX = 2**31 - 1
# compressionLevel, per codec (kafkalog.compression's ranges, Kafka's compression.<codec>.level)
_LEVELS = {
    "gzip": (lambda n: n == -1 or 1 <= n <= 9, "-1 (the codec's default) or 1..9"),
    "lz4": (lambda n: 1 <= n <= 17, "1..17"),
    "zstd": (lambda n: -131072 <= n <= 22, "-131072..22"),
}


def _check_topic(topic: str) -> None:
    """WriteError naming ``topic`` unless Kafka accepts it as a topic name."""
    try:
        _files.validate_topic(topic)
    except ValueError as e:
        raise WriteError(f"cannot write topic {topic!r}: {e}") from e


def _lower(options: Mapping[str, Any]) -> Dict[str, Any]:
    return {str(k).lower(): v for k, v in dict(options).items()}


def _opt_name(key: str) -> str:
    return _OPTION_SPELLING.get(key, key)


def _opt_int(o: Mapping[str, Any], key: str, default: Optional[int], lo: int = 0,
             hi: int = INT32_MAX) -> Optional[int]:
    """The integer option ``key`` (lower-cased), in ``lo..hi`` (WriteOptionError naming the
    option and the range otherwise: a value every task would refuse is refused here)."""
    v = o.get(key)
    if v is None:
        return default
    try:
        n = int(str(v).strip())
    except ValueError:
        raise WriteOptionError(
            f"option {_opt_name(key)!r} must be an integer in {lo}..{hi}, not {v!r}") from None
    if not lo <= n <= hi:
        raise WriteOptionError(f"option {_opt_name(key)!r} must be in {lo}..{hi}, not {n}")
    return n


def _opt_bool(o: Mapping[str, Any], key: str, default: Optional[bool]) -> Optional[bool]:
    v = o.get(key)
    if v is None:
        return default
    s = str(v).strip().lower()
    if s in ("true", "1", "yes", "on"):
        return True
    if s in ("false", "0", "no", "off"):
        return False
    raise WriteOptionError(f"option {_opt_name(key)!r} must be true or false, not {v!r}")


def _compression_level(o: Mapping[str, Any], codec: str) -> Optional[int]:
    """The ``compressionLevel`` option, in the range of ``codec`` (none and snappy have no
    level: it is accepted and not used)."""
    n = _opt_int(o, "compressionlevel", None, lo=-131072, hi=INT32_MAX)
    rule = _LEVELS.get(codec)
    if n is not None and rule is not None and not rule[0](n):
        raise WriteOptionError(
            f"option 'compressionLevel' must be, for {codec}, {rule[1]}; not {n}")
    return n


# The sink's options as documented (keys arrive lower-cased); unknown ones are refused with
# the read side's check (kafkalog.spark._options.check_option_keys), so a misspelled
# ``compresion`` is an error, not an uncompressed write.
_OPTION_SPELLING = {
    k.lower(): k
    for k in (
        "path compression compressionLevel kafka.compression.type segmentBytes batchBytes "
        "batchRecords indexIntervalBytes topic preserveOffsets leaderEpoch topicId "
        "numPartitions fsync saveMode"
    ).split()
}


def check_option_keys(options: Mapping[str, Any]) -> List[str]:
    """WriteError for a write option the sink does not know, naming the closest known one
    (``unknown option 'compresion' ...; did you mean 'compression'?``); return the producer
    options (``kafka.*``) that are accepted and ignored.  ``storage.*`` options are the
    store's (:mod:`kafkalog.spark._remote`)."""
    return _options.check_option_keys(
        _lower(options), spelling=_OPTION_SPELLING, known=_OPTION_SPELLING, ignored_names=(),
        rejected={}, what="sink", error=WriteOptionError)


SAVE_MODES = {
    "append": "append",
    "overwrite": "overwrite",
    "errorifexists": "errorifexists",
    "error": "errorifexists",
    "default": "errorifexists",
    "ignore": "ignore",
}


def _topic_id_option(v: Any) -> Optional[str]:
    """The ``topicId`` option, checked on the driver: Kafka's base64 form (as ``kafka-topics
    --describe`` prints it) or a UUID.  Returned in Kafka's form."""
    if not v:
        return None
    text = str(v).strip()
    try:
        tid = uuid.UUID(text)
    except ValueError:
        try:
            tid = _files.topic_id_from_string(text)
        except ValueError:
            raise WriteOptionError(
                f"option 'topicId' must be a topic id, in Kafka's base64 form (as kafka-topics "
                f"--describe prints it) or as a UUID, not {text!r}"
            ) from None
    if tid.int == 0:
        # Kafka's Uuid.ZERO_UUID means "no id": partition.metadata may not carry it
        raise WriteOptionError(
            f"option 'topicId' must be a topic's id, not the zero UUID ({text!r}), which Kafka "
            "reserves for \"no id\": give the id kafka-topics --describe prints, or leave the "
            "option out"
        )
    return _files.topic_id_to_string(tid)


def _save_mode(v: Any) -> Optional[str]:
    if v is None:
        return None
    mode = SAVE_MODES.get(str(v).strip().lower())
    if mode is None:
        raise WriteOptionError(
            f"unknown save mode {v!r}: use append, overwrite, errorifexists (error, default) or "
            "ignore"
        )
    return mode


def effective_mode(opts: "WriteOptions", overwrite: bool) -> str:
    """The save mode a job runs in: Spark's ``overwrite`` flag, refined by the ``saveMode``
    option (which carries ``errorifexists`` and ``ignore``: PySpark refuses those modes for
    a Python data source before the source runs, so kafkalog takes them as an option, with
    ``.mode("append")``)."""
    mode = opts.save_mode
    if overwrite:
        if mode not in (None, "overwrite"):
            raise WriteError(
                f"saveMode {mode!r} contradicts mode('overwrite'): use mode('append') with it"
            )
        return "overwrite"
    if mode == "overwrite":
        raise WriteError("saveMode 'overwrite' needs mode('overwrite')")
    return mode or "append"


def target_has_data(root: str) -> bool:
    """Whether the target exists with anything in it but kafkalog's staging area and the
    partitions' lock files (what the errorifexists and ignore modes test at commit)."""
    kind = _fs.LOCAL.kind(root)
    if kind in (_fs.MISSING, _fs.DANGLING_LINK):
        return False
    if kind != _fs.DIRECTORY:
        return True
    try:
        entries = _fs.LOCAL.list_dir(root)
    except _fs.MissingFileError:
        return False
    return any(e.name != STAGING_DIR and not _partition_lock.is_lock_file_name(e.name)
               for e in entries)


def check_save_mode(opts: "WriteOptions", mode: str) -> bool:
    """Before a job (driver): False when ``ignore`` finds the target already there (the job
    then writes nothing); raises WriteError when ``errorifexists`` does.  As Spark's file
    sources, a target that exists at all counts, even an empty directory."""
    if mode in ("errorifexists", "ignore") and os.path.lexists(opts.path):
        if mode == "ignore":
            return False
        raise WriteError(_exists_message(opts.path))
    return True


def _exists_message(path: str) -> str:
    return (
        f"the target {path} already exists (save mode errorifexists): write elsewhere, or use "
        "mode('append') to add records after each partition's log end, or mode('overwrite') "
        "to replace the partitions written"
    )


@dataclass
class WriteOptions:
    path: str
    topic: Optional[str] = None
    compression: str = "none"
    compression_level: Optional[int] = None
    segment_bytes: int = GiB
    batch_bytes: int = 1024 * 1024
    batch_records: Optional[int] = None
    index_interval_bytes: int = 4096
    preserve_offsets: Optional[bool] = None  # None: when an offset column is present
    leader_epoch: int = 0
    num_partitions: Optional[int] = None
    topic_id: Optional[str] = None
    fsync: bool = True
    save_mode: Optional[str] = None  # the saveMode option: append, errorifexists or ignore

    @classmethod
    def parse(cls, options: Mapping[str, Any], warn: bool = True) -> "WriteOptions":
        """The write options, checked (``warn``: warn about the ``kafka.*`` producer options
        that are ignored)."""
        from .._format import CompressionType

        o = _lower(options)
        ignored = check_option_keys(o)
        if warn and ignored:
            _errors.warn("kafkalog writes files, not to brokers: ignoring option(s) "
                         + ", ".join(ignored))
        path = o.get("path")
        if not path:
            raise WriteOptionError(
                'no path given: use df.write.format("kafkalog").save("/path/to/log-dir")'
            )
        path = local_path(str(path))
        comp = str(o.get("compression", o.get("kafka.compression.type", "none"))).strip().lower()
        try:
            CompressionType.parse(comp)
        except ValueError:
            raise WriteOptionError(
                f"option 'compression' must be none, gzip, snappy, lz4 or zstd, not {comp!r}"
            ) from None
        topic = o.get("topic")
        return cls(
            path=os.path.abspath(path),
            topic=str(topic) if topic else None,
            compression=comp,
            compression_level=_compression_level(o, CompressionType.parse(comp).name.lower()),
            segment_bytes=_opt_int(o, "segmentbytes", GiB, lo=1024),
            batch_bytes=_opt_int(o, "batchbytes", 1024 * 1024, lo=64),
            batch_records=_opt_int(o, "batchrecords", None, lo=1),
            index_interval_bytes=_opt_int(o, "indexintervalbytes", 4096, lo=0),
            preserve_offsets=_opt_bool(o, "preserveoffsets", None),
            # a batch's partitionLeaderEpoch is an int32 (Kafka: -1 = none; a write has one)
            leader_epoch=_opt_int(o, "leaderepoch", 0, lo=0),
            num_partitions=_opt_int(o, "numpartitions", None, lo=1),
            topic_id=_topic_id_option(o.get("topicid")),
            fsync=bool(_opt_bool(o, "fsync", True)),
            save_mode=_save_mode(o.get("savemode")),
        )

    def __post_init__(self) -> None:
        # a batch must fit in a segment (Kafka: segment.bytes >= the largest batch)
        self.batch_bytes = max(64, min(self.batch_bytes, self.segment_bytes))

    def log_config(self) -> Dict[str, Any]:
        return {
            "segment.bytes": self.segment_bytes,
            "index.interval.bytes": self.index_interval_bytes,
            "max.message.bytes": 2**31 - 1,
        }


def check_columns(names: Sequence[str], opts: WriteOptions) -> None:
    """The checks of Kafka's sink (``KafkaWriter.validateQuery``), on the driver."""
    names = list(names)
    if "value" not in names:
        raise WriteError("Required attribute 'value' not found")
    if opts.topic is None and "topic" not in names:
        raise WriteError(
            "topic option required when no 'topic' attribute is present. Use the topic option for "
            "setting a topic."
        )
    if opts.preserve_offsets and "offset" not in names:
        raise WriteError("preserveOffsets=true needs an 'offset' column")
    if opts.topic is not None:
        _check_topic(opts.topic)


# ------------------------------------------------------------------------------------------------
# Kafka's default partitioner
# ------------------------------------------------------------------------------------------------
def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (signed 32-bit result)."""
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length & 3
    tail = length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partition(key: bytes, num_partitions: int) -> int:
    """``toPositive(murmur2(key)) % numPartitions`` (Kafka's ``BuiltInPartitioner`` for keyed
    records)."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def partition_column(keys, values, partitions, num_partitions: int):
    """A partition array for an Arrow batch: the given partition where not null, else Kafka's
    default partitioner on the key (``toPositive(murmur2(key)) % n``), and for a record with
    no key the same hash of its value (``kafkalog.spark.write``'s rule: Kafka's producer
    spreads unkeyed records arbitrarily; here a Spark stage retry routes every row as the first
    attempt did)."""
    import pyarrow as pa

    def as_bytes(v):
        if v is None or isinstance(v, bytes):
            return v
        return v.encode("utf-8") if isinstance(v, str) else bytes(v)

    kl = keys.to_pylist() if keys is not None else None
    vl = values.to_pylist() if values is not None else None
    pl = partitions.to_pylist() if partitions is not None else None
    n = len(kl) if kl is not None else (len(pl) if pl is not None else len(vl))
    out = []
    for i in range(n):
        p = pl[i] if pl is not None else None
        if p is None:
            k = as_bytes(kl[i]) if kl is not None else None
            if k is None:
                k = (as_bytes(vl[i]) if vl is not None else None) or b""
            p = default_partition(k, num_partitions)
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


# ------------------------------------------------------------------------------------------------
# Task side
# ------------------------------------------------------------------------------------------------
@dataclass
class StagedPartition:
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
                        _check_topic(t)
                        self._valid_topics.add(t)
        if topic_const not in self._valid_topics and topic_const is not None:
            _check_topic(topic_const)
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
        _check_topic(topic)
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
                    f"records of {topic}-{partition} are not in offset order or repeat offsets: {e} "
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


# ------------------------------------------------------------------------------------------------
# Driver side
# ------------------------------------------------------------------------------------------------
_SEGMENT_KINDS = _commit.SEGMENT_KINDS


def _segment_files(d: str) -> List[str]:
    out = []
    for e in _fs.LOCAL.list_dir(d):
        sf = _files.parse_segment_file_name(e.name)
        if sf is not None and sf.suffix == "" and sf.kind in _SEGMENT_KINDS:
            out.append(e.name)
    return sorted(out)


# The directory swap, its undo, the root checkpoints and the leader-epoch merge are the
# storage's (kafkalog.storage.commit, a broker's LogManager); these names stay for callers.
_Swap = _commit.Swap


def _undo_commit(
    swaps: List[_commit.Swap], ckpt_old: Mapping[str, Mapping[Tuple[str, int], Optional[int]]],
    fsync: bool,
) -> str:
    """:func:`kafkalog.storage.commit.undo` (the sentence for the commit's error)."""
    return _commit.undo(swaps, ckpt_old, fsync)


def _storage_error(job_id: str, root: str, e: OSError, doing: str, undone: str) -> KafkaStorageError:
    path = getattr(e, "path", None) or getattr(e, "filename", None)
    why = e if isinstance(e, KafkaStorageError) else KafkaStorageError.from_os_error(e, doing)
    return KafkaStorageError(
        f"write job {job_id} could not be committed to {root}: {why}; {undone}",
        path=os.fsdecode(path) if path is not None else root,
        errno=e.errno,
        operation="committing a write job",
    )


def commit_job(
    opts: WriteOptions, job_id: str, staged: Sequence[StagedPartition], overwrite: bool,
    save_mode: Optional[str] = None,
) -> Dict[str, Any]:
    """Move the staged partitions of a job into ``opts.path`` (see the module doc).  Returns a
    summary ``{"partitions": n, "records": n, "bytes": n}``.

    Every partition written is locked (:class:`kafkalog.storage.commit.RootCommit`) from the
    check of its log end to its swap and checkpoints: a concurrent job committing to the same
    partition waits and then appends after this one (or, with given offsets below the new log
    end, fails saying so); a writable ``Log`` open on it makes this commit wait, and fail
    naming it after ``kafkalog.storage.partition_lock.WAIT_TIMEOUT_S`` seconds."""
    root = opts.path
    job_dir = os.path.join(root, STAGING_DIR, job_id)
    if save_mode in ("errorifexists", "ignore") and target_has_data(root):
        # something was written to the target while the job ran
        if save_mode == "ignore":
            abort_job(opts, job_id)
            return {"partitions": 0, "records": 0, "bytes": 0}
        raise WriteError(_exists_message(root))

    by_tp: Dict[Tuple[str, int], List[StagedPartition]] = {}
    for s in staged:
        if s.end_offset > s.first_offset or s.records:
            by_tp.setdefault((s.topic, s.partition), []).append(s)
    commit = _commit.RootCommit(
        root, os.path.join(job_dir, "_merged"), fsync=opts.fsync,
        holder=f"the commit of write job {job_id}")
    try:
        try:
            commit.lock(by_tp)
        except OSError as e:  # the lock file could not be made: nothing was touched
            raise _storage_error(job_id, root, e, "locking the partitions",
                                 "the target was left as it was before the job") from e
        summary = _commit_locked(opts, job_id, by_tp, overwrite, commit)
    finally:
        commit.release()
    abort_job(opts, job_id)
    return summary


def _commit_locked(
    opts: WriteOptions, job_id: str, by_tp: Mapping[Tuple[str, int], List[StagedPartition]],
    overwrite: bool, commit: "_commit.RootCommit",
) -> Dict[str, Any]:
    """The commit, its partitions locked: validate against the log ends as they are now,
    assemble each partition's directory, swap it in, update the checkpoints."""
    root = opts.path
    job_dir = os.path.join(root, STAGING_DIR, job_id)

    def log_end(topic: str, partition: int) -> Optional[int]:
        # reading the existing partition fails: nothing was touched yet
        try:
            return commit.log_end(topic, partition)
        except OSError as e:
            raise _storage_error(job_id, root, e, "reading the existing partition",
                                 "the target was left as it was before the job") from e

    # validate everything before touching the target
    plans = []
    for (topic, partition), pieces in sorted(by_tp.items()):
        pieces = sorted(pieces, key=lambda p: (p.first_offset, p.end_offset))
        exists = commit.exists(topic, partition)
        end = log_end(topic, partition) if exists and not overwrite else None
        if any(p.assigned for p in pieces):
            if not all(p.assigned for p in pieces):
                raise WriteError(
                    f"partition {topic}-{partition}: some tasks kept the given offsets and others "
                    "assigned new ones"
                )
            pieces = _number_pieces(pieces, end or 0)
        for a, b in zip(pieces, pieces[1:]):
            if b.first_offset < a.end_offset:
                raise WriteError(
                    f"partition {topic}-{partition} was written by several tasks with overlapping "
                    f"offsets ({a.first_offset}..{a.end_offset - 1} and {b.first_offset}..{b.end_offset - 1}): "
                    "repartition by topic and partition and sort by offset first, as "
                    "kafkalog.spark.write(df, path) does (or drop the offset column to assign new "
                    "offsets)"
                )
        if end is not None and pieces[0].first_offset < end:
            raise WriteError(
                f"cannot append to {topic}-{partition}: the new records start at offset "
                f"{pieces[0].first_offset}, below the log end offset {end} of the existing "
                "partition (use mode('overwrite') to replace it, or drop the offset column to "
                "assign offsets after the log end)"
            )
        plans.append((topic, partition, pieces, exists))

    records = nbytes = 0
    try:
        os.makedirs(commit.staging, exist_ok=True)
        _files.check_inside(commit.staging, root)  # no planted link out of the target root
        # A log-start entry above where a new directory starts would hide its first records
        # (and make a writable open delete them all) should the commit stop between a swap and
        # the checkpoint update: such entries are lowered before any swap.
        commit.lower_log_starts({(t, p): pieces[0].first_offset for t, p, pieces, _e in plans})
        for topic, partition, pieces, exists in plans:
            name = _files.partition_dir_name(topic, partition)
            merged = commit.new_directory(topic, partition)
            if len(pieces) > 1 or pieces[0].shift:
                # several tasks' pieces (or offsets to renumber): one log, rolled at
                # segmentBytes, whatever the number of tasks
                pieces = [_combine_pieces(opts, pieces, os.path.join(job_dir, "_combined", name))]
            epochs: List[Tuple[int, int]] = []
            log_start = pieces[0].first_offset
            if exists and not overwrite:
                # the existing log's files (closed cleanly first), the new records after them
                log_start, epochs = commit.carry_existing(
                    topic, partition, merged, pieces[0].first_offset)
            for p in pieces:
                for fname in _segment_files(p.directory):
                    dst = os.path.join(merged, fname)
                    if os.path.exists(dst):
                        if os.path.getsize(
                            os.path.join(p.directory, fname)
                        ) == 0 and not fname.endswith(".log"):
                            continue
                        raise WriteError(f"segment file {fname} of {name} written twice")
                    os.rename(os.path.join(p.directory, fname), dst)
                epochs.extend(_commit.epoch_entries(p.directory))
                meta = os.path.join(p.directory, _files.PARTITION_METADATA_FILE)
                if os.path.isfile(meta) and not os.path.exists(
                    os.path.join(merged, _files.PARTITION_METADATA_FILE)
                ):
                    os.rename(meta, os.path.join(merged, _files.PARTITION_METADATA_FILE))
                records += p.records
                nbytes += p.nbytes
            commit.place(topic, partition, merged, log_start, pieces[-1].end_offset, epochs)
        commit.write_checkpoints()
    except BaseException as e:
        undone = _undo_commit(commit.swaps, commit.checkpoints_before, opts.fsync)
        if isinstance(e, OSError):
            raise _storage_error(job_id, root, e, "committing", undone) from e
        raise
    commit.finish()  # committed: the old directories go
    return {"partitions": len(plans), "records": records, "bytes": nbytes}


def _number_pieces(pieces: Sequence[StagedPartition], base: int) -> List[StagedPartition]:
    """Pieces whose offsets were assigned by their tasks, numbered one after another from
    ``base`` in task order (each piece's offsets are consecutive)."""
    out = []
    for p in sorted(pieces, key=lambda p: (p.task_index, p.directory)):
        n = p.end_offset - p.first_offset
        out.append(
            dataclasses.replace(
                p, first_offset=base, end_offset=base + n, shift=p.shift + base - p.first_offset
            )
        )
        base += n
    return out


def _combine_pieces(
    opts: WriteOptions, pieces: Sequence[StagedPartition], directory: str
) -> StagedPartition:
    """Copy the batches of ``pieces`` (one partition, in offset order) into one new log in
    ``directory``, adding each piece's ``shift`` to its offsets (a v2 batch's base offset is
    outside its CRC), so that segments roll at ``segmentBytes`` as one writer's would."""
    from ..storage.log import Log

    os.makedirs(directory)
    _files.check_inside(directory, opts.path)
    topic_id = _files.topic_id_from_string(opts.topic_id) if opts.topic_id else None
    first = pieces[0]
    log = Log.open(directory, opts.log_config(), topic_id=topic_id)
    try:
        if first.first_offset:
            log.truncate_fully_and_start_at(first.first_offset)
        for p in pieces:
            for fname in _segment_files(p.directory):
                if fname.endswith(".log"):
                    _copy_batches(os.path.join(p.directory, fname), p.shift, log)
        start, end = log.log_start_offset, log.log_end_offset
    finally:
        log.close()
    if end != pieces[-1].end_offset:
        raise WriteError(
            f"combining the pieces of {first.topic}-{first.partition} ended at offset {end}, "
            f"not {pieces[-1].end_offset}"
        )
    return StagedPartition(
        first.topic, first.partition, directory, start, end,
        sum(p.records for p in pieces), sum(p.nbytes for p in pieces),
    )


def _copy_batches(path: str, shift: int, log: Any) -> None:
    """Append every batch of the segment file ``path`` to ``log``, base offsets moved by
    ``shift``."""
    with _fs.LOCAL.open_read(path) as f:
        pos = 0
        while True:
            head = f.read(pos, 12)
            if len(head) < 12:
                break
            size = _ENTRY.unpack_from(head, 0)[1]
            body = f.read(pos + 12, size) if size >= 0 else b""
            pos += 12 + size
            if len(body) < size or size < 49 or body[4] != 2:
                raise WriteError(f"unexpected data in the staged segment {path}")
            batch = bytearray(head + body)
            if shift:
                _BASE.pack_into(batch, 0, _BASE.unpack_from(batch, 0)[0] + shift)
            log.append_as_follower(batch)


def prepare_job(opts: WriteOptions, job_id: str) -> str:
    """Create a job's staging directory (on the driver, before any task runs)."""
    from ..errors import UnsafePathError

    staging = os.path.join(opts.path, STAGING_DIR)
    if os.path.islink(staging):
        raise UnsafePathError(
            f"refusing to stage in {staging}: it is a symbolic link (to "
            f"{os.path.realpath(staging)}); remove it",
            path=staging,
        )
    job_dir = os.path.join(staging, job_id)
    os.makedirs(job_dir, exist_ok=True)
    _files.check_inside(job_dir, opts.path)
    return job_dir


def abort_job(opts: WriteOptions, job_id: str) -> None:
    """Delete a job's staging area (and the staging root when nothing else is in it).  Tasks
    of a failed job may still be running: retry until the tree stays gone (tasks never
    re-create the job directory)."""
    import time

    staging = os.path.join(opts.path, STAGING_DIR)
    job_dir = os.path.join(staging, job_id)
    for attempt in range(8):
        shutil.rmtree(job_dir, ignore_errors=True)
        if not os.path.exists(job_dir):
            if attempt:
                break
            time.sleep(0.05)
            if not os.path.exists(job_dir):
                break
        time.sleep(0.1 * (attempt + 1))
    try:
        os.rmdir(staging)
    except OSError:
        pass
