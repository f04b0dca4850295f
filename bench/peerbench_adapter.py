"""kafkalog's adapter for the shared peer benchmark (``../shared/peerbench/bench_peers.py``).

Pass it with ``--plugin bench/peerbench_adapter.py``: it replaces the harness's built-in
``kafkalog`` / ``kafkalog-py`` entries (which look for a module inside the package) and adds
``kafkalog-arrow``, the columnar decoder.  Each runs in its own subprocess; ``kafkalog-py``
sets ``KAFKALOG_PURE_PYTHON=1``.  The operations follow the harness's contract: decode touches
offset, timestamp, key, value and headers of every record exactly like the peers' driver.
"""
from __future__ import annotations

import os

try:  # the harness inserts its own directory into sys.path
    from bench_peers import Adapter  # type: ignore
except ImportError:  # imported outside the harness (e.g. by tests)
    class Adapter:  # type: ignore[no-redef]
        name = "base"
        env: dict = {}
        unset_env: tuple = ()
        decode_mode = "python-objects"

        def info(self) -> dict:
            return {}


class KafkalogAdapter(Adapter):
    name = "kafkalog"
    unset_env = ("KAFKALOG_PURE_PYTHON",)
    env: dict = {}

    def load(self):
        import kafkalog

        want = "python" if os.environ.get("KAFKALOG_PURE_PYTHON") else "cython"
        if kafkalog.IMPLEMENTATION != want:
            raise RuntimeError(
                f"kafkalog loaded the {kafkalog.IMPLEMENTATION} twin, expected {want}: "
                f"{kafkalog.FALLBACK_REASON}"
            )
        self.kl = kafkalog
        self._info = {
            "version": kafkalog.__version__,
            "implementation": kafkalog.IMPLEMENTATION,
            "file": kafkalog.__file__,
        }

    def info(self):
        return self._info

    def decode_all(self, buf):
        n = 0
        for batch in self.kl.MemoryRecords(buf, check_crcs=False):
            for r in batch:
                r.offset
                r.timestamp
                r.key
                r.value
                r.headers
                n += 1
        return n

    def decode_tuples(self, buf):
        out = []
        append = out.append
        for batch in self.kl.MemoryRecords(buf, check_crcs=False):
            for r in batch:
                append((r.offset, r.key, r.value))
        return out

    def validate(self, buf):
        # The header fields the peers' drivers read: v2 batches (base offset, last offset
        # delta, max timestamp, codec, producer id); for v0/v1 entries the entry's own offset,
        # as a legacy wrapper's base offset needs decompression (in Kafka too).
        n = 0
        for b in self.kl.MemoryRecords(buf):
            b.ensure_valid()
            if b.magic == 2:
                b.base_offset
                b.last_offset_delta
                b.max_timestamp
                b.compression_type
                b.producer_id
            else:
                b.last_offset
                b.compression_type
                b.timestamp_type
            n += 1
        return n

    def encode(self, records, magic, codec, batch_size):
        Builder = self.kl.MemoryRecordsBuilder
        out = []
        offset = 0

        def new(base):
            return Builder(magic, codec, base, write_limit=batch_size)

        b = new(offset)
        for k, v, ts, h in records:
            if b.try_append(ts, k, v, h) is None:  # full: like the peers' append() -> None
                out.append(b.build())
                b = new(offset)
                b.append(ts, k, v, h)
            offset += 1
        out.append(b.build())
        return b"".join(out)


class KafkalogPythonAdapter(KafkalogAdapter):
    name = "kafkalog-py"
    unset_env = ()
    env = {"KAFKALOG_PURE_PYTHON": "1"}


class KafkalogArrowAdapter(KafkalogAdapter):
    """Columnar: the whole buffer decoded into Arrow columns in one compiled call."""

    name = "kafkalog-arrow"
    decode_mode = "columnar (kafkalog.arrow.to_arrow: offset, timestamp, key, value, headers)"

    def load(self):
        super().load()
        from kafkalog import arrow

        self.arrow = arrow

    def decode_all(self, buf):
        t = self.arrow.to_arrow(buf, check_crcs=False)
        return t.num_rows

    def decode_tuples(self, buf):
        t = self.arrow.to_arrow(buf, columns=["offset", "key", "value"], check_crcs=False)
        return list(zip(*(t.column(c).to_pylist() for c in ("offset", "key", "value"))))


ADAPTERS = [KafkalogAdapter, KafkalogPythonAdapter, KafkalogArrowAdapter]
