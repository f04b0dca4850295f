"""What the parts of :class:`kafkalog.storage.log.Log` (LogLoader, LocalLog, LogRetention)
use of one another, declared for the type checker.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, NoReturn, Optional, Union

if TYPE_CHECKING:
    import threading

    from ..errors import KafkaStorageError, UnsafePathError
    from . import fs as _fs
    from . import logdir as _logdir
    from .config import LogConfig
    from .epoch_cache import LeaderEpochCache
    from .files import TopicPartition
    from .producer_state import ProducerStateManager
    from .segment import Segment
    from .segments import LogOffsets, LogSegments

__all__ = ["LogParts"]


class LogParts:
    """What the parts of :class:`~kafkalog.storage.log.Log` (LogLoader, LocalLog, LogRetention:
    mixins) use of one another, declared for the type checker; Log and the mixins define them
    (nothing at run time)."""

    if TYPE_CHECKING:
        dir: str
        root: str
        config: LogConfig
        read_only: bool
        topic_partition: Optional[TopicPartition]
        leader_epoch_cache: LeaderEpochCache
        _store: Optional[_fs.FileSystem]  # None: a local directory
        _listing: Optional[_logdir.PartitionListing]
        _swap_notes: List[_logdir.Ignored]
        _clock: Callable[[], int]
        _lock: threading.RLock
        _cond: threading.Condition
        _segments: LogSegments
        _offsets: LogOffsets
        _closed: bool
        _offline: Optional[Union[KafkaStorageError, UnsafePathError]]
        _checkpointed: Dict[str, Any]
        _checkpoint_interval_ms: int
        _last_checkpoint_ms: int
        _unflushed_since: Optional[float]  # when the first unflushed append was (monotonic)
        _flusher_error: Optional[BaseException]  # what the flusher thread met, for a writer

        @property
        def producer_state(self) -> ProducerStateManager: ...
        @producer_state.setter
        def producer_state(self, value: ProducerStateManager) -> None: ...
        @property
        def high_watermark(self) -> int: ...
        @property
        def size(self) -> int: ...

        def first_unstable_offset(self) -> Optional[int]: ...
        def _tp_name(self) -> str: ...
        def _check_open(self) -> None: ...
        def _check_online(self) -> None: ...
        def _check_writable(self) -> None: ...
        def _io_error(self, e: Union[OSError, UnsafePathError], operation: str) -> NoReturn: ...
        def _open_segment(self, base_offset: int, suffix: str = "",
                          listed: Optional[_logdir.SegmentFiles] = None) -> Segment: ...
        def _add_segment(self, seg: Segment) -> None: ...
        def _delete_segment_files(self, seg: Segment) -> None: ...
        def _rebuild_producer_state(self, last_offset: int,
                                    reload_from_clean_shutdown: bool = False) -> None: ...
        def _roll(self, expected_next_offset: Optional[int]) -> Segment: ...
        def _write_checkpoints(self) -> None: ...
