"""Decoders for ``kafkalog dump``: what kafka-dump-log prints for keys, values and control records.

Kafka 4.4's kafka-dump-log (``org.apache.kafka.tools.DumpLogSegments``) is the reference.

* Key/value decoders (``--key-decoder``/``--value-decoder``): ``string`` (UTF-8, each malformed
  sequence replaced by one U+FFFD as Java's ``new String(bytes, UTF_8)`` does: :func:`java_utf8`;
  Kafka's default ``StringDecoder``), ``hex``, ``base64``, ``json`` (the bytes are JSON: printed as
  they are, and embedded as a JSON value by ``--json``), ``long`` and ``int`` (big-endian, Kafka's
  ``LongDecoder``/``IntegerDecoder``).  Kafka's decoder class names are accepted as aliases.
* ``--offsets-decoder`` and ``--transaction-log-decoder``: the group and transaction
  coordinators' records, ``{"type":"<record type>","data":{...}}`` /
  ``{"version":"<value version>","data":{...}}`` (``transactionStatus`` by name).
* ``--cluster-metadata-decoder``: KRaft metadata records,
  ``{"type":"TOPIC_RECORD","version":0,"data":{...}}``.
* Control records (printed whatever the decoder): ``endTxnMarker: COMMIT coordinatorEpoch: 0``,
  ``SnapshotHeader {...}``, ``SnapshotFooter {...}``, ``KRaftVersion {...}``, ``KRaftVoters {...}``,
  ``LeaderChange: {...}``, ``controlType: UNKNOWN(<id>)``.

The JSON renderings reproduce Kafka's generated ``*JsonConverter`` classes serialised by
Jackson: fields in schema order, camelCase names, only the fields of the record's version,
tagged fields only when they differ from their default, UUIDs in Kafka's URL-safe base64,
``bytes`` in standard base64, control characters escaped as Jackson does.  Messages are read by a
small schema-driven reader of Kafka's protocol encoding (classic and flexible versions) over
schema tables written for this module from Kafka 4.4's message definitions; where the data is
damaged it fails where Kafka's generated readers fail, with their messages.
"""
from __future__ import annotations

import base64
import binascii
import codecs
import json
import math
import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import InvalidRecordError

__all__ = [
    "DecodeError",
    "KEY_VALUE_DECODERS",
    "DECODER_CLASS_ALIASES",
    "ValueDecoder",
    "make_value_decoder",
    "MessageParser",
    "DecoderMessageParser",
    "OffsetsMessageParser",
    "TransactionLogMessageParser",
    "ClusterMetadataMessageParser",
    "control_record_text",
    "control_record_object",
    "jackson_dumps",
    "java_utf8",
    "uuid_to_kafka_string",
    "read_metadata_record",
    "METADATA_RECORD_TYPES",
]


class DecodeError(Exception):
    """A key or value that a decoder cannot read (the message says why, as Kafka would)."""


# ------------------------------------------------------------------------------------------------
# Text as Java's new String(bytes, UTF_8) decodes it
# ------------------------------------------------------------------------------------------------
def _java_malformed_length(b: bytes, i: int) -> int:
    """How many bytes from ``b[i]`` (where no valid UTF-8 sequence starts) Java's UTF-8 decoder
    replaces by one U+FFFD.  Java takes a lead byte, then each following byte while it still
    fits the lead (a second byte within the lead's own range -- A0-BF after E0, 90-BF after F0,
    80-8F after F4, 80-BF otherwise, so ED A0-BF counts -- then continuation bytes), and replaces
    them together: at most 3 bytes, fewer where the input ends or a byte does not fit.  A
    surrogate encoding (ED A0-BF xx) is one malformed sequence of 3 bytes; a byte that can start
    nothing (80-C1, F5-FF) and a two-byte lead without its continuation are replaced alone.
    Python's own ``errors="replace"`` replaces maximal subparts instead (ED A0 80 gives three
    U+FFFD there, one here)."""
    c = b[i]
    if c < 0xE0 or c > 0xF4:
        return 1
    n = len(b)
    if i + 1 >= n:
        return 1
    c2 = b[i + 1]
    if c == 0xE0:
        fits = 0xA0 <= c2 <= 0xBF
    elif c == 0xF0:
        fits = 0x90 <= c2 <= 0xBF
    elif c == 0xF4:
        fits = 0x80 <= c2 <= 0x8F
    else:
        fits = 0x80 <= c2 <= 0xBF
    if not fits:
        return 1
    if i + 2 >= n or not 0x80 <= b[i + 2] <= 0xBF:
        return 2
    return 3


def _java_utf8_errors(exc: UnicodeError) -> Tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return "\ufffd", exc.start + _java_malformed_length(exc.object, exc.start)


_JAVA_UTF8_ERRORS = "kafkalog.java-utf8"
codecs.register_error(_JAVA_UTF8_ERRORS, _java_utf8_errors)


def java_utf8(b: bytes) -> str:
    """``b`` decoded as Java's ``new String(b, UTF_8)`` decodes it (what kafka-dump-log prints):
    valid UTF-8 as it is, each malformed sequence replaced by one U+FFFD by Java's rules
    (:func:`_java_malformed_length`).  Python's decoder does the work; only a malformed
    sequence calls back into Python."""
    return b.decode("utf-8", _JAVA_UTF8_ERRORS)


# ------------------------------------------------------------------------------------------------
# JSON as Jackson writes it
# ------------------------------------------------------------------------------------------------
class JavaDouble(float):
    """A float64 field: Jackson writes it with Java's ``Double.toString``."""


_ESCAPES = {i: "\\u%04X" % i for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})
_ESCAPES[ord('"')] = '\\"'
_ESCAPES[ord("\\")] = "\\\\"


def _jstr(s: str) -> str:
    return '"' + s.translate(_ESCAPES) + '"'


def java_double_to_string(d: float) -> str:
    """Java's ``Double.toString`` (shortest digits; scientific outside [1e-3, 1e7))."""
    if math.isnan(d):
        return "NaN"
    if d in (float("inf"), float("-inf")):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if str(d).startswith("-") else "0.0"
    a = abs(d)
    sign = "-" if d < 0 else ""
    if 1e-3 <= a < 1e7:
        return sign + repr(a)  # Python is positional in this range, with at least ".0"
    from decimal import Decimal

    _, digits, exp = Decimal(repr(a)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    e = len(digits) + exp - 1
    return f"{sign}{ds[0]}.{ds[1:] or '0'}E{e}"


def jackson_dumps(obj: Any) -> str:
    """Serialise dicts/lists/str/int/bool/None/JavaDouble compactly, as Jackson's
    ``ObjectNode.toString()`` does (insertion order, no spaces, ``\\u00XX`` escapes)."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, str):
        return _jstr(obj)
    if isinstance(obj, JavaDouble):
        s = java_double_to_string(obj)
        return s if s[-1].isdigit() else _jstr(s)
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        return java_double_to_string(obj)
    if isinstance(obj, dict):
        return "{" + ",".join(_jstr(k) + ":" + jackson_dumps(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(jackson_dumps(v) for v in obj) + "]"
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def uuid_to_kafka_string(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


# ------------------------------------------------------------------------------------------------
# Kafka protocol reader (classic and flexible encodings)
# ------------------------------------------------------------------------------------------------
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


class _Underflow(DecodeError):
    """A fixed-size read past the end (Java: ``BufferUnderflowException``, whose message is
    null: Kafka's coordinator decoders print ``due to: null.``)."""


class _Reader:
    __slots__ = ("buf", "pos", "end", "nested")

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.nested = True  # False: a nested struct may not be read (see _Schema.read)

    def _take(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise _Underflow(
                f"Tried to read {n} bytes, but only {max(self.end - p, 0)} bytes remain"
            )
        self.pos = p + n
        return p

    def int8(self) -> int:
        return _I8.unpack_from(self.buf, self._take(1))[0]

    def int16(self) -> int:
        return _I16.unpack_from(self.buf, self._take(2))[0]

    def uint16(self) -> int:
        return _U16.unpack_from(self.buf, self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.buf, self._take(4))[0]

    def uint32(self) -> int:
        return _U32.unpack_from(self.buf, self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.buf, self._take(8))[0]

    def float64(self) -> JavaDouble:
        return JavaDouble(_F64.unpack_from(self.buf, self._take(8))[0])

    def uuid(self) -> str:
        p = self._take(16)
        return uuid_to_kafka_string(bytes(self.buf[p : p + 16]))

    def uvarint(self) -> int:
        """An unsigned varint as Kafka reads it: into a Java int (at most 5 bytes, the bits
        past 32 dropped, so the result may be negative)."""
        value = 0
        for shift in (0, 7, 14, 21):
            b = self.buf[self._take(1)]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
        b = self.buf[self._take(1)]
        value = (value | ((b - 256 if b & 0x80 else b) << 28)) & 0xFFFFFFFF
        if b & 0x80:
            raise DecodeError("Varint is too long, the most significant bit in the 5th byte is "
                              f"set, converted value: {value:x}")
        return value - (1 << 32) if value & 0x80000000 else value

    def raw(self, n: int) -> bytes:
        """``n`` bytes (a string's, a ``bytes`` field's, an unknown tagged field's), with the
        errors of Kafka's ``readArray``."""
        p = self.pos
        if n < 0:
            raise DecodeError(str(n))  # Java: NegativeArraySizeException
        if n > self.end - p:
            raise DecodeError(f"Error reading byte array of {n} byte(s): only {self.end - p} "
                              "byte(s) available")
        self.pos = p + n
        return bytes(self.buf[p : p + n])

    def remaining(self) -> int:
        return self.end - self.pos


def _parse_versions(spec: str) -> Tuple[int, int]:
    if spec in ("none", ""):
        return (1, 0)  # empty range
    if spec.endswith("+"):
        return (int(spec[:-1]), 0x7FFF)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


class _Field:
    __slots__ = ("name", "json", "type", "elem", "versions", "nullable", "tag", "tagged", "default")

    def __init__(
        self, name, typ, versions="0+", nullable=None, tag=None, tagged=None, default=None
    ):
        self.name = name
        self.json = name[0].lower() + name[1:]
        self.versions = _parse_versions(versions)
        self.nullable = _parse_versions(nullable) if nullable else (1, 0)
        self.tag = tag
        self.tagged = _parse_versions(tagged) if tagged else (1, 0)
        self.default = default
        if isinstance(typ, list):  # struct
            self.type, self.elem = "struct", typ
        elif isinstance(typ, tuple):  # ("[]", [fields]) array of structs
            self.type, self.elem = "[]struct", typ[1]
        elif typ.startswith("[]"):
            self.type, self.elem = "[]", typ[2:]
        else:
            self.type, self.elem = typ, None

    def present(self, v: int) -> bool:
        return self.versions[0] <= v <= self.versions[1]

    def is_tagged(self, v: int) -> bool:
        return self.tagged[0] <= v <= self.tagged[1]

    def is_nullable(self, v: int) -> bool:
        return self.nullable[0] <= v <= self.nullable[1]


F = _Field


class _Schema:
    __slots__ = ("name", "valid", "flexible", "fields")

    def __init__(self, name: str, valid: str, flexible: str, fields: List[_Field]) -> None:
        self.name = name
        self.valid = _parse_versions(valid)
        self.flexible = _parse_versions(flexible)
        self.fields = fields

    def read(self, r: _Reader, version: int, check_version: bool = True) -> Dict[str, Any]:
        """The message at ``version``.  Without ``check_version`` any version is read, as Kafka
        reads a metadata record: its generated reader leaves out each version test that holds
        for every valid version, which reads a version below or above the valid ones as the
        lowest or highest valid one; only its nested structs refuse a version above the
        highest."""
        lo, hi = self.valid
        if not check_version:
            if version > hi:
                r.nested = False
            version = min(max(version, lo), hi)
        elif not lo <= version <= hi:
            raise DecodeError(f"Can't read version {version} of {self.name}")
        flexible = self.flexible[0] <= version <= self.flexible[1]
        return _read_struct(r, self.fields, version, flexible)


_SCALARS = {
    "bool": lambda r: r.int8() != 0,
    "int8": _Reader.int8,
    "int16": _Reader.int16,
    "uint16": _Reader.uint16,
    "int32": _Reader.int32,
    "uint32": _Reader.uint32,
    "int64": _Reader.int64,
    "float64": _Reader.float64,
    "uuid": _Reader.uuid,
}


def _read_len(r: _Reader, flexible: bool, kind: str) -> int:
    """Length of a string/bytes/array: -1 for null."""
    if flexible:
        n = r.uvarint() - 1
        return n + (1 << 32) if n < -(1 << 31) else n   # Java int arithmetic
    if kind == "string":
        return r.int16()
    return r.int32()


def _read_value(r: _Reader, f: _Field, typ: str, elem, version: int, flexible: bool, nullable: bool,
                label: Optional[str] = None):
    """One value of field ``f`` (``label``: the field as Kafka's errors name it)."""
    reader = _SCALARS.get(typ)
    if reader is not None:
        return reader(r)
    if typ == "string":
        n = _read_len(r, flexible, "string")
        if n < 0:
            if not nullable:
                raise DecodeError(f"non-nullable field {label or f.json} was serialized as null")
            return None
        if n > 0x7FFF:
            raise DecodeError(f"string field {label or f.json} had invalid length {n}")
        return java_utf8(r.raw(n))
    if typ == "bytes":
        n = _read_len(r, flexible, "bytes")
        if n < 0:
            if not nullable:
                raise DecodeError(f"non-nullable field {label or f.json} was serialized as null")
            return None
        return r.raw(n)
    if typ in ("[]", "[]struct"):
        n = _read_len(r, flexible, "array")
        if n < 0:
            if not nullable:
                raise DecodeError(f"non-nullable field {label or f.json} was serialized as null")
            return None
        if n > r.remaining():
            raise DecodeError(
                f"Tried to allocate a collection of size {n}, but there are only "
                f"{r.remaining()} bytes remaining."
            )
        if typ == "[]struct":
            return [_nested(r, elem, version, flexible) for _ in range(n)]
        sub = _SCALARS.get(elem)
        if sub is not None:
            return [sub(r) for _ in range(n)]
        return [_read_value(r, f, elem, None, version, flexible, False, f.json + " element")
                for _ in range(n)]
    if typ == "struct":
        if nullable:
            marker = r.int8()
            if marker < 0:
                return None
        return _nested(r, elem, version, flexible)
    raise DecodeError(f"unsupported field type {typ}")  # pragma: no cover


def _nested(r: _Reader, fields: Sequence[_Field], version: int, flexible: bool) -> Dict[str, Any]:
    """A struct inside a message (refused where ``r.nested`` is False: see _Schema.read)."""
    if not r.nested:
        raise DecodeError("Can't read a nested struct above its highest version")
    return _read_struct(r, fields, version, flexible)


def _read_struct(
    r: _Reader, fields: Sequence[_Field], version: int, flexible: bool
) -> Dict[str, Any]:
    values: Dict[str, Any] = {}
    tagged: Dict[int, _Field] = {}
    for f in fields:
        if not f.present(version):
            continue
        if flexible and f.is_tagged(version):
            tagged[f.tag] = f
            continue
        values[f.json] = _read_value(
            r, f, f.type, f.elem, version, flexible, f.is_nullable(version)
        )
    found: Dict[str, Any] = {}
    if flexible:
        # As Kafka's generated readers: a known tag's value is read from the stream itself
        # (its size is not checked), an unknown tag's bytes are skipped, a repeated tag wins.
        count = r.uvarint()
        if count > r.remaining():
            raise DecodeError(f"Tried to read {count} tagged fields, but there are only "
                              f"{r.remaining()} bytes remaining.")
        for _ in range(count):
            tag = r.uvarint()
            size = r.uvarint()
            f = tagged.get(tag)
            if f is None:
                if any(g.tag == tag for g in fields):
                    # a tag of the message's other versions
                    raise DecodeError(f"Tag {tag} is not valid for version {version}")
                r.raw(size)
                continue
            if f.type == "struct" and f.is_nullable(version):
                # a tagged nullable struct: a varint before it, not above 0 for null
                found[f.json] = None if r.uvarint() <= 0 else _nested(r, f.elem, version, True)
            else:
                found[f.json] = _read_value(r, f, f.type, f.elem, version, True,
                                            f.is_nullable(version))
    # Output in schema order; tagged fields only when not at their default (Kafka's JSON
    # converters omit default tagged values).
    out: Dict[str, Any] = {}
    for f in fields:
        if not f.present(version):
            continue
        if f.json in values:
            out[f.json] = values[f.json]
        elif f.json in found:
            v = found[f.json]
            if v != f.default and not (f.default == [] and v == []):
                out[f.json] = v
    return out


def _to_json_obj(v: Any) -> Any:
    """Decoded message values -> JSON-able objects (bytes become base64 as Jackson does)."""
    if isinstance(v, dict):
        return {k: _to_json_obj(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_to_json_obj(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode("ascii")
    return v


# ------------------------------------------------------------------------------------------------
# Schemas: KRaft metadata records (type = unsigned varint apiKey in the frame)
# ------------------------------------------------------------------------------------------------
_ENDPOINT = [
    F("Name", "string"), F("Host", "string"), F("Port", "uint16"), F("SecurityProtocol", "int16")
]
_FEATURE = [
    F("Name", "string"), F("MinSupportedVersion", "int16"), F("MaxSupportedVersion", "int16")
]

# apiKey -> (MetadataRecordType name, schema)
METADATA_RECORD_TYPES: Dict[int, Tuple[str, _Schema]] = {}


def _meta(api_key: int, name: str, valid: str, fields: List[_Field]) -> None:
    enum_name = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name)).upper()
    METADATA_RECORD_TYPES[api_key] = (enum_name, _Schema(name, valid, "0+", fields))


_meta(0, "RegisterBrokerRecord", "0-4", [
    F("BrokerId", "int32"),
    F("IsMigratingZkBroker", "bool", "2+", default=False),
    F("IncarnationId", "uuid"),
    F("BrokerEpoch", "int64"),
    F("EndPoints", ("[]", _ENDPOINT)),
    F("Features", ("[]", _FEATURE)),
    F("Rack", "string", nullable="0+"),
    F("Fenced", "bool", default=True),
    F("InControlledShutdown", "bool", "1+", default=False),
    F("LogDirs", "[]uuid", "3+", tag=0, tagged="3+", default=[]),
    F("CordonedLogDirs", "[]uuid", "4+", nullable="4+", tag=1, tagged="4+"),
])
_meta(1, "UnregisterBrokerRecord", "0", [F("BrokerId", "int32"), F("BrokerEpoch", "int64")])
_meta(2, "TopicRecord", "0", [F("Name", "string"), F("TopicId", "uuid")])
_meta(3, "PartitionRecord", "0-2", [
    F("PartitionId", "int32"),
    F("TopicId", "uuid"),
    F("Replicas", "[]int32"),
    F("Isr", "[]int32"),
    F("RemovingReplicas", "[]int32"),
    F("AddingReplicas", "[]int32"),
    F("Leader", "int32"),
    F("LeaderRecoveryState", "int8", tag=0, tagged="0+", default=0),
    F("LeaderEpoch", "int32"),
    F("PartitionEpoch", "int32"),
    F("Directories", "[]uuid", "1+"),
    F("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=1, tagged="2+"),
    F("LastKnownElr", "[]int32", "2+", nullable="2+", tag=2, tagged="2+"),
])
_meta(4, "ConfigRecord", "0", [
    F("ResourceType", "int8"),
    F("ResourceName", "string"),
    F("Name", "string"),
    F("Value", "string", nullable="0+"),
])
_meta(5, "PartitionChangeRecord", "0-2", [
    F("PartitionId", "int32"),
    F("TopicId", "uuid"),
    F("Isr", "[]int32", nullable="0+", tag=0, tagged="0+"),
    F("Leader", "int32", tag=1, tagged="0+", default=-2),
    F("Replicas", "[]int32", nullable="0+", tag=2, tagged="0+"),
    F("RemovingReplicas", "[]int32", nullable="0+", tag=3, tagged="0+"),
    F("AddingReplicas", "[]int32", nullable="0+", tag=4, tagged="0+"),
    F("LeaderRecoveryState", "int8", tag=5, tagged="0+", default=-1),
    F("Directories", "[]uuid", "1+", nullable="1+", tag=8, tagged="1+"),
    F("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=6, tagged="2+"),
    F("LastKnownElr", "[]int32", "2+", nullable="2+", tag=7, tagged="2+"),
])
_meta(7, "FenceBrokerRecord", "0", [F("Id", "int32"), F("Epoch", "int64")])
_meta(8, "UnfenceBrokerRecord", "0", [F("Id", "int32"), F("Epoch", "int64")])
_meta(9, "RemoveTopicRecord", "0", [F("TopicId", "uuid")])
_meta(10, "DelegationTokenRecord", "0", [
    F("Owner", "string"),
    F("Requester", "string"),
    F("Renewers", "[]string"),
    F("IssueTimestamp", "int64"),
    F("MaxTimestamp", "int64"),
    F("ExpirationTimestamp", "int64"),
    F("TokenId", "string"),
])
_meta(11, "UserScramCredentialRecord", "0", [
    F("Name", "string"),
    F("Mechanism", "int8"),
    F("Salt", "bytes"),
    F("StoredKey", "bytes"),
    F("ServerKey", "bytes"),
    F("Iterations", "int32"),
])
_meta(12, "FeatureLevelRecord", "0", [F("Name", "string"), F("FeatureLevel", "int16")])
_meta(14, "ClientQuotaRecord", "0", [
    F("Entity", ("[]", [F("EntityType", "string"), F("EntityName", "string", nullable="0+")])),
    F("Key", "string"),
    F("Value", "float64"),
    F("Remove", "bool"),
])
_meta(15, "ProducerIdsRecord", "0", [
    F("BrokerId", "int32"), F("BrokerEpoch", "int64"), F("NextProducerId", "int64"),
])
_meta(17, "BrokerRegistrationChangeRecord", "0-3", [
    F("BrokerId", "int32"),
    F("BrokerEpoch", "int64"),
    F("Fenced", "int8", tag=0, tagged="0+", default=0),
    F("InControlledShutdown", "int8", "1+", tag=1, tagged="1+", default=0),
    F("LogDirs", "[]uuid", "2+", tag=2, tagged="2+", default=[]),
    F("CordonedLogDirs", "[]uuid", "3+", nullable="3+", tag=3, tagged="3+"),
])
_meta(18, "AccessControlEntryRecord", "0", [
    F("Id", "uuid"),
    F("ResourceType", "int8"),
    F("ResourceName", "string"),
    F("PatternType", "int8"),
    F("Principal", "string"),
    F("Host", "string"),
    F("Operation", "int8"),
    F("PermissionType", "int8"),
])
_meta(19, "RemoveAccessControlEntryRecord", "0", [F("Id", "uuid")])
_meta(20, "NoOpRecord", "0", [])
_meta(21, "ZkMigrationStateRecord", "0", [F("ZkMigrationState", "int8")])
_meta(22, "RemoveUserScramCredentialRecord", "0", [F("Name", "string"), F("Mechanism", "int8")])
_meta(23, "BeginTransactionRecord", "0", [F("Name", "string", nullable="0+", tag=0, tagged="0+")])
_meta(24, "EndTransactionRecord", "0", [])
_meta(25, "AbortTransactionRecord", "0", [F("Reason", "string", nullable="0+", tag=0, tagged="0+")])
_meta(26, "RemoveDelegationTokenRecord", "0", [F("TokenId", "string")])
_meta(27, "RegisterControllerRecord", "0", [
    F("ControllerId", "int32"),
    F("IncarnationId", "uuid"),
    F("ZkMigrationReady", "bool"),
    F("EndPoints", ("[]", _ENDPOINT)),
    F("Features", ("[]", _FEATURE)),
])
_meta(28, "ClearElrRecord", "0", [F("TopicName", "string")])
_meta(29, "UnregisterControllerRecord", "0", [F("ControllerId", "int32")])


def _frame_varint(r: _Reader, entity: str) -> int:
    """A frame field as Kafka reads it: a varint (a Java int) above Short.MAX is refused, any
    other is cast to a short (so a negative int keeps its low 16 bits)."""
    try:
        v = r.uvarint()
    except DecodeError:
        raise DecodeError(f"Error while reading {entity}") from None
    if v > 0x7FFF:
        raise DecodeError(f"Value for {entity} was too large.")
    return ((v & 0xFFFF) ^ 0x8000) - 0x8000


def read_metadata_record(value: bytes) -> Tuple[str, int, Dict[str, Any]]:
    """Decode a KRaft metadata record value: ``(TYPE_NAME, version, fields)``."""
    r = _Reader(value)
    frame = _frame_varint(r, "frame version")
    if frame == 0:
        raise DecodeError(
            "Could not deserialize metadata record with frame version 0. Note that upgrades "
            "from the preview release of KRaft in 2.8 to newer versions are not supported."
        )
    if frame != 1:
        raise DecodeError(
            f"Could not deserialize metadata record due to unknown frame version {frame}"
            f"(only frame version 1 is supported)"
        )
    api_key = _frame_varint(r, "type")
    version = _frame_varint(r, "version")
    entry = METADATA_RECORD_TYPES.get(api_key)
    if entry is None:
        raise DecodeError(
            "org.apache.kafka.common.errors.UnsupportedVersionException: "
            f"Unknown metadata id {api_key}")
    name, schema = entry
    try:
        # any version is read, as Kafka reads it: the fields its version ranges hold
        data = schema.read(r, version, check_version=False)
    except DecodeError:
        # Kafka's message names the type alone (the reason is the exception's cause)
        raise DecodeError(f"Failed to deserialize record with type {api_key}") from None
    if r.remaining() > 0:
        raise DecodeError(f"Found {r.remaining()} byte(s) of garbage after {api_key}")
    return name, version, data


# ------------------------------------------------------------------------------------------------
# Schemas: __consumer_offsets (group coordinator)
# ------------------------------------------------------------------------------------------------
_ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid.ZERO_UUID: the default of a uuid field

# record type (the int16 before the key) -> (key schema, value schema).  A key is one version
# (0) of its fields; the value's own version follows the int16 before it.
_GROUP_RECORDS: Dict[int, Tuple[_Schema, _Schema]] = {}


def _group(api_key: int, key: str, key_fields: List[_Field], value: str, valid: str,
           flexible: str, value_fields: List[_Field]) -> None:
    _GROUP_RECORDS[api_key] = (_Schema(key, "0", "none", key_fields),
                               _Schema(value, valid, flexible, value_fields))


_GROUP_ID = [F("GroupId", "string")]
_GROUP_MEMBER = [F("GroupId", "string"), F("MemberId", "string")]
_OFFSET_KEY = [F("group", "string"), F("topic", "string"), F("partition", "int32")]
_TOPIC_PARTITIONS = [F("TopicId", "uuid"), F("Partitions", "[]int32")]
# a member's assignment: the partitions and, tagged, the epoch each was assigned in
_ASSIGNED = [F("TopicId", "uuid"), F("Partitions", "[]int32"),
             F("AssignmentEpochs", "[]int32", nullable="0+", tag=0, tagged="0+", default=[])]
_TASK_IDS = [F("SubtopologyId", "string"), F("Partitions", "[]int32")]
_ASSIGNED_TASKS = [F("SubtopologyId", "string"), F("Partitions", "[]int32"),
                   F("AssignmentEpochs", "[]int32", nullable="0+", tag=0, tagged="0+", default=[])]
_KEY_VALUE = [F("Key", "string"), F("Value", "string")]
_STREAMS_TOPIC = [
    F("Name", "string"), F("Partitions", "int32"), F("ReplicationFactor", "int16"),
    F("TopicConfigs", ("[]", [F("key", "string"), F("value", "string")])),
]

# offset commits: type 0 (written by the oldest brokers: value version 0 only) and type 1
_group(0, "LegacyOffsetCommitKey", _OFFSET_KEY, "LegacyOffsetCommitValue", "0", "none", [
    F("offset", "int64"), F("metadata", "string"), F("commitTimestamp", "int64"),
])
_group(1, "OffsetCommitKey", _OFFSET_KEY, "OffsetCommitValue", "0-4", "4+", [
    F("offset", "int64"),
    F("leaderEpoch", "int32", "3+"),
    F("metadata", "string"),
    F("commitTimestamp", "int64"),
    F("expireTimestamp", "int64", "1"),
    F("topicId", "uuid", "4+", tag=0, tagged="4+", default=_ZERO_UUID),
])
# classic groups
_group(2, "GroupMetadataKey", [F("group", "string")], "GroupMetadataValue", "0-4", "4+", [
    F("protocolType", "string"),
    F("generation", "int32"),
    F("protocol", "string", nullable="0+"),
    F("leader", "string", nullable="0+"),
    F("currentStateTimestamp", "int64", "2+"),
    F("members", ("[]", [
        F("memberId", "string"),
        F("groupInstanceId", "string", "3+", nullable="3+"),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("rebalanceTimeout", "int32", "1+"),
        F("sessionTimeout", "int32"),
        F("subscription", "bytes"),
        F("assignment", "bytes"),
    ])),
])
# consumer groups (KIP-848)
_group(3, "ConsumerGroupMetadataKey", _GROUP_ID, "ConsumerGroupMetadataValue", "0", "0+", [
    F("Epoch", "int32"),
    F("MetadataHash", "int64", tag=0, tagged="0+", default=0),
])
_group(4, "ConsumerGroupPartitionMetadataKey", _GROUP_ID,
       "ConsumerGroupPartitionMetadataValue", "0", "0+", [
    F("Topics", ("[]", [
        F("TopicId", "uuid"),
        F("TopicName", "string"),
        F("NumPartitions", "int32"),
        F("PartitionMetadata", ("[]", [F("Partition", "int32"), F("Racks", "[]string")])),
    ])),
])
_group(5, "ConsumerGroupMemberMetadataKey", _GROUP_MEMBER,
       "ConsumerGroupMemberMetadataValue", "0", "0+", [
    F("InstanceId", "string", nullable="0+"),
    F("RackId", "string", nullable="0+"),
    F("ClientId", "string"),
    F("ClientHost", "string"),
    F("SubscribedTopicNames", "[]string"),
    F("SubscribedTopicRegex", "string", nullable="0+"),
    F("RebalanceTimeoutMs", "int32"),
    F("ServerAssignor", "string", nullable="0+"),
    F("ClassicMemberMetadata", [
        F("SessionTimeoutMs", "int32"),
        F("SupportedProtocols", ("[]", [F("Name", "string"), F("Metadata", "bytes")])),
    ], nullable="0+", tag=0, tagged="0+",
        # a struct's default: its fields' own
        default={"sessionTimeoutMs": 0, "supportedProtocols": []}),
])
_group(6, "ConsumerGroupTargetAssignmentMetadataKey", _GROUP_ID,
       "ConsumerGroupTargetAssignmentMetadataValue", "0", "0+", [
    F("AssignmentEpoch", "int32"),
    F("AssignmentTimestamp", "int64", tag=0, tagged="0+", default=0),
])
_group(7, "ConsumerGroupTargetAssignmentMemberKey", _GROUP_MEMBER,
       "ConsumerGroupTargetAssignmentMemberValue", "0", "0+", [
    F("TopicPartitions", ("[]", _TOPIC_PARTITIONS)),
])
_group(8, "ConsumerGroupCurrentMemberAssignmentKey", _GROUP_MEMBER,
       "ConsumerGroupCurrentMemberAssignmentValue", "0", "0+", [
    F("MemberEpoch", "int32"),
    F("PreviousMemberEpoch", "int32"),
    F("State", "int8"),
    F("AssignedPartitions", ("[]", _ASSIGNED)),
    F("PartitionsPendingRevocation", ("[]", _ASSIGNED)),
])
# share groups (KIP-932)
_group(10, "ShareGroupMemberMetadataKey", _GROUP_MEMBER,
       "ShareGroupMemberMetadataValue", "0", "0+", [
    F("RackId", "string", nullable="0+"),
    F("ClientId", "string"),
    F("ClientHost", "string"),
    F("SubscribedTopicNames", "[]string"),
])
_group(11, "ShareGroupMetadataKey", _GROUP_ID, "ShareGroupMetadataValue", "0", "0+", [
    F("Epoch", "int32"), F("MetadataHash", "int64"),
])
_group(12, "ShareGroupTargetAssignmentMetadataKey", _GROUP_ID,
       "ShareGroupTargetAssignmentMetadataValue", "0", "0+", [
    F("AssignmentEpoch", "int32"),
    F("AssignmentTimestamp", "int64", tag=0, tagged="0+", default=0),
])
_group(13, "ShareGroupTargetAssignmentMemberKey", _GROUP_MEMBER,
       "ShareGroupTargetAssignmentMemberValue", "0", "0+", [
    F("TopicPartitions", ("[]", _TOPIC_PARTITIONS)),
])
_group(14, "ShareGroupCurrentMemberAssignmentKey", _GROUP_MEMBER,
       "ShareGroupCurrentMemberAssignmentValue", "0", "0+", [
    F("MemberEpoch", "int32"),
    F("PreviousMemberEpoch", "int32"),
    F("State", "int8"),
    F("AssignedPartitions", ("[]", _TOPIC_PARTITIONS)),
])
_group(15, "ShareGroupStatePartitionMetadataKey", _GROUP_ID,
       "ShareGroupStatePartitionMetadataValue", "0", "0+", [
    F("InitializingTopics", ("[]", [F("TopicId", "uuid"), F("TopicName", "string"),
                                    F("Partitions", "[]int32")])),
    F("InitializedTopics", ("[]", [F("TopicId", "uuid"), F("TopicName", "string"),
                                   F("Partitions", "[]int32")])),
    F("DeletingTopics", ("[]", [F("TopicId", "uuid"), F("TopicName", "string")])),
])
_group(16, "ConsumerGroupRegularExpressionKey",
       [F("GroupId", "string"), F("RegularExpression", "string")],
       "ConsumerGroupRegularExpressionValue", "0", "0+", [
    F("Topics", "[]string"), F("Version", "int64"), F("Timestamp", "int64"),
])
# streams groups (KIP-1071)
_group(17, "StreamsGroupMetadataKey", _GROUP_ID, "StreamsGroupMetadataValue", "0", "0+", [
    F("Epoch", "int32"),
    F("MetadataHash", "int64"),
    F("ValidatedTopologyEpoch", "int32", tag=0, tagged="0+", default=-1),
    F("LastAssignmentConfigs", ("[]", _KEY_VALUE), nullable="0+", tag=1, tagged="0+", default=[]),
    F("StoredDescriptionTopologyEpoch", "int32", tag=2, tagged="0+", default=-1),
    F("FailedDescriptionTopologyEpoch", "int32", tag=3, tagged="0+", default=-1),
])
_group(19, "StreamsGroupMemberMetadataKey", _GROUP_MEMBER,
       "StreamsGroupMemberMetadataValue", "0", "0+", [
    F("InstanceId", "string", nullable="0+"),
    F("RackId", "string", nullable="0+"),
    F("ClientId", "string"),
    F("ClientHost", "string"),
    F("RebalanceTimeoutMs", "int32"),
    F("TopologyEpoch", "int32"),
    F("ProcessId", "string"),
    F("UserEndpoint", [F("Host", "string"), F("Port", "uint16")], nullable="0+"),
    F("ClientTags", ("[]", _KEY_VALUE)),
])
_group(20, "StreamsGroupTargetAssignmentMetadataKey", _GROUP_ID,
       "StreamsGroupTargetAssignmentMetadataValue", "0", "0+", [
    F("AssignmentEpoch", "int32"),
    F("AssignmentTimestamp", "int64", tag=0, tagged="0+", default=0),
])
_group(21, "StreamsGroupTargetAssignmentMemberKey", _GROUP_MEMBER,
       "StreamsGroupTargetAssignmentMemberValue", "0", "0+", [
    F("ActiveTasks", ("[]", _TASK_IDS)),
    F("StandbyTasks", ("[]", _TASK_IDS)),
    F("WarmupTasks", ("[]", _TASK_IDS)),
])
_group(22, "StreamsGroupCurrentMemberAssignmentKey", _GROUP_MEMBER,
       "StreamsGroupCurrentMemberAssignmentValue", "0", "0+", [
    F("MemberEpoch", "int32"),
    F("PreviousMemberEpoch", "int32"),
    F("State", "int8"),
    F("ActiveTasks", ("[]", _ASSIGNED_TASKS)),
    F("StandbyTasks", ("[]", _ASSIGNED_TASKS)),
    F("WarmupTasks", ("[]", _ASSIGNED_TASKS)),
    F("ActiveTasksPendingRevocation", ("[]", _ASSIGNED_TASKS)),
    F("StandbyTasksPendingRevocation", ("[]", _ASSIGNED_TASKS)),
    F("WarmupTasksPendingRevocation", ("[]", _ASSIGNED_TASKS)),
])
_group(23, "StreamsGroupTopologyKey", _GROUP_ID, "StreamsGroupTopologyValue", "0", "0+", [
    F("Epoch", "int32"),
    F("Subtopologies", ("[]", [
        F("SubtopologyId", "string"),
        F("SourceTopics", "[]string"),
        F("SourceTopicRegex", "[]string"),
        F("StateChangelogTopics", ("[]", _STREAMS_TOPIC)),
        F("RepartitionSinkTopics", "[]string"),
        F("RepartitionSourceTopics", ("[]", _STREAMS_TOPIC)),
        F("CopartitionGroups", ("[]", [
            F("SourceTopics", "[]int16"),
            F("SourceTopicRegex", "[]int16"),
            F("RepartitionSourceTopics", "[]int16"),
        ])),
    ])),
])

_CONSUMER_SUBSCRIPTION = _Schema("ConsumerProtocolSubscription", "0-3", "none", [
    F("Topics", "[]string"),
    F("UserData", "bytes", nullable="0+"),
    F("OwnedPartitions",
      ("[]", [F("Topic", "string", "1+"), F("Partitions", "[]int32", "1+")]), "1+"),
    F("GenerationId", "int32", "2+"),
    F("RackId", "string", "3+", nullable="3+"),
])
_CONSUMER_ASSIGNMENT = _Schema("ConsumerProtocolAssignment", "0-3", "none", [
    F("AssignedPartitions", ("[]", [F("Topic", "string"), F("Partitions", "[]int32")])),
    F("UserData", "bytes", nullable="0+"),
])


def _embedded_consumer_protocol(raw: bytes, schema: _Schema) -> Any:
    """Kafka replaces a consumer member's subscription/assignment bytes by their JSON when they
    parse (version prefix + message), and keeps the base64 bytes otherwise."""
    try:
        r = _Reader(raw)
        version = r.int16()
        return _to_json_obj(schema.read(r, version))
    except DecodeError:
        return base64.b64encode(raw).decode("ascii")


# ------------------------------------------------------------------------------------------------
# Schemas: __transaction_state
# ------------------------------------------------------------------------------------------------
# record type -> (key schema, value schema), as _GROUP_RECORDS
_TXN_RECORDS: Dict[int, Tuple[_Schema, _Schema]] = {}
_TXN_RECORDS[0] = (_Schema("TransactionLogKey", "0", "none", [F("TransactionalId", "string")]),
                   _Schema("TransactionLogValue", "0-1", "1+", [
    F("ProducerId", "int64"),
    F("PreviousProducerId", "int64", "1+", tag=0, tagged="1+", default=-1),
    F("NextProducerId", "int64", "1+", tag=1, tagged="1+", default=-1),
    F("ProducerEpoch", "int16"),
    F("NextProducerEpoch", "int16", "1+", tag=3, tagged="1+", default=-1),
    F("TransactionTimeoutMs", "int32"),
    F("TransactionStatus", "int8"),
    F("TransactionPartitions", ("[]", [F("Topic", "string"), F("PartitionIds", "[]int32")]),
      nullable="0+"),
    F("TransactionLastUpdateTimestampMs", "int64"),
    F("TransactionStartTimestampMs", "int64"),
    F("ClientTransactionVersion", "int16", "1+", tag=2, tagged="1+", default=0),
]))
# TransactionState names by id, as the transaction-log decoder prints transactionStatus
_TXN_STATES = (
    "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
    "PrepareEpochFence",
)

# ------------------------------------------------------------------------------------------------
# Schemas: KRaft control records (read with schema version 0, written with their Version field)
# ------------------------------------------------------------------------------------------------
_LEADER_CHANGE = _Schema("LeaderChangeMessage", "0-1", "0+", [
    F("Version", "int16"),
    F("LeaderId", "int32"),
    F("Voters", ("[]", [F("VoterId", "int32"), F("VoterDirectoryId", "uuid", "1+")])),
    F("GrantingVoters", ("[]", [F("VoterId", "int32"), F("VoterDirectoryId", "uuid", "1+")])),
])
_SNAPSHOT_HEADER = _Schema("SnapshotHeaderRecord", "0", "0+", [
    F("Version", "int16"), F("LastContainedLogTimestamp", "int64"),
])
_SNAPSHOT_FOOTER = _Schema("SnapshotFooterRecord", "0", "0+", [F("Version", "int16")])
_KRAFT_VERSION = _Schema("KRaftVersionRecord", "0", "0+", [
    F("Version", "int16"), F("KRaftVersion", "int16"),
])
_VOTERS = _Schema("VotersRecord", "0", "0+", [
    F("Version", "int16"),
    F("Voters", ("[]", [
        F("VoterId", "int32"),
        F("VoterDirectoryId", "uuid"),
        F("Endpoints", ("[]", [F("Name", "string"), F("Host", "string"), F("Port", "uint16")])),
        F("KRaftVersionFeature",
          [F("MinSupportedVersion", "int16"), F("MaxSupportedVersion", "int16")]),
    ])),
])

CONTROL_TYPE_NAMES = {
    0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION", 6: "KRAFT_VOTERS",
}
# type id -> (label as printed, schema)
_CONTROL_SCHEMAS = {
    2: ("LeaderChange:", _LEADER_CHANGE),
    3: ("SnapshotHeader", _SNAPSHOT_HEADER),
    4: ("SnapshotFooter", _SNAPSHOT_FOOTER),
    5: ("KRaftVersion", _KRAFT_VERSION),
    6: ("KRaftVoters", _VOTERS),
}


def _control_mod() -> Any:
    """kafkalog.control, imported at the first control record: it (with dataclasses) is a
    third of the CLI's import time, and most segments hold no control record."""
    global _control
    if _control is None:
        from .. import control

        _control = control
    return _control


_control: Any = None


def _control_type(key: Optional[bytes]) -> Tuple[int, int]:
    """``(key version, type id)``; raises like Kafka's ``ControlRecordType.parseTypeId``
    (:func:`kafkalog.control.parse_control_key`; a missing key is one of 0 bytes)."""
    try:
        version, ctype = _control_mod().parse_control_key(b"" if key is None else key)
    except InvalidRecordError as e:
        raise DecodeError(e.message) from None
    return version, int(ctype)


def _control_message(schema: _Schema, value: Optional[bytes]) -> Dict[str, Any]:
    if value is None:
        raise DecodeError(f"Control record value of {schema.name} is null")
    data = schema.read(_Reader(value), 0)
    # Kafka writes the JSON with the record's own Version field as the schema version.
    version = data.get("version", 0)
    if version != 0 and schema.valid[0] <= version <= schema.valid[1]:
        data = schema.read(_Reader(value), version)
    return _to_json_obj(data)


def control_record_object(key: Optional[bytes], value: Optional[bytes]) -> Dict[str, Any]:
    """A control record as a JSON-able dict for ``--json`` output."""
    _, type_id = _control_type(key)
    name = CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")
    out: Dict[str, Any] = {"controlType": name, "controlTypeId": type_id}
    if type_id in (0, 1):
        epoch, version = _end_txn_marker(value)
        out["coordinatorEpoch"] = epoch
        out["markerVersion"] = version
    elif type_id in _CONTROL_SCHEMAS:
        out["data"] = _control_message(_CONTROL_SCHEMAS[type_id][1], value)
    return out


def _end_txn_marker(value: Optional[bytes]) -> Tuple[int, int]:
    """``(coordinator epoch, version)`` of a marker's value
    (:func:`kafkalog.control.parse_end_txn_marker`; a missing value is one of 0 bytes)."""
    try:
        version, epoch = _control_mod().parse_end_txn_marker(b"" if value is None else value)
    except InvalidRecordError as e:
        raise DecodeError(e.message) from None
    return epoch, version


def control_record_text(key: Optional[bytes], value: Optional[bytes]) -> str:
    """The control-record part of a kafka-dump-log record line (with its leading space)."""
    _, type_id = _control_type(key)
    if type_id in (0, 1):
        epoch, _ = _end_txn_marker(value)
        return f" endTxnMarker: {CONTROL_TYPE_NAMES[type_id]} coordinatorEpoch: {epoch}"
    entry = _CONTROL_SCHEMAS.get(type_id)
    if entry is not None:
        label, schema = entry
        return f" {label} {jackson_dumps(_control_message(schema, value))}"
    return f" controlType: UNKNOWN({type_id})"


# ------------------------------------------------------------------------------------------------
# Key / value decoders
# ------------------------------------------------------------------------------------------------
def _utf8(b: bytes) -> str:
    return java_utf8(b)


def _as_long(b: bytes) -> str:
    if len(b) != 8:
        raise DecodeError("Size of data received by LongDeserializer is not 8")
    return str(_I64.unpack(b)[0])


def _as_int(b: bytes) -> str:
    if len(b) != 4:
        raise DecodeError("Size of data received by IntegerDeserializer is not 4")
    return str(_I32.unpack(b)[0])


KEY_VALUE_DECODERS: Dict[str, Callable[[bytes], str]] = {
    "string": _utf8,
    "hex": lambda b: binascii.hexlify(b).decode("ascii"),
    "base64": lambda b: base64.b64encode(b).decode("ascii"),
    "json": _utf8,
    "long": _as_long,
    "int": _as_int,
}

# Kafka's decoder classes (org.apache.kafka.tools.api.* and the deprecated kafka.serializer.*)
DECODER_CLASS_ALIASES = {
    "org.apache.kafka.tools.api.StringDecoder": "string",
    "kafka.serializer.StringDecoder": "string",
    "StringDecoder": "string",
    "org.apache.kafka.tools.api.LongDecoder": "long",
    "kafka.serializer.LongDecoder": "long",
    "LongDecoder": "long",
    "org.apache.kafka.tools.api.IntegerDecoder": "int",
    "kafka.serializer.IntegerDecoder": "int",
    "IntegerDecoder": "int",
}


class ValueDecoder:
    """Renders a key or value: ``text(bytes) -> str`` for the kafka-dump-log line and
    ``obj(bytes) -> JSON-able`` for ``--json`` output."""

    __slots__ = ("name", "text", "_json")

    def __init__(self, name: str) -> None:
        if name not in KEY_VALUE_DECODERS:
            raise ValueError(
                f"unknown decoder {name!r} (choose from {', '.join(KEY_VALUE_DECODERS)})"
            )
        self.name = name
        self.text = KEY_VALUE_DECODERS[name]
        self._json = name == "json"

    def obj(self, b: bytes) -> Any:
        if self._json:
            try:
                return json.loads(b)
            except (ValueError, UnicodeDecodeError):
                return _utf8(b)
        if self.name in ("long", "int"):
            try:
                return int(self.text(b))
            except DecodeError:
                return base64.b64encode(b).decode("ascii")
        return self.text(b)


def make_value_decoder(name_or_class: Optional[str]) -> ValueDecoder:
    """A decoder by kafkalog name or by Kafka decoder class name (None: ``string``)."""
    if name_or_class is None or name_or_class == "":
        return ValueDecoder("string")
    name = DECODER_CLASS_ALIASES.get(name_or_class, name_or_class)
    if name not in KEY_VALUE_DECODERS:
        raise ValueError(
            f"unsupported decoder {name_or_class!r}: kafkalog runs no JVM classes; use one of "
            f"{', '.join(KEY_VALUE_DECODERS)} or "
            "org.apache.kafka.tools.api.{String,Long,Integer}Decoder"
        )
    return ValueDecoder(name)


# ------------------------------------------------------------------------------------------------
# Message parsers (what --print-data-log prints for a record)
# ------------------------------------------------------------------------------------------------
class MessageParser:
    """``parse(record) -> (key text or None, payload text or None)``; ``parse_obj`` gives the
    same as JSON-able objects for ``--json``.  ``None`` means "not printed"."""

    name = "default"

    def parse(self, record) -> Tuple[Optional[str], Optional[str]]:  # pragma: no cover
        raise NotImplementedError

    def parse_obj(self, record) -> Tuple[Any, Any]:
        k, v = self.parse(record)
        return k, v


class DecoderMessageParser(MessageParser):
    """Kafka's DecoderMessageParser: a key decoder and a value decoder; null fields omitted."""

    def __init__(self, key_decoder: ValueDecoder, value_decoder: ValueDecoder) -> None:
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self.name = "decoder"

    def parse(self, record):
        k = record.key
        v = record.value
        return (
            None if k is None else self.key_decoder.text(k),
            None if v is None else self.value_decoder.text(v),
        )

    def parse_obj(self, record):
        k = record.key
        v = record.value
        return (
            None if k is None else self.key_decoder.obj(k),
            None if v is None else self.value_decoder.obj(v),
        )


def _java_message(e: DecodeError) -> str:
    """The message of the Java exception ``e`` stands for (an underflow's is null)."""
    return "null" if isinstance(e, _Underflow) else str(e)


class _CoordinatorRecordParser(MessageParser):
    """A coordinator's records (``__consumer_offsets``, ``__transaction_state``) as Kafka 4.4's
    tool prints them: the key ``{"type":"<record type>","data":{...}}``, the value
    ``{"version":"<value version>","data":{...}}`` or ``<DELETE>`` for a tombstone; a record
    type the coordinator does not know prints ``Unknown record type T at offset O, skipping.``
    and one that does not decode ``Error at offset O, skipping. <reason>`` (as the key, with no
    payload).  A record without a key stops the dump, as it stops Kafka's tool."""

    records: Dict[int, Tuple[_Schema, _Schema]] = {}

    def _value_json(self, record_type: int, data: Dict[str, Any]) -> Dict[str, Any]:
        return _to_json_obj(data)

    def _decode(self, record) -> Tuple[Any, Any, Optional[str]]:
        """(key obj, value obj or "<DELETE>", error key text)."""
        key = record.key
        if key is None:
            raise DecodeError(
                f"Failed to decode message at offset {record.offset} using the specified decoder "
                "(message had a missing key)"
            )
        r = _Reader(key)
        try:
            try:
                rtype = r.int16()
            except DecodeError:
                raise DecodeError("Could not read version from key's buffer.") from None
            entry = self.records.get(rtype)
            if entry is None:
                return (None, None,
                        f"Unknown record type {rtype} at offset {record.offset}, skipping.")
            kschema, vschema = entry
            try:
                kdata = kschema.read(r, 0)
            except DecodeError as e:
                raise DecodeError(f"Could not read record with version {rtype} from key's buffer "
                                  f"due to: {_java_message(e)}.") from None
            kobj = {"type": str(rtype), "data": _to_json_obj(kdata)}
            value = record.value
            if value is None:
                return kobj, "<DELETE>", None
            vr = _Reader(value)
            try:
                vver = vr.int16()
            except DecodeError:
                raise DecodeError("Could not read version from value's buffer.") from None
            if not vschema.valid[0] <= vver <= vschema.valid[1]:
                raise DecodeError(f"Found an unknown record version {vver} for {rtype} type")
            try:
                vdata = vschema.read(vr, vver)
            except DecodeError as e:
                raise DecodeError(f"Could not read record with version {vver} from value's buffer "
                                  f"due to: {_java_message(e)}.") from None
            return kobj, {"version": str(vver), "data": self._value_json(rtype, vdata)}, None
        except DecodeError as e:
            return None, None, f"Error at offset {record.offset}, skipping. {e}"

    def parse(self, record):
        kobj, vobj, err = self._decode(record)
        if err is not None:
            return err, None
        return jackson_dumps(kobj), vobj if isinstance(vobj, str) else jackson_dumps(vobj)

    def parse_obj(self, record):
        kobj, vobj, err = self._decode(record)
        if err is not None:
            return {"error": err}, None
        return kobj, vobj


class OffsetsMessageParser(_CoordinatorRecordParser):
    """``--offsets-decoder``: the group coordinator's records of ``__consumer_offsets`` (offset
    commits, classic, consumer, share and streams groups).  A classic group of protocol type
    ``consumer`` has its members' subscription and assignment bytes printed as their JSON."""

    name = "offsets"
    records = _GROUP_RECORDS

    def _value_json(self, record_type, data):
        vobj = _to_json_obj(data)
        if record_type == 2 and vobj.get("protocolType") == "consumer":
            for m_obj, m_raw in zip(vobj.get("members") or (), data.get("members") or ()):
                if m_raw.get("subscription") is not None:
                    m_obj["subscription"] = _embedded_consumer_protocol(
                        m_raw["subscription"], _CONSUMER_SUBSCRIPTION
                    )
                if m_raw.get("assignment") is not None:
                    m_obj["assignment"] = _embedded_consumer_protocol(
                        m_raw["assignment"], _CONSUMER_ASSIGNMENT
                    )
        return vobj


class TransactionLogMessageParser(_CoordinatorRecordParser):
    """``--transaction-log-decoder``: the transaction coordinator's records of
    ``__transaction_state``, with ``transactionStatus`` printed by name (``"Ongoing"``; an
    unknown id as its number in a string)."""

    name = "transaction-log"
    records = _TXN_RECORDS

    def _value_json(self, record_type, data):
        vobj = _to_json_obj(data)
        status = vobj.get("transactionStatus")
        if status is not None:
            vobj["transactionStatus"] = (_TXN_STATES[status] if 0 <= status < len(_TXN_STATES)
                                         else str(status))
        return vobj


class ClusterMetadataMessageParser(MessageParser):
    """``--cluster-metadata-decoder``: KRaft metadata records (no key is printed)."""

    name = "cluster-metadata"

    def parse(self, record):
        value = record.value
        try:
            if value is None:
                raise DecodeError("null value")
            name, version, data = read_metadata_record(value)
            out = jackson_dumps({"type": name, "version": version, "data": _to_json_obj(data)})
        except DecodeError as e:
            out = f"Error at {record.offset}, skipping. {e}"
        return None, out

    def parse_obj(self, record):
        value = record.value
        try:
            if value is None:
                raise DecodeError("null value")
            name, version, data = read_metadata_record(value)
            return None, {"type": name, "version": version, "data": _to_json_obj(data)}
        except DecodeError as e:
            return None, {"error": f"Error at {record.offset}, skipping. {e}"}
