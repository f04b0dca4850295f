"""Tests of kafkalog.compression: Kafka's codecs, byte-compatible with the Java client.

Covers round trips, the reference vectors (spec §18), real streams from the conformance corpus,
other clients' frames (sarama, kafka-python, aiokafka), concatenated streams, decompression bombs
(bounded time and memory), corrupt input (only kafkalog errors escape) and missing libraries.
"""
from __future__ import annotations

import array
import gzip as gzip_mod
import hashlib
import io
import json
import mmap
import random
import struct
import subprocess
import sys
import textwrap
import time
import tracemalloc
import types
import warnings
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kl_support import CONFORMANCE_SKIP_REASON, conformance_vectors

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def _import_compression():
    """Import kafkalog.compression; if the package __init__ is not importable (yet), load the
    module alone: it must only need kafkalog.errors and kafkalog._format."""
    try:
        from kafkalog import compression, errors

        return compression, errors
    except Exception:  # pragma: no cover - only while src/kafkalog/__init__.py is broken
        saved = {k: v for k, v in sys.modules.items()
                 if k == "kafkalog" or k.startswith("kafkalog.")}
        for k in saved:
            del sys.modules[k]
        pkg = types.ModuleType("kafkalog")
        pkg.__path__ = [str(SRC / "kafkalog")]
        sys.modules["kafkalog"] = pkg
        try:
            import kafkalog.compression as compression
            import kafkalog.errors as errors
        finally:
            for k in [k for k in sys.modules if k == "kafkalog" or k.startswith("kafkalog.")]:
                del sys.modules[k]
            sys.modules.update(saved)
        return compression, errors


compression, errors = _import_compression()
decompress = compression.decompress
compress = compression.compress
DecompressionError = errors.DecompressionError
DecompressedSizeError = errors.DecompressedSizeError
UnsupportedCompressionError = errors.UnsupportedCompressionError
KafkaLogError = errors.KafkaLogError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODECS = (GZIP, SNAPPY, LZ4, ZSTD)
NAMES = {GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

HELLO = b"hello kafka " * 3
# spec §18.2
LZ4_HELLO_V1 = bytes.fromhex(
    "04224d18 60 40 82 16000000 cf68656c6c6f206b61666b61200c00005061666b6120 00000000"
    .replace(" ", "")
)
LZ4_HELLO_V0 = bytes.fromhex(
    "04224d18 60 40 1a 16000000 cf68656c6c6f206b61666b61200c00005061666b6120 00000000"
    .replace(" ", "")
)
XERIAL_HELLO = bytes.fromhex(
    "82534e4150505900 00000001 00000001 00000011 242c68656c6c6f206b61666b61205e0c00"
    .replace(" ", "")
)
XERIAL_HEADER = bytes.fromhex("82534e4150505900 00000001 00000001".replace(" ", ""))
# spec §18.1(b): the one sarama record (21 bytes) its batches compress
SARAMA_RECORD = bytes.fromhex("28000a00080102030406050607020608090a040b0c")
JAVA_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def _payloads():
    rnd = random.Random(20240229)
    rand_100k = rnd.randbytes(100 * KiB)
    rand_1m = rnd.randbytes(MiB)
    words = [b"kafka", b"log", b"segment", b"offset", b"{\"id\":", b"\"value\":", b"}", b" "]
    comp_1m = b"".join(rnd.choice(words) for _ in range(MiB // 4))[:MiB]
    return {
        "empty": b"",
        "one-byte": b"x",
        "random-100KiB": rand_100k,
        "compressible-100KiB": comp_1m[: 100 * KiB],
        "random-1MiB": rand_1m,
        "compressible-1MiB": comp_1m,
    }


PAYLOADS = _payloads()


def _json_records(n=130, seed=1):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        key = b"user-%011d" % rnd.randrange(10**11)
        val = json.dumps(
            {"id": i, "ts": 1700000000000 + i, "event": rnd.choice(["click", "view", "buy"]),
             "page": "/p/%d" % rnd.randrange(1000), "v": round(rnd.random(), 4)},
            separators=(",", ":"),
        ).encode()
        val = (val + b" " * 100)[:100]
        out.append(bytes([len(key)]) + key + bytes([len(val)]) + val)
    return b"".join(out)


JSON_BATCH = _json_records()


def _magics(codec):
    return (2,) if codec == ZSTD else (0, 1, 2)


# ------------------------------------------------------------------------------------------
# Round trips
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(PAYLOADS))
@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: NAMES[c])
def test_round_trip(codec, magic, name):
    data = PAYLOADS[name]
    if codec == ZSTD and magic < 2:
        with pytest.raises(ValueError, match="zstd requires magic 2"):
            compress(codec, data, magic=magic)
        return
    packed = compress(codec, data, magic=magic)
    assert type(packed) is bytes
    out = decompress(codec, packed, magic=magic)
    assert type(out) is bytes
    assert out == data
    # Exact limit passes, one byte less is a bomb.
    assert decompress(codec, packed, magic=magic, max_size=len(data)) == data
    if data:
        with pytest.raises(DecompressedSizeError):
            decompress(codec, packed, magic=magic, max_size=len(data) - 1)


def test_none_codec():
    assert decompress(NONE, b"abc") == b"abc"
    assert decompress(NONE, memoryview(b"xabcx")[1:4]) == b"abc"
    assert type(decompress(NONE, bytearray(b"ab"))) is bytes
    assert compress(NONE, b"abc", magic=0) == b"abc"
    assert compress(NONE, b"", level=5) == b""


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: NAMES[c])
def test_empty_payload_is_consistent(codec):
    """compress(b"") yields a valid, non-empty stream; an empty input is no stream at all."""
    packed = compress(codec, b"")
    assert packed and decompress(codec, packed) == b""
    with pytest.raises(DecompressionError, match=NAMES[codec]):
        decompress(codec, b"")
    with pytest.raises(DecompressionError):
        decompress(codec, memoryview(b""))


def test_empty_payload_bytes():
    assert compress(GZIP, b"")[:10] == JAVA_GZIP_HEADER
    assert compress(SNAPPY, b"") == XERIAL_HEADER  # SnappyOutputStream writes its header first
    assert compress(LZ4, b"") == bytes.fromhex("04224d1860408200000000")
    assert compress(LZ4, b"", magic=0) == bytes.fromhex("04224d1860401a00000000")


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: NAMES[c])
def test_buffer_types(codec, tmp_path):
    data = JSON_BATCH
    packed = compress(codec, data)
    big = b"\xaa" * 7 + packed + b"\xbb" * 5
    assert decompress(codec, bytearray(packed)) == data
    assert decompress(codec, memoryview(big)[7:-5]) == data
    pad = (-len(packed)) % 4
    if pad == 0:  # a memoryview with a wider item format
        assert decompress(codec, memoryview(array.array("I", packed))) == data
    p = tmp_path / "blob"
    p.write_bytes(big)
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        view = memoryview(m)
        try:
            assert decompress(codec, view[7:-5]) == data
        finally:
            view.release()
    # compress accepts any buffer too
    assert decompress(codec, compress(codec, memoryview(big)[7:-5])) == packed
    assert decompress(codec, compress(codec, bytearray(data))) == data


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: NAMES[c])
def test_huge_and_zero_limits(codec):
    data = PAYLOADS["compressible-100KiB"]
    packed = compress(codec, data)
    for limit in (sys.maxsize, 2**70):
        assert decompress(codec, packed, max_size=limit) == data
    assert decompress(codec, compress(codec, b""), max_size=0) == b""
    with pytest.raises(DecompressedSizeError):
        decompress(codec, compress(codec, b"x"), max_size=0)


def test_codec_enum_and_unknown_ids():
    from kafkalog._format import CompressionType

    for ct in CompressionType:
        assert decompress(ct, compress(ct, HELLO)) == HELLO
    for bad in (5, 6, 7, -1, 255):
        with pytest.raises(UnsupportedCompressionError, match="unknown compression codec"):
            decompress(bad, b"abc")
        with pytest.raises(UnsupportedCompressionError):
            compress(bad, b"abc")
        with pytest.raises(UnsupportedCompressionError):
            compression.require(bad)
        assert compression.available(bad) is False
    with pytest.raises(TypeError):
        decompress("gzip", b"abc")
    with pytest.raises(TypeError):
        compress(True, b"abc")
    with pytest.raises(TypeError):
        decompress(True, b"abc")
    assert compression.available("gzip") is False


def test_bad_arguments():
    with pytest.raises(ValueError, match="magic"):
        compress(GZIP, b"x", magic=3)
    with pytest.raises(ValueError, match="zstd requires magic 2"):
        compress(ZSTD, b"x", magic=1)
    for codec, bad in ((GZIP, 0), (GZIP, 10), (GZIP, -2), (LZ4, 0), (LZ4, 18), (ZSTD, 23),
                       (ZSTD, -131073), (GZIP, True)):
        with pytest.raises(ValueError, match="level"):
            compress(codec, b"x", level=bad)
    with pytest.raises(TypeError):
        decompress(GZIP, compress(GZIP, b"x"), max_size="big")
    with pytest.raises(ValueError, match="max_size"):
        decompress(GZIP, compress(GZIP, b"x"), max_size=-1)
    with pytest.raises(TypeError):
        decompress(GZIP, "not bytes")


@pytest.mark.parametrize(
    "codec,levels",
    [(GZIP, (-1, 1, 5, 9)), (SNAPPY, (None, 3)), (LZ4, (1, 4, 9, 12, 17)),
     (ZSTD, (-5, 1, 3, 19, 22))],
    ids=lambda x: NAMES.get(x, "") if isinstance(x, int) else "",
)
def test_levels(codec, levels):
    data = PAYLOADS["compressible-100KiB"]
    for level in levels:
        packed = compress(codec, data, level=level)
        assert decompress(codec, packed) == data
        if codec == LZ4:
            assert packed[:7] == bytes.fromhex("04224d18604082")


# ------------------------------------------------------------------------------------------
# Reference vectors (spec §18) and writer layout
# ------------------------------------------------------------------------------------------
def test_xxh32_vectors():
    xxh32 = compression.xxh32
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    assert (xxh32(b"\x60\x40") >> 8) & 0xFF == 0x82
    assert (xxh32(b"\x04\x22\x4d\x18\x60\x40") >> 8) & 0xFF == 0x1A
    assert (xxh32(b"\x64\x70") >> 8) & 0xFF == 0xB9
    # sarama's content checksum over its 21-byte record (spec §18.1(b)): 0c3bef92 little-endian
    assert struct.pack("<I", xxh32(SARAMA_RECORD)) == bytes.fromhex("0c3bef92")


def test_xxh32_matches_lz4_block_checksums():
    lz4_frame = pytest.importorskip("lz4.frame")
    rnd = random.Random(7)
    for n in (1, 3, 4, 15, 16, 17, 31, 32, 33, 100, 1000, 5000):
        data = rnd.randbytes(n)
        f = lz4_frame.compress(data, block_checksum=True, block_linked=False, store_size=False)
        size = struct.unpack_from("<I", f, 7)[0] & 0x7FFFFFFF
        block = f[11 : 11 + size]
        assert struct.unpack_from("<I", f, 11 + size)[0] == compression.xxh32(block)
        assert compression.xxh32(data, seed=12345) == compression.xxh32(data, 12345)


def test_lz4_kafka_vectors_byte_exact():
    assert compress(LZ4, HELLO) == LZ4_HELLO_V1
    assert compress(LZ4, HELLO, magic=1) == LZ4_HELLO_V1
    assert compress(LZ4, HELLO, magic=0) == LZ4_HELLO_V0
    for magic in (0, 1, 2):
        assert decompress(LZ4, LZ4_HELLO_V1, magic=magic) == HELLO
    # KAFKA-3160: the broken header checksum is ignored for magic 0 only.
    assert decompress(LZ4, LZ4_HELLO_V0, magic=0) == HELLO
    for magic in (1, 2):
        with pytest.raises(DecompressionError, match="descriptor corrupted"):
            decompress(LZ4, LZ4_HELLO_V0, magic=magic)


def test_xerial_vector_byte_exact():
    assert compress(SNAPPY, HELLO) == XERIAL_HELLO
    for magic in (0, 1, 2):
        assert decompress(SNAPPY, XERIAL_HELLO, magic=magic) == HELLO


def test_sarama_vectors():
    """spec §18.1(b): gzip, raw snappy and lz4 (FLG 0x64 BD 0x70) as sarama writes them."""
    crc = zlib.crc32(SARAMA_RECORD)
    gz = (
        bytes.fromhex("1f8b080000096e8800ff")  # mtime set, OS 0xff
        + bytes.fromhex("011500eaff")  # stored deflate block (final), 21 bytes
        + SARAMA_RECORD
        + struct.pack("<II", crc, len(SARAMA_RECORD))
    )
    assert decompress(GZIP, gz) == SARAMA_RECORD
    # sarama's own bytes: a non-final stored block then an empty final fixed block (03 00)
    gz2 = (
        bytes.fromhex("1f8b080000096e8800ff001500eaff")
        + SARAMA_RECORD
        + bytes.fromhex("0300adc9586715000000")
    )
    assert decompress(GZIP, gz2) == SARAMA_RECORD
    raw_snappy = bytes.fromhex("1550") + SARAMA_RECORD
    assert decompress(SNAPPY, raw_snappy) == SARAMA_RECORD
    lz4 = (bytes.fromhex("04224d18 6470b9 15000080".replace(" ", "")) + SARAMA_RECORD
           + bytes.fromhex("000000000c3bef92"))
    for magic in (0, 1, 2):
        assert decompress(LZ4, lz4, magic=magic) == SARAMA_RECORD


def test_gzip_writes_java_header():
    data = PAYLOADS["compressible-100KiB"]
    for level in (None, -1, 1, 9):
        packed = compress(GZIP, data, level=level)
        assert packed[:10] == JAVA_GZIP_HEADER
        assert struct.unpack("<II", packed[-8:]) == (zlib.crc32(data), len(data))
        assert gzip_mod.decompress(packed) == data
    # default level: Deflater's -1, i.e. zlib level 6, raw deflate between header and trailer
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert compress(GZIP, data)[10:-8] == c.compress(data) + c.flush()


def test_snappy_writes_xerial_32k_chunks():
    data = PAYLOADS["compressible-100KiB"]
    packed = compress(SNAPPY, data)
    assert packed[:16] == XERIAL_HEADER
    pos, sizes = 16, []
    while pos < len(packed):
        (clen,) = struct.unpack_from(">i", packed, pos)
        block = packed[pos + 4 : pos + 4 + clen]
        n, shift, i = 0, 0, 0
        while True:
            b = block[i]
            n |= (b & 0x7F) << shift
            i += 1
            if b < 0x80:
                break
            shift += 7
        sizes.append(n)
        pos += 4 + clen
    assert pos == len(packed)
    assert sizes == [32 * KiB] * 3 + [len(data) - 96 * KiB]


def test_lz4_writes_kafka_frame_layout():
    for data, stored in ((PAYLOADS["random-1MiB"], True), (PAYLOADS["compressible-1MiB"], False)):
        for magic, hc in ((0, 0x1A), (1, 0x82), (2, 0x82)):
            packed = compress(LZ4, data, magic=magic)
            assert packed[:7] == bytes.fromhex("04224d18 6040".replace(" ", "")) + bytes([hc])
            pos, blocks = 7, 0
            while True:
                (word,) = struct.unpack_from("<I", packed, pos)
                pos += 4
                if word == 0:
                    break
                size = word & 0x7FFFFFFF
                assert size <= 64 * KiB
                assert bool(word & 0x80000000) is stored
                blocks += 1
                pos += size
            assert pos == len(packed)
            assert blocks == 16


# ------------------------------------------------------------------------------------------
# gzip
# ------------------------------------------------------------------------------------------
def test_gzip_concatenated_members():
    a, b, c = b"first member ", b"", PAYLOADS["compressible-100KiB"]
    stream = compress(GZIP, a) + gzip_mod.compress(b) + gzip_mod.compress(c, mtime=123)
    assert decompress(GZIP, stream) == a + b + c
    assert decompress(GZIP, stream, max_size=len(a + c)) == a + b + c
    with pytest.raises(DecompressedSizeError):
        decompress(GZIP, stream, max_size=len(a + c) - 1)


def test_gzip_optional_header_fields():
    buf = io.BytesIO()
    with gzip_mod.GzipFile(filename="name.txt", mode="wb", fileobj=buf, mtime=1) as f:
        f.write(JSON_BATCH)
    # FEXTRA + FNAME + FCOMMENT + FHCRC, built by hand
    body = zlib.compressobj(6, zlib.DEFLATED, -15)
    deflated = body.compress(HELLO) + body.flush()
    header = (b"\x1f\x8b\x08" + bytes([4 | 8 | 16 | 2]) + b"\0\0\0\0\0\xff" + b"\x03\x00abc"
              + b"nm\0" + b"cm\0")
    header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    member = header + deflated + struct.pack("<II", zlib.crc32(HELLO), len(HELLO))
    assert decompress(GZIP, buf.getvalue()) == JSON_BATCH
    assert decompress(GZIP, member) == HELLO
    # as the second member too (Java parses that header itself)
    assert decompress(GZIP, compress(GZIP, b"a") + member) == b"a" + HELLO


def test_gzip_trailing_bytes_like_java():
    member = compress(GZIP, HELLO)
    # GZIPInputStream ignores trailing bytes that do not parse as a gzip header
    for tail in (b"\0", b"\0\0\0\0", b"garbage!" * 3, b"\x1f", b"\x1f\x8b", b"\x1f\x8b\x08\x00\x00",
                 b"\x1f\x8b\x09" + bytes(20)):
        assert decompress(GZIP, member + tail) == HELLO
    # ... but a parseable header starts a member whose errors are reported
    with pytest.raises(DecompressionError, match="gzip"):
        decompress(GZIP, member + JAVA_GZIP_HEADER + b"\xff" * 20)
    with pytest.raises(DecompressionError, match="gzip"):
        decompress(GZIP, member + compress(GZIP, HELLO)[:-3])


def test_gzip_malformed():
    packed = compress(GZIP, JSON_BATCH)
    for n in (1, 5, 10, 11, len(packed) // 2, len(packed) - 8, len(packed) - 1):
        with pytest.raises(DecompressionError, match="gzip"):
            decompress(GZIP, packed[:n])
    bad_crc = bytearray(packed)
    bad_crc[-6] ^= 1
    with pytest.raises(DecompressionError, match="gzip"):
        decompress(GZIP, bytes(bad_crc))
    bad_size = bytearray(packed)
    bad_size[-1] ^= 1
    with pytest.raises(DecompressionError):
        decompress(GZIP, bytes(bad_size))
    with pytest.raises(DecompressionError, match="gzip"):
        decompress(GZIP, zlib.compress(JSON_BATCH))  # zlib wrapper, not gzip
    with pytest.raises(DecompressionError, match="gzip"):
        decompress(GZIP, b"\x00" * 40)


# ------------------------------------------------------------------------------------------
# snappy
# ------------------------------------------------------------------------------------------
def _raw_snappy(data):
    cramjam = pytest.importorskip("cramjam")
    return bytes(cramjam.snappy.compress_raw(data))


def test_snappy_raw_input():
    for data in (b"a", HELLO, JSON_BATCH, PAYLOADS["random-100KiB"], PAYLOADS["compressible-1MiB"]):
        assert decompress(SNAPPY, _raw_snappy(data)) == data
    assert decompress(SNAPPY, b"\x00") == b""  # the raw encoding of b""
    # shorter than 16 bytes, even with the magic prefix: raw (and here invalid)
    with pytest.raises(DecompressionError, match="snappy"):
        decompress(SNAPPY, XERIAL_HEADER[:12])


def test_snappy_concatenated_xerial_streams():
    a, b = JSON_BATCH, PAYLOADS["compressible-100KiB"]
    stream = (compress(SNAPPY, a) + compress(SNAPPY, b) + compress(SNAPPY, b"")
              + compress(SNAPPY, HELLO))
    assert decompress(SNAPPY, stream) == a + b + HELLO
    with pytest.raises(DecompressedSizeError):
        decompress(SNAPPY, stream, max_size=len(a + b + HELLO) - 1)


def test_snappy_xerial_edge_cases():
    chunk = _raw_snappy(HELLO)
    one = XERIAL_HEADER + struct.pack(">i", len(chunk)) + chunk
    assert decompress(SNAPPY, one) == HELLO
    # 1-3 trailing bytes end the stream (SnappyInputStream.hasNextChunk)
    for tail in (b"\0", b"\0\0", b"\xff\xff\xff"):
        assert decompress(SNAPPY, one + tail) == HELLO
    # chunk length 0x82534E41 starting an invalid header: reading stops there
    assert decompress(SNAPPY, one + b"\x82SNA" + b"x" * 12 + b"more garbage") == HELLO
    # ... a truncated concatenated header is an error
    with pytest.raises(DecompressionError, match="concatenated"):
        decompress(SNAPPY, one + XERIAL_HEADER[:10])
    with pytest.raises(DecompressionError, match="negative"):
        decompress(SNAPPY, one + struct.pack(">i", -5) + chunk)
    with pytest.raises(DecompressionError, match="greater than the maximum"):
        decompress(SNAPPY, one + struct.pack(">i", 600 * MiB) + chunk)
    with pytest.raises(DecompressionError, match="truncated"):
        decompress(SNAPPY, one + struct.pack(">i", len(chunk) + 1) + chunk)
    with pytest.raises(DecompressionError, match="empty"):
        decompress(SNAPPY, one + struct.pack(">i", 0))
    with pytest.raises(DecompressionError, match="version"):
        decompress(SNAPPY, XERIAL_HEADER[:8] + bytes(8) + struct.pack(">i", len(chunk)) + chunk)
    # other header versions are accepted (Java checks version >= 1 only)
    assert decompress(SNAPPY, XERIAL_HEADER[:8] + struct.pack(">ii", 7, 3)
                      + struct.pack(">i", len(chunk)) + chunk) == HELLO
    # header only: empty output
    assert decompress(SNAPPY, XERIAL_HEADER) == b""
    corrupt = bytearray(one)
    corrupt[-3] ^= 0xFF
    with pytest.raises(DecompressionError, match="snappy"):
        decompress(SNAPPY, bytes(corrupt))


def test_snappy_declared_length_mismatch():
    chunk = bytearray(_raw_snappy(HELLO))
    chunk[0] = len(HELLO) + 1  # declared length one larger than the content
    with pytest.raises(DecompressionError, match="snappy"):
        decompress(SNAPPY, bytes(chunk))
    with pytest.raises(DecompressionError, match="impossible"):
        decompress(SNAPPY, b"\xff\xff\xff\xff\x0f" + b"\0" * 10)
    with pytest.raises(DecompressionError, match="varint"):
        decompress(SNAPPY, b"\xff\xff\xff\xff\xff\xff")


# ------------------------------------------------------------------------------------------
# lz4
# ------------------------------------------------------------------------------------------
def _lz4f():
    return pytest.importorskip("lz4.frame")


def _lz4_block(data):
    """A raw LZ4 block (no size prefix), as a frame carries it."""
    return pytest.importorskip("lz4.block").compress(data, store_size=False)


def _frame(flg, bd, blocks, *, magic_hc=False, content_size=None, end=True, content_checksum=None):
    desc = bytes([flg, bd]) + (struct.pack("<Q", content_size) if content_size is not None else b"")
    hc_input = (b"\x04\x22\x4d\x18" + desc) if magic_hc else desc
    out = b"\x04\x22\x4d\x18" + desc + bytes([(compression.xxh32(hc_input) >> 8) & 0xFF])
    for word, payload in blocks:
        out += struct.pack("<I", word) + payload
    if end:
        out += b"\0\0\0\0"
    if content_checksum is not None:
        out += struct.pack("<I", content_checksum)
    return out


def test_lz4_frames_of_other_clients():
    lz4f = _lz4f()
    data = PAYLOADS["compressible-1MiB"] + PAYLOADS["random-100KiB"]
    variants = [
        dict(store_size=True),
        dict(content_checksum=True),
        dict(block_checksum=True),
        dict(block_checksum=True, content_checksum=True, store_size=True),
        dict(block_size=lz4f.BLOCKSIZE_MAX256KB),
        dict(block_size=lz4f.BLOCKSIZE_MAX1MB, block_checksum=True),
        dict(block_size=lz4f.BLOCKSIZE_MAX4MB, store_size=False, content_checksum=True),  # sarama
        dict(compression_level=12),
    ]
    for kw in variants:
        frame = lz4f.compress(data, block_linked=False, **kw)
        for magic in (0, 1, 2):
            assert decompress(LZ4, frame, magic=magic) == data, kw
    sarama = lz4f.compress(data, block_linked=False, block_size=lz4f.BLOCKSIZE_MAX4MB,
                           store_size=False, content_checksum=True)
    assert sarama[4:7] == bytes.fromhex("6470b9")
    # small inputs: python-lz4 shrinks the block size to fit, still fine
    for n in (0, 1, 100, 70000):
        frame = lz4f.compress(PAYLOADS["compressible-1MiB"][:n], block_linked=False,
                              store_size=True, content_checksum=True)
        assert decompress(LZ4, frame) == PAYLOADS["compressible-1MiB"][:n]


def test_lz4_streaming_writer_4mib_blocks():
    lz4f = _lz4f()
    data = PAYLOADS["compressible-1MiB"] * 5
    with lz4f.LZ4FrameCompressor(block_size=lz4f.BLOCKSIZE_MAX4MB, block_linked=False,
                                 content_checksum=True) as c:
        frame = c.begin() + c.compress(data) + c.flush()
    assert frame[5] == 0x70
    assert decompress(LZ4, frame) == data
    with pytest.raises(DecompressedSizeError):
        decompress(LZ4, frame, max_size=len(data) - 1)


def test_lz4_linked_blocks_rejected():
    lz4f = _lz4f()
    frame = lz4f.compress(PAYLOADS["compressible-1MiB"], block_linked=True, store_size=False)
    assert not frame[4] & 0x20
    with pytest.raises(DecompressionError, match="[Dd]ependent block"):
        decompress(LZ4, frame)


def test_lz4_header_checks():
    blk = _lz4_block(HELLO)
    blocks = [(len(blk), blk)]
    assert decompress(LZ4, _frame(0x60, 0x40, blocks)) == HELLO
    with pytest.raises(DecompressionError, match="invalid magic"):
        decompress(LZ4, b"\x05" + _frame(0x60, 0x40, blocks)[1:])
    with pytest.raises(DecompressionError, match="[Rr]eserved"):
        decompress(LZ4, _frame(0x61, 0x40, blocks))  # DictID bit: reserved for Kafka
    with pytest.raises(DecompressionError, match="[Rr]eserved"):
        decompress(LZ4, _frame(0x62, 0x40, blocks))
    with pytest.raises(DecompressionError, match="version"):
        decompress(LZ4, _frame(0xA0, 0x40, blocks))
    with pytest.raises(DecompressionError, match="[Rr]eserved BD"):
        decompress(LZ4, _frame(0x60, 0x41, blocks))
    with pytest.raises(DecompressionError, match="[Rr]eserved BD"):
        decompress(LZ4, _frame(0x60, 0xC0, blocks))
    with pytest.raises(DecompressionError, match="block size value 3"):
        decompress(LZ4, _frame(0x60, 0x30, blocks))
    # content size: skipped (not checked against the output), but part of the header checksum
    assert decompress(LZ4, _frame(0x68, 0x40, blocks, content_size=12345)) == HELLO
    bad = bytearray(_frame(0x68, 0x40, blocks, content_size=len(HELLO)))
    bad[14] ^= 0xFF
    with pytest.raises(DecompressionError, match="descriptor corrupted"):
        decompress(LZ4, bytes(bad))
    assert decompress(LZ4, bytes(bad), magic=0) == HELLO
    assert decompress(LZ4, _frame(0x68, 0x40, blocks, content_size=len(HELLO), magic_hc=True),
                      magic=0) == HELLO
    with pytest.raises(DecompressionError, match="prematurely"):
        decompress(LZ4, _frame(0x68, 0x40, blocks, content_size=1)[:12])


def test_lz4_block_checks():
    blk = _lz4_block(HELLO)
    # block larger than the declared maximum
    big = b"x" * (64 * KiB + 1)
    with pytest.raises(DecompressionError, match="exceeded max"):
        decompress(LZ4, _frame(0x60, 0x40, [(len(big) | 0x80000000, big)]))
    assert decompress(LZ4, _frame(0x60, 0x50, [(len(big) | 0x80000000, big)])) == big
    # stored blocks, mixed with compressed ones
    assert decompress(LZ4, _frame(0x60, 0x40, [(0x80000003, b"abc"), (len(blk), blk),
                                               (0x80000001, b"!")])) == b"abc" + HELLO + b"!"
    # missing end mark, truncated block, truncated block header
    for frame in (
        _frame(0x60, 0x40, [(len(blk), blk)], end=False),
        _frame(0x60, 0x40, [(len(blk), blk)])[:-6],
        _frame(0x60, 0x40, [(len(blk), blk)])[:9],
    ):
        with pytest.raises(DecompressionError, match="prematurely"):
            decompress(LZ4, frame)
    # content checksum: read but not verified (as Kafka); missing -> premature end
    assert decompress(LZ4,
                      _frame(0x64, 0x40, [(len(blk), blk)], content_checksum=0xDEADBEEF)) == HELLO
    with pytest.raises(DecompressionError, match="content checksum"):
        decompress(LZ4, _frame(0x64, 0x40, [(len(blk), blk)]))
    # bytes after the end mark are ignored (as Kafka)
    assert decompress(LZ4, LZ4_HELLO_V1 + b"trailing") == HELLO
    # corrupt compressed block
    with pytest.raises(DecompressionError, match="corrupt block"):
        decompress(LZ4, _frame(0x60, 0x40, [(5, b"\xff\xff\xff\xff\xff")]))
    # an end mark with the "stored" bit is an end mark (Kafka masks the bit first)
    assert decompress(LZ4,
                      _frame(0x60, 0x40, [(len(blk), blk), (0x80000000, b"")], end=False)) == HELLO


def test_lz4_block_checksums_verified():
    lz4f = _lz4f()
    data = PAYLOADS["compressible-100KiB"] + PAYLOADS["random-100KiB"]
    frame = lz4f.compress(data, block_linked=False, block_checksum=True, store_size=False)
    assert frame[4] & 0x10
    assert decompress(LZ4, frame) == data
    size = struct.unpack_from("<I", frame, 7)[0] & 0x7FFFFFFF
    for pos in (11 + size, 11 + size + 3, 11 + 10):  # in the checksum, in the data
        bad = bytearray(frame)
        bad[pos] ^= 0x40
        with pytest.raises(DecompressionError, match="lz4"):
            decompress(LZ4, bytes(bad))
    bad = bytearray(frame)
    bad[11 + size] ^= 1
    with pytest.raises(DecompressionError, match="checksum mismatch"):
        decompress(LZ4, bytes(bad))
    with pytest.raises(DecompressionError, match="prematurely"):
        decompress(LZ4, frame[: 11 + size + 2])


def test_lz4_corrupt_header_checksum_magic_ge_1():
    bad = bytearray(LZ4_HELLO_V1)
    bad[6] ^= 0x01
    for magic in (1, 2):
        with pytest.raises(DecompressionError, match="descriptor corrupted"):
            decompress(LZ4, bytes(bad), magic=magic)
    assert decompress(LZ4, bytes(bad), magic=0) == HELLO


# ------------------------------------------------------------------------------------------
# zstd
# ------------------------------------------------------------------------------------------
def _zstd():
    return pytest.importorskip("zstandard")


def test_zstd_frames_without_content_size():
    zstd = _zstd()
    for data in (b"", b"a", JSON_BATCH, PAYLOADS["compressible-1MiB"], PAYLOADS["random-1MiB"]):
        f = zstd.ZstdCompressor(level=3, write_content_size=False).compress(data)
        assert zstd.frame_content_size(f) == -1
        assert decompress(ZSTD, f) == data
        # streaming writer, as zstd-jni's ZstdOutputStream
        buf = io.BytesIO()
        with zstd.ZstdCompressor(level=3).stream_writer(buf, closefd=False) as w:
            w.write(data)
        assert decompress(ZSTD, buf.getvalue()) == data
        co = zstd.ZstdCompressor(level=1, write_checksum=True).compressobj()
        f2 = co.compress(data) + co.flush()
        assert decompress(ZSTD, f2) == data
    f = zstd.ZstdCompressor(write_content_size=False).compress(JSON_BATCH)
    assert decompress(ZSTD, f, max_size=len(JSON_BATCH)) == JSON_BATCH
    with pytest.raises(DecompressedSizeError):
        decompress(ZSTD, f, max_size=len(JSON_BATCH) - 1)


def test_zstd_concatenated_and_skippable_frames():
    zstd = _zstd()
    a, b, c = JSON_BATCH, PAYLOADS["compressible-100KiB"], HELLO
    fa = zstd.ZstdCompressor().compress(a)  # with content size
    fb = zstd.ZstdCompressor(write_content_size=False).compress(b)
    fc = compress(ZSTD, c)
    fe = zstd.ZstdCompressor().compress(b"")
    skip = struct.pack("<II", 0x184D2A50, 5) + b"skip!"
    for stream, expect in (
        (fa + fb + fc, a + b + c),
        (fb + fa, b + a),
        (fe + fa, a),
        (fa + fe + fe + fc, a + c),
        (skip + fa + skip + fb, a + b),
        (fa + skip, a),
    ):
        assert decompress(ZSTD, stream) == expect
        assert decompress(ZSTD, stream, max_size=len(expect)) == expect
        if expect:
            with pytest.raises(DecompressedSizeError):
                decompress(ZSTD, stream, max_size=len(expect) - 1)


def test_zstd_malformed():
    zstd = _zstd()
    for f in (
        zstd.ZstdCompressor().compress(JSON_BATCH),
        zstd.ZstdCompressor(write_content_size=False, write_checksum=True).compress(JSON_BATCH),
    ):
        for n in (1, 3, 4, 5, 8, len(f) // 2, len(f) - 1):
            with pytest.raises(DecompressionError, match="zstd"):
                decompress(ZSTD, f[:n])
        with pytest.raises(DecompressionError, match="zstd"):
            decompress(ZSTD, f + b"trailing garbage")
        with pytest.raises(DecompressionError, match="zstd"):
            decompress(ZSTD, f + f[:10])
    f = bytearray(zstd.ZstdCompressor(write_checksum=True).compress(JSON_BATCH))
    f[-1] ^= 0xFF
    with pytest.raises(DecompressionError, match="zstd"):
        decompress(ZSTD, bytes(f))
    with pytest.raises(DecompressionError, match="zstd"):
        decompress(ZSTD, b"\xab" * 139)  # librdkafka's garbage batch
    # a zstd frame inside a magic 0/1 message is read (only writing it is refused)
    assert decompress(ZSTD, compress(ZSTD, HELLO), magic=1) == HELLO


# ------------------------------------------------------------------------------------------
# Decompression bombs: bounded time and memory
# ------------------------------------------------------------------------------------------
def _gzip_bomb(total=GiB):
    z = bytes(MiB)
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    seg = co.compress(z) + co.flush(zlib.Z_FULL_FLUSH)  # byte-aligned, history-free: repeatable
    crc = 0
    for _ in range(total // MiB):
        crc = zlib.crc32(z, crc)
    return JAVA_GZIP_HEADER + seg * (total // MiB) + b"\x03\x00" + struct.pack("<II", crc,
                                                                               total & 0xFFFFFFFF)


def _raw_snappy_zeros(total):
    """A valid raw snappy block of ``total`` zero bytes (one literal then 64-byte copies)."""
    varint = bytearray()
    n = total
    while n >= 0x80:
        varint.append((n & 0x7F) | 0x80)
        n >>= 7
    varint.append(n)
    copies, rest = divmod(total - 1, 64)
    body = b"\x00\x00" + b"\xfe\x01\x00" * copies
    if rest:
        body += bytes([((rest - 1) << 2) | 2, 1, 0])
    return bytes(varint) + body


def _snappy_xerial_bomb(total=GiB):
    chunk = _raw_snappy(bytes(32 * KiB))
    return XERIAL_HEADER + (struct.pack(">i", len(chunk)) + chunk) * (total // (32 * KiB))


def _lz4_bomb(total=GiB):
    blk = _lz4_block(bytes(64 * KiB))
    return LZ4_HELLO_V1[:7] + (struct.pack("<I",
                                           len(blk)) + blk) * (total // (64 * KiB)) + b"\0\0\0\0"


def _zstd_bomb(total=GiB, content_size=False):
    zstd = _zstd()
    z = bytes(MiB)
    if content_size:
        co = zstd.ZstdCompressor(level=1).compressobj(size=total)
    else:
        co = zstd.ZstdCompressor(level=1).compressobj()
    return b"".join([co.compress(z) for _ in range(total // MiB)] + [co.flush()])


@pytest.fixture(scope="module")
def bombs():
    zstd = _zstd()
    one_mib_frame = zstd.ZstdCompressor(level=1).compress(bytes(MiB))
    return {
        "gzip": (GZIP, _gzip_bomb()),
        "gzip-members": (GZIP, compress(GZIP, bytes(MiB)) * 64),
        "snappy-raw": (SNAPPY, _raw_snappy_zeros(GiB)),
        "snappy-xerial": (SNAPPY, _snappy_xerial_bomb()),
        "lz4": (LZ4, _lz4_bomb()),
        "zstd": (ZSTD, _zstd_bomb()),
        "zstd-content-size": (ZSTD, _zstd_bomb(content_size=True)),
        "zstd-frames": (ZSTD, one_mib_frame * 64),
    }


def test_bomb_builders_are_valid():
    zstd = _zstd()
    cramjam = pytest.importorskip("cramjam")
    assert bytes(cramjam.snappy.decompress_raw(_raw_snappy_zeros(MiB + 5))) == bytes(MiB + 5)
    assert zlib.decompress(_gzip_bomb(4 * MiB), 31) == bytes(4 * MiB)
    assert decompress(GZIP, _gzip_bomb(4 * MiB)) == bytes(4 * MiB)
    assert decompress(SNAPPY, _raw_snappy_zeros(MiB + 5)) == bytes(MiB + 5)
    assert decompress(SNAPPY, _snappy_xerial_bomb(4 * MiB)) == bytes(4 * MiB)
    assert decompress(LZ4, _lz4_bomb(4 * MiB)) == bytes(4 * MiB)
    assert decompress(ZSTD, _zstd_bomb(4 * MiB)) == bytes(4 * MiB)
    assert zstd.frame_content_size(_zstd_bomb(4 * MiB, content_size=True)) == 4 * MiB


@pytest.mark.parametrize(
    "name",
    ["gzip", "gzip-members", "snappy-raw", "snappy-xerial", "lz4", "zstd", "zstd-content-size",
     "zstd-frames"],
)
def test_bomb_is_refused_quickly_in_bounded_memory(bombs, name):
    codec, bomb = bombs[name]
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        t0 = time.perf_counter()
        with pytest.raises(DecompressedSizeError, match=NAMES[codec]) as info:
            decompress(codec, bomb, max_size=MiB)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(info.value, DecompressionError)
    assert elapsed < 5.0, elapsed
    assert peak < 16 * MiB, peak


_RSS_CHILD = textwrap.dedent(
    """
    import resource, sys, types
    sys.path.insert(0, {src!r})
    try:
        import kafkalog.compression as c
        import kafkalog.errors as e
    except Exception:
        for k in [k for k in sys.modules if k.startswith("kafkalog")]:
            del sys.modules[k]
        pkg = types.ModuleType("kafkalog"); pkg.__path__ = [{pkg!r}]
        sys.modules["kafkalog"] = pkg
        import kafkalog.compression as c
        import kafkalog.errors as e
    codec = int(sys.argv[1])
    data = open(sys.argv[2], "rb").read()
    c.require(codec)
    c.decompress(codec, c.compress(codec, b"warm up" * 100))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        c.decompress(codec, data, max_size=1 << 20)
    except e.DecompressedSizeError:
        pass
    else:
        raise SystemExit("no DecompressedSizeError")
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print((after - before) * 1024)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="ru_maxrss in KiB is Linux-specific")
def test_bomb_peak_rss(bombs, tmp_path):
    """The same, measured as the process' peak RSS (catches allocations tracemalloc misses)."""
    script = tmp_path / "child.py"
    script.write_text(_RSS_CHILD.format(src=str(SRC), pkg=str(SRC / "kafkalog")))
    for name, (codec, bomb) in bombs.items():
        path = tmp_path / f"{name}.bin"
        path.write_bytes(bomb)
        out = subprocess.run(
            [sys.executable, str(script), str(codec), str(path)], capture_output=True, text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        delta = int(out.stdout.strip().splitlines()[-1])
        assert delta < 64 * MiB, (name, delta)


def test_lz4_bomb_stops_at_the_limit():
    """A 1 GiB lz4 bomb stops at the limit; the same stream cut to the limit decodes."""
    bomb = _lz4_bomb(GiB)
    with pytest.raises(DecompressedSizeError):
        decompress(LZ4, bomb, max_size=8 * MiB)
    assert decompress(LZ4, _lz4_bomb(8 * MiB), max_size=8 * MiB) == bytes(8 * MiB)


# ------------------------------------------------------------------------------------------
# Corrupt input never raises anything but kafkalog errors
# ------------------------------------------------------------------------------------------
try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    given = None

PREFIXES = {
    GZIP: JAVA_GZIP_HEADER,
    SNAPPY: XERIAL_HEADER,
    LZ4: bytes.fromhex("04224d18604082"),
    ZSTD: b"\x28\xb5\x2f\xfd",
}
SAMPLES = {codec: compress(codec, JSON_BATCH[:3000]) for codec in CODECS}
SAMPLES_MAGIC0_LZ4 = compress(LZ4, JSON_BATCH[:3000], magic=0)


def _only_kafkalog_errors(codec, data, magic):
    try:
        out = decompress(codec, data, magic=magic, max_size=4 * MiB)
    except DecompressionError:
        return None
    assert type(out) is bytes
    return out


if given is not None:

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        codec=st.sampled_from(CODECS),
        magic=st.sampled_from([0, 1, 2]),
        prefixed=st.booleans(),
        data=st.binary(max_size=600),
    )
    def test_fuzz_random_bytes(codec, magic, prefixed, data):
        if prefixed:
            data = PREFIXES[codec] + data
        _only_kafkalog_errors(codec, data, magic)

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        codec=st.sampled_from(CODECS),
        magic=st.sampled_from([0, 1, 2]),
        flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), min_size=1, max_size=4),
        cut=st.one_of(st.none(), st.integers(0, 10**6)),
    )
    def test_fuzz_bit_flips_and_truncation(codec, magic, flips, cut):
        base = SAMPLES_MAGIC0_LZ4 if (codec == LZ4 and magic == 0) else SAMPLES[codec]
        buf = bytearray(base)
        for pos, bit in flips:
            buf[pos % len(buf)] ^= 1 << bit
        if cut is not None:
            del buf[cut % (len(buf) + 1) :]
        _only_kafkalog_errors(codec, bytes(buf), magic)

else:  # pragma: no cover

    @pytest.mark.skip(reason="hypothesis is not installed")
    def test_fuzz_random_bytes():
        pass


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD], ids=lambda c: NAMES[c])
def test_every_truncation_is_an_error(codec):
    packed = compress(codec, JSON_BATCH)
    for n in range(len(packed)):
        with pytest.raises(DecompressionError):
            decompress(codec, packed[:n])


def test_snappy_truncations_error_or_yield_a_prefix():
    """Java's xerial reader ends quietly on 0-3 bytes after a chunk: output is then a prefix."""
    data = PAYLOADS["compressible-100KiB"]
    packed = compress(SNAPPY, data)
    for n in range(0, len(packed), 97):
        try:
            out = decompress(SNAPPY, packed[:n])
        except DecompressionError:
            continue
        assert data.startswith(out)


# ------------------------------------------------------------------------------------------
# Libraries: lazy imports, missing libraries
# ------------------------------------------------------------------------------------------
@pytest.fixture
def fresh_libraries():
    compression._reset_libraries()
    yield
    compression._reset_libraries()


def _block_imports(monkeypatch, *blocked):
    real = compression._import

    def fake(name):
        if name in blocked or name.split(".")[0] in blocked:
            raise ImportError(f"No module named {name!r}")
        return real(name)

    monkeypatch.setattr(compression, "_import", fake)


@pytest.mark.parametrize(
    "codec,blocked,extra",
    [(SNAPPY, ("cramjam", "snappy"), "snappy"), (LZ4, ("lz4",), "lz4"),
     (ZSTD, ("zstandard",), "zstd")],
    ids=["snappy", "lz4", "zstd"],
)
def test_missing_library(monkeypatch, fresh_libraries, codec, blocked, extra):
    _block_imports(monkeypatch, *blocked)
    hint = f"pip install 'kafkalog[{extra}]'"
    assert compression.available(codec) is False
    with pytest.raises(UnsupportedCompressionError) as info:
        compression.require(codec)
    assert hint in str(info.value)
    with pytest.raises(UnsupportedCompressionError, match=r"kafkalog\[" + extra):
        decompress(codec, b"\x04\x22\x4d\x18\x28\xb5\x2f\xfd" * 4)
    with pytest.raises(UnsupportedCompressionError, match=r"kafkalog\[" + extra):
        compress(codec, b"abc")
    # other codecs are unaffected
    for other in (NONE, GZIP) + tuple(c for c in CODECS if c != codec):
        assert compression.available(other)
        assert decompress(other, compress(other, HELLO)) == HELLO
    # the failure is remembered until the libraries are reset
    monkeypatch.undo()
    assert compression.available(codec) is False
    compression._reset_libraries()
    assert compression.available(codec) is True


def test_snappy_falls_back_to_python_snappy(monkeypatch, fresh_libraries):
    pytest.importorskip("snappy")
    _block_imports(monkeypatch, "cramjam")
    assert compression.available(SNAPPY)
    assert compress(SNAPPY, HELLO) == XERIAL_HELLO
    assert decompress(SNAPPY, XERIAL_HELLO) == HELLO
    assert (decompress(SNAPPY, compress(SNAPPY, PAYLOADS["compressible-100KiB"]))
            == PAYLOADS["compressible-100KiB"])
    with pytest.raises(DecompressionError, match="snappy"):
        decompress(SNAPPY, XERIAL_HELLO[:-3] + b"\xff\xff\xff")


def test_gzip_and_none_always_available():
    for codec in (NONE, GZIP):
        assert compression.available(codec)
        compression.require(codec)


def test_import_is_light():
    code = textwrap.dedent(
        f"""
        import sys, types
        pkg = types.ModuleType("kafkalog"); pkg.__path__ = [{str(SRC / "kafkalog")!r}]
        sys.modules["kafkalog"] = pkg
        import kafkalog.compression
        loaded = sorted(m for m in ("lz4", "zstandard", "cramjam", "snappy") if m in sys.modules)
        mods = sorted(m for m in sys.modules if m.startswith("kafkalog."))
        print(loaded, mods)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("[] ['kafkalog._format', 'kafkalog.compression', "
                                  "'kafkalog.errors']")


def test_thread_safety():
    items = []
    for i in range(8):
        data = _json_records(40 + i, seed=i)
        items.append((data, {c: compress(c, data) for c in CODECS}))
    errors_seen = []

    def work(k):
        data, packed = items[k % len(items)]
        for _ in range(100):
            for codec in CODECS:
                if decompress(codec, packed[codec]) != data:
                    errors_seen.append((k, codec))
            if decompress(ZSTD, compress(ZSTD, data, level=1 + k % 3)) != data:
                errors_seen.append((k, "zstd-compress"))
        return True

    with ThreadPoolExecutor(max_workers=8) as ex:
        assert all(ex.map(work, range(16)))
    assert not errors_seen


# ------------------------------------------------------------------------------------------
# Cross-checks with other Python Kafka clients
# ------------------------------------------------------------------------------------------
CROSS_DATA = [HELLO, JSON_BATCH, PAYLOADS["compressible-100KiB"] * 2, PAYLOADS["random-100KiB"]]


def _clients():
    out = []
    with warnings.catch_warnings():  # kafka-python warns about importlib.resources at import
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import aiokafka.codec as aio

            out.append(("aiokafka", aio))
        except Exception:  # pragma: no cover
            pass
        try:
            import kafka.codec as kp

            out.append(("kafka-python", kp))
        except Exception:  # pragma: no cover
            pass
    return out


CLIENTS = _clients()


@pytest.mark.skipif(not CLIENTS, reason="neither aiokafka nor kafka-python is installed")
@pytest.mark.parametrize("client", [c[0] for c in CLIENTS])
def test_cross_client_codecs(client):
    mod = dict(CLIENTS)[client]
    checked = []
    for data in CROSS_DATA:
        if mod.has_gzip():
            assert decompress(GZIP, mod.gzip_encode(data)) == data
            assert bytes(mod.gzip_decode(compress(GZIP, data))) == data
            checked.append("gzip")
        if mod.has_snappy():
            assert decompress(SNAPPY, bytes(mod.snappy_encode(data))) == data  # xerial
            assert decompress(SNAPPY, bytes(mod.snappy_encode(data, xerial_compatible=False))
                              ) == data  # raw
            assert decompress(SNAPPY, bytes(mod.snappy_encode(data, xerial_blocksize=4096))) == data
            assert bytes(mod.snappy_decode(compress(SNAPPY, data))) == data
            checked.append("snappy")
        if mod.has_lz4():
            assert decompress(LZ4, bytes(mod.lz4_encode(data))) == data
            for magic in (1, 2):
                assert bytes(mod.lz4_decode(compress(LZ4, data, magic=magic))) == data
            checked.append("lz4")
        if mod.has_zstd():
            assert decompress(ZSTD, bytes(mod.zstd_encode(data))) == data
            assert bytes(mod.zstd_decode(compress(ZSTD, data))) == data
            checked.append("zstd")
    assert {"gzip", "snappy", "lz4", "zstd"} <= set(checked)


class _XXH32Shim:
    """Stands in for the ``xxhash`` package kafka-python wants for magic-0 lz4."""

    class xxh32:  # noqa: N801 - mirrors xxhash.xxh32
        def __init__(self, data=b""):
            self._h = compression.xxh32(data)

        def digest(self):
            return self._h.to_bytes(4, "big")


def test_kafka_python_magic0_lz4_framing(monkeypatch):
    """kafka-python's 0.8/0.9 framing (broken HC) interoperates with ours, byte for byte."""
    kp = dict(CLIENTS).get("kafka-python")
    if kp is None or not kp.has_lz4():
        pytest.skip("kafka-python with lz4 is not installed")
    if getattr(kp, "xxhash", None) is None:
        monkeypatch.setattr(kp, "xxhash", _XXH32Shim)
    assert kp.lz4_encode_old_kafka(HELLO) == LZ4_HELLO_V0
    for data in CROSS_DATA:
        theirs = kp.lz4_encode_old_kafka(data)
        assert theirs[4:7] == bytes.fromhex("60401a")
        assert decompress(LZ4, theirs, magic=0) == data
        with pytest.raises(DecompressionError, match="descriptor corrupted"):
            decompress(LZ4, theirs, magic=1)
        assert kp.lz4_decode_old_kafka(compress(LZ4, data, magic=0)) == data


# ------------------------------------------------------------------------------------------
# Real streams from the conformance corpus
# ------------------------------------------------------------------------------------------
VECTORS = list(conformance_vectors().values()) or None


def _uvarint(buf, pos):
    n = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7


def _count_v2_records(section):
    pos = count = 0
    while pos < len(section):
        z, pos = _uvarint(section, pos)
        length = (z >> 1) ^ -(z & 1)
        assert length >= 0
        pos += length
        count += 1
    assert pos == len(section)
    return count


def _count_entries(buf):
    pos = count = 0
    while pos < len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        pos += 12 + size
        count += 1
    assert pos == len(buf)
    return count


def _legacy_parts(msg):
    """(magic, codec, value) of a legacy message starting at its CRC field."""
    magic, attrs = msg[4], msg[5]
    pos = 6 + (8 if magic == 1 else 0)
    (klen,) = struct.unpack_from(">i", msg, pos)
    pos += 4 + max(klen, 0)
    (vlen,) = struct.unpack_from(">i", msg, pos)
    return magic, attrs & 7, (msg[pos + 4 : pos + 4 + vlen] if vlen >= 0 else None)


def _compressed_pieces(buf, kind, expect):
    """Yield (codec, magic, payload, checker) for every compressed piece of a vector."""
    if kind == "other":
        if "codec" in expect:
            codec = {"gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}[expect["codec"]]
            magic = 0 if expect.get("lz4_hc_variant") == "broken_kafka_magic0" else 2
            yield codec, magic, buf, ("other", expect)
        return
    if kind in ("v0_message", "v1_message") and expect.get("framing") == "bare":
        magic, codec, value = _legacy_parts(buf)
        if codec:
            yield codec, magic, value, ("legacy", expect)
        return
    pos = 0
    while len(buf) - pos >= 17:
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        end = pos + 12 + size
        if size < 14 or end > len(buf):
            break
        magic = buf[pos + 16]
        if magic == 2 and size >= 49:
            codec = struct.unpack_from(">h", buf, pos + 21)[0] & 7
            (count,) = struct.unpack_from(">i", buf, pos + 57)
            if codec and count:
                yield codec, 2, buf[pos + 61 : end], ("v2", count)
        elif magic in (0, 1):
            _, codec, value = _legacy_parts(buf[pos + 12 : end])
            if codec:
                yield codec, magic, value, ("legacy", None)
        pos = end


@pytest.mark.skipif(VECTORS is None, reason=CONFORMANCE_SKIP_REASON)
def test_conformance_corpus_streams():
    seen = {c: 0 for c in CODECS}
    broken_hc = 0
    for v in VECTORS:
        expect = v.get("expect", {})
        buf = bytes.fromhex(v["hex"])
        for codec, magic, payload, (what, info) in _compressed_pieces(buf, v["kind"], expect):
            if v.get("malformed"):
                with pytest.raises(DecompressionError):
                    decompress(codec, payload, magic=magic)
                continue
            out = decompress(codec, payload, magic=magic)
            seen[codec] += 1
            if what == "v2":
                assert _count_v2_records(out) == info, v["id"]
            elif what == "legacy":
                if info and "wrapper_value_decompressed" in info:
                    assert out.hex() == info["wrapper_value_decompressed"]["hex"], v["id"]
                if out:
                    n = _count_entries(out)
                    if info and "inner" in info:
                        assert n == len(info["inner"]), v["id"]
            else:
                if "decompressed" in info:
                    d = info["decompressed"]
                    assert out == (d["utf8"].encode() if "utf8" in d
                                   else bytes.fromhex(d["hex"])), v["id"]
                if "decompressed_sha256" in info:
                    assert hashlib.sha256(out).hexdigest() == info["decompressed_sha256"], v["id"]
                if "decompressed_length" in info:
                    assert len(out) == info["decompressed_length"], v["id"]
            if codec == LZ4 and magic == 0 and payload[6] != compress(LZ4, b"")[6]:
                broken_hc += 1
                with pytest.raises(DecompressionError, match="descriptor corrupted"):
                    decompress(codec, payload, magic=1)
    assert all(seen.values()), seen
    assert broken_hc >= 1
