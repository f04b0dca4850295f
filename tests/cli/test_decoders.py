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
    control_record_text,
    jackson_dumps,
    java_double_to_string,
    make_value_decoder,
    read_metadata_record,
)


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
    assert jackson_dumps({"v": JavaDouble(1024.0), "n": JavaDouble(float("nan"))}) == '{"v":1024.0,"n":"NaN"}'


def test_metadata_record_tagged_fields():
    topic = uuid.UUID(int=1).bytes
    # PartitionChangeRecord v0: PartitionId, TopicId, then tagged Isr (tag 0) and Leader (tag 1)
    isr = uv(3) + struct.pack(">ii", 1, 2)
    leader = struct.pack(">i", 2)
    tags = uv(2) + uv(0) + uv(len(isr)) + isr + uv(1) + uv(len(leader)) + leader
    value = uv(1) + uv(5) + uv(0) + struct.pack(">i", 3) + topic + tags
    name, version, data = read_metadata_record(value)
    assert (name, version) == ("PARTITION_CHANGE_RECORD", 0)
    assert data == {"partitionId": 3, "topicId": base64.urlsafe_b64encode(topic).decode().rstrip("="),
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
        (uv(1) + uv(14) + uv(0) + uv(2) + cstr("user") + cstr("alice") + b"\x00" + cstr("producer_byte_rate")
         + struct.pack(">d", 1024.0) + b"\x00" + b"\x00",
         '{"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"user","entityName":"alice"}],'
         '"key":"producer_byte_rate","value":1024.0,"remove":false}}'),
        (uv(1) + uv(20) + uv(0) + b"\x00", '{"type":"NO_OP_RECORD","version":0,"data":{}}'),
    ]
    for value, expected in cases:
        assert p.parse(Rec(None, value, 7)) == (None, expected)
    assert p.parse(Rec(None, uv(1) + uv(2) + uv(7) + b"\x00", 7)) == \
        (None, "Error at 7, skipping. Failed to deserialize record with type 2: Can't read version 7 of TopicRecord")


def test_offsets_decoder_record_types():
    p = OffsetsMessageParser()
    gid = struct.pack(">h", 5) + b"group"
    mid = struct.pack(">h", 1) + b"m"
    # v5 ConsumerGroupMemberMetadata: flexible value with a null ClassicMemberMetadata (tag absent)
    v5 = (struct.pack(">h", 0) + b"\x00" + b"\x00" + cstr("client") + cstr("/1.2.3.4") + uv(2) + cstr("t")
          + b"\x00" + struct.pack(">i", 5000) + cstr("uniform") + b"\x00")
    k, v = p.parse(Rec(struct.pack(">h", 5) + gid + mid, v5))
    assert k == '{"type":"5","data":{"groupId":"group","memberId":"m"}}'
    assert v == ('{"version":"0","data":{"instanceId":null,"rackId":null,"clientId":"client",'
                 '"clientHost":"/1.2.3.4","subscribedTopicNames":["t"],"subscribedTopicRegex":null,'
                 '"rebalanceTimeoutMs":5000,"serverAssignor":"uniform"}}')
    # v8 current member assignment
    tp = uuid.UUID(int=2).bytes
    v8 = struct.pack(">hiib", 0, 3, 2, 0) + uv(2) + tp + uv(3) + struct.pack(">ii", 0, 1) + b"\x00" + uv(1) + b"\x00"
    k, v = p.parse(Rec(struct.pack(">h", 8) + gid + mid, v8))
    assert v == ('{"version":"0","data":{"memberEpoch":3,"previousMemberEpoch":2,"state":0,"assignedPartitions":'
                 '[{"topicId":"AAAAAAAAAAAAAAAAAAAAAg","partitions":[0,1]}],"partitionsPendingRevocation":[]}}')
    # a value that does not parse
    k, v = p.parse(Rec(struct.pack(">h", 3) + gid, struct.pack(">h", 0)))
    assert v is None and k.startswith("Error at offset 0, skipping. Could not read record with version 0 from "
                                      "value's buffer due to: ")
    # GroupMetadata with an unparsable consumer subscription keeps its base64 bytes
    member = (struct.pack(">h", 1) + b"m" + struct.pack(">h", 1) + b"c" + struct.pack(">h", 1) + b"h"
              + struct.pack(">ii", 1000, 2000) + struct.pack(">i", 2) + b"\x7f\x7f" + struct.pack(">i", -1) + b"")
    gm = (struct.pack(">h", 1) + struct.pack(">h", 8) + b"consumer" + struct.pack(">i", 1) + struct.pack(">h", -1)
          + struct.pack(">h", -1) + struct.pack(">i", 1) + member)
    with pytest.raises(DecodeError):
        # a null non-nullable bytes field is an error
        from kafkalog.tools.decoders import _GROUP_RECORDS, _Reader

        _GROUP_RECORDS[2][1].read(_Reader(gm[2:]), 1)
    member = member[:-4] + struct.pack(">i", 0)
    gm = gm[: len(gm) - len(member)] + member
    _, v = p.parse(Rec(struct.pack(">h", 2) + gid, gm))
    assert '"subscription":"f38="' in v and '"assignment":{"assignedPartitions":[],"userData":null}' not in v


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
    assert make_value_decoder("org.apache.kafka.tools.api.IntegerDecoder").text(struct.pack(">i", -3)) == "-3"
    assert make_value_decoder("json").obj(b'{"a":1}') == {"a": 1}
    with pytest.raises(ValueError):
        make_value_decoder("com.example.Foo")
    with pytest.raises(DecodeError):
        make_value_decoder("long").text(b"123")
