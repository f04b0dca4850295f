"""Kafka's default partitioner, for every writer that routes records to partitions: murmur2
(``Utils.murmur2``) and ``toPositive(murmur2(key)) % numPartitions`` (``BuiltInPartitioner``
for keyed records).

Kafka's producer spreads records without a key arbitrarily (the sticky partitioner); kafkalog's
writers hash such a record's value instead (:func:`partition_of`), so that a retried Spark stage
routes every row as its first attempt did."""
from __future__ import annotations

from typing import Any

__all__ = ["murmur2", "default_partition", "partition_of"]

_M = 0x5BD1E995
_SEED = 0x9747B28C


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (signed 32-bit result)."""
    m = _M
    length = len(data)
    h = (_SEED ^ length) & 0xFFFFFFFF
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


def partition_of(key: Any, value: Any, num_partitions: int) -> int:
    """The partition of a record that names none: Kafka's default partitioner on its key, or,
    for a record without a key, the same hash of its value (an absent value hashes as empty
    bytes).  A key or value may be bytes, a ``str`` (hashed as UTF-8) or anything ``bytes()``
    accepts."""
    if key is None:
        key = value if value is not None else b""
    if not isinstance(key, bytes):
        key = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
