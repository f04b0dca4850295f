"""Whole log entries of a segment file read by ranges (a file in an object store, or any file
read without a mapping): the bytes come in windows that end on entry boundaries, the next
range fetched in the background while the caller decodes the current one (Kafka's
``FileRecords`` batch iteration, over ranged reads)."""
from __future__ import annotations

import errno
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Optional, Tuple

from ..errors import KafkaStorageError

#: the largest size a log entry's length field may give (an int32)
MAX_ENTRY = 2**31 - 1
_LOG_OVERHEAD = 12  # offset (int64) + size (int32)
_MIN_ENTRY = 26  # a magic-0 message's smallest log entry


def _entry_header(buf, p: int) -> Tuple[int, int]:
    """(offset, total size) of the log entry at ``p`` of ``buf`` (its 12-byte log overhead)."""
    off = int.from_bytes(buf[p:p + 8], "big", signed=True)
    length = int.from_bytes(buf[p + 8:p + 12], "big", signed=True)
    return off, _LOG_OVERHEAD + length


def entry_windows(f, start: int, block: int, end_offset: Optional[int] = None,
                  max_entry: int = MAX_ENTRY, first=None) -> Iterator[Tuple[int, object]]:
    """``(position, buffer)`` windows of whole log entries of the open file ``f`` from byte
    ``start``: about ``block`` bytes each, the next range fetched in the background while the
    caller decodes (memory: two blocks and one entry).  Stops after the first entry whose
    offset is >= ``end_offset``.  The last window also holds a partial trailing entry, so the
    decoder sees what it would see in the whole file.  ``first``: a future of the first
    range's bytes, already requested (the next segment, fetched while this one decoded)."""
    size = f.size
    fetch = getattr(f, "fetch", None) or f.read
    pool = ThreadPoolExecutor(1)
    # a pruned read (end_offset) starts with a small range and doubles it: the few entries it
    # wants are often in the first one; a full read fetches whole blocks from the start
    cur = block if end_offset is None else min(block, 64 * 1024)
    try:
        pos = start  # file position of buf[0]
        nxt = min(size, start + cur)
        buf = None
        if first is not None:
            try:
                buf = first.result()
            except Exception:  # fetched again below: the error is raised from this thread
                buf = None
            if buf is not None and len(buf) != nxt - start:
                buf = None
        if buf is None:
            buf = fetch(start, nxt - start) if nxt > start else b""
        cur = min(block, cur * 2)
        fut = pool.submit(fetch, nxt, cur) if nxt < size and end_offset is None else None
        while True:
            p = 0
            stop = False
            final = False
            n = len(buf)
            while p + _LOG_OVERHEAD <= n:
                off, total = _entry_header(buf, p)
                if total < _MIN_ENTRY or total > max_entry + _LOG_OVERHEAD or pos + p + total > size:
                    final = True  # bad, too large or truncated: the decoder says what
                    break
                if p + total > n:
                    break
                p += total
                if end_offset is not None and off >= end_offset:
                    stop = True
                    break
            if stop:
                yield pos, memoryview(buf)[:p]
                return
            if final or nxt >= size:
                yield pos, buf
                return
            if p:
                yield pos, memoryview(buf)[:p]
            rest = buf[p:]
            need = 0
            if len(rest) >= _LOG_OVERHEAD:
                need = _entry_header(rest, 0)[1] - len(rest)
            if fut is not None:
                more = fut.result()
            else:
                more = fetch(nxt, max(cur, need))
                cur = min(block, cur * 2)
            nxt += len(more)
            if len(more) < need and nxt < size:
                extra = fetch(nxt, need - len(more))
                more += extra
                nxt += len(extra)
            fut = pool.submit(fetch, nxt, cur) if nxt < size else None
            cur = min(block, cur * 2)
            pos += p
            buf = bytes(rest) + more
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def local_windows(fd: int, start: int, end: int, block: int, path: str = "",
                  max_entry: int = MAX_ENTRY) -> Iterator[Tuple[int, memoryview]]:
    """``(position, bytes)`` windows of whole log entries of ``[start, end)`` of a local file
    (its descriptor ``fd``), read with ``pread`` into one buffer the windows reuse: each window
    is valid only until the generator resumes (the caller copies what it keeps).  No mapping,
    so a file cut shorter meanwhile (``path``, for the error) is never a SIGBUS: it raises
    KafkaStorageError with errno EAGAIN (read again), as a read view's scan does.  Windows are
    about ``block`` bytes (one entry larger than that is read whole); the last also holds a partial trailing entry, as the whole file would, and
    an entry whose framing is bad starts a last window (the decoder says what it is)."""
    from .. import _speedups
    from .fs import read_into

    walk = _speedups.batch.walk_frames
    buf = bytearray(max(1, min(block, end - start)))
    pos = start  # file position of buf[0]
    have = 0  # bytes at the head of buf already read (the tail of the last window)
    need = 0  # the size of one entry larger than a window, read whole
    while pos + have < end:
        want = min(max(block, need, have + 1), end - pos)
        need = 0
        if want > len(buf):
            grown = bytearray(want)
            grown[:have] = memoryview(buf)[:have]
            buf = grown
        mv = memoryview(buf)
        got = have + read_into(fd, mv[have:want], pos + have)
        if got < want:
            raise KafkaStorageError(
                f"segment {path} shrank while it was read ({want - have} bytes asked at "
                f"position {pos + have}, {got - have} there): it was truncated or replaced "
                "meanwhile; read again", position=pos + got, path=path or None,
                errno=errno.EAGAIN, operation="reading")
        if pos + got >= end:
            yield pos, mv[:got]
            return
        p = walk(mv, 0, got, end - pos, -1, max_entry, 0)[0]
        while got - p >= _LOG_OVERHEAD:  # past what the compiled walk takes: odd entries
            total = _entry_header(mv, p)[1]
            if total < _MIN_ENTRY or total > max_entry + _LOG_OVERHEAD or p + total > got:
                break
            p += total
        if p == 0:
            total = _entry_header(mv, 0)[1] if got >= _LOG_OVERHEAD else 0
            if total < _MIN_ENTRY or total > max_entry + _LOG_OVERHEAD or pos + total > end:
                yield pos, mv[:got]  # bad framing, or an entry past the end
                return
            need = total  # one entry larger than a window: read it whole
            have = got
            continue
        yield pos, mv[:p]
        tail = got - p
        buf[:tail] = buf[p:got]
        pos += p
        have = tail
