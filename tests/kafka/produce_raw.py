"""A minimal Kafka Produce client over a plain socket (127.0.0.1), for sending a record batch
exactly as given: Kafka's Java producer picks its own producer id, so a test that must continue
a producer whose state kafkalog recorded (its id, epoch and sequence) sends that producer's
batches itself (``test_broker_serves_more.py``).

Only what that needs: an ApiVersions v0 request (the broker's Produce version range) and a
Produce request of version 8 (the newest non-flexible one; Kafka 4.x serves Produce 3 and up),
one topic, one partition, one batch; its answer for that partition.

Produce v8 request: transactional_id (nullable string), acks (int16), timeout_ms (int32),
[topic: name (string), [partition: index (int32), records (nullable bytes)]].
Produce v8 response: [topic: name, [partition: index (int32), error_code (int16), base_offset
(int64), log_append_time_ms (int64), log_start_offset (int64), [record_errors: batch_index
(int32), message (nullable string)], error_message (nullable string)]], throttle_time_ms (int32).
Request header v1 (api_key, api_version, correlation_id, client_id); response header v0
(correlation_id).
"""
from __future__ import annotations

import socket
import struct
from typing import Dict, NamedTuple, Optional, Tuple

PRODUCE, API_VERSIONS = 0, 18
PRODUCE_VERSION = 8
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
CLIENT_ID = b"kafkalog-tests"


class ProduceResult(NamedTuple):
    error_code: int
    base_offset: int
    log_start_offset: int
    error_message: Optional[str]


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self) -> Optional[str]:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s


def _string(s: Optional[bytes]) -> bytes:
    return struct.pack(">h", -1) if s is None else struct.pack(">h", len(s)) + s


class Connection:
    """One socket to the broker; requests are answered in order."""

    def __init__(self, host: str, port: int, timeout: float = 60.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(
                    f"the broker closed the connection after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, body: bytes) -> _Reader:
        self.correlation += 1
        header = struct.pack(">hhi", api_key, version, self.correlation) + _string(CLIENT_ID)
        msg = header + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        (size,) = struct.unpack(">i", self._recv(4))
        r = _Reader(self._recv(size))
        got = r.take(">i")
        assert got == self.correlation, f"correlation id {got}, sent {self.correlation}"
        return r

    def api_versions(self) -> Dict[int, Tuple[int, int]]:
        """api key -> (min version, max version) the broker serves (ApiVersions v0)."""
        r = self.request(API_VERSIONS, 0, b"")
        error = r.take(">h")
        assert error == 0, f"ApiVersions error {error}"
        return {r.take(">h"): (r.take(">h"), r.take(">h")) for _ in range(r.take(">i"))}

    def produce(self, topic: str, partition: int, records: bytes, acks: int = -1,
                timeout_ms: int = 30_000) -> ProduceResult:
        """Produce v8 of ``records`` (a magic-2 batch) to one partition; its partition answer."""
        body = (_string(None) + struct.pack(">hi", acks, timeout_ms)
                + struct.pack(">i", 1) + _string(topic.encode())
                + struct.pack(">i", 1) + struct.pack(">i", partition)
                + struct.pack(">i", len(records)) + records)
        r = self.request(PRODUCE, PRODUCE_VERSION, body)
        found = None
        for _ in range(r.take(">i")):
            name = r.string()
            for _ in range(r.take(">i")):
                index, error = r.take(">i"), r.take(">h")
                base = r.take(">q")
                r.take(">q")  # log_append_time_ms
                start = r.take(">q")
                for _ in range(r.take(">i")):
                    r.take(">i")
                    r.string()
                message = r.string()
                if (name, index) == (topic, partition):
                    found = ProduceResult(error, base, start, message)
        r.take(">i")  # throttle_time_ms
        assert r.pos == len(r.data), f"{len(r.data) - r.pos} bytes left in the Produce response"
        assert found is not None, f"no answer for {topic}-{partition}"
        return found
