"""A topic's log configuration: :class:`LogConfig`, Kafka's topic-config keys with their
defaults and validation (Kafka's ``LogConfig``).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .._format import INT32_MAX, CompressionType, TimestampType
from ._log_common import (
    LONG_MAX,
)


# ------------------------------------------------------------------------------------------------
# LogConfig
# ------------------------------------------------------------------------------------------------
def _parse_long(key: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool):
        raise ValueError(f"Invalid value {v!r} for configuration {key}: expected an integer")
    if isinstance(v, str):
        try:
            v = int(v.strip())
        except ValueError:
            raise ValueError(f"Invalid value {v!r} for configuration {key}: not a number") from None
    if not isinstance(v, int):
        raise ValueError(f"Invalid value {v!r} for configuration {key}: expected an integer")
    if v < lo or v > hi:
        raise ValueError(
            f"Invalid value {v} for configuration {key}: Value must be in [{lo}, {hi}]"
        )
    return v


def _parse_bool(key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise ValueError(
        f"Invalid value {v!r} for configuration {key}: Expected value to be either true or false"
    )


def _parse_double(key: str, v: Any, lo: float, hi: float) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"Invalid value {v!r} for configuration {key}: not a number") from None
    if not lo <= f <= hi:
        raise ValueError(
            f"Invalid value {f} for configuration {key}: Value must be in [{lo}, {hi}]"
        )
    return f


_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = {"createtime": "CreateTime", "logappendtime": "LogAppendTime"}


def _parse_policy(key: str, v: Any) -> Tuple[str, ...]:
    items = v.split(",") if isinstance(v, str) else list(v)
    out = []
    for item in items:
        item = str(item).strip().lower()
        if not item:
            continue
        if item not in ("compact", "delete"):
            raise ValueError(
                f"Invalid value {item} for configuration {key}: "
                "String must be one of: compact, delete"
            )
        if item not in out:
            out.append(item)
    return tuple(out)


def _parse_str_choice(key: str, v: Any, choices) -> str:
    s = str(v).strip()
    if s.lower() not in choices:
        raise ValueError(
            f"Invalid value {s} for configuration {key}: "
            f"String must be one of: {', '.join(choices)}"
        )
    return s.lower()


def _parse_ts_type(key: str, v: Any) -> str:
    if isinstance(v, TimestampType):
        v = v.kafka_name
    s = str(v).strip().replace("_", "").lower()
    if s not in _TIMESTAMP_TYPES:
        raise ValueError(
            f"Invalid value {v} for configuration {key}: "
            "String must be one of: CreateTime, LogAppendTime"
        )
    return _TIMESTAMP_TYPES[s]


def _long(lo: int = -(2**63), hi: int = LONG_MAX):
    return lambda k, v: _parse_long(k, v, lo, hi)


def _int(lo: int = -(2**31), hi: int = INT32_MAX):
    return lambda k, v: _parse_long(k, v, lo, hi)


def _str(k: str, v: Any) -> str:
    return "" if v is None else str(v)


# key -> (default, parser).  Kafka's TopicConfig / LogConfig at the spec snapshot.
_CONFIG_DEFS: Dict[str, Tuple[Any, Callable[[str, Any], Any]]] = {
    "cleanup.policy": (("delete",), _parse_policy),
    "compression.type": ("producer", lambda k, v: _parse_str_choice(k, v, _COMPRESSION_TYPES)),
    "compression.gzip.level": (-1, _int(-1, 9)),
    "compression.lz4.level": (9, _int(1, 17)),
    "compression.zstd.level": (3, _int(-131072, 22)),
    "delete.retention.ms": (86400000, _long(0)),
    "file.delete.delay.ms": (60000, _long(0)),
    "flush.messages": (LONG_MAX, _long(1)),
    "flush.ms": (LONG_MAX, _long(0)),
    "follower.replication.throttled.replicas": ("", _str),
    "index.interval.bytes": (4096, _int(0)),
    "leader.replication.throttled.replicas": ("", _str),
    "local.retention.bytes": (-2, _long(-2)),
    "local.retention.ms": (-2, _long(-2)),
    "max.compaction.lag.ms": (LONG_MAX, _long(1)),
    "max.message.bytes": (1048588, _int(0)),
    "message.downconversion.enable": (True, _parse_bool),
    "message.format.version": ("3.0-IV1", _str),
    "message.timestamp.after.max.ms": (LONG_MAX, _long(0)),
    "message.timestamp.before.max.ms": (LONG_MAX, _long(0)),
    "message.timestamp.difference.max.ms": (LONG_MAX, _long(0)),
    "message.timestamp.type": ("CreateTime", _parse_ts_type),
    "min.cleanable.dirty.ratio": (0.5, lambda k, v: _parse_double(k, v, 0.0, 1.0)),
    "min.compaction.lag.ms": (0, _long(0)),
    "min.insync.replicas": (1, _int(1)),
    "preallocate": (False, _parse_bool),
    "remote.storage.enable": (False, _parse_bool),
    "remote.log.copy.disable": (False, _parse_bool),
    "remote.log.delete.on.disable": (False, _parse_bool),
    "retention.bytes": (-1, _long()),
    "retention.ms": (604800000, _long(-1)),
    "segment.bytes": (1073741824, _int(14)),
    "segment.index.bytes": (10485760, _int(4)),
    "segment.jitter.ms": (0, _long(0)),
    "segment.ms": (604800000, _long(1)),
    "unclean.leader.election.enable": (False, _parse_bool),
}


class LogConfig:
    """A topic's log configuration: Kafka's topic-config keys with Kafka's defaults.

    ``LogConfig({"segment.bytes": 1 << 20, "cleanup.policy": "compact"})``, or keyword
    arguments with dots spelled as underscores (``LogConfig(segment_bytes=1 << 20)``).  Values
    may be strings, as in a ``.properties`` file.  Every key is an attribute with dots replaced
    by underscores (``config.segment_bytes``); unknown keys and invalid values raise ValueError.
    """

    __slots__ = ("_values", "_originals")

    def __init__(self, props: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> None:
        originals: Dict[str, Any] = {}
        for k, v in (props or {}).items():
            originals[str(k).strip()] = v
        for k, v in kwargs.items():
            originals[k.replace("_", ".")] = v
        values = {}
        for key, (default, parse) in _CONFIG_DEFS.items():
            values[key] = parse(key, originals[key]) if key in originals else default
        unknown = sorted(set(originals) - set(_CONFIG_DEFS))
        if unknown:
            raise ValueError(f"Unknown topic config name: {', '.join(unknown)}")
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_originals", originals)

    @classmethod
    def from_properties(cls, props: Optional[Mapping[str, Any]] = None) -> "LogConfig":
        return cls(props)

    def __getattr__(self, name: str) -> Any:
        key = name.replace("_", ".")
        values = object.__getattribute__(self, "_values")
        if key in values:
            return values[key]
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LogConfig is immutable; use with_overrides()")

    def get(self, key: str) -> Any:
        """The value of a dotted Kafka key."""
        return self._values[key]

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    @property
    def originals(self) -> Dict[str, Any]:
        """The keys that were set explicitly."""
        return dict(self._originals)

    def to_properties(self, include_defaults: bool = False) -> Dict[str, Any]:
        if include_defaults:
            return dict(self._values)
        return {k: self._values[k] for k in self._originals}

    def with_overrides(
        self, props: Optional[Mapping[str, Any]] = None, **kwargs: Any
    ) -> "LogConfig":
        merged = dict(self._originals)
        merged.update(props or {})
        merged.update({k.replace("_", "."): v for k, v in kwargs.items()})
        return LogConfig(merged)

    # -- derived (Kafka's LogConfig getters) -------------------------------------------------------
    @property
    def compact(self) -> bool:
        return "compact" in self._values["cleanup.policy"]

    @property
    def delete(self) -> bool:
        return "delete" in self._values["cleanup.policy"]

    @property
    def segment_size(self) -> int:
        return self._values["segment.bytes"]

    @property
    def max_index_size(self) -> int:
        return self._values["segment.index.bytes"]

    @property
    def max_message_size(self) -> int:
        return self._values["max.message.bytes"]

    @property
    def flush_interval(self) -> int:
        return self._values["flush.messages"]

    @property
    def retention_size(self) -> int:
        return self._values["retention.bytes"]

    @property
    def initial_file_size(self) -> int:
        return self._values["segment.bytes"] if self._values["preallocate"] else 0

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self._values["message.timestamp.type"] == "LogAppendTime"
            else TimestampType.CREATE_TIME
        )

    @property
    def timestamp_before_max_ms(self) -> int:
        """``message.timestamp.before.max.ms``, or the deprecated difference when unset."""
        v = self._values["message.timestamp.before.max.ms"]
        return v if v != LONG_MAX else self._values["message.timestamp.difference.max.ms"]

    @property
    def timestamp_after_max_ms(self) -> int:
        v = self._values["message.timestamp.after.max.ms"]
        return v if v != LONG_MAX else self._values["message.timestamp.difference.max.ms"]

    @property
    def target_compression(self) -> Optional[CompressionType]:
        """The codec written to the log (None: keep the producer's)."""
        c = self._values["compression.type"]
        if c == "producer":
            return None
        if c == "uncompressed":
            return CompressionType.NONE
        return CompressionType.parse(c)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogConfig):
            return NotImplemented
        return self._values == other._values

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"LogConfig({self.to_properties()!r})"
