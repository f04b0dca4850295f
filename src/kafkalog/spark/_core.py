"""Spark-free core of the ``kafkalog`` Spark data source: options, discovery, offsets, split
planning and the Arrow read of one split.

Nothing here imports pyspark, so the same planning and decoding serve the unit tests, DuckDB,
Polars or plain pyarrow users::

    from kafkalog.spark import _core as core
    opts = core.ReadOptions.parse({"path": "/var/kafka-logs", "subscribe": "orders"})
    plan = core.plan(opts)                     # list of Split
    for split in plan:
        for rb in core.read_split(split, opts, core.arrow_schema(opts)):
            ...                                # pyarrow.RecordBatch in the connector's schema

Layout understood (Kafka's ``LogManager``): every path is a log-dir root holding
``<topic>-<partition>`` directories, one such partition directory, a directory of segments
whose name is not ``<topic>-<partition>`` (topic and partition are then null), or one
``<20 digits>.log`` segment file.  ``-delete``, ``-future`` and ``-stray`` directories are
skipped, and so are internal topics (``__*``) unless ``includeInternalTopics`` is set or a
``subscribe``/``assign`` option names them.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import json
import math
import os
import re
import struct
import warnings
from dataclasses import dataclass, field
from typing import Any, Container, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ..storage import files as _files
from ..storage import fs as _fs
from ..storage import logdir as _logdir
from ..storage.log_view import LogView as _LogView
from ._paths import UnsupportedPathError, local_path
from ..errors import CorruptRecordError, KafkaLogError, KafkaStorageError

MiB = 1024 * 1024
DEFAULT_MAX_PARTITION_BYTES = 256 * MiB
OPEN_COST_BYTES = 4 * MiB  # what a split pays per segment piece, as Spark's openCostInBytes
DEFAULT_MAX_RECORDS_PER_BATCH = 65536
DEFAULT_MAX_BATCH_BYTES = 64 * MiB

EARLIEST = -2
LATEST = -1

_ENTRY = struct.Struct(">qi")

# Options of spark-sql-kafka that talk to brokers or consumers: accepted and ignored (so are
# other ``kafka.*`` consumer settings, except those in _REJECTED_KAFKA_OPTIONS).
_IGNORED_OPTIONS = {
    "groupidprefix",
    "kafkaconsumer.polltimeoutms",
    "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
    "maxrecordsperpartition",
    "minoffsetspertrigger",
    "maxtriggerdelay",
    "topic",
}
_KNOWN_OPTIONS = {
    "path",
    "paths",
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "failondataloss",
    "minpartitions",
    "maxoffsetspertrigger",
    "includeheaders",
    "kafka.isolation.level",
    # kafkalog's own
    "maxpartitionbytes",
    "includeinternaltopics",
    "replicapolicy",
    "includebatchmetadata",
    "includesegmentmetadata",
    "checkcrcs",
    "maxrecordsperbatch",
    "maxbatchbytes",
    "maxdecompressedsize",
    "defaultparallelism",
}

# Consumer settings the connector refuses (KafkaSourceProvider.validateGeneralOptions), refused
# here the same way and with the same advice.
_REJECTED_KAFKA_OPTIONS = {
    "kafka.auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
        "'startingOffsets' to 'earliest' or 'latest' to specify where to start."
    ),
    "kafka.key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
        "arrays. Use DataFrame operations to explicitly deserialize the keys."
    ),
    "kafka.value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as byte "
        "arrays. Use DataFrame operations to explicitly deserialize the values."
    ),
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}

# The option names as documented (for "did you mean" and messages; keys arrive lower-cased).
_OPTION_SPELLING = {
    k.lower(): k
    for k in (
        "path paths subscribe subscribePattern assign startingOffsets endingOffsets "
        "startingTimestamp endingTimestamp startingOffsetsByTimestamp endingOffsetsByTimestamp "
        "startingOffsetsByTimestampStrategy failOnDataLoss minPartitions maxOffsetsPerTrigger "
        "includeHeaders kafka.isolation.level maxPartitionBytes includeInternalTopics "
        "replicaPolicy includeBatchMetadata includeSegmentMetadata checkCrcs maxRecordsPerBatch "
        "maxBatchBytes maxDecompressedSize defaultParallelism groupIdPrefix "
        "kafkaConsumer.pollTimeoutMs fetchOffset.numRetries fetchOffset.retryIntervalMs "
        "maxRecordsPerPartition minOffsetsPerTrigger maxTriggerDelay topic "
        "kafka.bootstrap.servers kafka.group.id"
    ).split()
}


def check_option_keys(
    opts: Mapping[str, Any],
    spelling: Mapping[str, str] = _OPTION_SPELLING,
    known: Optional[Container[str]] = None,
    ignored_names: Container[str] = _IGNORED_OPTIONS,
    rejected: Mapping[str, str] = _REJECTED_KAFKA_OPTIONS,
    what: str = "source",
    error: Optional[type] = None,
) -> List[str]:
    """Raise ``error`` (:class:`OptionError`) for an option the source does not know (with the
    closest known name) or one the connector refuses; return the broker/consumer options that
    are accepted and ignored.  Keys arrive lower-cased; ``spelling`` maps them to the
    documented names.  The sink checks its options with the same rules
    (:func:`kafkalog.spark._write.check_option_keys`)."""
    import difflib

    error = error or OptionError
    known = _KNOWN_OPTIONS if known is None else known
    ignored = []
    for k in sorted(opts):
        if k in rejected:
            raise error(rejected[k])
        if k in known or k.startswith("storage."):
            continue  # storage.*: the store's options (kafkalog.spark._remote)
        if k in ignored_names:
            ignored.append(k)
            continue
        close = difflib.get_close_matches(k, list(spelling), n=1, cutoff=0.75)
        if k.startswith("kafka.") and not (close and close[0] in known):
            ignored.append(k)  # a client setting: meaningless for files
            continue
        hint = f"; did you mean {spelling[close[0]]!r}?" if close else ""
        raise error(
            f"unknown option {k!r} for the kafkalog {what}{hint} (options are case-insensitive; "
            "see docs/spark.md for the list)"
        )
    return ignored

# The spark-sql-kafka schema (KafkaRecordToRowConverter.kafkaSchema), all fields nullable.
KAFKA_COLUMNS: Tuple[str, ...] = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
)
KAFKA_DDL = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT"
)
HEADERS_DDL = "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
BATCH_FIELDS: Tuple[Tuple[str, str, str], ...] = (
    # (Spark field, kafkalog.arrow column, Spark type)
    ("baseOffset", "batchOffset", "BIGINT"),
    ("position", "position", "BIGINT"),
    ("leaderEpoch", "leaderEpoch", "INT"),
    ("producerId", "producerId", "BIGINT"),
    ("producerEpoch", "producerEpoch", "SMALLINT"),
    ("baseSequence", "baseSequence", "INT"),
    ("isTransactional", "isTransactional", "BOOLEAN"),
    ("compression", "compression", "STRING"),
)
BATCH_DDL = "batch STRUCT<" + ", ".join(f"{n}: {t}" for n, _, t in BATCH_FIELDS) + ">"
SEGMENT_DDL = "segment STRING"


def schema_ddl(
    include_headers: bool = False, batch_metadata: bool = False, segment_metadata: bool = False
) -> str:
    """The DDL of the data source's default schema for these options."""
    parts = [KAFKA_DDL]
    if include_headers:
        parts.append(HEADERS_DDL)
    if batch_metadata:
        parts.append(BATCH_DDL)
    if segment_metadata:
        parts.append(SEGMENT_DDL)
    return ", ".join(parts)


def arrow_schema(opts: "ReadOptions"):
    """The Arrow schema of the default Spark schema (``to_arrow_schema(schema, timezone="UTC")``)."""
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if opts.include_headers:
        fields.append(pa.field("headers", _headers_type()))
    if opts.include_batch_metadata:
        fields.append(pa.field("batch", _batch_type()))
    if opts.include_segment_metadata:
        fields.append(pa.field("segment", pa.string()))
    return pa.schema(fields)


def check_schema(target_schema, opts: "ReadOptions") -> None:
    """A user-supplied schema (``.schema(...)``) may name any subset of the source's columns in
    any order, each with the source's type: the data are never converted (a Spark cast would
    differ, e.g. ``timestamp BIGINT`` is seconds in Spark; cast after the read instead)."""
    every = ReadOptions(
        paths=[], include_headers=True, include_batch_metadata=True, include_segment_metadata=True
    )
    full = arrow_schema(every)
    ddl = dict(c.strip().split(" ", 1) for c in KAFKA_DDL.split(", "))
    ddl.update(
        headers=HEADERS_DDL.split(" ", 1)[1], batch=BATCH_DDL.split(" ", 1)[1], segment="STRING"
    )
    for f in target_schema:
        if f.name not in full.names:
            raise OptionError(
                f"column {f.name!r} of the given schema is not a column of the kafkalog source "
                f"({', '.join(full.names)})"
            )
        if not _same_type(f.type, full.field(f.name).type):
            raise OptionError(
                f"column {f.name!r} of the given schema has type {f.type}, but the kafkalog "
                f"source reads it as {ddl[f.name]}: give that type (or leave the column out) and "
                f"convert after the read, e.g. .withColumn({f.name!r}, col({f.name!r}).cast(...))"
            )


def _same_type(a, b) -> bool:
    """Arrow types equal up to nullability and the name of a list's child field."""
    import pyarrow as pa

    if pa.types.is_list(a) and pa.types.is_list(b):
        return _same_type(a.value_type, b.value_type)
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return a.num_fields == b.num_fields and all(
            a.field(i).name == b.field(i).name and _same_type(a.field(i).type, b.field(i).type)
            for i in range(a.num_fields)
        )
    return a.equals(b)


def _headers_type():
    import pyarrow as pa

    return pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))


_ARROW_BATCH_TYPES = {
    "BIGINT": "int64",
    "INT": "int32",
    "SMALLINT": "int16",
    "BOOLEAN": "bool_",
    "STRING": "string",
}


def _batch_type():
    import pyarrow as pa

    return pa.struct(
        [pa.field(n, getattr(pa, _ARROW_BATCH_TYPES[t])()) for n, _, t in BATCH_FIELDS]
    )


# ------------------------------------------------------------------------------------------------
# Options
# ------------------------------------------------------------------------------------------------
class OptionError(ValueError):
    """An option value the data source cannot accept (raised on the driver, at load time)."""


class NoKafkaLogError(KafkaLogError, OptionError):
    """A path given to the source under which nothing looks like a Kafka log (no segment, no
    partition directory with log files, no log-dir checkpoint): a mistyped or wrong path, as a
    missing one is, not an empty result."""


class DataLossError(KafkaLogError):
    """Records a query was to read are gone from the log directories (deleted by retention, or
    the partition was deleted, recreated or rewritten shorter).  Raised when ``failOnDataLoss``
    is true; with false the records are skipped with a warning."""


class ConcurrentWriteError(KafkaLogError):
    """A partition directory was replaced (by a kafkalog write's commit, or deleted) after the
    query was planned.  Nothing mixed was returned; re-running the query reads the new data."""

    retryable = True


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    v = opts.get(key)
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes", "on"):
        return True
    if s in ("false", "0", "no", "off"):
        return False
    raise OptionError(f"option {key!r} must be true or false, not {v!r}")


def _int(opts: Mapping[str, str], key: str, default: Optional[int], lo: int = 0) -> Optional[int]:
    v = opts.get(key)
    if v is None:
        return default
    try:
        n = int(str(v).strip())
    except ValueError:
        raise OptionError(f"option {key!r} must be an integer, not {v!r}") from None
    if n < lo:
        raise OptionError(f"option {key!r} must be >= {lo}, not {n}")
    return n


def _offset_spec(opts: Mapping[str, str], key: str) -> Optional[Any]:
    """'earliest' | 'latest' | {topic: {partition: offset}} (None when absent)."""
    v = opts.get(key)
    if v is None:
        return None
    s = str(v).strip()
    if s.lower() in ("earliest", "latest"):
        return s.lower()
    return _tp_json(s, key, allow_special=True)


def _tp_json(s: str, key: str, allow_special: bool = False) -> Dict[str, Dict[int, int]]:
    try:
        obj = json.loads(s)
    except ValueError:
        raise OptionError(
            f'Expected e.g. {{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}} for option '
            f"{key!r}, got {s}"
        ) from None
    if not isinstance(obj, dict):
        raise OptionError(f"option {key!r} must be a JSON object of topics, got {s}")
    out: Dict[str, Dict[int, int]] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise OptionError(
                f"option {key!r}: topic {topic!r} must map partitions to numbers, got {s}"
            )
        tp: Dict[int, int] = {}
        for p, off in parts.items():
            try:
                pi = int(p)
            except ValueError:
                raise OptionError(
                    f"option {key!r}: partition {p!r} of topic {topic!r} is not a number"
                ) from None
            if isinstance(off, bool) or not isinstance(off, int):
                raise OptionError(
                    f"option {key!r}: value for {topic}-{p} must be an integer, got {off!r}"
                )
            tp[pi] = off
        out[str(topic)] = tp
    return out


def _assign_json(s: str) -> Dict[str, List[int]]:
    try:
        obj = json.loads(s)
    except ValueError:
        obj = None
    if not isinstance(obj, dict) or not all(isinstance(v, list) for v in obj.values()):
        raise OptionError(
            f'Expected e.g. {{"topicA":[0,1],"topicB":[0,1]}} for option \'assign\', got {s}'
        )
    out = {}
    for t, ps in obj.items():
        if not all(isinstance(p, int) and not isinstance(p, bool) for p in ps):
            raise OptionError(f"option 'assign': partitions of {t!r} must be integers, got {ps!r}")
        out[str(t)] = sorted(set(ps))
    return out


def _parse_paths(opts: Mapping[str, str]) -> List[str]:
    paths: List[str] = []
    raw = opts.get("paths")
    if raw:
        try:
            v = json.loads(raw) if isinstance(raw, str) else list(raw)
        except ValueError:
            v = [raw]
        if isinstance(v, str):
            v = [v]
        paths.extend(str(p) for p in v)
    if opts.get("path"):
        p = opts["path"]
        paths.extend([str(x) for x in p] if isinstance(p, (list, tuple)) else [str(p)])
    out = []
    for p in paths:
        if _fs.is_uri(p) and p.split("://", 1)[0].lower() != "file":
            out.append(p)  # an object store or HDFS: read by kafkalog.spark._remote
            continue
        try:
            out.append(local_path(p))
        except UnsupportedPathError as e:
            raise OptionError(str(e)) from e
    remote = [p for p in paths if _fs.is_uri(p) and p.split("://", 1)[0].lower() != "file"]
    if remote and len(remote) != len(out):
        raise OptionError(
            "cannot mix local paths and object-store or HDFS URIs in one read ("
            + ", ".join(paths) + "): read them separately and union the DataFrames")
    return out


@dataclass
class ReadOptions:
    """Parsed, validated options (the connector's names; see docs/spark.md)."""

    paths: List[str]
    subscribe: Optional[List[str]] = None
    subscribe_pattern: Optional[str] = None
    assign: Optional[Dict[str, List[int]]] = None
    starting: Any = None  # 'earliest' | 'latest' | {t: {p: off}}
    ending: Any = None
    starting_timestamp: Optional[int] = None
    ending_timestamp: Optional[int] = None
    starting_by_timestamp: Optional[Dict[str, Dict[int, int]]] = None
    ending_by_timestamp: Optional[Dict[str, Dict[int, int]]] = None
    starting_strategy: str = "error"
    fail_on_data_loss: bool = True
    min_partitions: Optional[int] = None
    max_offsets_per_trigger: Optional[int] = None
    include_headers: bool = False
    read_committed: bool = False
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    include_internal_topics: bool = False
    replica_policy: str = "error"
    include_batch_metadata: bool = False
    include_segment_metadata: bool = False
    check_crcs: bool = True
    max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    max_decompressed_size: Optional[int] = None
    default_parallelism: Optional[int] = None
    streaming: bool = False
    ignored: List[str] = field(default_factory=list)
    # ``storage.*`` options: how to reach an object store or HDFS (kafkalog.storage.fs.resolve)
    storage_options: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(
        cls,
        options: Mapping[str, Any],
        streaming: bool = False,
        default_parallelism: Optional[int] = None,
        warn: bool = True,
    ) -> "ReadOptions":
        opts = {str(k).lower(): v for k, v in dict(options).items()}
        paths = _parse_paths(opts)
        if not paths:
            raise OptionError(
                'no path given: use spark.read.format("kafkalog").load("/path/to/log-dir") (a '
                "broker's log.dirs entry, a <topic>-<partition> directory or a segment file)"
            )
        ignored = check_option_keys(opts)
        if warn and ignored:
            _warn("kafkalog reads files, not brokers: ignoring option(s) " + ", ".join(ignored))
        strategies = [
            k for k in ("assign", "subscribe", "subscribepattern") if opts.get(k) is not None
        ]
        if len(strategies) > 1:
            raise OptionError(
                "Only one of the following options can be specified for Kafka source: subscribe, "
                "subscribePattern, assign. See the docs for more details."
            )
        subscribe = None
        if opts.get("subscribe") is not None:
            subscribe = [t.strip() for t in str(opts["subscribe"]).split(",") if t.strip()]
            if not subscribe:
                raise OptionError(
                    "No topics to subscribe to as specified value for option 'subscribe' is "
                    f"'{opts['subscribe']}'"
                )
        pattern = None
        if opts.get("subscribepattern") is not None:
            pattern = str(opts["subscribepattern"]).strip()
            if not pattern:
                raise OptionError(
                    "Pattern to subscribe is empty as specified value for option 'subscribePattern' is ''"
                )
            pattern = java_regex(pattern)
        assign = _assign_json(str(opts["assign"])) if opts.get("assign") is not None else None

        starting = _offset_spec(opts, "startingoffsets")
        ending = _offset_spec(opts, "endingoffsets")
        st_ts = _timestamp_opt(opts, "startingtimestamp")
        en_ts = _timestamp_opt(opts, "endingtimestamp")
        st_by = (
            _tp_json(str(opts["startingoffsetsbytimestamp"]), "startingOffsetsByTimestamp")
            if opts.get("startingoffsetsbytimestamp") is not None
            else None
        )
        en_by = (
            _tp_json(str(opts["endingoffsetsbytimestamp"]), "endingOffsetsByTimestamp")
            if opts.get("endingoffsetsbytimestamp") is not None
            else None
        )
        for spec, name in (
            (st_by, "startingOffsetsByTimestamp"),
            (en_by, "endingOffsetsByTimestamp"),
        ):
            for t, ps in (spec or {}).items():
                for p, ts in ps.items():
                    if ts < LATEST_TIMESTAMP and ts != EARLIEST_TIMESTAMP:
                        raise OptionError(_bad_timestamp(f"{name} for {t}-{p}", ts))
        strategy = str(opts.get("startingoffsetsbytimestampstrategy", "error")).strip().lower()
        if strategy not in ("error", "latest"):
            raise OptionError(
                "option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
                f"not {opts.get('startingoffsetsbytimestampstrategy')!r}"
            )
        if streaming:
            for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
                if opts.get(k) is not None:
                    raise OptionError(
                        f"ending offset not valid in streaming queries: option "
                        f"{_OPTION_SPELLING[k]!r} (a stream reads on as the log grows; read a "
                        "fixed range with spark.read)"
                    )
        else:
            if starting == "latest":
                raise OptionError("starting offset can't be latest for batch queries on Kafka")
            if ending == "earliest":
                raise OptionError("ending offset can't be earliest for batch queries on Kafka")
            if isinstance(starting, dict):
                for t, ps in starting.items():
                    for p, off in ps.items():
                        if off == LATEST:
                            raise OptionError(
                                f"startingOffsets for {t}-{p} can't be latest for batch queries on Kafka"
                            )
            if isinstance(ending, dict):
                for t, ps in ending.items():
                    for p, off in ps.items():
                        if off == EARLIEST:
                            raise OptionError(
                                f"endingOffsets for {t}-{p} can't be earliest for batch queries on Kafka"
                            )
        for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
            if isinstance(spec, dict):
                for t, ps in spec.items():
                    for p, off in ps.items():
                        if off < -2:
                            raise OptionError(
                                f"{name} for {t}-{p}: offset {off} is not valid (use -2 earliest, -1 latest)"
                            )
        if isinstance(starting, dict) and isinstance(ending, dict):
            _check_start_end(starting, ending)
        mn = _int(opts, "minoffsetspertrigger", None)
        mx = _int(opts, "maxoffsetspertrigger", None, lo=1)
        if mn is not None and mx is not None and mn > mx:
            raise OptionError(
                f"The value of minOffsetPerTrigger({mn}) is higher than the "
                f"maxOffsetsPerTrigger({mx})."
            )
        min_parts = _int(opts, "minpartitions", None, lo=1)
        iso = str(opts.get("kafka.isolation.level", "read_uncommitted")).strip().lower()
        if iso not in ("read_uncommitted", "read_committed"):
            raise OptionError(
                f"option 'kafka.isolation.level' must be read_uncommitted or read_committed, not {iso!r}"
            )
        policy = str(opts.get("replicapolicy", "error")).strip().lower()
        if policy not in ("error", "first", "longest"):
            raise OptionError(
                f"option 'replicaPolicy' must be error, first or longest, not {policy!r}"
            )
        dp = default_parallelism
        if opts.get("defaultparallelism") is not None:
            dp = _int(opts, "defaultparallelism", None, lo=1)
        return cls(
            paths=paths,
            subscribe=subscribe,
            subscribe_pattern=pattern,
            assign=assign,
            starting=starting,
            ending=ending,
            starting_timestamp=st_ts,
            ending_timestamp=en_ts,
            starting_by_timestamp=st_by,
            ending_by_timestamp=en_by,
            starting_strategy=strategy,
            fail_on_data_loss=_bool(opts, "failondataloss", True),
            min_partitions=min_parts,
            max_offsets_per_trigger=_int(opts, "maxoffsetspertrigger", None, lo=1),
            include_headers=_bool(opts, "includeheaders", False),
            read_committed=(iso == "read_committed"),
            max_partition_bytes=_int(opts, "maxpartitionbytes", DEFAULT_MAX_PARTITION_BYTES, lo=1),
            include_internal_topics=_bool(opts, "includeinternaltopics", False),
            replica_policy=policy,
            include_batch_metadata=_bool(opts, "includebatchmetadata", False),
            include_segment_metadata=_bool(opts, "includesegmentmetadata", False),
            check_crcs=_bool(opts, "checkcrcs", True),
            max_records_per_batch=_int(
                opts, "maxrecordsperbatch", DEFAULT_MAX_RECORDS_PER_BATCH, lo=1
            ),
            max_batch_bytes=_int(opts, "maxbatchbytes", DEFAULT_MAX_BATCH_BYTES, lo=1),
            max_decompressed_size=_int(opts, "maxdecompressedsize", None, lo=1),
            default_parallelism=dp,
            streaming=streaming,
            ignored=ignored,
            storage_options=_storage_options(opts),
        )


def _storage_options(opts: Mapping[str, Any]) -> Dict[str, Any]:
    from ._remote import storage_options

    try:
        return storage_options(opts)
    except ValueError as e:
        raise OptionError(str(e)) from None


_STORES: Dict[Any, Any] = {}  # one file system per store and options, per process


def store_of(path: str, storage_options: Optional[Mapping[str, Any]] = None) -> "_fs.FileSystem":
    """The file system holding ``path``: the local one for a path or ``file://`` URI, else an
    object store / HDFS client configured by ``storage_options`` (kept per process: its
    listing answers serve later opens, and a task does not build a client per file)."""
    if not _fs.is_uri(path) or path.split("://", 1)[0].lower() == "file":
        return _fs.LOCAL
    scheme, _, rest = path.partition("://")
    key = (scheme.lower(), rest.split("/", 1)[0],
           json.dumps(dict(storage_options or {}), sort_keys=True, default=str))
    fs = _STORES.get(key)
    if fs is None:
        fs = _STORES[key] = _fs.resolve(path, dict(storage_options or {}))[0]
    return fs


def _warn(msg: str) -> None:
    """Warn once: a ``UserWarning`` (printed on the stderr of the process that planned or read,
    as Python prints warnings; ``warnings`` filters apply)."""
    warnings.warn(msg, stacklevel=3)


# ListOffsets' special timestamps, which the connector passes through (OffsetSpec.forTimestamp)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


def _bad_timestamp(what: str, ts: int) -> str:
    return (
        f"{what}: timestamp {ts} is not valid (a timestamp in ms since the epoch, or -2 for "
        "the earliest and -1 for the latest offset)"
    )


def _timestamp_opt(opts: Mapping[str, str], key: str) -> Optional[int]:
    v = opts.get(key)
    if v is None:
        return None
    try:
        ts = int(str(v).strip())
    except ValueError:
        raise OptionError(
            f"option {_OPTION_SPELLING[key]!r} must be a timestamp in ms, not {v!r}"
        ) from None
    if ts < 0 and ts not in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
        raise OptionError(_bad_timestamp(f"option {_OPTION_SPELLING[key]!r}", ts))
    return ts


def _check_start_end(starting: Dict[str, Dict[int, int]], ending: Dict[str, Dict[int, int]]):
    """The connector's checkOffsetLimitValidity: both JSON specs name the same partitions, and
    a start is not after its end (the -2/-1 markers are not compared)."""
    s_keys = {(t, p) for t, ps in starting.items() for p in ps}
    e_keys = {(t, p) for t, ps in ending.items() for p in ps}
    if s_keys != e_keys:

        def names(keys):
            return ", ".join(f"{t}-{p}" for t, p in sorted(keys)) or "none"

        raise OptionError(
            "startingOffsets and endingOffsets name different partitions: only in "
            f"startingOffsets: {names(s_keys - e_keys)}; only in endingOffsets: "
            f"{names(e_keys - s_keys)}"
        )
    for t, ps in starting.items():
        for p, so in ps.items():
            eo = ending[t][p]
            if so >= 0 and eo >= 0 and so > eo:
                raise OptionError(
                    f"startingOffsets for {t}-{p} ({so}) is after its endingOffsets ({eo})"
                )


_JAVA_POSIX = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": "\\x00-\\x7f",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    "Graph": "\\x21-\\x7e",
    "Print": "\\x20-\\x7e",
    "Blank": " \\t",
    "Cntrl": "\\x00-\\x1f\\x7f",
    "XDigit": "0-9a-fA-F",
    "Space": " \\t\\n\\x0b\\f\\r",
    "javaLowerCase": "a-z",
    "javaUpperCase": "A-Z",
    "L": "a-zA-Z",
    "IsAlphabetic": "a-zA-Z",
    "IsDigit": "0-9",
    "N": "0-9",
    "Nd": "0-9",
}


def java_regex(pattern: str) -> str:
    """``subscribePattern`` is a ``java.util.regex.Pattern`` in the connector: translate the
    Java-only syntax that Python's ``re`` lacks or reads differently (``\\Q...\\E``,
    ``(?<name>...)``, ``\\z``, the POSIX ``\\p{...}`` classes, ``\\h``, ``\\v``), and refuse
    clearly what has no exact translation (class intersection ``&&``, ``\\G``, ``\\R``,
    ``\\X``, other ``\\p{...}``).  Returns the Python pattern (compiled once here)."""

    def fail(what: str) -> OptionError:
        return OptionError(
            f"option 'subscribePattern': {what} in {pattern!r} is Java regex syntax kafkalog "
            "cannot reproduce exactly; rewrite the pattern without it"
        )

    out: List[str] = []
    i, n = 0, len(pattern)
    in_class = 0
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            d = pattern[i + 1]
            if d == "Q":
                j = pattern.find("\\E", i + 2)
                lit = pattern[i + 2 :] if j < 0 else pattern[i + 2 : j]
                out.append(re.escape(lit))
                i = n if j < 0 else j + 2
                continue
            if d in "pP" and i + 2 < n:
                if pattern[i + 2] == "{":
                    j = pattern.find("}", i + 3)
                    name = pattern[i + 3 : j] if j > 0 else ""
                    k = name[2:] if name.startswith("Is") and name[2:] in _JAVA_POSIX else name
                    if j < 0 or k not in _JAVA_POSIX:
                        raise fail(f"the class \\{d}{{{name}}}")
                    cls = _JAVA_POSIX[k]
                    end = j + 1
                else:
                    raise fail(f"\\{d}{pattern[i + 2]}")
                neg = d == "P"
                if in_class:
                    if neg:
                        raise fail(f"a negated class \\P{{{name}}} inside [...]")
                    out.append(cls)
                else:
                    out.append(("[^" if neg else "[") + cls + "]")
                i = end
                continue
            if d == "z":
                out.append("\\Z")
            elif d == "Z":
                out.append("(?=\\n?\\Z)")
            elif d == "h":
                out.append(
                    ("" if in_class else "[")
                    + " \\t\\xa0\\u1680\\u180e\\u2000-\\u200a\\u202f\\u205f\\u3000"
                    + ("" if in_class else "]")
                )
            elif d == "v":
                out.append(
                    ("" if in_class else "[") + "\\n\\x0b\\f\\r\\x85\\u2028\\u2029"
                    + ("" if in_class else "]")
                )
            elif d in "GRXHVkec":
                raise fail(f"\\{d}")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class and pattern.startswith("&&", i):
            raise fail("a class intersection '&&'")
        if c == "[":
            if in_class:
                raise fail("a nested class '[...[...]]'")
            in_class = 1
            out.append(c)
            i += 1
            # a ']' right after '[' or '[^' is kept literal (topic names cannot hold one)
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):
                out.append("\\]")
                i += 1
            continue
        if c == "]" and in_class:
            in_class = 0
        elif c == "(" and pattern.startswith("(?<", i) and not pattern.startswith(
            ("(?<=", "(?<!"), i
        ):
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    py = "".join(out)
    try:
        re.compile(py)
    except re.error as e:
        raise OptionError(
            f"option 'subscribePattern': invalid regular expression {pattern!r}: {e}"
        ) from None
    return py


# ------------------------------------------------------------------------------------------------
# Files: indexes and header walks, through the storage model (index.py, segment.py)
# ------------------------------------------------------------------------------------------------
def _seg_files(seg: "SegmentRef") -> "_logdir.SegmentFiles":
    if seg.files is not None:
        return seg.files
    return _logdir.SegmentFiles(seg.base_offset, seg.path, None, None, None)


def offset_index_entries(seg: "SegmentRef") -> List[Tuple[int, int]]:
    """``(offset, position)`` entries of the segment's offset index (read with
    :class:`kafkalog.storage.index.OffsetIndex`), up to the first non-increasing one (a damaged or
    missing index only costs seeks).  Read once per :class:`SegmentRef`."""
    if seg.index_entries is not None:
        return seg.index_entries
    sf = _seg_files(seg)
    if sf.offset_index is None:
        seg.index_entries = []
        return []
    try:
        idx = _logdir.offset_index(sf, seg.fs)
    except KafkaStorageError:
        return []
    out: List[Tuple[int, int]] = []
    try:
        last_off = seg.base_offset - 1
        last_pos = -1
        for off, pos in idx:
            if off <= last_off or pos <= last_pos or pos < 0:
                break
            out.append((off, pos))
            last_off, last_pos = off, pos
    finally:
        idx.close()
    seg.index_entries = out
    return out


def time_index_entries(seg: "SegmentRef") -> Tuple[List[Tuple[int, int]], bool]:
    """``(timestamp, offset)`` entries of the segment's time index (read with
    :class:`kafkalog.storage.index.TimeIndex`), up to the first non-increasing one, and whether the
    file holds exactly those (a closed segment's trimmed index)."""
    sf = _seg_files(seg)
    if sf.time_index is None:
        return [], False
    try:
        ti = _logdir.time_index(sf, seg.fs)
    except KafkaStorageError:
        return [], False
    out: List[Tuple[int, int]] = []
    try:
        for ts, off in ti:
            if out and ts <= out[-1][0]:
                break
            out.append((ts, off))
        trimmed = ti.length == 12 * len(out)
    finally:
        ti.close()
    return out, trimmed


def iter_headers(
    seg: "SegmentRef", start: int = 0, end: Optional[int] = None,
    file: Optional[_fs.ReadableFile] = None,
) -> Iterator[Any]:
    """The batch headers of a segment from ``start`` (:meth:`kafkalog.storage.segment.Segment.
    iter_headers`: no CRC check, no decompression), stopping quietly at a partial entry or a
    header no entry can have.  ``file``: the ``.log`` already open (read through it)."""
    sg = _logdir.open_segment(_seg_files(seg), file, seg.fs)
    try:
        yield from sg.iter_headers(start, end)
    except CorruptRecordError:
        return
    finally:
        sg.close_handlers()


# ------------------------------------------------------------------------------------------------
# Discovery
# ------------------------------------------------------------------------------------------------
@dataclass
class SegmentRef:
    base_offset: int
    path: str
    size: int
    # its files as the storage model found them (index paths); not part of equality
    files: Optional["_logdir.SegmentFiles"] = field(default=None, compare=False, repr=False)
    # its offset index entries once read (they only grow: older entries stay valid)
    index_entries: Optional[List[Tuple[int, int]]] = field(
        default=None, compare=False, repr=False
    )
    # the file system holding it (None: the local one)
    fs: Optional["_fs.FileSystem"] = field(default=None, compare=False, repr=False)


# A kafkalog write's commit puts a fresh one in every partition directory it swaps in (an
# identity no directory shares, unlike an inode number, which the filesystem reuses).  Kafka
# ignores files it does not know in a partition directory.
GENERATION_FILE = ".kafkalog-generation"

DirVersion = Tuple[int, int, Optional[str]]


def write_generation(directory: str) -> str:
    """Give ``directory`` a new generation marker (replacing a linked or copied one); returns
    it.  Called by the writer on a partition directory before it is swapped into place."""
    import uuid

    gen = uuid.uuid4().hex
    # a new file: a hard link to the previous directory's marker is unlinked, never written
    fd = _files.create_new_file(os.path.join(directory, GENERATION_FILE))
    try:
        _files.write_all(fd, (gen + "\n").encode("ascii"))
    finally:
        os.close(fd)
    return gen


def _version_of(handle: "_fs.DirectoryHandle") -> DirVersion:
    """The version of a directory held open: its identity and its generation marker."""
    gen = None
    try:
        with handle.open_read(GENERATION_FILE) as f:
            gen = f.read(0, 64).decode("ascii", "replace").strip()
    except KafkaStorageError:  # no marker (or not a regular file): identity only
        pass
    dev, ino = handle.identity[:2]
    return (dev, ino, gen)


def dir_version(directory: str) -> Optional[DirVersion]:
    """What tells this partition directory from any other that takes its name later: its
    device and inode and its generation marker (None where the directory is missing or
    the system cannot open a directory)."""
    try:
        handle = _fs.LOCAL.open_dir(directory)
    except KafkaStorageError:
        return None
    if handle is None:
        return None
    with handle:
        return _version_of(handle)


class _Segments(list):
    """The segments of a partition directory, with the directory's version taken *before*
    they were listed (the read checks the directory is still that one)."""

    version: Optional[DirVersion] = None
    view: Any = None  # the PartitionView they came from


@dataclass
class TopicPartitionLog:
    """One partition directory (or bare segment list) found under the paths.  Its offsets
    (log start, log end, last stable offset) and timestamp lookups are the storage read
    model's (:class:`kafkalog.storage.log_view.LogView` over the directory), asked once and
    kept."""

    topic: Optional[str]
    partition: Optional[int]
    directory: str
    segments: List[SegmentRef]
    version: Optional[DirVersion] = None
    fs: Optional["_fs.FileSystem"] = field(default=None, compare=False, repr=False)
    _offsets: Optional[Tuple[int, int, int]] = field(default=None, compare=False, repr=False)
    _view: Optional[_LogView] = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.version is None:
            self.version = getattr(self.segments, "version", None)

    @property
    def key(self) -> Tuple[Optional[str], Optional[int]]:
        return (self.topic, self.partition)

    @property
    def name(self) -> str:
        if self.topic is None:
            return self.directory
        return f"{self.topic}-{self.partition}"

    def open_view(self) -> _LogView:
        """The storage read model of the directory (close it after use)."""
        return _LogView.open(self.directory, self.fs)

    @contextlib.contextmanager
    def viewing(self) -> Iterator[None]:
        """Keep one view of the directory open meanwhile: the offsets and timestamp lookups
        asked then share it (one open, one recovery walk, in a store one set of fetches)."""
        if self._view is not None or not self.segments:
            yield
            return
        self._view = self.open_view()
        try:
            yield
        finally:
            view, self._view = self._view, None
            view.close()

    def _bounds(self) -> Tuple[int, int, int]:
        if self._offsets is None:
            if not self.segments:
                # no segment (storage opens no log without one): an empty log, no offsets
                self._offsets = (0, 0, 0)
                return self._offsets
            with self.viewing():
                v = self._view
                self._offsets = (v.log_start_offset, v.log_end_offset, v.last_stable_offset)
        return self._offsets

    def earliest(self) -> int:
        """The log start offset (:attr:`LogView.log_start_offset`)."""
        return self._bounds()[0]

    def latest(self, read_committed: bool = False) -> int:
        """The log end offset; with ``read_committed``, the last stable offset (the end a
        read_committed consumer sees)."""
        return self._bounds()[2 if read_committed else 1]

    def last_stable(self) -> int:
        """The last stable offset (:attr:`LogView.last_stable_offset`)."""
        return self._bounds()[2]


def _is_internal(topic: Optional[str]) -> bool:
    return topic is not None and topic.startswith("__")


_REPORTED: set = set()  # ignored names already warned about (once per process)


def _report_ignored(view: Any) -> None:
    """Report the names of a partition directory (a PartitionView; None: nothing) that the
    storage model did not use, as the CLI's ``verify`` reports them: a name of the log's
    grammar that is not a regular file (never opened, never waited on), or one that is almost
    a log file name.  Other unknown names are left alone, as Kafka does."""
    if view is None:
        return
    for ig in view.ignored:
        if ig.kind != _fs.FILE and ig.kind != _fs.MISSING:
            msg = f"{ig.path}: {ig.reason}: not read"
        elif ig.reason != "not a Kafka log file name":
            msg = f"{ig.path}: ignored: {ig.reason}"
        else:
            continue
        if msg not in _REPORTED:
            _REPORTED.add(msg)
            _warn(msg)


def _refs_of_view(view: Any) -> List[SegmentRef]:
    out = _Segments()
    for sf in view.segments:
        try:
            size = view.fs.size(sf.log)
        except _fs.MissingFileError:
            continue  # deleted since listed (retention)
        out.append(SegmentRef(sf.base_offset, sf.log, size, sf,
                              fs=None if view.fs.is_local() else view.fs))
    return out


def _segment_refs(directory: str, fs: "_fs.FileSystem" = _fs.LOCAL) -> List[SegmentRef]:
    # a store without directories to hold open has no version: nothing replaces a prefix
    # atomically there, and the writer never rewrites a partition in a store
    version = dir_version(directory) if fs.is_local() else None
    try:
        view = _logdir.scan_partition(directory, fs)
    except KafkaStorageError:
        return []
    out = _refs_of_view(view)
    out.version = version
    out.view = view
    return out


def _parse_tp_dir(name: str) -> Optional[Tuple[str, int]]:
    try:
        pd = _files.parse_partition_dir(name)
    except ValueError:
        return None
    if pd.kind:
        return None  # -delete / -future / -stray
    return pd.topic_partition.topic, pd.topic_partition.partition


def _expand(path: str, fs: "_fs.FileSystem" = _fs.LOCAL) -> List[str]:
    if any(c in path for c in "*?["):
        found = fs.glob(path)
        if not found:
            raise FileNotFoundError(f"path {path!r} matches nothing")
        return found
    if fs.kind(path) in (_fs.MISSING, _fs.DANGLING_LINK):
        if not fs.is_local():
            raise KafkaStorageError(
                f"cannot read {path}: no such object, directory or prefix in the store; give "
                "a log root (a broker's log.dirs entry), a <topic>-<partition> directory or a "
                "segment file", path=path, operation="listing")
        raise FileNotFoundError(f"path {path!r} does not exist")
    return [path]


def discover(opts: ReadOptions) -> List[TopicPartitionLog]:
    """Every partition log under ``opts.paths`` that the topic options select, sorted by topic
    and partition."""
    found: List[TopicPartitionLog] = []
    for raw in opts.paths:
        fs = store_of(raw, opts.storage_options)
        _fs_arg = None if fs.is_local() else fs
        if not fs.is_local():
            raw = raw.rstrip("/")
        for path in _expand(raw, fs):
            if fs.is_local():
                path = os.path.abspath(path)
            kind = fs.kind(path)
            if kind != _fs.DIRECTORY:
                sf = _files.parse_segment_file_name(_fs.basename(path))
                if kind != _fs.FILE or sf is None or sf.kind != ".log" or sf.suffix:
                    raise OptionError(
                        f"{path} is neither a directory nor a <20 digits>.log segment file"
                        + ("" if kind == _fs.FILE else f" (it is a {kind})")
                    )
                d = _fs.parent(path)
                tp = _parse_tp_dir(_fs.basename(d))
                files = None
                try:
                    files = next(
                        (s for s in _logdir.scan_partition(d, fs).segments if s.log == path),
                        None,
                    )
                except KafkaStorageError:
                    pass
                seg = SegmentRef(sf.base_offset, path, fs.size(path), files,
                                 fs=None if fs.is_local() else fs)
                found.append(
                    TopicPartitionLog(tp[0] if tp else None, tp[1] if tp else None, d, [seg],
                                      fs=_fs_arg)
                )
                continue
            tp = _parse_tp_dir(_fs.basename(path))
            segs = _segment_refs(path, fs)
            view = getattr(segs, "view", None)
            if tp is not None and (segs or not _has_tp_children(path, fs)):
                if not _holds_log_files(view):
                    _no_kafka_log(path, fs, opts)
                _report_ignored(view)
                found.append(TopicPartitionLog(tp[0], tp[1], path, segs, fs=_fs_arg))
                continue
            here = []
            if segs:  # a directory of segments that is not named <topic>-<partition>
                here.append((view, TopicPartitionLog(None, None, path, segs, fs=_fs_arg)))
            # a log-dir root
            root = _logdir.scan_root(path, fs)
            for ref in root.live_partitions:
                tp = (ref.topic_partition.topic, ref.topic_partition.partition)
                psegs = _segment_refs(ref.path, fs)
                here.append((getattr(psegs, "view", None),
                             TopicPartitionLog(tp[0], tp[1], ref.path, psegs, fs=_fs_arg)))
            if not (root.checkpoints or root.metadata
                    or len(root.partitions) > len(root.live_partitions)  # -delete, -future
                    or any(_holds_log_files(v) for v, _ in here)):
                _no_kafka_log(path, fs, opts)
            for v, t in here:
                _report_ignored(v)
                found.append(t)
    found = [tp for tp in found if _selected(tp, opts)]
    return _dedupe(found, opts.replica_policy)


def _holds_log_files(view: Any) -> bool:
    """Whether a directory's listing (a PartitionView; None: it could not be listed) holds a
    file of Kafka's log: a segment or index, a producer snapshot, a partition checkpoint, or
    a name of the log's grammar (even one that is not a regular file)."""
    if view is None:
        return False
    return bool(
        view.segments or view.orphan_indexes or view.snapshots or view.state_files
        or view.metadata or view.kraft_snapshots
        or any(ig.reason != "not a Kafka log file name" for ig in view.ignored)
    )


def _no_kafka_log(path: str, fs: "_fs.FileSystem", opts: ReadOptions) -> None:
    """Refuse a path under which nothing looks like a Kafka log, as a missing path is refused
    (a stream may start on an empty directory, a mirror that is not synced yet)."""
    if opts.streaming:
        try:
            if not fs.list_dir(path):
                return
        except KafkaStorageError:
            pass
    raise NoKafkaLogError(
        f"no Kafka log under {path}: it holds no <20 digits>.log segment, no "
        "<topic>-<partition> directory with log files and no log-dir checkpoint; give a "
        "log-dir root (a broker's log.dirs entry), a <topic>-<partition> directory or a "
        "segment file"
    )


def _has_tp_children(path: str, fs: "_fs.FileSystem" = _fs.LOCAL) -> bool:
    try:
        return bool(_logdir.scan_root(path, fs).live_partitions)
    except KafkaStorageError:
        return False


def _selected(tp: TopicPartitionLog, opts: ReadOptions) -> bool:
    if opts.subscribe is not None:
        return tp.topic in opts.subscribe
    if opts.assign is not None:
        return tp.topic in opts.assign and tp.partition in opts.assign[tp.topic]
    if tp.topic is not None and _is_internal(tp.topic) and not opts.include_internal_topics:
        return False
    if opts.subscribe_pattern is not None:
        # anywhere in the name, as spark-sql-kafka's SubscribePatternStrategy filters the
        # topic list (Scala Regex.findFirstIn; tests/kafka/test_spark_connector.py)
        return tp.topic is not None and re.search(opts.subscribe_pattern, tp.topic) is not None
    return True


def _real(path: str) -> str:
    return path if _fs.is_uri(path) else os.path.realpath(path)


def _dedupe(found: List[TopicPartitionLog], policy: str) -> List[TopicPartitionLog]:
    by_key: Dict[Any, List[TopicPartitionLog]] = {}
    order = []
    for tp in found:
        k = tp.key if tp.topic is not None else ("\0dir", tp.directory)
        if k not in by_key:
            order.append(k)
            by_key[k] = []
        if all(
            _real(x.directory) != _real(tp.directory)
            or x.segments != tp.segments
            for x in by_key[k]
        ):
            by_key[k].append(tp)
    out = []
    for k in order:
        cands = by_key[k]
        if len(cands) > 1:
            if policy == "error":
                raise OptionError(
                    f"partition {cands[0].name} is present under several paths "
                    f"({', '.join(c.directory for c in cands)}): set option replicaPolicy to "
                    "'first' or 'longest' to pick one"
                )
            if policy == "longest":
                cands = sorted(cands, key=lambda c: (-(c.latest() - c.earliest()), -c.latest()))
        out.append(cands[0])
    out.sort(
        key=lambda t: (
            t.topic is None,
            t.topic or "",
            t.partition if t.partition is not None else -1,
            t.directory,
        )
    )
    return out


# ------------------------------------------------------------------------------------------------
# Offsets
# ------------------------------------------------------------------------------------------------
def _segment_max_timestamp(tp: TopicPartitionLog, seg: SegmentRef) -> int:
    """The largest record timestamp of a segment (ms): the last ``.timeindex`` entry of a closed
    segment (a trimmed index), else a header walk from the last indexed position."""
    entries, trimmed = time_index_entries(seg)
    if entries and trimmed:
        return entries[-1][0]
    best = -1
    start = 0
    if entries:
        best = entries[-1][0]
        idx = offset_index_entries(seg)
        pos = [p for o, p in idx if o <= entries[-1][1]]
        start = pos[-1] if pos else 0
    for h in iter_headers(seg, start):
        if h.max_timestamp > best:
            best = h.max_timestamp
    return best


def position_of_offset(tp: TopicPartitionLog, seg: SegmentRef, target: int) -> Optional[int]:
    """Position of the first entry of ``seg`` holding an offset >= ``target`` (its last offset
    >= target), found like Kafka's ``translateOffset``: index lookup then header walk.  None
    when the segment has no such entry."""
    idx = offset_index_entries(seg)
    i = bisect.bisect_right(idx, (target, 2**62)) - 1
    start = idx[i][1] if i >= 0 else 0
    for h in iter_headers(seg, start):
        if h.last_offset >= target:
            return h.position
    return None


def end_position_of_offset(tp: TopicPartitionLog, seg: SegmentRef, end: int) -> Optional[int]:
    """Position of the first entry of ``seg`` whose offsets are all >= ``end`` (the entry after
    the one holding ``end - 1``); None when every entry of the segment is needed."""
    idx = offset_index_entries(seg)
    i = bisect.bisect_right(idx, (end - 1, 2**62)) - 1
    start = idx[i][1] if i >= 0 else 0
    prev_last = None
    for h in iter_headers(seg, start):
        if h.magic == 2 and h.base_offset >= end:
            return h.position
        if prev_last is not None and prev_last >= end - 1:
            return h.position
        prev_last = h.last_offset
    return None


def offset_for_timestamp(tp: TopicPartitionLog, ts: int) -> Optional[int]:
    """Kafka's ``fetchOffsetByTimestamp`` (:meth:`LogView.offset_for_timestamp`): the earliest
    offset at or after the log start whose record timestamp is >= ``ts`` (>= 0), or None."""
    if not tp.segments:
        return None
    with tp.viewing():
        found = tp._view.offset_for_timestamp(ts)
    return None if found is None else found.offset


@dataclass
class Range:
    tp: TopicPartitionLog
    start: int
    end: int  # exclusive


def _spec_lookup(spec: Any, tp: TopicPartitionLog) -> Optional[int]:
    if isinstance(spec, dict) and tp.topic in spec:
        return spec[tp.topic].get(tp.partition)
    return None


def _check_spec_tps(
    spec: Any, name: str, tps: Sequence[TopicPartitionLog], opts: ReadOptions
) -> None:
    if not isinstance(spec, dict):
        return
    have = {tp.key for tp in tps}
    missing = [f"{t}-{p}" for t, ps in spec.items() for p in ps if (t, p) not in have]
    if missing:
        msg = f"{name} names partitions not found under the path(s) (or not selected): {', '.join(sorted(missing))}"
        if opts.fail_on_data_loss:
            raise OptionError(msg + " (set failOnDataLoss=false to ignore)")
        _warn(msg)


def resolve_start(tp: TopicPartitionLog, opts: ReadOptions) -> int:
    earliest, latest = tp.earliest(), tp.latest(opts.read_committed)
    ts = None
    if opts.starting_timestamp is not None:
        ts = opts.starting_timestamp
    elif opts.starting_by_timestamp is not None:
        ts = _spec_lookup(opts.starting_by_timestamp, tp)
        if ts is None:
            if opts.starting_by_timestamp and tp.topic in opts.starting_by_timestamp:
                raise OptionError(
                    f"startingOffsetsByTimestamp has no entry for partition {tp.name}"
                )
            return earliest if not opts.streaming else latest
    if ts == EARLIEST_TIMESTAMP:
        return earliest
    if ts == LATEST_TIMESTAMP:
        return latest
    if ts is not None:
        off = offset_for_timestamp(tp, ts)
        if off is None:
            if opts.starting_strategy == "latest":
                return latest
            raise OptionError(
                f"No offset matched from request of topic-partition {tp.name} and timestamp {ts}."
            )
        return off
    spec = opts.starting
    if spec is None:
        spec = "latest" if opts.streaming else "earliest"
    if spec == "earliest":
        return earliest
    if spec == "latest":
        return latest
    off = _spec_lookup(spec, tp)
    if off is None:
        return latest if opts.streaming else earliest
    if off == EARLIEST:
        return earliest
    if off == LATEST:
        return latest
    if off < earliest:
        msg = (
            f"Cannot fetch offset {off} of {tp.name}: the earliest available offset is {earliest}. "
            "Some data may have been lost because they are not available any more (deleted by "
            "retention or missing segments)."
        )
        if opts.fail_on_data_loss:
            raise OptionError(
                msg + " If you want your query to fail in this case set failOnDataLoss=true; "
                "to skip the lost data set it to false."
            )
        _warn(msg + " Starting from the earliest offset (failOnDataLoss=false).")
        return earliest
    return off


def resolve_end(tp: TopicPartitionLog, opts: ReadOptions) -> int:
    latest = tp.latest(opts.read_committed)
    ts = None
    if opts.ending_timestamp is not None:
        ts = opts.ending_timestamp
    elif opts.ending_by_timestamp is not None:
        ts = _spec_lookup(opts.ending_by_timestamp, tp)
    if ts == EARLIEST_TIMESTAMP:
        return tp.earliest()
    if ts == LATEST_TIMESTAMP:
        return latest
    if ts is not None:
        off = offset_for_timestamp(tp, ts)
        return latest if off is None else off
    spec = opts.ending
    if spec is None or spec == "latest":
        return latest
    off = _spec_lookup(spec, tp)
    if off is None or off == LATEST:
        return latest
    if off > latest:
        # the connector's consumer cannot fetch up to such an end: data loss
        msg = (
            f"Cannot fetch offset {latest} of {tp.name}: endingOffsets asks for offsets up to "
            f"{off} but "
            + (f"the last stable offset (read_committed) is {latest}"
               if opts.read_committed else f"the log ends at {latest}")
            + ". Some data may have been lost, or the offset was never written."
        )
        if opts.fail_on_data_loss:
            raise OptionError(
                msg + " To read up to that offset instead, set failOnDataLoss=false."
            )
        _warn(msg + " Reading up to the log end (failOnDataLoss=false).")
        return latest
    return off


def check_specs(tps: Sequence[TopicPartitionLog], opts: ReadOptions) -> None:
    """``assign`` and the offset/timestamp JSON options must name partitions that were found."""
    if opts.assign is not None:
        have = {tp.key for tp in tps}
        missing = [f"{t}-{p}" for t, ps in opts.assign.items() for p in ps if (t, p) not in have]
        if missing:
            # the connector fails too (its admin client cannot list offsets of a partition
            # that does not exist)
            raise OptionError(
                f"assign names partitions not found under the path(s): {', '.join(missing)}"
            )
    for spec, name in (
        (opts.starting, "startingOffsets"),
        (opts.ending, "endingOffsets"),
        (opts.starting_by_timestamp, "startingOffsetsByTimestamp"),
        (opts.ending_by_timestamp, "endingOffsetsByTimestamp"),
    ):
        _check_spec_tps(spec, name, tps, opts)


def resolve_ranges(
    tps: Sequence[TopicPartitionLog], opts: ReadOptions, check: bool = True
) -> List[Range]:
    if check:
        check_specs(tps, opts)
    out = []
    for tp in tps:
        with tp.viewing():
            start = resolve_start(tp, opts)
            end = resolve_end(tp, opts)
        if start > end:
            msg = f"starting offset {start} of {tp.name} is after its ending offset {end}"
            if opts.fail_on_data_loss and not opts.streaming:
                raise OptionError(msg)
            start = end
        out.append(Range(tp, start, end))
    return out


# ------------------------------------------------------------------------------------------------
# Splits
# ------------------------------------------------------------------------------------------------
@dataclass
class Piece:
    """Entries of one segment starting in ``[start, end)`` (``end`` None: to the end of the
    file); rows are kept when ``from_offset <= offset < until_offset``."""

    topic: Optional[str]
    partition: Optional[int]
    path: str
    start: int
    end: Optional[int]
    from_offset: int
    until_offset: Optional[int]
    nbytes: int
    directory: str = ""
    version: Optional[DirVersion] = None  # of ``directory`` when planned (see dir_version)
    # the piece ends the partition's last segment: bytes after its last whole entry at or past
    # ``until_offset`` are a torn tail (Kafka's recovery cuts it), not damage
    tail: bool = False


@dataclass
class Split:
    """What one Spark task reads: pieces in (topic, partition, offset) order."""

    index: int
    pieces: List[Piece]

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.pieces)


@dataclass
class Pruning:
    """Restrictions from pushed filters (all optional; exact unless noted)."""

    topics: Optional[set] = None  # allowed topic names
    topic_prefixes: Optional[List[str]] = None
    partitions: Optional[set] = None
    partition_lo: Optional[int] = None  # inclusive
    partition_hi: Optional[int] = None  # inclusive
    offset_lo: Optional[int] = None  # inclusive
    offset_hi: Optional[int] = None  # exclusive
    ts_lo_us: Optional[int] = None  # inclusive (row filter + segment pruning)
    ts_hi_us: Optional[int] = None  # inclusive (row filter only)
    exclude_unknown_tp: bool = False
    empty: bool = False

    def keeps_tp(self, tp: TopicPartitionLog) -> bool:
        if self.empty:
            return False
        if tp.topic is None:
            return (
                not self.exclude_unknown_tp
                and self.topics is None
                and self.topic_prefixes is None
                and self.partitions is None
                and self.partition_lo is None
                and self.partition_hi is None
            )
        if self.topics is not None and tp.topic not in self.topics:
            return False
        if self.topic_prefixes is not None and not all(
            tp.topic.startswith(p) for p in self.topic_prefixes
        ):
            return False
        if self.partitions is not None and tp.partition not in self.partitions:
            return False
        if self.partition_lo is not None and tp.partition < self.partition_lo:
            return False
        if self.partition_hi is not None and tp.partition > self.partition_hi:
            return False
        return True


def _target_bytes(total: int, opts: ReadOptions, pieces: int = 0) -> int:
    """Split size as Spark's file sources pick it: ``min(maxPartitionBytes, max(openCost,
    (bytes + pieces * openCost) / parallelism))``, lowered to ``bytes / minPartitions``.  The
    parallelism is the cluster's when :func:`kafkalog.spark.register` passed it, else the
    number of cores of the planning process (a source found by Spark itself cannot read the
    session's settings)."""
    target = opts.max_partition_bytes
    par = opts.default_parallelism or os.cpu_count() or 1
    with_cost = total + pieces * OPEN_COST_BYTES
    if par > 1:
        target = min(target, max(OPEN_COST_BYTES, -(-with_cost // par)))
    if opts.min_partitions:
        target = min(target, max(1, -(-total // opts.min_partitions)))
    return max(1, target)


def _cut_points(
    tp: TopicPartitionLog, seg: SegmentRef, start: int, end: int, target: int
) -> List[int]:
    """Entry positions in (start, end) about ``target`` bytes apart, from the ``.index`` (or a
    header walk when the segment has no usable index)."""
    idx = offset_index_entries(seg)
    positions = [p for _, p in idx if start < p < end]
    if not positions and end - start > target:
        positions = [h.position for h in iter_headers(seg, start, end) if h.position > start]
    cuts = []
    last = start
    for p in positions:
        if p - last >= target and end - p >= target // 4:
            cuts.append(p)
            last = p
    return cuts


def _pieces_for_range(r: Range, target: int, pruning: Optional[Pruning]) -> List[Piece]:
    tp = r.tp
    start, end = r.start, r.end
    if pruning is not None:
        if pruning.offset_lo is not None:
            start = max(start, pruning.offset_lo)
        if pruning.offset_hi is not None:
            end = min(end, pruning.offset_hi)
    if start >= end:
        return []
    pieces = []
    segs = tp.segments
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
        if nxt is not None and nxt <= start:
            continue
        if seg.base_offset >= end:
            break
        if seg.size == 0:
            continue
        if pruning is not None and pruning.ts_lo_us is not None:
            mx = _segment_max_timestamp(tp, seg)
            if mx >= 0 and mx * 1000 < pruning.ts_lo_us:
                continue
        s_pos = 0
        if start > seg.base_offset:
            p = position_of_offset(tp, seg, start)
            if p is None:
                continue
            s_pos = p
        e_pos = None
        if nxt is None or end < nxt:
            e_pos = end_position_of_offset(tp, seg, end)
        stop = seg.size if e_pos is None else e_pos
        if stop <= s_pos:
            continue
        bounds = [s_pos] + _cut_points(tp, seg, s_pos, stop, target) + [stop]
        for a, b in zip(bounds, bounds[1:]):
            pieces.append(
                Piece(
                    tp.topic,
                    tp.partition,
                    seg.path,
                    a,
                    None if (b == stop and e_pos is None) else b,
                    start,
                    end,
                    b - a,
                    tp.directory,
                    tp.version,
                    nxt is None and b == stop and e_pos is None,
                )
            )
    return pieces


def _replanned(fn):
    """Run a planning step again when a file it read vanished under it (a concurrent write
    swapped a partition directory, retention deleted a segment); after three tries, a
    :class:`ConcurrentWriteError`.  A path the user gave that does not exist is not retried."""
    import functools

    @functools.wraps(fn)
    def run(*args, **kwargs):
        for _attempt in range(3):
            try:
                return fn(*args, **kwargs)
            except OSError as e:  # FileNotFoundError, or storage's KafkaStorageError for one
                if e.errno != errno.ENOENT or e.filename is None:
                    raise
                last = e
        raise ConcurrentWriteError(
            f"the log directories kept changing while this query was planned ({last.filename} "
            "vanished); re-run the query",
            path=last.filename,
        ) from last

    return run


@_replanned
def plan(
    opts: ReadOptions,
    pruning: Optional[Pruning] = None,
    tps: Optional[Sequence[TopicPartitionLog]] = None,
    ranges: Optional[Sequence[Range]] = None,
) -> List[Split]:
    """The splits of a batch read (or of one micro-batch when ``ranges`` is given)."""
    if ranges is None:
        if tps is None:
            tps = discover(opts)
        check_specs(tps, opts)
        if opts.subscribe is not None:
            found = {tp.topic for tp in tps}
            missing = [t for t in opts.subscribe if t not in found]
            if missing:
                # the connector fails too: its admin client cannot describe such a topic
                raise OptionError(
                    f"subscribe names topics not found under the path(s): {', '.join(missing)}"
                )
        if pruning is not None:
            tps = [tp for tp in tps if pruning.keeps_tp(tp)]
        ranges = resolve_ranges(tps, opts, check=False)
    elif pruning is not None:
        ranges = [r for r in ranges if pruning.keeps_tp(r.tp)]
    est = sum(_range_bytes_estimate(r) for r in ranges)
    cut_target = _target_bytes(est, opts)
    pieces: List[Piece] = []
    for r in ranges:
        pieces.extend(_pieces_for_range(r, cut_target, pruning))
    total = sum(p.nbytes for p in pieces)
    target = _target_bytes(total, opts, len(pieces))
    return pack(pieces, target, OPEN_COST_BYTES if not opts.min_partitions else 0)


def _range_bytes_estimate(r: Range) -> int:
    n = 0
    segs = r.tp.segments
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
        if nxt is not None and nxt <= r.start:
            continue
        if seg.base_offset >= r.end:
            break
        n += seg.size
    return n


def pack(pieces: Sequence[Piece], target: int, open_cost: int = OPEN_COST_BYTES) -> List[Split]:
    """Group consecutive pieces into splits of about ``target`` bytes, each piece costing its
    size plus ``open_cost`` (Spark's ``openCostInBytes``), as file splits are packed."""
    splits: List[Split] = []
    cur: List[Piece] = []
    cost = 0
    for p in pieces:
        c = p.nbytes + open_cost
        if cur and cost + c > target:
            splits.append(Split(len(splits), cur))
            cur, cost = [], 0
        cur.append(p)
        cost += c
    if cur:
        splits.append(Split(len(splits), cur))
    return splits


# ------------------------------------------------------------------------------------------------
# Reading a split
# ------------------------------------------------------------------------------------------------
_DECODED = ("key", "value", "offset", "timestamp", "timestampType", "headers")


def _replaced(piece: Piece, why: str) -> ConcurrentWriteError:
    name = piece.directory if piece.topic is None else f"{piece.topic}-{piece.partition}"
    return ConcurrentWriteError(
        f"partition {name} ({piece.directory}) {why} after this query was planned (a concurrent "
        "write replaced or deleted it); nothing of it was returned: re-run the query",
        path=piece.directory,
    )


class _SplitFiles:
    """The files a split reads, one partition directory at a time: the directory is held open
    once (:meth:`kafkalog.storage.fs.FileSystem.open_dir`), checked to be the version the split was
    planned on, and its segments (up to ``EAGER`` of them at once, before anything of it is
    decoded) and, for read_committed, its transaction data are opened through that handle.  A
    directory a concurrent write swaps out afterwards stays readable through these handles, so
    every partition is read wholly from one version; what cannot be had from the planned
    version raises :class:`ConcurrentWriteError`, and a segment deleted in place (retention) is
    data loss under ``failOnDataLoss``."""

    EAGER = 64  # segment files held open per partition directory (the rest are opened late)

    def __init__(self, pieces: Sequence[Piece], opts: ReadOptions) -> None:
        self.opts = opts
        self.paths: Dict[str, List[str]] = {}  # directory -> its segments in this split
        for piece in pieces:
            ps = self.paths.setdefault(self._dirname(piece), [])
            if not ps or ps[-1] != piece.path:
                ps.append(piece.path)
        self.current: Optional[str] = None  # the directory open now
        self.dh: Optional[_fs.DirectoryHandle] = None
        self.files: Dict[str, Optional[_fs.ReadableFile]] = {}
        self.aborted: Optional[List[Tuple[int, int, int]]] = None

    def fs_of(self, path: str) -> "_fs.FileSystem":
        return store_of(path, self.opts.storage_options)

    @staticmethod
    def _dirname(piece: Piece) -> str:
        return piece.directory or _fs.parent(piece.path)

    def _enter(self, piece: Piece) -> None:
        d = self._dirname(piece)
        if d == self.current:
            return
        self.close()
        self.current = d
        if piece.version is not None:
            try:
                self.dh = _fs.LOCAL.open_dir(d)
            except _fs.NotRegularFileError:  # gone, or something else now has its name
                raise _replaced(piece, "disappeared") from None
            if self.dh is not None and _version_of(self.dh) != piece.version:
                raise _replaced(piece, "was replaced")
        for path in self.paths.get(d, [])[: self.EAGER]:
            if path not in self.files:
                self.files[path] = self._open(piece, path)
        if self.opts.read_committed:
            self.aborted = self._aborted(piece, d)

    def _aborted(self, piece: Piece, d: str) -> List[Tuple[int, int, int]]:
        """``(producer_id, first_offset, last_offset)`` of the aborted transactions of the
        directory (the storage read model's: its transaction indexes), read from the version
        the split was planned on."""
        fs = self.fs_of(piece.path)
        try:
            with _LogView.open(d, None if fs.is_local() else fs) as view:
                found = view.collect_aborted_transactions(0, view.log_end_offset)
        except (KafkaStorageError, FileNotFoundError):
            if piece.version is not None and dir_version(d) != piece.version:
                raise _replaced(piece, "was replaced") from None
            raise
        if piece.version is not None and dir_version(d) != piece.version:
            raise _replaced(piece, "was replaced")
        return sorted((t.producer_id, t.first_offset, t.last_offset) for t in found)

    def _open(self, piece: Piece, path: str) -> Optional[_fs.ReadableFile]:
        try:
            if self.dh is None:
                return self.fs_of(path).open_read(path)
            return self.dh.open_read(os.path.basename(path))
        except _fs.MissingFileError:
            if self.dh is not None and dir_version(piece.directory) != piece.version:
                raise _replaced(piece, "was replaced") from None
        name = piece.directory if piece.topic is None else f"{piece.topic}-{piece.partition}"
        upto = "" if piece.until_offset is None else f" up to offset {piece.until_offset - 1}"
        msg = (
            f"segment {path} of {name} was deleted (by retention?) after this query was "
            f"planned: its records from offset {piece.from_offset}{upto} are lost"
        )
        if self.opts.fail_on_data_loss:
            raise DataLossError(
                msg + "; set failOnDataLoss=false to skip them",
                path=path,
                offset=piece.from_offset,
            )
        _warn(msg + "; skipped (failOnDataLoss=false)")
        return None

    def file(self, piece: Piece) -> Optional[_fs.ReadableFile]:
        """The open segment of ``piece`` (None: deleted, skipped under failOnDataLoss=false)."""
        self._enter(piece)
        if piece.path not in self.files:
            # past the eagerly opened ones: keep one late-opened file at a time
            late = [p for p in self.files if p not in self.paths[self.current][: self.EAGER]]
            for p in late:
                f = self.files.pop(p)
                if f is not None:
                    f.close()
            self.files[piece.path] = self._open(piece, piece.path)
        return self.files[piece.path]

    def aborted_for(self, piece: Piece) -> Optional[List[Tuple[int, int, int]]]:
        self._enter(piece)
        return self.aborted

    def __del__(self) -> None:  # a read abandoned half-way (the generator is dropped)
        self.close()

    def close(self) -> None:
        for f in list(self.files.values()) + [self.dh]:
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        self.files.clear()
        self.dh = None
        self.current = None
        self.aborted = None


def read_split(
    split: Split, opts: ReadOptions, target_schema, pruning: Optional[Pruning] = None
) -> Iterator[Any]:
    """Decode a split into ``pyarrow.RecordBatch`` es of exactly ``target_schema`` (the Arrow
    form of the Spark schema; any subset and order of the source's columns)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .. import arrow as ka
    from ..errors import KafkaLogError

    names = list(target_schema.names)
    known = set(KAFKA_COLUMNS) | {"headers", "batch", "segment"}
    for n in names:
        if n not in known:
            raise OptionError(
                f"column {n!r} is not a column of the kafkalog source ({', '.join(sorted(known))})"
            )
    dec_cols = [c for c in _DECODED if c in names]
    for c in ("offset", "position"):  # position: where the walk for damage starts
        if c not in dec_cols:
            dec_cols.append(c)
    if (
        pruning is not None
        and (pruning.ts_lo_us is not None or pruning.ts_hi_us is not None)
        and "timestamp" not in dec_cols
    ):
        dec_cols.append("timestamp")
    want_batch = "batch" in names
    if want_batch:
        dec_cols += [src for _, src, _ in BATCH_FIELDS if src not in dec_cols]
    kw: Dict[str, Any] = {}
    if opts.max_decompressed_size is not None:
        kw["max_decompressed_size"] = opts.max_decompressed_size
    files = _SplitFiles(split.pieces, opts)

    def decode(piece: Piece, start: int, stop: Optional[int]):
        f = files.file(piece)
        if f is None:
            return
        if f.size == 0 or start >= f.size:
            return
        buf = f.map()
        if buf is None:  # a store without local pages: ranged reads, a window at a time
            yield from _decode_windows(piece, f, start, stop)
            return
        try:
            yield from _decode_buffer(piece, buf, start, stop)
        finally:
            del buf
            f.unmap()  # a view still alive (e.g. in a traceback) keeps it until the GC

    def _decode_windows(piece: Piece, f, start: int, stop: Optional[int]):
        """Decode ``[start, stop)`` of a file in a store: windows of whole entries of about
        ``block_size`` bytes, the next fetched while this one decodes (memory: two windows,
        not the piece); positions (in errors and the batch column) are the file's."""
        from ..storage.ranged import entry_windows

        end = f.size if stop is None else min(stop, f.size)
        block = getattr(getattr(getattr(f, "fs", None), "options", None), "block_size",
                        _fs.DEFAULT_BLOCK_SIZE)
        for pos, win in entry_windows(_Ranged(f, end), start, block):
            try:
                for rb in _decode_buffer(piece, win, 0, None):
                    if pos:
                        i = rb.schema.get_field_index("position")
                        rb = rb.set_column(i, rb.schema.field(i), pc.add(rb.column(i), pos))
                    yield rb
            except KafkaLogError as e:
                if e.position is not None:
                    e.position += pos
                raise

    def _decode_buffer(piece: Piece, buf, start: int, stop: Optional[int]):
        aborted = files.aborted_for(piece) if opts.read_committed else None
        return ka.iter_batches(
            buf,
            columns=dec_cols,
            timestamp_unit="us",
            max_rows=opts.max_records_per_batch,
            max_bytes=opts.max_batch_bytes,
            check_crcs=opts.check_crcs,
            read_committed=opts.read_committed,
            aborted_transactions=aborted,
            start_position=start,
            stop_position=stop,
            **kw,
        )

    def piece_batches(piece: Piece) -> Iterator[Any]:
        # open first, outside the corrupt-data handling below: a replaced directory or a
        # deleted segment is not corrupt data
        f = files.file(piece)
        if f is None:
            return
        planned = piece.start + piece.nbytes
        if f.size < planned:
            # cut short (or replaced by a shorter object) since planning: what was planned
            # past its end is gone; never passed off as the whole piece
            name = piece.directory if piece.topic is None else f"{piece.topic}-{piece.partition}"
            msg = (f"segment {piece.path} of {name} is {f.size} bytes, shorter than the "
                   f"{planned} bytes planned: it was truncated or replaced after this query was "
                   f"planned, and records from offset {piece.from_offset} on may be lost")
            if opts.fail_on_data_loss:
                raise DataLossError(msg + "; set failOnDataLoss=false to read what is left",
                                    path=piece.path, offset=piece.from_offset)
            _warn(msg + "; reading what is left (failOnDataLoss=false)")
        def last_position(rb, at: int) -> int:
            return rb.column("position")[-1].as_py() if rb.num_rows else at

        if opts.fail_on_data_loss:
            try:
                at = piece.start
                for rb in decode(piece, piece.start, piece.end):
                    at = last_position(rb, at)
                    yield rb
                damage = _damage_in(piece, files.file(piece), at, files.fs_of(piece.path))
                if damage is not None:
                    raise CorruptRecordError(damage[2], damage[0], damage[1], piece.path)
            except KafkaLogError as e:
                try:
                    err = type(e)(
                        f"{e.message} [set failOnDataLoss=false to skip corrupt batches]",
                        e.position,
                        e.offset,
                        e.path or piece.path,
                    )
                except Exception:
                    raise e from None
                raise err from e
            return
        restart: Optional[int] = piece.start
        last_yielded = None

        def fresh(rb):
            nonlocal last_yielded
            if last_yielded is not None:
                rb = rb.filter(pc.greater(rb.column("offset"), pa.scalar(last_yielded, pa.int64())))
            if rb.num_rows:
                last_yielded = rb.column("offset")[-1].as_py()
            return rb

        while restart is not None:
            at = restart
            try:
                for rb in decode(piece, restart, piece.end):
                    at = last_position(rb, at)
                    rb = fresh(rb)
                    if rb.num_rows:
                        yield rb
                f = files.file(piece)
                damage = _damage_in(piece, f, at, files.fs_of(piece.path))
                if damage is None:
                    return
                bad, why = damage[0], damage[2]
                size = None
            except KafkaLogError as e:
                bad, why = e.position, str(e)
                f = files.file(piece)
                size = _entry_size(f, bad) if bad is not None and f is not None else None
                if bad is None or bad < restart:
                    _warn(f"skipping corrupt data in {piece.path} at position {bad}: {why} "
                          "(failOnDataLoss=false)")
                    return
                # re-decode the good entries before the bad one, then go on after it
                if bad > restart:
                    try:
                        for rb in decode(piece, restart, bad):
                            rb = fresh(rb)
                            if rb.num_rows:
                                yield rb
                    except KafkaLogError:
                        pass
            stop = f.size if piece.end is None else min(piece.end, f.size)
            if size is not None and bad + size <= stop:
                restart = bad + size  # one whole entry that does not decode: skip it
            else:  # framing lost: go on at the next offset index entry of the segment
                restart = _resync(piece, bad, stop, files.fs_of(piece.path))
            _warn(f"skipping corrupt data in {piece.path} at position {bad}: {why}; reading on "
                  + ("at the end of the segment" if restart is None else f"at position {restart}")
                  + " (failOnDataLoss=false)")
            if restart is not None and restart >= stop:
                return

    ts_lo = ts_hi = None
    if pruning is not None:
        ts_lo, ts_hi = pruning.ts_lo_us, pruning.ts_hi_us
    schema_types = {f.name: f.type for f in target_schema}
    for piece in split.pieces:
        for rb in piece_batches(piece):
            n = rb.num_rows
            if n == 0:
                continue
            offs = rb.column("offset")
            lo = piece.from_offset
            hi = piece.until_offset
            mm = pc.min_max(offs)
            mn, mx = mm["min"].as_py(), mm["max"].as_py()
            if hi is not None and mn >= hi:
                break
            mask = None
            if mn < lo or (hi is not None and mx >= hi):
                mask = pc.greater_equal(offs, pa.scalar(lo, pa.int64()))
                if hi is not None:
                    mask = pc.and_(mask, pc.less(offs, pa.scalar(hi, pa.int64())))
            if ts_lo is not None or ts_hi is not None:
                ts = rb.column("timestamp").cast(pa.int64())
                m2 = None
                if ts_lo is not None:
                    m2 = pc.greater_equal(ts, pa.scalar(ts_lo, pa.int64()))
                if ts_hi is not None:
                    m3 = pc.less_equal(ts, pa.scalar(ts_hi, pa.int64()))
                    m2 = m3 if m2 is None else pc.and_(m2, m3)
                mask = m2 if mask is None else pc.and_(mask, m2)
            if mask is not None:
                rb = rb.filter(mask)
                n = rb.num_rows
                if n == 0:
                    continue
            arrays = []
            for f in target_schema:
                name = f.name
                if name == "topic":
                    a = (
                        pa.nulls(n, pa.string())
                        if piece.topic is None
                        else pa.repeat(pa.scalar(piece.topic, pa.string()), n)
                    )
                elif name == "partition":
                    a = (
                        pa.nulls(n, pa.int32())
                        if piece.partition is None
                        else pa.repeat(pa.scalar(piece.partition, pa.int32()), n)
                    )
                elif name == "segment":
                    a = pa.repeat(pa.scalar(piece.path, pa.string()), n)
                elif name == "batch":
                    a = pa.StructArray.from_arrays(
                        [rb.column(src) for _, src, _ in BATCH_FIELDS],
                        fields=list(_batch_type()),
                    )
                else:
                    a = rb.column(name)
                t = schema_types[name]
                if a.type != t:
                    a = a.cast(t)
                arrays.append(a)
            yield pa.RecordBatch.from_arrays(arrays, schema=target_schema)
    files.close()


def _damage_in(piece: Piece, f: Optional["_fs.ReadableFile"], at: int,
               fs: "_fs.FileSystem") -> Optional[Tuple[int, Optional[int], str]]:
    """``(position, offset, why)`` of the first entry of ``piece`` from the entry at ``at`` on
    that cannot be framed (a size past the piece's end or below the minimum, an unknown
    magic), None when its entries are whole up to its end; a torn tail of the partition's last
    segment past the offsets read is not damage (Kafka's recovery cuts it)."""
    if f is None:
        return None
    stop = f.size if piece.end is None else min(piece.end, f.size)
    if at >= stop:
        return None
    sf = _files.parse_segment_file_name(_fs.basename(piece.path))
    base = sf.base_offset if sf is not None else 0
    sg = _logdir.open_segment(_logdir.SegmentFiles(base, piece.path, None, None, None), f,
                              None if fs.is_local() else fs)
    end = at
    try:
        for h in sg.iter_headers(at, stop):
            end = h.position + h.size
    except CorruptRecordError as e:
        return e.position, e.offset, e.message
    finally:
        sg.close_handlers()
    if end >= stop:
        return None
    head = f.read(end, 12)
    offset = _ENTRY.unpack_from(head, 0)[0] if len(head) >= 12 else None
    if piece.tail and (offset is None or piece.until_offset is None
                       or offset >= piece.until_offset):
        return None
    claim = (f"the entry claims {_ENTRY.unpack_from(head, 0)[1]} bytes"
             if offset is not None else "a partial entry header")
    return end, offset, (f"Corrupt batch in {piece.path} at position {end}: {claim} in a "
                         f"segment of {f.size} bytes, and the log goes on after it, so the read "
                         "stops here rather than leave out what follows")


def _resync(piece: Piece, bad: int, stop: int, fs: "_fs.FileSystem") -> Optional[int]:
    """The first offset index entry of ``piece``'s segment after ``bad`` and before ``stop``
    (where a plan of more splits may also start a piece), None when there is none."""
    try:
        view = _logdir.scan_partition(piece.directory or _fs.parent(piece.path), fs)
    except KafkaStorageError:
        return None
    sf = next((s for s in view.segments if s.log == piece.path), None)
    if sf is None:
        return None
    ref = SegmentRef(sf.base_offset, sf.log, stop, sf, fs=None if fs.is_local() else fs)
    return next((p for _o, p in offset_index_entries(ref) if bad < p < stop), None)


class _Ranged:
    """The first ``size`` bytes of an open file in a store (what one piece may read)."""

    def __init__(self, f: "_fs.ReadableFile", size: int) -> None:
        self.f = f
        self.size = size

    def fetch(self, position: int, length: int) -> bytes:
        length = max(0, min(length, self.size - position))
        fetch = getattr(self.f, "fetch", None) or self.f.read
        return fetch(position, length) if length else b""


def _entry_size(f: "_fs.ReadableFile", position: int) -> Optional[int]:
    try:
        head = f.read(position, 12)
    except (OSError, ValueError):
        return None
    if len(head) < 12:
        return None
    size = _ENTRY.unpack_from(head, 0)[1]
    if size < 14:
        return None
    return size + 12


# ------------------------------------------------------------------------------------------------
# Streaming offsets
# ------------------------------------------------------------------------------------------------
def offsets_json(offsets: Mapping[Tuple[str, int], int]) -> Dict[str, Dict[str, int]]:
    """``{(topic, partition): offset}`` -> the connector's ``{"topic": {"0": offset}}``."""
    out: Dict[str, Dict[str, int]] = {}
    for (t, p), off in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(off)
    return out


def offsets_from_json(obj: Any) -> Dict[Tuple[str, int], int]:
    if isinstance(obj, str):
        obj = json.loads(obj)
    out = {}
    for t, ps in (obj or {}).items():
        for p, off in ps.items():
            out[(t, int(p))] = int(off)
    return out


def rate_limit(
    start: Mapping[Tuple[str, int], int], end: Mapping[Tuple[str, int], int], limit: int
) -> Dict[Tuple[str, int], int]:
    """The connector's ``rateLimit``: ``limit`` offsets spread over the partitions in
    proportion to what each has available."""
    sizes = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(sizes.values())
    if total <= limit or total == 0:
        return dict(end)
    out = {}
    for tp, e in end.items():
        b = start.get(tp, e)
        size = sizes[tp]
        prorate = limit * (size / total)
        off = b + (math.ceil(prorate) if prorate < 1 else math.floor(prorate))
        out[tp] = min(e, off)
    return out
