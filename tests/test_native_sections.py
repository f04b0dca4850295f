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
    pytest.skip("the compiled decoders are compared in the default (compiled) run", allow_module_level=True)
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
        limit = rnd.choice((compression.DEFAULT_MAX_DECOMPRESSED_SIZE, len(body), max(len(body) - 1, 0)))
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
            b.append(1700000000000 + j, b"k%d" % rnd.randrange(9), _body(rnd)[: rnd.randrange(1, 400)],
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
