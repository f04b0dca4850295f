"""A partition's leader-epoch cache, kept in ``leader-epoch-checkpoint`` (Kafka's
``LeaderEpochFileCache``).
"""
from __future__ import annotations

import os
from typing import List, Optional

from ..errors import KafkaStorageError
from . import checkpoints as _checkpoints


# ------------------------------------------------------------------------------------------------
# Leader-epoch cache
# ------------------------------------------------------------------------------------------------
class LeaderEpochCache:
    """The ``leader-epoch-checkpoint`` of a partition (Kafka's LeaderEpochFileCache): the
    first offset written under each leader epoch, written through on every change."""

    def __init__(self, path: Optional[str], read_only: bool = False, fs=None,
                 present: Optional[bool] = None) -> None:
        """``fs``: the :class:`~kafkalog.storage.fs.FileSystem` holding ``path`` (default:
        the local one); one that is not local is only read (``read_only`` is implied).
        ``present``: whether the file is there, as the caller's listing says (None: ask)."""
        self.path = path
        self.read_only = read_only or path is None or fs is not None
        self._entries: List[_checkpoints.EpochEntry] = []
        if present is False:
            return
        if present and fs is None and path is not None:
            self._entries = sorted(_checkpoints.read_leader_epoch_checkpoint(path))
        elif fs is not None:
            if path is not None:
                self._entries = sorted(_checkpoints.read_leader_epoch_checkpoint(path, fs))
        elif path is not None and os.path.exists(path):
            self._entries = sorted(_checkpoints.read_leader_epoch_checkpoint(path))

    @property
    def entries(self) -> List[_checkpoints.EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> Optional[int]:
        return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> Optional[_checkpoints.EpochEntry]:
        return self._entries[-1] if self._entries else None

    def flush(self, fsync: bool = True) -> None:
        if not self.read_only and self.path is not None:
            try:
                _checkpoints.write_leader_epoch_checkpoint(self.path, self._entries, fsync=fsync)
            except OSError as e:
                raise KafkaStorageError.from_os_error(
                    e, "writing the leader-epoch checkpoint", path=self.path
                )

    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; entries with a larger or equal
        epoch or start offset are dropped first (Kafka's ``assign``).  Returns whether the
        cache changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(
                f"Received invalid partition leader epoch entry ({epoch}, {start_offset})"
            )
        latest = self.latest_entry
        if latest is not None and not (epoch != latest.epoch or start_offset < latest.start_offset):
            return False
        self._entries = [
            e for e in self._entries if not (e.epoch >= epoch or e.start_offset >= start_offset)
        ]
        self._entries.append(_checkpoints.EpochEntry(epoch, start_offset))
        if flush:
            self.flush()
        return True

    def epoch_for_offset(self, offset: int) -> Optional[int]:
        previous = None
        for e in self._entries:
            if e.start_offset == offset:
                return e.epoch
            if e.start_offset > offset:
                return previous
            previous = e.epoch
        return previous

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries starting at or after ``end_offset``."""
        if end_offset >= 0 and self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries = [e for e in self._entries if e.start_offset < end_offset]
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop the entries below ``start_offset``, moving the last of them to it."""
        if start_offset < 0:
            return
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed:
            return
        keep = [e for e in self._entries if e.start_offset > start_offset]
        new_first = _checkpoints.EpochEntry(removed[-1].epoch, start_offset)
        new_entries = [new_first] + keep
        if new_entries != self._entries:
            self._entries = new_entries
            self.flush(fsync=False)  # re-applied from the log start offset at every open

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self.flush()

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self._entries!r})"
