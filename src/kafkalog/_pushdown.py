"""Filters handed to a :class:`kafkalog.dataset.KafkaLogDataset` (``pyarrow.compute.Expression``
s, as DuckDB and Polars build them) read for what they say about ``topic``, ``partition``,
``offset`` and ``timestamp``: :func:`analyze` returns a :class:`Pushdown`, the values of those
columns that a row passing the filter may have.  It only ever widens: a row the filter keeps
always lies inside it (SQL's three-valued logic included: a null never passes a comparison),
so the scan may skip what lies outside and then apply the whole filter to the rows it
decoded.  Anything not understood (another column, a function, a cast, ``not``) constrains
nothing.

An expression is read from its serialized form (``Expression.__reduce__``: an Arrow IPC file
whose schema metadata lists the expression tree in prefix order, its literals and function
options being the file's one-row columns); the tree read is rebuilt and compared with the
expression, and a filter whose tree does not rebuild to an equal expression pushes nothing."""
from __future__ import annotations

import datetime as _dt
import decimal
import math
import struct
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Pushdown", "analyze", "field_names", "Ints", "row_filter"]

_MIN = -(2**63)
_MAX = 2**63 - 1


# -- the expression tree ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Field:
    name: Optional[str]  # None: a nested reference


@dataclass(frozen=True)
class _Literal:
    value: Any  # a pyarrow Scalar


@dataclass(frozen=True)
class _Call:
    name: str
    args: Tuple[Any, ...]
    options: Any  # a pyarrow StructScalar or None


_Node = Union[_Field, _Literal, _Call]


def _u32(b: bytes, p: int) -> int:
    return struct.unpack_from("<I", b, p)[0]


def _table_field(b: bytes, table: int, i: int) -> Optional[int]:
    """The position of field ``i`` of the flatbuffer table at ``table`` (None: absent)."""
    vt = table - struct.unpack_from("<i", b, table)[0]
    vsize = struct.unpack_from("<H", b, vt)[0]
    if 4 + 2 * i >= vsize:
        return None
    off = struct.unpack_from("<H", b, vt + 4 + 2 * i)[0]
    return None if off == 0 else table + off


def _deref(b: bytes, p: int) -> int:
    return p + _u32(b, p)


def _string(b: bytes, p: int) -> str:
    s = _deref(b, p)
    n = _u32(b, s)
    return b[s + 4:s + 4 + n].decode("utf-8")


def _metadata_pairs(message: bytes) -> List[Tuple[str, str]]:
    """The custom metadata of an IPC schema message (flatbuffers ``Message`` -> ``Schema``),
    in order, duplicates kept (``Schema.metadata`` is a dict and loses both)."""
    root = _deref(message, 0)
    header = _table_field(message, root, 2)  # Message.header
    if header is None:
        return []
    schema = _deref(message, header)
    meta = _table_field(message, schema, 2)  # Schema.custom_metadata
    if meta is None:
        return []
    vec = _deref(message, meta)
    out = []
    for k in range(_u32(message, vec)):
        kv = _deref(message, vec + 4 + 4 * k)
        key = _table_field(message, kv, 0)
        value = _table_field(message, kv, 1)
        out.append(("" if key is None else _string(message, key),
                    "" if value is None else _string(message, value)))
    return out


def _parse(expr: pc.Expression) -> Optional[_Node]:
    """The tree of ``expr`` (None when its serialized form is not one this reader knows)."""
    _fn, args = expr.__reduce__()
    if not args or not isinstance(args[0], pa.Buffer):
        return None
    buf = args[0]
    message = pa.ipc.read_message(buf.slice(8))  # after the file's "ARROW1\0\0" magic
    pairs = _metadata_pairs(message.metadata.to_pybytes())
    columns = pa.ipc.open_file(buf).read_all().columns
    pos = 0

    def scalar(index: str) -> Any:
        return columns[int(index)][0]

    def one() -> _Node:
        nonlocal pos
        key, value = pairs[pos]
        pos += 1
        if key == "literal":
            return _Literal(scalar(value))
        if key == "field_ref":
            return _Field(value)
        if key == "nested_field_ref":
            for _ in range(int(value)):
                one()
            return _Field(None)
        if key != "call":
            raise ValueError(key)
        call_args: List[_Node] = []
        while pairs[pos][0] != "end":
            if pairs[pos][0] == "options":
                options = scalar(pairs[pos][1])
                pos += 2
                return _Call(value, tuple(call_args), options)
            call_args.append(one())
        pos += 1
        return _Call(value, tuple(call_args), None)

    try:
        node = one()
    except (ValueError, IndexError, KeyError):
        return None
    return node if pos == len(pairs) else None


def _rebuild(node: _Node) -> Optional[pc.Expression]:
    """``node`` as an Expression again (None where its function options are not rebuilt)."""
    if isinstance(node, _Field):
        return None if node.name is None else pc.field(node.name)
    if isinstance(node, _Literal):
        return pc.scalar(node.value)
    args = [_rebuild(a) for a in node.args]
    if any(a is None for a in args):
        return None
    options = None
    if node.options is not None:
        if node.name != "is_in" or not node.options.is_valid:
            return None
        o = node.options
        names = [o.type.field(i).name for i in range(o.type.num_fields)]
        if "null_matching_behavior" not in names:
            return None
        # MATCH (0) and SKIP (1) are what pyarrow's skip_nulls=False/True give
        behaviour = o["null_matching_behavior"].as_py()
        if behaviour not in (0, 1):
            return None
        options = pc.SetLookupOptions(o["value_set"].values, skip_nulls=behaviour == 1)
    return pc.Expression._call(node.name, args, options)


def field_names(expr: Optional[pc.Expression]) -> Optional[List[str]]:
    """The top-level columns ``expr`` reads, in order of first use (None: not known: a nested
    reference, or a form this module cannot read)."""
    if expr is None:
        return []
    node = _parse(expr)
    if node is None:
        return None
    out: List[str] = []

    def walk(n: _Node) -> bool:
        if isinstance(n, _Field):
            if n.name is None:
                return False
            if n.name not in out:
                out.append(n.name)
            return True
        if isinstance(n, _Call):
            return all(walk(a) for a in n.args)
        return True

    return out if walk(node) else None


# -- what a filter allows --------------------------------------------------------------------
class Ints:
    """A set of int64 values: sorted, disjoint, closed intervals ``(lo, hi)``."""

    __slots__ = ("spans",)

    def __init__(self, spans: Sequence[Tuple[int, int]] = ((_MIN, _MAX),)) -> None:
        merged: List[Tuple[int, int]] = []
        for lo, hi in sorted((max(a, _MIN), min(b, _MAX)) for a, b in spans):
            if lo > hi:
                continue
            if merged and lo <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        self.spans = tuple(merged)

    def __and__(self, other: "Ints") -> "Ints":
        out = []
        for a, b in self.spans:
            for c, d in other.spans:
                if max(a, c) <= min(b, d):
                    out.append((max(a, c), min(b, d)))
        return Ints(out)

    def __or__(self, other: "Ints") -> "Ints":
        return Ints(self.spans + other.spans)

    def __bool__(self) -> bool:
        return bool(self.spans)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ints) and self.spans == other.spans

    def __repr__(self) -> str:
        return f"Ints({list(self.spans)})"

    @property
    def everything(self) -> bool:
        return self.spans == ((_MIN, _MAX),)

    def ranges(self) -> List[Tuple[Optional[int], Optional[int]]]:
        """As half-open offset ranges ``[lo, hi)`` (None: unbounded)."""
        return [(None if a == _MIN else a, None if b == _MAX else b + 1) for a, b in self.spans]

    def __contains__(self, v: Any) -> bool:
        return v is not None and any(a <= v <= b for a, b in self.spans)


_Pred = Optional[Callable[[Any], bool]]  # None: any value (null included)


@dataclass
class Pushdown:
    """What a filter lets through, column by column (None: anything).  ``topics`` and
    ``partitions`` are tests of a partition's topic name and number (a null one: a directory
    not named ``<topic>-<partition>``); ``offsets`` and ``timestamps`` (ms) are sets of
    values.  ``never``: no row can pass."""

    topics: _Pred = None
    partitions: _Pred = None
    offsets: Optional[Ints] = None
    timestamps: Optional[Ints] = None
    never: bool = False

    def keeps(self, topic: Optional[str], partition: Optional[int]) -> bool:
        """Whether rows of the partition ``topic``-``partition`` may pass."""
        if self.never:
            return False
        if self.topics is not None and not self.topics(topic):
            return False
        return self.partitions is None or self.partitions(partition)

    @property
    def min_timestamp(self) -> Optional[int]:
        """The smallest timestamp a row may have (None: no bound)."""
        if self.timestamps is None or not self.timestamps.spans:
            return None
        lo = self.timestamps.spans[0][0]
        return None if lo == _MIN else lo

    def describe(self) -> Dict[str, Any]:
        """A plain summary (for reports and tests)."""
        return {
            "never": self.never,
            "topics": self.topics is not None,
            "partitions": self.partitions is not None,
            "offsets": None if self.offsets is None else list(self.offsets.spans),
            "timestamps": None if self.timestamps is None else list(self.timestamps.spans),
        }


_NEVER = Pushdown(never=True)
_INT_COLUMNS = ("partition", "offset", "timestamp")


def _both(a: _Pred, b: _Pred) -> _Pred:
    if a is None:
        return b
    if b is None:
        return a
    return lambda v: a(v) and b(v)


def _either(a: _Pred, b: _Pred) -> _Pred:
    if a is None or b is None:
        return None
    return lambda v: a(v) or b(v)


def _and(x: Pushdown, y: Pushdown) -> Pushdown:
    if x.never or y.never:
        return _NEVER
    offs = x.offsets if y.offsets is None else y.offsets if x.offsets is None \
        else x.offsets & y.offsets
    ts = x.timestamps if y.timestamps is None else y.timestamps if x.timestamps is None \
        else x.timestamps & y.timestamps
    if (offs is not None and not offs) or (ts is not None and not ts):
        return _NEVER
    return Pushdown(_both(x.topics, y.topics), _both(x.partitions, y.partitions), offs, ts)


def _or(x: Pushdown, y: Pushdown) -> Pushdown:
    if x.never:
        return y
    if y.never:
        return x
    offs = None if x.offsets is None or y.offsets is None else x.offsets | y.offsets
    ts = None if x.timestamps is None or y.timestamps is None else x.timestamps | y.timestamps
    return Pushdown(_either(x.topics, y.topics), _either(x.partitions, y.partitions), offs, ts)


_TS_PER_MS = {"s": Fraction(1000), "ms": Fraction(1), "us": Fraction(1, 1000),
              "ns": Fraction(1, 1000000)}


def _number(s: Any, column: str, ts_type: pa.DataType) -> Optional[Fraction]:
    """A literal as the exact number the column's values are compared with (for
    ``timestamp``: ms), or None when this module does not know how Arrow compares them."""
    if not s.is_valid:
        return None
    t = s.type
    timestamp_column = column == "timestamp" and pa.types.is_timestamp(ts_type)
    if pa.types.is_timestamp(t):
        if not timestamp_column:
            return None
        return Fraction(s.value) * _TS_PER_MS[t.unit]
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        if not timestamp_column:
            return None
        v = s.value if pa.types.is_date64(t) else s.value * 86_400_000
        return Fraction(v)
    if timestamp_column:
        return None
    if pa.types.is_integer(t):
        return Fraction(s.as_py())
    if pa.types.is_floating(t):
        v = s.as_py()
        return Fraction(v) if math.isfinite(v) else None
    if pa.types.is_decimal(t):
        v = s.as_py()
        return Fraction(v) if isinstance(v, decimal.Decimal) and v.is_finite() else None
    return None


_FLIP = {"less": "greater", "less_equal": "greater_equal", "greater": "less",
         "greater_equal": "less_equal", "equal": "equal", "not_equal": "not_equal"}


def _span(op: str, v: Fraction) -> Ints:
    if op == "equal":
        return Ints([(int(v), int(v))]) if v.denominator == 1 else Ints([])
    if op == "not_equal":
        if v.denominator != 1:
            return Ints()
        return Ints([(_MIN, int(v) - 1), (int(v) + 1, _MAX)])
    if op == "less":
        return Ints([(_MIN, math.ceil(v) - 1)])
    if op == "less_equal":
        return Ints([(_MIN, math.floor(v))])
    if op == "greater":
        return Ints([(math.floor(v) + 1, _MAX)])
    return Ints([(math.ceil(v), _MAX)])  # greater_equal


_PY_OPS = {
    "equal": lambda a, b: a == b, "not_equal": lambda a, b: a != b,
    "less": lambda a, b: a < b, "less_equal": lambda a, b: a <= b,
    "greater": lambda a, b: a > b, "greater_equal": lambda a, b: a >= b,
}


def _compare(column: str, op: str, lit: Any, ts_type: pa.DataType) -> Pushdown:
    """``column <op> literal``."""
    test = _PY_OPS[op]
    if column == "topic":
        if not (pa.types.is_string(lit.type) or pa.types.is_large_string(lit.type)
                or lit.type == pa.string_view()) or not lit.is_valid:
            return Pushdown() if lit.is_valid else _NEVER
        value = lit.as_py()
        return Pushdown(topics=lambda t: t is not None and test(t, value))
    if not lit.is_valid:
        return _NEVER  # a comparison with null is null
    v = _number(lit, column, ts_type)
    if v is None:
        return Pushdown()
    if column == "partition":
        return Pushdown(partitions=lambda p: p is not None and test(Fraction(p), v))
    span = _span(op, v)
    if not span:
        return _NEVER
    return Pushdown(offsets=span) if column == "offset" else Pushdown(timestamps=span)


def _is_in(column: str, node: _Call, ts_type: pa.DataType) -> Pushdown:
    opts = node.options
    if opts is None or not opts.is_valid:
        return Pushdown()
    values = opts["value_set"].values
    if values is None or values.null_count:
        return Pushdown()  # a null in the set may match a null
    if column == "topic":
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
            return Pushdown()
        names = frozenset(values.to_pylist())
        return Pushdown(topics=lambda t: t in names)
    nums = []
    for i in range(len(values)):
        v = _number(values[i], column, ts_type)
        if v is None:
            return Pushdown()
        if v.denominator == 1:
            nums.append(int(v))
    if not nums:
        return _NEVER
    if column == "partition":
        allowed = frozenset(nums)
        return Pushdown(partitions=lambda p: p in allowed)
    span = Ints([(n, n) for n in nums])
    return Pushdown(offsets=span) if column == "offset" else Pushdown(timestamps=span)


_PUSHED = ("topic",) + _INT_COLUMNS


def _walk(node: _Node, ts_type: pa.DataType) -> Pushdown:  # noqa: C901 - one case per form
    if isinstance(node, _Literal):
        v = node.value
        if pa.types.is_boolean(v.type):
            return Pushdown() if v.as_py() else _NEVER
        return _NEVER if not v.is_valid else Pushdown()
    if isinstance(node, _Field):
        return Pushdown()
    name, args = node.name, node.args
    if name in ("and", "and_kleene") and len(args) == 2:
        return _and(_walk(args[0], ts_type), _walk(args[1], ts_type))
    if name in ("or", "or_kleene") and len(args) == 2:
        return _or(_walk(args[0], ts_type), _walk(args[1], ts_type))
    if name in ("and_not", "and_not_kleene") and len(args) == 2:
        return _walk(args[0], ts_type)
    if name == "if_else" and len(args) == 3:
        # true: the condition is true and the first branch is, or it is false and the second
        return _or(_and(_walk(args[0], ts_type), _walk(args[1], ts_type)),
                   _walk(args[2], ts_type))
    if name in _FLIP and len(args) == 2:
        a, b = args
        if isinstance(a, _Literal) and isinstance(b, _Field):
            a, b, name = b, a, _FLIP[name]
        if isinstance(a, _Field) and isinstance(b, _Literal) and a.name in _PUSHED:
            return _compare(a.name, name, b.value, ts_type)
        return Pushdown()
    if name == "is_in" and len(args) == 1 and isinstance(args[0], _Field) \
            and args[0].name in _PUSHED:
        return _is_in(args[0].name, node, ts_type)
    if name == "is_null" and len(args) == 1 and isinstance(args[0], _Field):
        col = args[0].name
        if col == "topic":
            return Pushdown(topics=lambda t: t is None)
        if col == "partition":
            return Pushdown(partitions=lambda p: p is None)
        if col in ("offset", "timestamp"):
            return _NEVER  # never null
        return Pushdown()
    if name == "is_valid" and len(args) == 1 and isinstance(args[0], _Field):
        col = args[0].name
        if col == "topic":
            return Pushdown(topics=lambda t: t is not None)
        if col == "partition":
            return Pushdown(partitions=lambda p: p is not None)
    return Pushdown()


def analyze(expr: Optional[pc.Expression], timestamp_type: pa.DataType) -> Optional[Pushdown]:
    """What ``expr`` lets through (None: a form this module does not read, or one it could not
    rebuild equal: nothing can be pushed).  ``timestamp_type``: the type of the ``timestamp``
    column (``timestamp[ms|us, tz=UTC]`` or ``int64`` ms)."""
    if expr is None:
        return Pushdown()
    if not isinstance(expr, pc.Expression):
        raise TypeError(f"filter must be a pyarrow.compute.Expression, not "
                        f"{type(expr).__name__}")
    node = _parse(expr)
    if node is None:
        return None
    rebuilt = _rebuild(node)
    if rebuilt is not None and not rebuilt.equals(expr):
        return None
    return _walk(node, timestamp_type)


def _evaluator(node: _Node) -> Optional[Callable[[pa.RecordBatch], Any]]:
    """``node`` as a function of a batch computing its value with pyarrow's compute kernels
    (None where a call's options are not rebuilt: see :func:`_rebuild`)."""
    if isinstance(node, _Field):
        if node.name is None:
            return None
        name = node.name
        return lambda rb: rb.column(name)
    if isinstance(node, _Literal):
        value = node.value
        return lambda rb: value
    args = [_evaluator(a) for a in node.args]
    if any(a is None for a in args):
        return None
    options = None
    if node.options is not None:
        rebuilt = _rebuild(node)
        if rebuilt is None:
            return None
        o = node.options
        options = pc.SetLookupOptions(o["value_set"].values,
                                      skip_nulls=o["null_matching_behavior"].as_py() == 1)
    fn = node.name
    call = pc.call_function
    return lambda rb: call(fn, [a(rb) for a in args], options)  # type: ignore[misc]


def row_filter(expr: pc.Expression) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """A function keeping the rows of a batch that pass ``expr`` (a null is not a pass), as
    ``RecordBatch.filter(expr)`` does: the expression's calls are made directly with pyarrow's
    compute kernels (the same functions, the same implicit casts), without the query plan
    ``filter(expr)`` builds for every batch, and a batch whose rows all pass is returned as it
    is.  Forms this module does not rebuild go to ``RecordBatch.filter``."""
    node = _parse(expr)
    rebuilt = None if node is None else _rebuild(node)
    ev = None
    if node is not None and rebuilt is not None and rebuilt.equals(expr):
        ev = _evaluator(node)
    if ev is None:
        return lambda rb: rb.filter(expr)

    def keep(rb: pa.RecordBatch) -> pa.RecordBatch:
        mask = ev(rb)
        if isinstance(mask, pa.Scalar):
            return rb if mask.as_py() is True else rb.slice(0, 0)
        if isinstance(mask, pa.ChunkedArray):
            mask = mask.combine_chunks()
        if not pa.types.is_boolean(mask.type):
            return rb.filter(expr)  # let pyarrow say what is wrong with the filter
        if mask.true_count == len(rb):
            return rb
        return rb.filter(mask)

    return keep


def to_ms(value: Union[int, _dt.datetime]) -> int:
    """A timestamp bound as ms since the epoch (a naive datetime is UTC)."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        return (value - epoch) // _dt.timedelta(milliseconds=1)
    return int(value)
