"""The read buffers and the read-ahead of a scan (:meth:`LogView.chunks
<kafkalog.storage.log_view.LogView.chunks>`): the two buffers a scan reads into in turn
(:class:`ReadBlocks`), the buffers kept between scans and the helper thread that reads the next
block while the caller works on this one.

The kept buffers, their lock and the helper thread belong to the process: a forked child
starts without them (``os.register_at_fork``), as the parent's pages and thread are not its
own.
"""
from __future__ import annotations

import mmap
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from typing import Any, Callable, List, Optional, Tuple

__all__ = ["ReadBlocks", "BlockRead"]


# Read buffers kept between scans, the largest first, _SPARE_BYTES in all: fresh memory costs
# a page fault (zeroed pages) per 4 KiB, on a virtual machine more than the read itself, so a
# scan takes kept buffers and gives them back when it ends (see ReadBlocks).  They are
# anonymous memory (a *private* anonymous mapping: page-aligned, nothing to zero, no file
# mapped; never ``mmap(-1, n)`` alone, which is MAP_SHARED, so a forked child would read into
# its parent's pages), and each read lands on a page boundary (_ALIGN): the kernel copies into
# an aligned buffer about 1.5x as fast.
_SPARE_BYTES = 128 << 20
# A borrowing scan reads ahead in a helper thread only reads of at least this many bytes:
# handing a smaller one over costs more (thread wake-ups) than the read itself.  (At 16 MiB,
# segments of 8 MiB were never read ahead: to_arrow of a root of 8 such partitions 1.2x slower.)
_READ_AHEAD_MIN = 1 << 20
# A scan that reads ahead makes its first read this short (the caller waits for that one; the
# next, whole blocks, are read while the caller decodes): 1-2 ms less per to_arrow(dir).
_FIRST_READ = 2 << 20
_ALIGN = 4096
_spare: List[Any] = []
_spare_lock = threading.Lock()
# the helper thread of the scans that read ahead (one per process: started once, made anew in
# a forked child, where the parent's thread does not run)
_helper: Optional[ThreadPoolExecutor] = None
_helper_pid = 0


def _read_helper() -> ThreadPoolExecutor:
    global _helper, _helper_pid
    with _spare_lock:
        if _helper is None or _helper_pid != os.getpid():
            _helper = ThreadPoolExecutor(1, thread_name_prefix="kafkalog-read-ahead")
            _helper_pid = os.getpid()
        return _helper


def _take_buffer(n: int) -> Any:
    """A buffer of at least ``n`` bytes (contents undefined): the smallest kept one that
    fits, else a new one."""
    with _spare_lock:
        fits = [i for i, b in enumerate(_spare) if len(b) >= n]
        if fits:
            return _spare.pop(fits[-1])
    return _new_buffer(n)


if hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MAP_ANONYMOUS"):
    _PRIVATE = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS

    def _new_buffer(n: int) -> Any:
        return mmap.mmap(-1, n, flags=_PRIVATE)
else:  # no private anonymous mappings here (Windows): plain memory
    def _new_buffer(n: int) -> Any:
        return bytearray(n)


def _after_fork_in_child() -> None:
    """A forked child starts with no kept buffers, a fresh lock (another thread may have held
    the parent's at the fork) and no read-ahead thread (the parent's does not run here)."""
    global _spare, _spare_lock, _helper, _helper_pid
    _spare = []
    _spare_lock = threading.Lock()
    _helper, _helper_pid = None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _give_buffer(buf: Any) -> None:
    """Keep ``buf`` for a later scan (within _SPARE_BYTES, the largest kept)."""
    if not buf or len(buf) > _SPARE_BYTES:
        return
    with _spare_lock:
        _spare.append(buf)
        _spare.sort(key=len, reverse=True)
        total = 0
        for i, b in enumerate(_spare):
            total += len(b)
            if total > _SPARE_BYTES:
                del _spare[i:]
                break


class BlockRead:
    """One read of a :meth:`LogView.chunks` scan: ``total`` bytes of ``seg`` from ``pos``
    into buffer ``slot`` from ``lead`` on (planned when the segment was ``size`` bytes and the
    log ended at ``leo``); ``job`` is its helper-thread future, ``ok`` its result when read in
    place."""

    __slots__ = ("k", "seg", "pos", "size", "leo", "slot", "lead", "total", "job", "ok")

    def __init__(self, k: int, seg: Any, pos: int, size: int, leo: int, slot: int,
                 lead: int, total: int) -> None:
        self.k, self.seg, self.pos, self.size, self.leo = k, seg, pos, size, leo
        self.slot, self.lead, self.total = slot, lead, total
        self.job: Optional[Future] = None
        self.ok = True


class ReadBlocks:
    """The two buffers of a :meth:`LogView.chunks` scan, used in turn: while the caller works
    on the bytes of one, the next read goes into the other (with ``prefetch``, in a helper
    thread).  The buffers grow to the largest read and are never replaced while a read into
    them is under way."""

    def __init__(self, lock: Any, read_into: Callable[[Any, int, memoryview], None],
                 block: int, prefetch: bool) -> None:
        """``lock``: the owning log's lock, held while a segment is read; ``read_into(seg,
        pos, buf)``: fills ``buf`` with the bytes at ``pos`` of ``seg`` (the view's
        ``LogView._read_into``, under that lock)."""
        self._lock = lock
        self._read_into = read_into
        self._block = block
        self._bufs = [bytearray(), bytearray()]
        self._slot = 1
        self._prefetch = prefetch
        self._first = True
        self._job: Any = None  # the read under way in the helper thread
        # (k, position): where the scan of segment k stops reading (LogView._stop_position)
        self.stop_at: Tuple[int, Optional[int]] = (-1, None)

    def _buffer(self, slot: int, n: int, keep: int = 0) -> memoryview:
        buf = self._bufs[slot]
        if len(buf) < n:  # another one (the caller is done with the old one)
            new = _take_buffer(n)
            new[:keep] = memoryview(buf)[:keep]
            _give_buffer(buf)
            buf = self._bufs[slot] = new
        return memoryview(buf)[:n]

    def _fill(self, seg: Any, pos: int, buf: memoryview) -> bool:
        """Read ``buf`` from ``pos`` of ``seg`` under the log's lock (False: ``seg`` was
        closed meanwhile)."""
        with self._lock:
            if seg.closed:
                return False
            self._read_into(seg, pos, buf)
            return True

    def start(self, k: int, seg: Any, pos: int, carry: Any, size: int, leo: int,
              ahead: bool = False) -> BlockRead:
        """Begin the read of the block at ``pos`` of ``seg`` into the next buffer, ``carry``
        (the first bytes, already read) copied first; in the helper thread where ``ahead``
        (the caller has other work meanwhile) and the scan reads ahead."""
        c = 0 if carry is None else len(carry)
        block = self._block
        if self._first:  # the caller waits for the first read: a short one, the rest ahead
            self._first = False
            if self._prefetch and _FIRST_READ:
                block = min(block, _FIRST_READ)
        want = min(block, size - pos) - c
        total = c + max(want, 0)
        lead = -c % _ALIGN  # the carry ends, and the read starts, on a page boundary
        self._slot ^= 1
        mv = self._buffer(self._slot, lead + total)[lead:]
        if c:
            mv[:c] = carry
        rd = BlockRead(k, seg, pos, size, leo, self._slot, lead, total)
        if want > 0:
            if ahead and self._prefetch and want >= _READ_AHEAD_MIN:
                rd.job = self._job = _read_helper().submit(self._fill, seg, pos + c, mv[c:])
            else:
                rd.ok = self._fill(seg, pos + c, mv[c:])
        return rd

    def wait(self, rd: BlockRead) -> Optional[memoryview]:
        """The bytes of ``rd`` once read (None: its segment was closed meanwhile); a read
        error is raised here."""
        if rd.job is not None:
            job, rd.job, self._job = rd.job, None, None
            rd.ok = job.result()
        if not rd.ok:
            return None
        return memoryview(self._bufs[rd.slot])[rd.lead:rd.lead + rd.total]

    def extend(self, rd: BlockRead, need: int) -> Optional[memoryview]:
        """The ``need`` bytes from ``rd.pos``: ``rd``'s bytes and the rest read after them
        (one batch larger than the block)."""
        mv = self._buffer(rd.slot, rd.lead + need, rd.lead + rd.total)[rd.lead:]
        if not self._fill(rd.seg, rd.pos + rd.total, mv[rd.total:]):
            return None
        rd.total = need
        return mv

    def close(self) -> None:
        """Wait for a read under way (its buffer and file stay in use until it ends), then
        give the buffers back."""
        if self._job is not None:
            futures_wait([self._job])
            self._job = None
        bufs, self._bufs = self._bufs, [bytearray(), bytearray()]
        for buf in bufs:
            _give_buffer(buf)
