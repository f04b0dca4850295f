"""Property test: Log against a simple in-memory model over random sequences of append, read,
roll, retention, log-start-offset moves, truncation, offset-for-timestamp, clean reopen and
crash reopen (files closed without flush, marker or checkpoints)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule  # noqa: E402

from kafkalog.errors import RecordTooLargeError  # noqa: E402
from kafkalog.records import MemoryRecordsBuilder  # noqa: E402
from kafkalog.storage.log import Log  # noqa: E402

from .conftest import BASE_TS, FakeClock  # noqa: E402

RETENTION_MS = 60_000


class LogVersusModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kafkalog-model-"))
        self.dir = self.tmp / "model-0"
        self.clock = FakeClock(BASE_TS)
        self.config = {
            "segment.bytes": 700,
            "index.interval.bytes": 90,
            "segment.index.bytes": 96,
            "retention.ms": RETENTION_MS,
        }
        self.log = Log.open(self.dir, self.config, clock=self.clock)
        self.batches = []  # [(first, last, [(offset, ts, value)])]
        self.leo = 0
        self.log_start = 0
        self.ts = BASE_TS

    def teardown(self) -> None:
        try:
            self.log.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- model helpers ------------------------------------------------------------------------
    def visible(self):
        return [
            (o, t, v) for _f, _l, recs in self.batches for (o, t, v) in recs if o >= self.log_start
        ]

    # -- rules -----------------------------------------------------------------------------------
    @rule(
        n=st.integers(1, 6),
        size=st.integers(0, 120),
        ts_steps=st.lists(st.integers(-500, 3000), min_size=6, max_size=6),
        codec=st.sampled_from(["none", "none", "gzip"]),
    )
    def append(self, n, size, ts_steps, codec):
        b = MemoryRecordsBuilder(compression_type=codec)
        recs = []
        for i in range(n):
            self.ts = max(BASE_TS, self.ts + ts_steps[i])
            value = (b"%d:" % (self.leo + i)).ljust(size, b"#")
            b.append(self.ts, None, value)
            recs.append((self.leo + i, self.ts, value))
        data = b.build()
        if len(data) > self.config["segment.bytes"]:
            with pytest.raises(RecordTooLargeError, match="maximum configured segment size"):
                self.log.append(data)
            return
        info = self.log.append(data)
        assert (info.first_offset, info.last_offset) == (self.leo, self.leo + n - 1)
        assert info.max_timestamp == max(t for _o, t, _v in recs)
        self.batches.append((self.leo, self.leo + n - 1, recs))
        self.leo += n

    @rule(data=st.data(), max_bytes=st.integers(0, 1500), min_one=st.booleans())
    def read(self, data, max_bytes, min_one):
        offset = data.draw(st.integers(self.log_start, self.leo), label="offset")
        result = self.log.read(offset, max_bytes, min_one_message=min_one)
        if offset == self.leo:
            assert result.size_in_bytes == 0
            return
        expected = [b for b in self.batches if b[1] >= offset]
        got = list(result)  # complete batches only
        assert result.size_in_bytes <= max(max_bytes, got[0].size_in_bytes if got else 0)
        if min_one:
            assert got, "min_one_message must return the first batch"
        for batch, (first, last, recs) in zip(got, expected):
            assert (batch.base_offset, batch.last_offset) == (first, last)
            assert [(r.offset, r.timestamp, r.value) for r in batch] == recs
        assert len(got) <= len(expected)

    @rule()
    def roll(self):
        self.log.roll()

    @rule(advance=st.integers(0, 3 * RETENTION_MS))
    def time_retention(self, advance):
        self.clock.advance(advance)
        now = self.clock.now
        before = self.log_start
        self.log.delete_retention()
        new_start = self.log.log_start_offset
        assert new_start >= before
        dropped = [r for r in self.visible() if r[0] < new_start]
        # only expired data goes: a deleted segment's largest timestamp was older than retention
        assert all(now - t > RETENTION_MS for _o, t, _v in dropped)
        first = self.log.segments[0]
        if len(self.log.segments) > 1 or first.size > 0:
            assert now - first.largest_timestamp <= RETENTION_MS or first.base_offset == self.leo
        self.log_start = new_start
        if self.log_start == self.leo:
            pass  # everything expired: one empty segment at the log end remains
        assert [s.base_offset for s in self.log.segments][0] <= self.log_start

    @rule(data=st.data())
    def move_log_start(self, data):
        target = data.draw(st.integers(self.log_start, self.leo), label="start")
        self.log.increment_log_start_offset(target)
        self.log_start = max(self.log_start, target)
        self.log.delete_retention()  # the log-start pass (retention.ms may also apply)
        self.log_start = self.log.log_start_offset
        assert self.log_start >= target

    @precondition(lambda self: self.leo > self.log_start)
    @rule(data=st.data())
    def truncate(self, data):
        target = data.draw(st.integers(self.log_start, self.leo - 1), label="target")
        assert self.log.truncate_to(target)
        keep = [b for b in self.batches if b[1] < target]
        # the whole batch holding the target goes
        self.batches = keep
        self.leo = keep[-1][1] + 1 if keep else self.log.log_end_offset
        self.log_start = min(self.log_start, self.leo)
        if not keep:
            self.leo = self.log.log_end_offset
            self.log_start = self.log.log_start_offset

    @rule(data=st.data())
    def offset_for_timestamp(self, data):
        recs = self.visible()
        candidates = [t for _o, t, _v in recs] + [BASE_TS - 1, self.ts + 1]
        target = data.draw(st.sampled_from(candidates), label="ts")
        expected = next(((o, t) for o, t, _v in recs if t >= target), None)
        got = self.log.offset_for_timestamp(target)
        assert (None if got is None else (got.offset, got.timestamp)) == expected

    @rule()
    def reopen_clean(self):
        self.log.close()
        self.log = Log.open(self.dir, self.config, clock=self.clock)
        assert self.log.had_clean_shutdown

    @rule(flush=st.booleans())
    def reopen_after_crash(self, flush):
        if flush:
            self.log.flush()
        self.log.close_handlers()
        self.log = Log.open(self.dir, self.config, clock=self.clock)
        assert not self.log.had_clean_shutdown

    # -- invariants --------------------------------------------------------------------------------
    @invariant()
    def matches_model(self):
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.log_start
        got = [(r.offset, r.timestamp, r.value) for r in self.log.iter_records()]
        assert got == self.visible()

    @invariant()
    def indexes_are_consistent(self):
        self.log.verify_indexes()


LogVersusModel.TestCase.settings = settings(
    max_examples=int(__import__("os").environ.get("KAFKALOG_MODEL_EXAMPLES", "30")),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_log_versus_model = LogVersusModel.TestCase
