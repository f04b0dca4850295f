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
    CorruptIndexError,
    CorruptRecordError,
    DecompressedSizeError,
    DecompressionError,
    InvalidOffsetError,
    InvalidRecordError,
    KafkaLogError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
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
)
