"""Public record classes, bound once to the twin chosen in ``_speedups``."""
from __future__ import annotations

from ._speedups import batch as _batch
from ._speedups import legacy as _legacy

MemoryRecords = _batch.MemoryRecords
MemoryRecordsBuilder = _batch.MemoryRecordsBuilder
RecordBatch = _batch.RecordBatch
Record = _batch.Record
LegacyRecordBatch = _legacy.LegacyRecordBatch
LegacyRecord = _legacy.LegacyRecord

__all__ = [
    "MemoryRecords",
    "MemoryRecordsBuilder",
    "RecordBatch",
    "Record",
    "LegacyRecordBatch",
    "LegacyRecord",
]
