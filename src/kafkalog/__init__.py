"""kafkalog: Apache Kafka's on-disk log (segments, indexes, record batches of every format).

``kafkalog.IMPLEMENTATION`` says which twin is loaded: ``"cython"`` (compiled) or ``"python"``
(forced with ``KAFKALOG_PURE_PYTHON=1``).  ``import kafkalog`` never imports pyarrow or pyspark.
"""
from __future__ import annotations

from . import errors
from ._format import CompressionType, TimestampType
from ._speedups import FALLBACK_REASON, IMPLEMENTATION
from ._version import __version__
from .errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    CorruptSnapshotError,
    DecompressedSizeError,
    DecompressionError,
    InvalidOffsetError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTopicError,
    InvalidTxnStateError,
    KafkaLogError,
    KafkaStorageError,
    LogLockedError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    TransactionCoordinatorFencedError,
    UnsafePathError,
    UnsupportedCompressionError,
)
from .records import (
    LegacyRecord,
    LegacyRecordBatch,
    MemoryRecords,
    MemoryRecordsBuilder,
    Record,
    RecordBatch,
)

__all__ = (
    "__version__",
    "IMPLEMENTATION",
    "dataset",
    "FALLBACK_REASON",
    "CompressionType",
    "TimestampType",
    "MemoryRecords",
    "MemoryRecordsBuilder",
    "RecordBatch",
    "Record",
    "LegacyRecordBatch",
    "LegacyRecord",
    "errors",
    "KafkaLogError",
    "CorruptRecordError",
    "InvalidRecordError",
    "DecompressionError",
    "DecompressedSizeError",
    "UnsupportedCompressionError",
    "CorruptIndexError",
    "InvalidOffsetError",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
    "CorruptCheckpointError",
    "CorruptSnapshotError",
    "LogLockedError",
    "KafkaStorageError",
    "InvalidTopicError",
    "UnsafePathError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "TransactionCoordinatorFencedError",
    # storage engine (imported on first use)
    "Log",
    "LogConfig",
    "LogAppendInfo",
    "Segment",
    "OffsetIndex",
    "TimeIndex",
    "TransactionIndex",
    "Cleaner",
    "CleanerConfig",
    # the read model every reader asks (offsets, batches, damage, LSO, aborted transactions)
    "LogView",
    "open_view",
)

# The storage engine is imported on first use, so `import kafkalog` stays light for codec users.
_LAZY = {
    "Log": "storage.log",
    "LogConfig": "storage.log",
    "LogAppendInfo": "storage.log",
    "Segment": "storage.segment",
    "OffsetIndex": "storage.index",
    "TimeIndex": "storage.index",
    "TransactionIndex": "storage.txn_index",
    "Cleaner": "storage.cleaner",
    "CleanerConfig": "storage.cleaner",
    "LogView": "storage.log_view",
    "open_view": "storage.log",
}


def dataset(source, **options):
    """Kafka logs as a lazy :class:`pyarrow.dataset.Dataset` that DuckDB, Polars and pyarrow
    scan with projection and filter pushdown: :func:`kafkalog.dataset.dataset` (needs pyarrow,
    imported on this first call)."""
    import importlib

    # importing the submodule binds it as this package's ``dataset`` attribute; it is callable
    return importlib.import_module(".dataset", __name__).dataset(source, **options)


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'kafkalog' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
