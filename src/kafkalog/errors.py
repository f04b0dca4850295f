"""The exceptions kafkalog raises about data, shared by the compiled and pure twins.

Every error about bytes (a log, an index, a checkpoint) derives from :class:`KafkaLogError`
and says *what* is wrong and *where*: the file (when known), the byte position and, when it
is known, the offset.  Bad *arguments* from the caller raise plain ``TypeError`` /
``ValueError`` instead.
"""
from __future__ import annotations

import os as _os
from typing import Optional

__all__ = [
    "KafkaLogError",
    "CorruptRecordError",
    "DecompressionError",
    "DecompressedSizeError",
    "UnsupportedCompressionError",
    "CorruptIndexError",
    "InvalidOffsetError",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
    "InvalidTimestampError",
    "InvalidRecordError",
    "LogClosedError",
    "CorruptCheckpointError",
    "CorruptSnapshotError",
    "LogLockedError",
    "KafkaStorageError",
    "InvalidTopicError",
    "UnsafePathError",
    "MissingCodecError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "TransactionCoordinatorFencedError",
]


class KafkaLogError(Exception):
    """Base class of every error kafkalog raises about data it reads or writes.

    ``position`` is a byte position (in the buffer or file), ``offset`` a Kafka offset,
    ``path`` the file; each is ``None`` where unknown.  ``str(err)`` names them all.
    """

    def __init__(
        self,
        message: str,
        position: Optional[int] = None,
        offset: Optional[int] = None,
        path: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.position = position
        self.offset = offset
        self.path = path

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(f"file {self.path}")
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        if where:
            return f"{self.message} ({', '.join(where)})"
        return self.message

    def __reduce__(self):
        return (type(self), (self.message, self.position, self.offset, self.path))

    def located(self, path: Optional[str] = None, base_position: int = 0) -> "KafkaLogError":
        """Return this error with a file path set and positions shifted by ``base_position``."""
        if path is not None and self.path is None:
            self.path = path
        if base_position and self.position is not None:
            self.position += base_position
        return self


class CorruptRecordError(KafkaLogError, ValueError):
    """A batch, message or record is malformed: bad CRC, size, magic, varint or length.

    Covers Kafka's CorruptRecordException and InvalidRecordException.
    """


class InvalidRecordError(CorruptRecordError):
    """Bytes that parse but break a rule a broker enforces (e.g. compressed inner messages)."""


class DecompressionError(CorruptRecordError):
    """A compressed records section or wrapper value could not be decompressed."""


class DecompressedSizeError(DecompressionError):
    """Decompressing a batch would exceed the configured maximum (a decompression bomb)."""


class UnsupportedCompressionError(KafkaLogError):
    """An unknown codec id, or a codec whose library is not installed."""


class CorruptIndexError(KafkaLogError, ValueError):
    """An offset, time or transaction index file is malformed or inconsistent."""


class InvalidOffsetError(KafkaLogError, ValueError):
    """An offset that cannot be appended: not increasing, or overflowing a segment."""


class OffsetOutOfRangeError(KafkaLogError):
    """A read before the log start offset or past the log end offset."""


class RecordTooLargeError(KafkaLogError, ValueError):
    """A batch larger than ``max.message.bytes`` (or a segment)."""


class InvalidTimestampError(KafkaLogError, ValueError):
    """A timestamp a broker would reject (e.g. LogAppendTime set by a producer)."""


class LogClosedError(KafkaLogError):
    """An operation on a Log or Segment that was closed."""


class CorruptCheckpointError(KafkaLogError, ValueError):
    """A checkpoint file (offset checkpoints, leader-epoch-checkpoint, partition.metadata) is
    malformed: wrong version, count mismatch or a malformed line."""


class CorruptSnapshotError(KafkaLogError, ValueError):
    """A producer-state ``.snapshot`` file is malformed (unknown version, bad CRC, bad size);
    Kafka's CorruptSnapshotException."""


class LogLockedError(KafkaLogError):
    """A partition directory is already open for writing (by this or another process)."""


class KafkaStorageError(KafkaLogError, OSError):
    """The operating system failed a read or write of a log file (disk full, I/O error, ...);
    Kafka's KafkaStorageException.  Also an ``OSError`` with the system's ``errno`` and
    ``strerror``; ``path`` (= ``filename``) is the file, ``position`` the byte position when
    known, ``operation`` what kafkalog was doing, and the original ``OSError`` is chained as
    ``__cause__``.  A :class:`~kafkalog.storage.log.Log` that meets one goes offline: every
    later call but ``close()`` raises a KafkaStorageError until the directory is opened again."""

    def __init__(
        self,
        message: str,
        position: Optional[int] = None,
        offset: Optional[int] = None,
        path: Optional[str] = None,
        errno: Optional[int] = None,
        operation: Optional[str] = None,
    ) -> None:
        KafkaLogError.__init__(self, message, position, offset, path)
        self.errno = errno
        self.strerror = _os.strerror(errno) if errno is not None else None
        self.filename = path
        self.operation = operation

    def __reduce__(self):
        return (
            type(self),
            (self.message, self.position, self.offset, self.path, self.errno, self.operation),
        )

    @classmethod
    def from_os_error(
        cls,
        err: BaseException,
        operation: str,
        path: Optional[str] = None,
        position: Optional[int] = None,
        offset: Optional[int] = None,
    ) -> "KafkaStorageError":
        """The error to raise for an OSError met while ``operation`` (e.g. ``"writing
        segment"``), with ``err`` as its ``__cause__``; ``path`` defaults to the OSError's file
        name.  A KafkaStorageError is returned as it is."""
        if isinstance(err, KafkaStorageError):
            return err
        code = getattr(err, "errno", None)
        if path is None:
            path = getattr(err, "filename", None)
            if path is not None:
                path = _os.fsdecode(path)
        reason = getattr(err, "strerror", None) or str(err) or type(err).__name__
        if code is not None:
            reason = f"[Errno {code}] {reason}"
        new = cls(f"I/O error while {operation}: {reason}", position, offset, path, code, operation)
        new.__cause__ = err
        return new


class InvalidTopicError(KafkaLogError, ValueError):
    """A topic name Kafka would not accept (Kafka's InvalidTopicException): empty, ``.`` or
    ``..``, longer than 249 characters, or holding a character other than ASCII letters,
    digits, ``.``, ``_`` and ``-``.  Raised before kafkalog builds a path from the name;
    ``topic`` is the rejected name."""

    def __init__(
        self, message: str, topic: Optional[str] = None, path: Optional[str] = None
    ) -> None:
        super().__init__(message, path=path)
        self.topic = topic

    def __reduce__(self):
        return (type(self), (self.message, self.topic, self.path))


class UnsafePathError(KafkaLogError):
    """kafkalog refused to write a file because doing so would leave the directory it belongs
    in: the name is a symbolic link leading elsewhere (or dangling), or a directory kafkalog
    creates resolves outside the directory it should be in.  ``path`` is the refused name."""


class MissingCodecError(UnsupportedCompressionError):
    """A known codec whose library is not installed (a missing dependency, not bad data); the
    message names the extra that installs it (``pip install 'kafkalog[zstd]'``)."""

    #: the exit status of the ``verify`` and ``stats`` commands when batches went unread
    #: because of a missing codec library (1 is for problems in the data, 2 for usage)
    exit_status = 3


class OutOfOrderSequenceError(KafkaLogError):
    """A producer's batch whose first sequence does not follow the producer's last one (or a
    new epoch not starting at 0); Kafka's OutOfOrderSequenceException.  Nothing was appended;
    ``offset`` is where the batch would have gone."""


class InvalidProducerEpochError(KafkaLogError):
    """A batch or transaction marker of an older producer epoch than the log has seen (a fenced
    producer, a stale marker); Kafka's InvalidProducerEpochException.  Nothing was appended."""


class InvalidTxnStateError(KafkaLogError):
    """A non-transactional batch from a producer whose transaction is ongoing; Kafka's
    InvalidTxnStateException.  Nothing was appended."""


class TransactionCoordinatorFencedError(KafkaLogError):
    """A transaction marker from a coordinator epoch older than the last one seen for the
    producer (a zombie coordinator); Kafka's TransactionCoordinatorFencedException.  Nothing
    was appended."""
