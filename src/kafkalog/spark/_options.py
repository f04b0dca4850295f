"""The options of the ``kafkalog`` Spark data source (the spark-sql-kafka connector's names,
plus kafkalog's own; see docs/spark.md): which are known, ignored or refused, and their parsed,
validated form, :class:`ReadOptions`."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Container, Dict, List, Mapping, Optional

from . import _store_clients
from ._columns import parse_columns
from ._errors import OptionError
from ._errors import warn as _warn
from ._local_paths import UnsupportedPathError, local_path
from ._pattern import java_regex

MiB = 1024 * 1024
DEFAULT_MAX_PARTITION_BYTES = 256 * MiB
OPEN_COST_BYTES = 4 * MiB  # what a split pays per segment piece, as Spark's openCostInBytes
DEFAULT_MAX_RECORDS_PER_BATCH = 65536
DEFAULT_MAX_BATCH_BYTES = 64 * MiB

EARLIEST = -2
LATEST = -1


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
    "columns",
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
        "maxBatchBytes maxDecompressedSize defaultParallelism columns groupIdPrefix "
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
            continue  # storage.*: the store's options (kafkalog.spark._object_stores)
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


def parse_bool(opts: Mapping[str, Any], key: str, default: Optional[bool], *,
               name: Optional[str] = None, error: Optional[type] = None) -> Optional[bool]:
    """The boolean option ``key`` (lower-cased): true/1/yes/on or false/0/no/off, any case.
    ``error`` (:class:`OptionError`) names the option as ``name`` (``key``) otherwise; the
    sink parses its options with it too (:mod:`kafkalog.spark._write_options`)."""
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
    raise (error or OptionError)(f"option {name or key!r} must be true or false, not {v!r}")


def parse_int(opts: Mapping[str, Any], key: str, default: Optional[int], lo: int = 0,
              hi: Optional[int] = None, *, name: Optional[str] = None,
              error: Optional[type] = None) -> Optional[int]:
    """The integer option ``key`` (lower-cased), at least ``lo`` (and with ``hi``, in
    ``lo..hi``).  ``error`` (:class:`OptionError`) names the option as ``name`` (``key``) and
    what it accepts otherwise; the sink parses its options with it too."""
    v = opts.get(key)
    if v is None:
        return default
    error = error or OptionError
    name = name or key
    try:
        n = int(str(v).strip())
    except ValueError:
        want = "an integer" if hi is None else f"an integer in {lo}..{hi}"
        raise error(f"option {name!r} must be {want}, not {v!r}") from None
    if hi is None:
        if n < lo:
            raise error(f"option {name!r} must be >= {lo}, not {n}")
    elif not lo <= n <= hi:
        raise error(f"option {name!r} must be in {lo}..{hi}, not {n}")
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
        if _store_clients.is_remote(p):
            out.append(p)  # an object store or HDFS: read by kafkalog.spark._object_stores
            continue
        try:
            out.append(local_path(p))
        except UnsupportedPathError as e:
            raise OptionError(str(e)) from e
    remote = [p for p in paths if _store_clients.is_remote(p)]
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
    #: the ``columns`` option: the only columns of the source's schema (None: all of them)
    columns: Optional[List[str]] = None
    ignored: List[str] = field(default_factory=list)
    # ``storage.*`` options: how to reach an object store or HDFS
    # (kafkalog.storage.store_fs.resolve)
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
                    "Pattern to subscribe is empty as specified value for option "
                    "'subscribePattern' is ''"
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
                                f"startingOffsets for {t}-{p} can't be latest for batch "
                                "queries on Kafka"
                            )
            if isinstance(ending, dict):
                for t, ps in ending.items():
                    for p, off in ps.items():
                        if off == EARLIEST:
                            raise OptionError(
                                f"endingOffsets for {t}-{p} can't be earliest for batch "
                                "queries on Kafka"
                            )
        for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
            if isinstance(spec, dict):
                for t, ps in spec.items():
                    for p, off in ps.items():
                        if off < -2:
                            raise OptionError(
                                f"{name} for {t}-{p}: offset {off} is not valid "
                                "(use -2 earliest, -1 latest)"
                            )
        if isinstance(starting, dict) and isinstance(ending, dict):
            _check_start_end(starting, ending)
        mn = parse_int(opts, "minoffsetspertrigger", None)
        mx = parse_int(opts, "maxoffsetspertrigger", None, lo=1)
        if mn is not None and mx is not None and mn > mx:
            raise OptionError(
                f"The value of minOffsetPerTrigger({mn}) is higher than the "
                f"maxOffsetsPerTrigger({mx})."
            )
        min_parts = parse_int(opts, "minpartitions", None, lo=1)
        iso = str(opts.get("kafka.isolation.level", "read_uncommitted")).strip().lower()
        if iso not in ("read_uncommitted", "read_committed"):
            raise OptionError(
                "option 'kafka.isolation.level' must be read_uncommitted or read_committed, "
                f"not {iso!r}"
            )
        policy = str(opts.get("replicapolicy", "error")).strip().lower()
        if policy not in ("error", "first", "longest"):
            raise OptionError(
                f"option 'replicaPolicy' must be error, first or longest, not {policy!r}"
            )
        dp = default_parallelism
        if opts.get("defaultparallelism") is not None:
            dp = parse_int(opts, "defaultparallelism", None, lo=1)
        include_headers = parse_bool(opts, "includeheaders", False)
        batch_metadata = parse_bool(opts, "includebatchmetadata", False)
        segment_metadata = parse_bool(opts, "includesegmentmetadata", False)
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
            fail_on_data_loss=parse_bool(opts, "failondataloss", True),
            min_partitions=min_parts,
            max_offsets_per_trigger=parse_int(opts, "maxoffsetspertrigger", None, lo=1),
            include_headers=include_headers,
            read_committed=(iso == "read_committed"),
            max_partition_bytes=parse_int(
                opts, "maxpartitionbytes", DEFAULT_MAX_PARTITION_BYTES, lo=1
            ),
            include_internal_topics=parse_bool(opts, "includeinternaltopics", False),
            replica_policy=policy,
            include_batch_metadata=batch_metadata,
            include_segment_metadata=segment_metadata,
            check_crcs=parse_bool(opts, "checkcrcs", True),
            max_records_per_batch=parse_int(
                opts, "maxrecordsperbatch", DEFAULT_MAX_RECORDS_PER_BATCH, lo=1
            ),
            max_batch_bytes=parse_int(opts, "maxbatchbytes", DEFAULT_MAX_BATCH_BYTES, lo=1),
            max_decompressed_size=parse_int(opts, "maxdecompressedsize", None, lo=1),
            default_parallelism=dp,
            streaming=streaming,
            columns=parse_columns(opts, include_headers, batch_metadata, segment_metadata),
            ignored=ignored,
            storage_options=_storage_options(opts),
        )


def _storage_options(opts: Mapping[str, Any]) -> Dict[str, Any]:
    try:
        return _store_clients.storage_options(opts)
    except ValueError as e:
        raise OptionError(str(e)) from None


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
