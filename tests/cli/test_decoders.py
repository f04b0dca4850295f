"""The decoders behind ``--offsets-decoder``, ``--transaction-log-decoder``,
``--cluster-metadata-decoder`` and the control-record rendering: Kafka's JSON converters as
Jackson writes them."""
from __future__ import annotations

import base64
import struct
import uuid

import pytest

from kafkalog.tools.decoders import (
    ClusterMetadataMessageParser,
    DecodeError,
    JavaDouble,
    OffsetsMessageParser,
    TransactionLogMessageParser,
    control_record_text,
    jackson_dumps,
    java_double_to_string,
    java_utf8,
    make_value_decoder,
    read_metadata_record,
)

from .conftest import GOLDEN


class Rec:
    def __init__(self, key, value, offset=0):
        self.key = key
        self.value = value
        self.offset = offset


def uv(n):  # unsigned varint
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def cstr(s):  # compact string
    b = s.encode()
    return uv(len(b) + 1) + b


def test_jackson_escapes_and_numbers():
    assert jackson_dumps({"a": 'q"\\\n\t\x01\x7f\u00e9', "b": [1, None, True], "c": {}}) == \
        '{"a":"q\\"\\\\\\n\\t\\u0001\x7f\u00e9","b":[1,null,true],"c":{}}'
    assert [java_double_to_string(x) for x in (1.0, 1e7, 0.001, 1e-4, 123.25, 2.5e-7, 1e21)] == \
        ["1.0", "1.0E7", "0.001", "1.0E-4", "123.25", "2.5E-7", "1.0E21"]
    assert jackson_dumps({"v": JavaDouble(1024.0),
                          "n": JavaDouble(float("nan"))}) == '{"v":1024.0,"n":"NaN"}'


def test_metadata_record_tagged_fields():
    topic = uuid.UUID(int=1).bytes
    # PartitionChangeRecord v0: PartitionId, TopicId, then tagged Isr (tag 0) and Leader (tag 1)
    isr = uv(3) + struct.pack(">ii", 1, 2)
    leader = struct.pack(">i", 2)
    tags = uv(2) + uv(0) + uv(len(isr)) + isr + uv(1) + uv(len(leader)) + leader
    value = uv(1) + uv(5) + uv(0) + struct.pack(">i", 3) + topic + tags
    name, version, data = read_metadata_record(value)
    assert (name, version) == ("PARTITION_CHANGE_RECORD", 0)
    assert data == {"partitionId": 3,
                    "topicId": base64.urlsafe_b64encode(topic).decode().rstrip("="),
                    "isr": [1, 2], "leader": 2}
    # a Leader tag equal to its default (-2) is omitted, as Kafka's converter does
    tags = uv(1) + uv(1) + uv(4) + struct.pack(">i", -2)
    _, _, data = read_metadata_record(uv(1) + uv(5) + uv(0) + struct.pack(">i", 3) + topic + tags)
    assert "leader" not in data


def test_metadata_records_of_several_types():
    p = ClusterMetadataMessageParser()
    cases = [
        (uv(1) + uv(2) + uv(0) + cstr("foo") + uuid.UUID(int=0).bytes + b"\x00",
         '{"type":"TOPIC_RECORD","version":0,"data":{"name":"foo","topicId":"AAAAAAAAAAAAAAAAAAAAAA"}}'),
        (uv(1) + uv(4) + uv(0) + b"\x02" + cstr("t") + cstr("retention.ms") + b"\x00" + b"\x00",
         '{"type":"CONFIG_RECORD","version":0,"data":{"resourceType":2,"resourceName":"t",'
         '"name":"retention.ms","value":null}}'),
        (uv(1) + uv(14) + uv(0) + uv(2) + cstr("user") + cstr("alice") + b"\x00"
         + cstr("producer_byte_rate") + struct.pack(">d", 1024.0) + b"\x00" + b"\x00",
         '{"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"user",'
         '"entityName":"alice"}],'
         '"key":"producer_byte_rate","value":1024.0,"remove":false}}'),
        (uv(1) + uv(20) + uv(0) + b"\x00", '{"type":"NO_OP_RECORD","version":0,"data":{}}'),
    ]
    for value, expected in cases:
        assert p.parse(Rec(None, value, 7)) == (None, expected)
    # Kafka 4.4 reads version 7 as version 0 (a name is due: the 0 is a null one) and names
    # only the type in its message
    assert p.parse(Rec(None, uv(1) + uv(2) + uv(7) + b"\x00", 7)) == \
        (None, "Error at 7, skipping. Failed to deserialize record with type 2")


def test_offsets_decoder_record_types():
    p = OffsetsMessageParser()
    gid = struct.pack(">h", 5) + b"group"
    mid = struct.pack(">h", 1) + b"m"
    # v5 ConsumerGroupMemberMetadata: flexible value with a null ClassicMemberMetadata (tag absent)
    v5 = (struct.pack(">h",
                      0) + b"\x00" + b"\x00" + cstr("client") + cstr("/1.2.3.4") + uv(2) + cstr("t")
          + b"\x00" + struct.pack(">i", 5000) + cstr("uniform") + b"\x00")
    k, v = p.parse(Rec(struct.pack(">h", 5) + gid + mid, v5))
    assert k == '{"type":"5","data":{"groupId":"group","memberId":"m"}}'
    assert v == ('{"version":"0","data":{"instanceId":null,"rackId":null,"clientId":"client",'
                 '"clientHost":"/1.2.3.4","subscribedTopicNames":["t"],"subscribedTopicRegex":null,'
                 '"rebalanceTimeoutMs":5000,"serverAssignor":"uniform"}}')
    # v8 current member assignment
    tp = uuid.UUID(int=2).bytes
    v8 = (struct.pack(">hiib", 0, 3, 2, 0) + uv(2) + tp + uv(3) + struct.pack(">ii", 0, 1) + b"\x00"
          + uv(1) + b"\x00")
    k, v = p.parse(Rec(struct.pack(">h", 8) + gid + mid, v8))
    assert v == ('{"version":"0","data":{"memberEpoch":3,"previousMemberEpoch":2,"state":0,'
                 '"assignedPartitions":'
                 '[{"topicId":"AAAAAAAAAAAAAAAAAAAAAg","partitions":[0,1]}],"partitionsPendingRevocation":[]}}')
    # a value that does not parse
    k, v = p.parse(Rec(struct.pack(">h", 3) + gid, struct.pack(">h", 0)))
    assert v is None and k.startswith("Error at offset 0, skipping. Could not read record with "
                                      "version 0 from value's buffer due to: ")
    # GroupMetadata with an unparsable consumer subscription keeps its base64 bytes
    member = (struct.pack(">h", 1) + b"m" + struct.pack(">h", 1) + b"c" + struct.pack(">h", 1)
              + b"h" + struct.pack(">ii", 1000, 2000) + struct.pack(">i", 2) + b"\x7f\x7f"
              + struct.pack(">i", -1) + b"")
    gm = (struct.pack(">h", 1) + struct.pack(">h", 8) + b"consumer" + struct.pack(">i", 1)
          + struct.pack(">h", -1) + struct.pack(">h", -1) + struct.pack(">i", 1) + member)
    with pytest.raises(DecodeError):
        # a null non-nullable bytes field is an error
        from kafkalog.tools.decoders import _GROUP_RECORDS, _Reader

        _GROUP_RECORDS[2][1].read(_Reader(gm[2:]), 1)
    member = member[:-4] + struct.pack(">i", 0)
    gm = gm[: len(gm) - len(member)] + member
    _, v = p.parse(Rec(struct.pack(">h", 2) + gid, gm))
    assert ('"subscription":"f38="' in v
            and '"assignment":{"assignedPartitions":[],"userData":null}' not in v)


def test_offsets_decoder_missing_key_is_fatal():
    with pytest.raises(DecodeError, match="message had a missing key"):
        OffsetsMessageParser().parse(Rec(None, b"x", 12))


def test_control_record_errors():
    with pytest.raises(DecodeError, match="Must have at least 4 bytes"):
        control_record_text(b"\x00", b"")
    with pytest.raises(DecodeError, match="end transaction marker. Must have at least 6 bytes"):
        control_record_text(struct.pack(">hh", 0, 1), b"\x00")


def test_value_decoders():
    assert make_value_decoder(None).text(b"\xff") == "\ufffd"
    assert make_value_decoder("org.apache.kafka.tools.api.IntegerDecoder").text(
        struct.pack(">i", -3)) == "-3"
    assert make_value_decoder("json").obj(b'{"a":1}') == {"a": 1}
    with pytest.raises(ValueError):
        make_value_decoder("com.example.Foo")
    with pytest.raises(DecodeError):
        make_value_decoder("long").text(b"123")


# -- Kafka 4.4's own output ---------------------------------------------------------------------
_PARSERS = {"offsets": OffsetsMessageParser, "transaction-log": TransactionLogMessageParser,
            "cluster-metadata": ClusterMetadataMessageParser}


def _kafka44_golden():
    """(decoder, offset, key, value, what Kafka 4.4 printed) of golden/kafka44_decoders.txt."""
    out = []
    for line in (GOLDEN / "kafka44_decoders.txt").read_text(encoding="utf-8").split("\n"):
        if line and not line.startswith("#"):
            name, offset, key, value, tail = line.split("\t", 4)
            out.append((name, int(offset), None if key == "-" else bytes.fromhex(key),
                        None if value == "-" else bytes.fromhex(value), tail))
    return out


def test_decoders_print_what_kafka_4_4_prints():
    """Every record of the golden file (every record type and value version, random values, one
    corrupted copy of each, tombstones, versions out of range, unknown types; see its header)
    decodes to the text Kafka 4.4.0's kafka-dump-log printed for it."""
    golden = _kafka44_golden()
    assert {g[0] for g in golden} == set(_PARSERS) and len(golden) > 400
    wrong = []
    for name, offset, key, value, expected in golden:
        k, v = _PARSERS[name]().parse(Rec(key, value, offset))
        got = ("" if k is None else " key: " + k) + ("" if v is None else " payload: " + v)
        if got != expected:
            wrong.append(f"{name} offset {offset}:\n  kafka:    {expected}\n  kafkalog: {got}")
    assert not wrong, f"{len(wrong)} record(s) differ; the first:\n" + "\n".join(wrong[:3])


# -- text as Java decodes it ----------------------------------------------------------------------
@pytest.mark.parametrize("raw,expected", [
    (b"t\xed\xb6\r", "t\ufffd\r"),              # ED + a continuation, then a non-continuation: one
    (b"\xed\xa0\x80", "\ufffd"),                # a surrogate's encoding: one, for all 3 bytes
    (b"\xed\xbf\xbfz", "\ufffdz"),
    (b"\xe0\x80\x80", "\ufffd" * 3),            # an overlong E0 80..9F: the lead alone, then each
    (b"\xe0\xa0", "\ufffd"),                    # a 3-byte sequence cut by the end: one
    (b"\xe1\x80A", "\ufffdA"),
    (b"\xf0\x90\x80", "\ufffd"),                # a 4-byte sequence cut by the end: one
    (b"\xf0\x90\x80A", "\ufffdA"),
    (b"\xf0\x80\x80\x80", "\ufffd" * 4),        # an overlong F0 80..8F
    (b"\xf4\x90\x80\x80", "\ufffd" * 4),        # past U+10FFFF
    (b"\xf5\x80", "\ufffd" * 2), (b"\xc0\xaf", "\ufffd" * 2), (b"\xff", "\ufffd"),
    (b"\xc2", "\ufffd"), (b"\xc2A", "\ufffdA"),
    (b"ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "ok \u00e9 \u20ac \U0001F600"),  # valid: as is
])
def test_java_utf8_replaces_as_java_does(raw, expected):
    assert java_utf8(raw) == expected


def test_java_utf8_differs_from_python_replace():
    """The first case above: Python's own decoder replaces ED and B6 apart (two U+FFFD)."""
    assert b"t\xed\xb6\r".decode("utf-8", "replace") == "t\ufffd\ufffd\r"
    assert java_utf8(b"t\xed\xb6\r") == "t\ufffd\r"


def test_java_utf8_matches_java_on_generated_byte_strings():
    """2000 byte strings and what Java 17's new String(bytes, UTF_8) made of them
    (golden/java_utf8_decode.txt, produced by golden/JavaUtf8.java)."""
    pairs = [line.split(" ") for line in (GOLDEN / "java_utf8_decode.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    assert len(pairs) == 2000
    wrong = [(raw, want) for raw, want in pairs
             if java_utf8(bytes.fromhex(raw)).encode("utf-8") != bytes.fromhex(want)]
    assert not wrong, f"{len(wrong)} differ, e.g. {wrong[:3]}"
    # on a tenth of them (ED followed by A0-BF: a surrogate's lead) Python's own replacement differs
    differs = [raw for raw, want in pairs
               if bytes.fromhex(raw).decode("utf-8",
                                            "replace").encode("utf-8") != bytes.fromhex(want)]
    assert len(differs) >= 200


def test_string_fields_decode_as_java():
    """A string field of a record (the cluster-metadata decoder) with the bytes of the first
    case above: Kafka reads it with new String(bytes, UTF_8) too."""
    name = b"t\xed\xb6\r"
    value = uv(1) + uv(2) + uv(0) + uv(len(name) + 1) + name + uuid.UUID(int=0).bytes + b"\x00"
    assert read_metadata_record(value)[2]["name"] == "t\ufffd\r"


# -- Kafka 4.4's record versions and the JSON of --transaction-log-decoder ----------------------
def test_register_broker_v4_and_registration_change_v3_cordoned_log_dirs():
    """RegisterBrokerRecord v4 and BrokerRegistrationChangeRecord v3 add the tagged, nullable
    CordonedLogDirs (tag 1 and 3; printed when set, an empty list included)."""
    d1, d2 = uuid.UUID(int=1).bytes, uuid.UUID(int=2).bytes
    inc = uuid.UUID(int=3).bytes
    ep = uv(2) + cstr("PLAINTEXT") + cstr("h") + struct.pack(">Hh", 9092, 0) + b"\x00"
    body = (struct.pack(">i", 1) + b"\x00" + inc + struct.pack(">q", 7) + ep + uv(1) + b"\x00"
            + b"\x01" + b"\x01")   # features [], rack null, fenced, inControlledShutdown
    dirs = uv(3) + d1 + d2
    # LogDirs, CordonedLogDirs []
    tags = uv(2) + uv(0) + uv(len(dirs)) + dirs + uv(1) + uv(2) + uv(1)
    name, version, data = read_metadata_record(uv(1) + uv(0) + uv(4) + body + tags)
    assert (name, version) == ("REGISTER_BROKER_RECORD", 4)
    assert list(data)[-3:] == ["inControlledShutdown", "logDirs", "cordonedLogDirs"]
    assert data["logDirs"] == ["AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg"]
    assert data["cordonedLogDirs"] == []
    change = struct.pack(">iq", 1, 12) + uv(1) + uv(3) + uv(len(dirs)) + dirs
    name, version, data = read_metadata_record(uv(1) + uv(17) + uv(3) + change)
    assert (name, version) == ("BROKER_REGISTRATION_CHANGE_RECORD", 3)
    assert data == {"brokerId": 1, "brokerEpoch": 12,
                    "cordonedLogDirs": ["AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg"]}
    # a null CordonedLogDirs is its default: left out
    _, _, data = read_metadata_record(uv(1) + uv(17) + uv(3) + struct.pack(">iq", 1, 12)
                                      + uv(1) + uv(3) + uv(1) + uv(0))
    assert "cordonedLogDirs" not in data


def test_unregister_controller_record():
    assert ClusterMetadataMessageParser().parse(Rec(None,
                                                    uv(1) + uv(29) + uv(0) + struct.pack(">i", 3000)
                                                    + b"\x00")) == \
        (None, '{"type":"UNREGISTER_CONTROLLER_RECORD","version":0,"data":{"controllerId":3000}}')


def test_metadata_versions_past_the_valid_ones():
    """Kafka 4.4 reads a metadata record of any version (its reader tests a field's versions
    only where the valid versions differ on it): a version above the highest reads as the
    highest, one below the lowest as the lowest; a nested struct above the highest fails."""
    p = ClusterMetadataMessageParser()
    topic = cstr("foo") + uuid.UUID(int=0).bytes + b"\x00"
    assert p.parse(Rec(None, uv(1) + uv(2) + uv(7) + topic, 1)) == \
        (None, '{"type":"TOPIC_RECORD","version":7,"data":{"name":"foo",'
               '"topicId":"AAAAAAAAAAAAAAAAAAAAAA"}}')
    minus_one = b"\xff\xff\xff\xff\x0f"   # the varint of the Java int -1
    assert p.parse(Rec(None, uv(1) + uv(20) + minus_one + b"\x00", 2)) == \
        (None, '{"type":"NO_OP_RECORD","version":-1,"data":{}}')
    quota = uv(2) + cstr("user") + b"\x00" + b"\x00" + cstr("k") + struct.pack(">d",
                                                                               1.0) + b"\x00\x00"
    assert p.parse(Rec(None, uv(1) + uv(14) + uv(0) + quota,
                       3))[1].startswith('{"type":"CLIENT_QUOTA_RECORD"')
    assert p.parse(Rec(None, uv(1) + uv(14) + uv(1) + quota, 3)) == \
        (None, "Error at 3, skipping. Failed to deserialize record with type 14")


def test_offset_commit_v4_topic_id():
    """OffsetCommitValue v4's tagged topicId (tag 0) is printed after commitTimestamp, unless it is
    the zero UUID (its default)."""
    key = (struct.pack(">h", 1) + struct.pack(">h", 1) + b"g" + struct.pack(">h", 1) + b"t"
           + struct.pack(">i", 4))
    tid = base64.urlsafe_b64decode("1sSmBta9QQuaScyOfs4Qog==")   # the broker matrix's topic id
    v4 = struct.pack(">hqi", 4, 140, 0) + uv(1) + struct.pack(">q", 1795764032291)
    _, v = OffsetsMessageParser().parse(Rec(key, v4 + uv(1) + uv(0) + uv(16) + tid))
    assert v == ('{"version":"4","data":{"offset":140,"leaderEpoch":0,"metadata":"",'
                 '"commitTimestamp":1795764032291,"topicId":"1sSmBta9QQuaScyOfs4Qog"}}')
    _, v = OffsetsMessageParser().parse(Rec(key, v4 + uv(1) + uv(0) + uv(16) + bytes(16)))
    assert v.endswith('"commitTimestamp":1795764032291}}')


def test_offsets_record_types_of_kafka_4_4():
    """Type 0 is the legacy offset commit (value version 0 only); share-group and streams-group
    records decode; a value version outside the record's own is Kafka's error."""
    p = OffsetsMessageParser()
    okey = struct.pack(">h", 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    v0 = struct.pack(">hq", 0, 5) + struct.pack(">h", 0) + struct.pack(">q", 9)
    assert p.parse(Rec(struct.pack(">h", 0) + okey, v0)) == (
        '{"type":"0","data":{"group":"g","topic":"t","partition":0}}',
        '{"version":"0","data":{"offset":5,"metadata":"","commitTimestamp":9}}')
    assert p.parse(Rec(struct.pack(">h", 0) + okey,
                       struct.pack(">h", 1) + v0[2:] + b"\x00" * 8, 6)) == (
        "Error at offset 6, skipping. Found an unknown record version 1 for 0 type", None)
    share = struct.pack(">h", 11) + struct.pack(">h", 1) + b"s"
    assert p.parse(Rec(share, struct.pack(">hiq", 0, 3, -7) + b"\x00")) == (
        '{"type":"11","data":{"groupId":"s"}}',
        '{"version":"0","data":{"epoch":3,"metadataHash":-7}}')
    assert p.parse(Rec(struct.pack(">h", 18) + b"\x00", b"\x00\x00", 8)) == (
        "Unknown record type 18 at offset 8, skipping.", None)


def test_transaction_log_decoder_prints_json():
    """Kafka 4.4: the key {"type":"0","data":{"transactionalId":...}}, the value as the
    generated converter writes it with transactionStatus by name (an unknown id as its number)."""
    p = TransactionLogMessageParser()
    key = struct.pack(">hh", 0, 6) + b"txn-tA"
    parts = uv(2) + cstr("txn") + uv(2) + struct.pack(">i", 0) + b"\x00"
    v1 = (struct.pack(">hqhib", 1, 5, 0, 600000, 1) + parts + struct.pack(">qq", 1795764030807,
                                                                          1795764030807)
          + uv(2) + uv(0) + uv(8) + struct.pack(">q", 5) + uv(2) + uv(2) + struct.pack(">h", 2))
    assert p.parse(Rec(key, v1)) == (
        '{"type":"0","data":{"transactionalId":"txn-tA"}}',
        '{"version":"1","data":{"producerId":5,"previousProducerId":5,"producerEpoch":0,'
        '"transactionTimeoutMs":600000,"transactionStatus":"Ongoing","transactionPartitions":'
        '[{"topic":"txn","partitionIds":[0]}],"transactionLastUpdateTimestampMs":1795764030807,'
        '"transactionStartTimestampMs":1795764030807,"clientTransactionVersion":2}}')
    v0 = (struct.pack(">hqhib", 0, 0, 0, 60000, 9) + struct.pack(">i", -1)
          + struct.pack(">qq", 1, -1))
    _, v = p.parse(Rec(key, v0))
    assert '"transactionStatus":"9","transactionPartitions":null' in v
    assert p.parse(Rec(key, None)) == ('{"type":"0","data":{"transactionalId":"txn-tA"}}',
                                       "<DELETE>")
    assert p.parse(Rec(struct.pack(">h", 1) + key[2:], v0, 4)) == (
        "Unknown record type 1 at offset 4, skipping.", None)
    assert p.parse(Rec(key, struct.pack(">h", 2) + v0[2:], 5)) == (
        "Error at offset 5, skipping. Found an unknown record version 2 for 0 type", None)
    with pytest.raises(DecodeError,
                       match="at offset 3 using the specified decoder .message had a missing key"):
        p.parse(Rec(None, v0, 3))


def test_coordinator_reader_errors_are_kafkas():
    """What Kafka's readers say: a short fixed-size read is a BufferUnderflowException (message
    null), a short string is readArray's error; a tagged field count past the end is refused."""
    p = OffsetsMessageParser()
    key = struct.pack(">h", 3) + struct.pack(">h", 1) + b"g"
    assert p.parse(Rec(key, struct.pack(">h", 0) + b"\x00\x00", 1))[0] == (
        "Error at offset 1, skipping. Could not read record with version 0 from value's buffer "
        "due to: null.")
    assert p.parse(Rec(struct.pack(">hh", 3, 5) + b"g", None, 2))[0] == (
        "Error at offset 2, skipping. Could not read record with version 3 from key's buffer due "
        "to: Error reading byte array of 5 byte(s): only 1 byte(s) available.")
    assert p.parse(Rec(key, struct.pack(">hi", 0, 1) + uv(9), 3))[0] == (
        "Error at offset 3, skipping. Could not read record with version 0 from value's buffer due "
        "to: Tried to read 9 tagged fields, but there are only 0 bytes remaining..")


def test_tagged_nullable_struct_marker():
    """A tagged nullable struct (ConsumerGroupMemberMetadataValue's ClassicMemberMetadata) is
    preceded by a varint, 0 or below for null (printed as null: the field's default is the
    empty struct, which is left out)."""
    p = OffsetsMessageParser()
    key = struct.pack(">h", 5) + struct.pack(">h", 1) + b"g" + struct.pack(">h", 1) + b"m"
    body = (struct.pack(">h", 0) + b"\x00\x00" + cstr("c") + cstr("h") + uv(1) + b"\x00"
            + struct.pack(">i", 5) + b"\x00")
    classic = struct.pack(">i", 45000) + uv(2) + cstr("n") + uv(2) + b"\x07" + b"\x00" + b"\x00"
    empty = struct.pack(">i", 0) + uv(1) + b"\x00"

    def member(marker, struct_bytes):
        return body + uv(1) + uv(0) + uv(len(marker) + len(struct_bytes)) + marker + struct_bytes

    _, v = p.parse(Rec(key, member(b"\x01", classic)))
    assert v.endswith('"classicMemberMetadata":{"sessionTimeoutMs":45000,'
                      '"supportedProtocols":[{"name":"n","metadata":"Bw=="}]}}}')
    _, v = p.parse(Rec(key, member(b"\x80\x01", classic)))   # the varint 128: not null
    assert '"sessionTimeoutMs":45000' in v
    for null in (b"\x00", b"\xff\xff\xff\xff\x0f"):
        _, v = p.parse(Rec(key, member(null, classic)))
        assert v.endswith('"serverAssignor":null,"classicMemberMetadata":null}}')
    _, v = p.parse(Rec(key, member(b"\x01", empty)))
    assert v.endswith('"serverAssignor":null}}')
