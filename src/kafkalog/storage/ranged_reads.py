"""Whole log entries of a segment file read by ranges (a file in an object store, or any file
read without a mapping): the bytes come in windows that end on entry boundaries, the next
range fetched in the background while the caller decodes the current one (Kafka's
``FileRecords`` batch iteration, over ranged reads)."""
from __future__ import annotations

import errno
from concurrent.futures import ThreadPoolExecutor
from typing import Generator, Iterator, List, Optional, Tuple, Union

from ..errors import KafkaStorageError

#: the largest size a log entry's length field may give (an int32)
MAX_ENTRY = 2**31 - 1
_LOG_OVERHEAD = 12  # offset (int64) + size (int32)
_MIN_ENTRY = 26  # a magic-0 message's smallest log entry

#: what entry_windows and local_windows yield: ``(position, buffer)``
_Windows = Generator[Tuple[int, Union[bytes, memoryview]], None, None]


def _entry_header(buf, p: int) -> Tuple[int, int]:
    """(offset, total size) of the log entry at ``p`` of ``buf`` (its 12-byte log overhead)."""
    off = int.from_bytes(buf[p:p + 8], "big", signed=True)
    length = int.from_bytes(buf[p + 8:p + 12], "big", signed=True)
    return off, _LOG_OVERHEAD + length


def entry_windows(f, start: int, block: int, end_offset: Optional[int] = None,
                  max_entry: int = MAX_ENTRY, first=None) -> _Windows:
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
                if (total < _MIN_ENTRY or total > max_entry + _LOG_OVERHEAD
                        or pos + p + total > size):
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
                  max_entry: int = MAX_ENTRY) -> _Windows:
    """``(position, bytes)`` windows of whole log entries of ``[start, end)`` of a local file
    (its descriptor ``fd``), read with ``pread`` into one buffer the windows reuse: each window
    is valid only until the generator resumes (the caller copies what it keeps).  No mapping,
    so a file cut shorter meanwhile (``path``, for the error) is never a SIGBUS: it raises
    KafkaStorageError with errno EAGAIN (read again), as a read view's scan does.  Windows are
    about ``block`` bytes (one entry larger than that is read whole); the last also holds a
    partial trailing entry, as the whole file would, and an entry whose framing is bad starts a
    last window (the decoder says what it is)."""
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


class BoundedFile:
    """The first ``size`` bytes of an open file in a store (what one read may see):
    ``fetch``/``read`` clamped to them, and ``size``."""

    def __init__(self, f, size: int) -> None:
        self.f = f
        self.size = size

    def fetch(self, position: int, length: int) -> bytes:
        length = max(0, min(length, self.size - position))
        fetch = getattr(self.f, "fetch", None) or self.f.read
        return fetch(position, length) if length else b""

    read = fetch


def _reader(f, fd: Optional[int], size: int):
    """``read_at(position, n)`` over a local descriptor or a store file, clamped to ``size``."""
    if fd is not None:
        from .fs import read_into

        def read_at(position: int, n: int) -> bytes:
            n = max(0, min(n, size - position))
            buf = bytearray(n)
            got = read_into(fd, memoryview(buf), position) if n else 0
            return bytes(buf[:got])
        return read_at
    return BoundedFile(f, size).fetch


def sound_entries(f, path: str, base_offset: int, start: int, stop: int, block: int, *,
                  limit: Optional[int] = None, on_damage: str = "raise",
                  gaps: Optional[list] = None, check_crcs: bool = False,
                  max_entry: int = MAX_ENTRY) -> Iterator[Tuple[int, object]]:
    """``(position, bytes)`` runs of whole entries of ``[start, stop)`` of the segment file
    ``f`` (a local file with ``fileno()``, read with ``pread``; else a file in a store, read by
    ranges), under the read model's damage rule: ``[start, stop)`` is bytes of the log (a
    planner took it from a read view, which ends the log before a torn tail), so any entry in
    it that does not frame (size, magic, a header cut by ``stop``), whose offset goes backwards
    or reaches ``limit`` (the next segment's base offset, or the log end), or (``check_crcs``)
    fails its CRC is damage: CorruptRecordError naming ``path``, the position and the offset,
    or with ``on_damage="skip"`` a :class:`~kafkalog.storage.log_view.DamageGap` in ``gaps``
    and the read goes on after exactly that entry where its size field still frames it, else
    at the first whole valid entry after it (the same places a read view's scan goes on).
    A run is valid until the generator resumes."""
    from .. import _speedups
    from ..errors import CorruptRecordError, KafkaLogError
    from ..records import MemoryRecords
    from .framing import framing_problem, gap_is_damage, resume_point
    from .log_view import SKIP, DamageGap

    fileno = getattr(f, "fileno", None)
    fd = fileno() if fileno is not None else None
    read_at = _reader(f, fd, stop)
    walk = _speedups.batch.walk_frames
    end_arg = -1 if limit is None else limit
    seen = base_offset
    pos: Optional[int] = start

    def damage(x: int, head: bytes, why: str, total: Optional[int],
               exact: bool = False) -> Optional[int]:
        """Apply the policy to the entry at ``x``; where the read goes on (None: nowhere).
        ``exact``: a whole entry whose CRC failed, skipped exactly; ``seen`` (the scan's,
        below) is the offset after the last whole entry read."""
        offset = int.from_bytes(head[:8], "big", signed=True) if len(head) >= 8 else None
        if on_damage != SKIP:
            raise CorruptRecordError(
                f"Corrupt batch in {path} at position {x}: {why}; the log goes on after it, "
                "so the read stops here rather than leave out what follows", x, offset, path)
        if exact and total is not None:
            resume = x + total if x + total < stop else None
        else:
            resume = resume_point(read_at, stop, x, head, seen, start)
        if gaps is not None:
            head2 = read_at(resume, 8) if resume is not None else b""
            next_offset = (int.from_bytes(head2, "big", signed=True) if len(head2) == 8
                           else (limit if limit is not None else -1))
            first = seen if offset is None or offset >= next_offset > seen else offset
            gaps.append(DamageGap(path, x, first, next_offset, why))
        return resume

    def checked(win, wpos: int, a: int, b: int) -> List[Tuple[int, int]]:
        """The sub-runs of the whole entries ``win[a:b]`` to hand over (``check_crcs``: each
        one whose CRC fails is damage of its own, skipped exactly)."""
        if not check_crcs or a >= b:
            return [(a, b)] if a < b else []
        runs, q = [], a
        while q < b:
            try:
                MemoryRecords(win[q:b]).validate()
                runs.append((q, b))
                return runs
            except KafkaLogError as e:
                if e.position is None:  # not known which entry: said, never guessed
                    raise e.located(path, wpos + q)
                x = q + e.position
                total = int.from_bytes(win[x + 8:x + 12], "big", signed=True) + 12
                if x > q:
                    runs.append((q, x))
                damage(wpos + x, bytes(win[x:x + 17]), e.message, total, exact=True)
                q = x + total
        return runs

    while pos is not None and pos < stop:
        if fd is not None:
            windows = local_windows(fd, pos, stop, block, path, max_entry)
        else:
            windows = entry_windows(BoundedFile(f, stop), pos, block, max_entry=max_entry)
        resume: Optional[int] = None
        bad = False
        try:
            for wpos, win in windows:
                n = len(win)
                p = 0
                why = None
                while True:
                    p, seen = walk(win, p, n, stop - wpos, end_arg, max_entry, seen, True)
                    if p >= n:
                        break
                    x = wpos + p
                    head = bytes(win[p:p + 17])
                    why = framing_problem(head, x, stop, max_entry)
                    if why is None:
                        off = int.from_bytes(head[:8], "big", signed=True)
                        total = int.from_bytes(head[8:12], "big", signed=True) + 12
                        if off < seen or (limit is not None and off >= limit):
                            why = (f"the entry's offset {off} is out of place (the entry before "
                                   f"ends at offset {seen - 1}" + (
                                       f"; the segment's offsets end below {limit})"
                                       if limit is not None else ")"))
                        elif total > n - p:
                            why = "the entry does not fit in the range read"
                        elif off > seen:  # a gap: the entry after it says whether it is one
                            q = p + total
                            after = (bytes(win[q:q + 17]) if q + 17 <= n
                                     else read_at(wpos + q, 17))
                            if gap_is_damage(seen, off, after):
                                why = (f"the entry's offset {off} is out of place (the entry "
                                       f"before ends at offset {seen - 1}, the one after it "
                                       f"goes on from {int.from_bytes(after[:8], 'big')})")
                            else:
                                seen = off + 1 + (int.from_bytes(win[p + 23:p + 27], "big",
                                                                 signed=True)
                                                  if head[16] == 2 else 0)
                                p = q
                                continue
                        else:  # pragma: no cover - the walk takes such an entry
                            why = "the entry could not be walked"
                    break
                for a, b in checked(win, wpos, 0, p):
                    yield wpos + a, win[a:b]
                if why is not None:
                    head = bytes(win[p:p + 17])
                    framed = (int.from_bytes(head[8:12], "big", signed=True) + 12
                              if len(head) >= 12 else None)
                    resume, bad = damage(wpos + p, head, why, framed), True
                    break
        finally:
            windows.close()
        if not bad:
            return
        pos = resume
