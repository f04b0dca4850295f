"""The options of the ``kafkalog`` sink (docs/spark.md): their parsing, and the checks the
driver makes before a write job runs (the save mode, the columns, the topic).  A value every
task would refuse is refused here, with a :class:`WriteOptionError` naming the option and what
it accepts, before anything is written."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .._format import INT32_MAX, CompressionType
from ..storage import files as _files
from . import _errors, _options
from ._local_paths import local_path

GiB = 1024 * 1024 * 1024


class WriteError(ValueError):
    """The rows cannot be written as asked (raised in a task or at commit)."""


class WriteOptionError(WriteError, _errors.OptionError):
    """A write option the sink refuses, raised on the driver when the options are parsed
    (before any task runs or anything is written); it names the option and what it accepts.
    The source's option error (:class:`~kafkalog.spark._errors.OptionError`) and a
    :class:`WriteError` both."""


# compressionLevel, per codec (kafkalog.compression's ranges, Kafka's compression.<codec>.level)
_LEVELS = {
    "gzip": (lambda n: n == -1 or 1 <= n <= 9, "-1 (the codec's default) or 1..9"),
    "lz4": (lambda n: 1 <= n <= 17, "1..17"),
    "zstd": (lambda n: -131072 <= n <= 22, "-131072..22"),
}


def check_topic(topic: str) -> None:
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
    return _options.parse_int(o, key, default, lo, hi, name=_opt_name(key),
                              error=WriteOptionError)


def _opt_bool(o: Mapping[str, Any], key: str, default: Optional[bool]) -> Optional[bool]:
    return _options.parse_bool(o, key, default, name=_opt_name(key), error=WriteOptionError)


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
    store's (:mod:`kafkalog.spark._object_stores`)."""
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


def check_save_mode(opts: "WriteOptions", mode: str) -> bool:
    """Before a job (driver): False when ``ignore`` finds the target already there (the job
    then writes nothing); raises WriteError when ``errorifexists`` does.  As Spark's file
    sources, a target that exists at all counts, even an empty directory."""
    if mode in ("errorifexists", "ignore") and os.path.lexists(opts.path):
        if mode == "ignore":
            return False
        raise WriteError(exists_message(opts.path))
    return True


def exists_message(path: str) -> str:
    """What a job refused by ``errorifexists`` says (before the job, or at its commit)."""
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
        check_topic(opts.topic)

