"""Every wire-format number is declared once in ``kafkalog._format`` (the columnar twins' column
bits and error codes once in ``kafkalog._arrow_common``); the compiled twins repeat the numbers
they need as C constants (``cdef enum`` members, ``cdef`` integer globals).  These tests check
that each such C constant agrees with the Python one of the same meaning - read from the
.pyx/.pxd sources, so both twins' runs check them - and that the boundaries the constants stand
for (the smallest log entry, the v2 header, the widest varint) are where ``_format`` puts them,
in every twin that is built."""
from __future__ import annotations

import ast
import importlib
import os
import re
import struct

import pytest

from kafkalog import _arrow_common, _format
from kafkalog.errors import CorruptRecordError

PKG_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "src", "kafkalog"))

# C names that say the same as a _format name spelt differently
ALIASES = {
    "TS_MASK": "LEGACY_TIMESTAMP_TYPE_MASK",
    "CODEC_MASK": "COMPRESSION_CODEC_MASK",
    "KL_MAX_VARINT_BYTES": "MAX_VARINT_BYTES",
    "KL_MAX_VARLONG_BYTES": "MAX_VARLONG_BYTES",
    "INT32_MAX_": "INT32_MAX",
    "INT64_MAX_": "INT64_MAX",
    "I64_MAX": "INT64_MAX",
}
# modules whose C constants mirror _arrow_common's (column bits, decode error codes)
COLUMNAR = {"_arrow.pyx"}

_OPS = {
    ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
    ast.BitOr: lambda a, b: a | b, ast.BitAnd: lambda a, b: a & b,
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
}


def _value(node, known: dict) -> int:
    if isinstance(node, ast.Expression):
        return _value(node.body, known)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return known[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left, known), _value(node.right, known))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand, known)
    raise ValueError(ast.dump(node))


def c_constants(text: str) -> dict:
    """NAME -> value of the ``cdef enum`` members and ``cdef <int type> NAME = <int>`` globals
    of a Cython source (expressions over earlier names, parenthesised over several lines)."""
    out: dict = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^cdef (?:u?int\d+_t|int|long|Py_ssize_t|size_t) ([A-Za-z_]\w*) = (.+)$",
                     line)
        if m:
            try:
                out[m.group(1)] = _value(ast.parse(m.group(2).split("#")[0], mode="eval"), out)
            except (SyntaxError, ValueError, KeyError):
                pass
        elif re.match(r"^\s*cdef enum\b[^:]*:\s*$", line):
            indent = len(line) - len(line.lstrip())
            i += 1
            while i < len(lines) and (not lines[i].strip()
                                      or len(lines[i]) - len(lines[i].lstrip()) > indent):
                stmt = lines[i].split("#")[0]
                while stmt.count("(") > stmt.count(")") and i + 1 < len(lines):
                    i += 1
                    stmt += " " + lines[i].split("#")[0]
                m = re.match(r"^\s+([A-Za-z_]\w*)\s*=\s*(.+)$", stmt)
                if m:
                    out[m.group(1)] = _value(ast.parse(m.group(2).strip(), mode="eval"), out)
                i += 1
            continue
        i += 1
    return out


def _sources():
    return sorted(n for n in os.listdir(PKG_DIR) if n.endswith((".pyx", ".pxd")))


@pytest.mark.parametrize("name", _sources())
def test_c_constants_agree_with_format(name):
    with open(os.path.join(PKG_DIR, name), encoding="utf-8") as f:
        consts = c_constants(f.read())
    checked = []
    for cname, value in consts.items():
        pyname = ALIASES.get(cname, cname)
        if hasattr(_format, pyname) and isinstance(getattr(_format, pyname), int):
            assert value == getattr(_format, pyname), f"{name}: {cname} = {value}, _format.{pyname}"
            checked.append(cname)
        if name in COLUMNAR and re.match(r"^(COL|E)_[A-Z0-9_]+$", cname) \
                and hasattr(_arrow_common, cname):
            assert value == getattr(_arrow_common, cname), f"{name}: {cname} = {value}"
            checked.append(cname)
    if name in COLUMNAR:  # every column bit and error code the compiled decoder knows
        missing = [c for c in consts if re.match(r"^(COL|E)_", c) and c != "COL_META"
                   and not hasattr(_arrow_common, c)]
        assert missing == [], f"{name}: C constants _arrow_common does not define: {missing}"


def test_the_constant_reader_reads_the_forms_used():
    src = (
        "cdef enum:\n    A = 1 << 3\n    B = (A\n         | 1)  # note\n\n"
        "cdef int64_t BIG = 0x7FFFFFFFFFFFFFFF\n"
        "def f():\n    cdef enum:\n        C = 2\n"
    )
    assert c_constants(src) == {"A": 8, "B": 9, "BIG": 2**63 - 1, "C": 2}
    with open(os.path.join(PKG_DIR, "_arrow.pyx"), encoding="utf-8") as f:
        arrow = c_constants(f.read())
    assert arrow["RECORD_BATCH_OVERHEAD"] == 61 and arrow["COL_POSITION"] == 1 << 14
    assert arrow["E_BATCH_TRUNCATED"] == _arrow_common.E_BATCH_TRUNCATED


def _twins(name: str):
    """The built twins of ``kafkalog.<name>`` (the compiled one only where it imports)."""
    mods = [importlib.import_module(f"kafkalog.{name}_py")]
    try:
        mods.insert(0, importlib.import_module(f"kafkalog.{name}"))
    except ImportError:  # a pure build: the pure twin still checks _format's numbers
        pass
    return mods


def _entry(size: int, magic: int = 2) -> bytes:
    body = bytearray(max(size, 0))
    if len(body) > 4:
        body[4] = magic  # the magic byte sits 16 bytes into the entry
    return struct.pack(">qi", 5, size) + bytes(body)


@pytest.mark.parametrize("name", ["_batch", "_arrow"])
def test_smallest_entry_is_the_v0_record_overhead(name):
    smallest = _format.RECORD_OVERHEAD_V0
    for mod in _twins(name):
        decode = ((lambda b, m=mod: [list(x) for x in m.MemoryRecords(b)]) if name == "_batch"
                  else (lambda b, m=mod: m.Decoder().decode(b)))
        with pytest.raises(CorruptRecordError) as info:
            decode(_entry(smallest - 1))
        assert f"Record size {smallest - 1} is smaller than the minimum record overhead " \
               f"({smallest})" in str(info.value), mod
        with pytest.raises(CorruptRecordError) as info:  # one more byte: past the size check
            decode(_entry(smallest))
        assert f"less than the {_format.RECORD_BATCH_OVERHEAD}-byte header" in str(info.value), mod


def test_v2_header_is_record_batch_overhead_bytes():
    n = _format.RECORD_BATCH_OVERHEAD
    for mod in _twins("_batch"):
        with pytest.raises(CorruptRecordError) as info:
            mod.RecordBatch(bytes(n - 1))
        assert f"Record batch is truncated: {n - 1} bytes, less than the {n}-byte header" \
            in str(info.value), mod


@pytest.mark.parametrize("read, width", [("read_varint", _format.MAX_VARINT_BYTES),
                                         ("read_varlong", _format.MAX_VARLONG_BYTES)])
def test_widest_varint(read, width):
    for mod in _twins("_varint"):
        value, end = getattr(mod, read)(b"\x80" * (width - 1) + b"\x00")
        assert (value, end) == (0, width), mod
        with pytest.raises(CorruptRecordError, match=f"most significant bit of byte {width}"):
            getattr(mod, read)(b"\x80" * width + b"\x00")
