"""storage.ranged_reads.local_windows: the windows a Spark task decodes a local segment in."""
from __future__ import annotations

import errno
import os
import random
import struct

import pytest

from kafkalog.errors import KafkaStorageError
from kafkalog.storage.ranged_reads import local_windows


def _entries(rnd: random.Random, n: int) -> list:
    """Log entries of random sizes (offset, size, then that many bytes; magic 2 at byte 16)."""
    out, off = [], 0
    for _ in range(n):
        body = bytearray(rnd.choice([49, 60, 200, 3000, 70_000]))
        body[4] = 2  # magic (the byte after the 4-byte leader epoch)
        struct.pack_into(">i", body, 11, 0)  # last offset delta 0
        out.append(struct.pack(">qi", off, len(body)) + bytes(body))
        off += 1
    return out


def _windows(path: str, start: int, end: int, block: int) -> list:
    fd = os.open(path, os.O_RDONLY)
    try:
        return [(pos, bytes(w)) for pos, w in local_windows(fd, start, end, block, path)]
    finally:
        os.close(fd)


@pytest.mark.parametrize("seed", range(12))
def test_windows_are_whole_entries_of_the_range(tmp_path, seed):
    rnd = random.Random(seed)
    entries = _entries(rnd, rnd.randint(1, 60))
    data = b"".join(entries)
    bounds = [0]
    for e in entries:
        bounds.append(bounds[-1] + len(e))
    path = str(tmp_path / "00000000000000000000.log")
    with open(path, "wb") as f:
        f.write(data)
    start = rnd.choice(bounds[:-1])
    end = rnd.choice([b for b in bounds if b > start] + [len(data)])
    block = rnd.choice([100, 4096, 65_536, 1 << 20])
    wins = _windows(path, start, end, block)
    assert b"".join(w for _, w in wins) == data[start:end]  # every byte once, in order
    pos = start
    for p, w in wins:
        assert p == pos
        pos += len(w)
        assert pos in bounds  # each window ends where an entry does (the range ends on one)


def test_a_bad_length_starts_the_last_window(tmp_path):
    entries = _entries(random.Random(1), 20)
    data = bytearray(b"".join(entries))
    bad = sum(len(e) for e in entries[:7])
    struct.pack_into(">i", data, bad + 8, 2**31 - 1)  # a huge length field, mid-segment
    path = str(tmp_path / "00000000000000000000.log")
    with open(path, "wb") as f:
        f.write(data)
    wins = _windows(path, 0, len(data), 4096)
    # the good entries before it, then a last window that starts at it (the decoder reports
    # it there; nothing of 2 GiB is allocated)
    assert wins[-1][0] == bad
    assert b"".join(w for _, w in wins[:-1]) == bytes(data[:bad])
    assert wins[-1][1] == bytes(data[bad:bad + len(wins[-1][1])])


def test_a_file_cut_shorter_meanwhile_is_a_retryable_error(tmp_path):
    entries = _entries(random.Random(2), 200)
    data = b"".join(entries)
    path = str(tmp_path / "00000000000000000000.log")
    with open(path, "wb") as f:
        f.write(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        it = local_windows(fd, 0, len(data), 8192, path)
        next(it)
        os.truncate(path, 100)
        with pytest.raises(KafkaStorageError) as e:
            list(it)
    finally:
        os.close(fd)
    assert e.value.errno == errno.EAGAIN and e.value.filename == path
