"""The compiled snappy/lz4 decoders that the object decoder uses (``_arrow.decompress_section``)
give exactly kafkalog.compression's answer, or decline (None) where it raises: compared over
generated frames (other writers' options, short-offset repeats, damage, limits), and through
whole batches decoded to objects by the compiled and the pure twin."""
import importlib
import os
import random

import pytest

from kafkalog import compression
from kafkalog.errors import KafkaLogError

PURE = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")
if PURE:
    pytest.skip("the compiled decoders are compared in the default (compiled) run",
                allow_module_level=True)
_arrow = importlib.import_module("kafkalog._arrow")  # an ImportError fails the module
lz4_frame = pytest.importorskip("lz4.frame")
SNAPPY, LZ4 = 2, 3


def _body(rnd):
    """Records-like bytes: runs of one byte and of short patterns (LZ77 offsets 1..7), text,
    noise."""
    out = bytearray()
    for _ in range(rnd.randrange(1, 40)):
        k = rnd.randrange(4)
        if k == 0:
            out += bytes([rnd.randrange(256)]) * rnd.randrange(1, 300)
        elif k == 1:
            pat = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 8)))
            out += pat * rnd.randrange(1, 60)
        elif k == 2:
            out += b'{"id":%d,"u":"user-%07d"}' % (rnd.randrange(10**9), rnd.randrange(10**7))
        else:
            out += bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 200)))
    return bytes(out)


def _frame(rnd, codec, body):
    if codec == SNAPPY:
        return compression.compress(SNAPPY, body)
    if rnd.random() < 0.5:
        return compression.compress(LZ4, body, level=rnd.choice((1, 9, 12)))
    return lz4_frame.compress(  # other writers' options: checksums, content size, 256 KiB blocks
        body,
        block_size=rnd.choice((lz4_frame.BLOCKSIZE_MAX64KB, lz4_frame.BLOCKSIZE_MAX256KB)),
        content_checksum=rnd.random() < 0.5,
        block_checksum=rnd.random() < 0.3,
        store_size=rnd.random() < 0.5,
        compression_level=rnd.choice((0, 3, 9)),
    )


def _damage(rnd, data):
    k = rnd.randrange(4)
    if k == 0 or len(data) < 2:
        return data
    if k == 1:
        return data[: rnd.randrange(len(data))]
    b = bytearray(data)
    b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
    if k == 3:
        b[rnd.randrange(len(b))] = rnd.randrange(256)
    return bytes(b)


@pytest.mark.parametrize("codec", [SNAPPY, LZ4])
def test_same_bytes_or_declines(codec):
    rnd = random.Random(1124 + codec)
    taken = declined = 0
    for i in range(600):
        body = _body(rnd) * rnd.choice((1, 1, 30))
        data = _damage(rnd, _frame(rnd, codec, body))
        limit = rnd.choice((compression.DEFAULT_MAX_DECOMPRESSED_SIZE, len(body),
                            max(len(body) - 1, 0)))
        pad = rnd.randrange(5)
        src = bytes(pad) + data + bytes(3)
        got = _arrow.decompress_section(codec, src, pad, pad + len(data), limit)
        try:
            want = compression.decompress(codec, data, magic=2, max_size=limit)
        except KafkaLogError:
            assert got is None, i
            declined += 1
            continue
        if got is None:  # declining an input that decodes is allowed (the fallback answers)
            declined += 1
            continue
        assert bytes(got) == want, i
        taken += 1
    assert taken > 150 and declined > 50, (taken, declined)  # both ways were exercised


def test_bounds_and_other_codecs():
    data = compression.compress(LZ4, b"abc" * 1000)
    assert _arrow.decompress_section(1, data, 0, len(data), 1 << 20) is None
    assert _arrow.decompress_section(4, data, 0, len(data), 1 << 20) is None
    assert _arrow.decompress_section(LZ4, data, 0, len(data) + 1, 1 << 20) is None
    assert _arrow.decompress_section(LZ4, data, 5, 4, 1 << 20) is None
    assert _arrow.decompress_section(LZ4, data, -1, 4, 1 << 20) is None
    assert bytes(_arrow.decompress_section(LZ4, data, 0, len(data), 3000)) == b"abc" * 1000
    assert _arrow.decompress_section(LZ4, data, 0, len(data), 2999) is None
    # a negative limit is declined (kafkalog.compression's ValueError answers), even for a frame
    # with no blocks, which decodes to nothing before any limit is compared
    empty = compression.compress(LZ4, b"")
    assert _arrow.decompress_section(LZ4, empty, 0, len(empty), -1) is None
    assert _arrow.decompress_section(SNAPPY, compression.compress(SNAPPY, b"x"), 0, 0, -1) is None
    with pytest.raises(ValueError):
        compression.decompress(LZ4, empty, magic=2, max_size=-1)
    # a snappy length no block of 6 bytes can expand to: declined (nothing reserved for it)
    assert _arrow.decompress_section(SNAPPY, b"\x80\x80\x80\x64\x00\x00", 0, 6, 256 << 20) is None


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_objects_compiled_equal_pure(codec):
    """Whole batches, sound and damaged, decoded to objects by both twins: same records, or the
    same error (class, message, position, offset)."""
    import kafkalog
    from kafkalog import _batch, _batch_py

    rnd = random.Random(7)
    for i in range(150):
        b = kafkalog.MemoryRecordsBuilder(2, codec, 1000 * i)
        for j in range(rnd.randrange(1, 50)):
            b.append(1700000000000 + j, b"k%d" % rnd.randrange(9),
                     _body(rnd)[: rnd.randrange(1, 400)],
                     [("h", b"v" * rnd.randrange(4))] if rnd.random() < 0.3 else [])
        raw = bytearray(b.build())
        if rnd.random() < 0.5:  # damage the compressed records section (CRCs are not checked)
            p = rnd.randrange(61, len(raw))
            raw[p] ^= 1 << rnd.randrange(8)
        answers = []
        for mod in (_batch, _batch_py):
            try:
                recs = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                        for batch in mod.MemoryRecords(bytes(raw), check_crcs=False) for r in batch]
                answers.append(("ok", recs))
            except KafkaLogError as exc:
                answers.append((type(exc).__name__, str(exc), getattr(exc, "position", None),
                                getattr(exc, "offset", None)))
        assert answers[0] == answers[1], i


def _lz4_header(flg=0x60, bd=0x40):
    import struct

    return struct.pack("<I", 0x184D2204) + bytes((flg, bd, compression._lz4_hc(bytes((flg, bd)))))


def _stored(block):
    import struct

    return struct.pack("<I", len(block) | 0x80000000) + block


def test_lz4_end_mark_with_the_uncompressed_bit():
    """A block word of 0x80000000 (size 0 with the uncompressed bit) ends the frame, as Kafka
    reads it: what follows is ignored, never decoded as more blocks."""
    import struct

    import kafkalog
    from kafkalog import _batch, _batch_py

    b = kafkalog.MemoryRecordsBuilder(2, "none", 0)
    for j in range(2):
        b.append(1700000000000, b"k", b"value %d" % j)
    plain = b.build()
    records = plain[61:]
    for tail in (b"", _stored(records) + struct.pack("<I", 0)):
        section = _lz4_header() + struct.pack("<I", 0x80000000) + tail
        assert compression.decompress(LZ4, section, magic=2) == b""
        got = _arrow.decompress_section(LZ4, section, 0, len(section), 1 << 20)
        assert got is None or bytes(got) == b""
        # the whole batch: both twins give the same (an empty section for a count of 2)
        body = bytearray(plain[:61] + section)
        body[8:12] = (len(body) - 12).to_bytes(4, "big")
        body[21:23] = (int.from_bytes(body[21:23], "big") | LZ4).to_bytes(2, "big")
        answers = []
        for mod in (_batch, _batch_py):
            try:
                answers.append(("ok", [r.value
                                       for batch in mod.MemoryRecords(bytes(body), check_crcs=False)
                                       for r in batch]))
            except KafkaLogError as exc:
                answers.append((type(exc).__name__, str(exc)))
        assert answers[0] == answers[1]
        assert answers[0][0] == "CorruptRecordError"


def test_bytes_changing_during_decode_never_pass_the_limit():
    """A bytearray written by another thread while the GIL is released: a block measured
    under the limit is then decoded into only the room measured, so no output (and no write)
    goes past the limit, whatever the bytes turn into in between.  A stress run: it can miss
    a regression, never report a false one."""
    import struct
    import sys
    import threading
    import time

    # 1 literal 'a', a match (offset 1) whose length byte X flips 0 <-> 254, then 5 literals
    blk = bytes([0x1F]) + b"a" + b"\x01\x00" + b"\x00" + bytes([0x50]) + b"bcdef"
    frame = bytearray(_lz4_header() + struct.pack("<I", len(blk)) + blk + struct.pack("<I", 0))
    x = 7 + 4 + 4
    assert len(bytes(_arrow.decompress_section(LZ4, bytes(frame), 0, len(frame), 30))) == 25
    frame[x] = 254
    assert len(bytes(_arrow.decompress_section(LZ4, bytes(frame), 0, len(frame), 1 << 20))) == 279
    frame[x] = 0
    old_pool = _arrow._set_pool_limit(0)  # allocations of exactly the measured size
    old_switch = sys.getswitchinterval()
    stop = False

    def flip():
        while not stop:
            frame[x] = 254
            frame[x] = 0

    t = threading.Thread(target=flip)
    sys.setswitchinterval(1e-6)
    t.start()
    sizes = set()
    try:
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            got = _arrow.decompress_section(LZ4, frame, 0, len(frame), 30)
            sizes.add(None if got is None else len(got))
    finally:
        stop = True
        t.join()
        sys.setswitchinterval(old_switch)
        _arrow._set_pool_limit(old_pool)
    assert sizes <= {None, 25}, sizes


def test_negative_limit_is_the_same_error_with_a_warm_pool():
    """A negative max_decompressed_size is refused by both twins alike, also when a pooled
    block is waiting (the compiled decoders would otherwise return an empty section)."""
    import struct

    import kafkalog
    from kafkalog import _batch, _batch_py

    warm = kafkalog.MemoryRecordsBuilder(2, "lz4", 0)
    warm.append(1, b"k", bytes(100000))
    assert len([r for b in _batch.MemoryRecords(warm.build()) for r in b]) == 1
    section = _lz4_header() + struct.pack("<I", 0)
    after_crc = struct.pack(">hiqqqhii", LZ4, 0, 1000, 1000, -1, -1, -1, 1) + section
    body = struct.pack(">ibI", 0, 2, 0) + after_crc
    raw = struct.pack(">qi", 0, len(body)) + body
    answers = []
    for mod in (_batch, _batch_py):
        with pytest.raises(ValueError) as info:
            [r for b in mod.MemoryRecords(raw, check_crcs=False,
                                          max_decompressed_size=-1) for r in b]
        answers.append(str(info.value))
    assert answers[0] == answers[1]
