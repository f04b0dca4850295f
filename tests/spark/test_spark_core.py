"""kafkalog.spark's Spark-free core: options, discovery, offsets, split planning and reading
(no JVM needed; these run wherever pyarrow is installed)."""

from __future__ import annotations

import os
import shutil

import pytest

pa = pytest.importorskip("pyarrow")

from kafkalog import partitioner  # noqa: E402
from kafkalog.errors import KafkaLogError  # noqa: E402
from kafkalog.spark import (  # noqa: E402
    _discovery,
    _errors,
    _offsets,
    _options,
    _planning,
    _schema,
    _tasks,
)
from kafkalog.spark import _write as wcore  # noqa: E402


def _read_all(opts, pruning=None, splits=None):
    schema = _schema.arrow_schema(opts)
    rows = []
    for s in splits if splits is not None else _planning.plan(opts, pruning):
        for rb in _tasks.read_split(s, opts, schema, pruning):
            assert rb.schema.equals(schema)
            rows.extend(rb.to_pylist())
    return sorted(rows, key=lambda r: (r["topic"] or "", r["partition"] or 0, r["offset"]))


def test_read_equals_direct_decode(sample_root, oracle):
    opts = _options.ReadOptions.parse({"path": sample_root, "includeHeaders": "true"})
    assert oracle.norm(_read_all(opts)) == oracle.norm(oracle.rows(sample_root))


@pytest.mark.parametrize("max_bytes,min_parts", [(4096, None), (None, 7), (1 << 30, None)])
def test_split_sizes_do_not_change_the_result(sample_root, oracle, max_bytes, min_parts):
    o = {"path": sample_root}
    if max_bytes:
        o["maxPartitionBytes"] = str(max_bytes)
    if min_parts:
        o["minPartitions"] = str(min_parts)
    opts = _options.ReadOptions.parse(o, default_parallelism=1)
    splits = _planning.plan(opts)
    if max_bytes == 4096:
        # large segments are cut at .index positions: more splits than segments
        assert len(splits) > 2 * len(oracle.dirs(sample_root))
        assert max(s.nbytes for s in splits) < 64 * 1024
    if min_parts:
        assert len(splits) >= min_parts
    if max_bytes == 1 << 30:
        assert len(splits) == 1  # small segments are packed
    assert oracle.norm(_read_all(opts, splits=splits)) == oracle.norm(
        oracle.rows(sample_root, headers=False)
    )


def test_default_parallelism_sizes_splits(sample_root):
    one = _planning.plan(_options.ReadOptions.parse({"path": sample_root}, default_parallelism=1))
    many = _planning.plan(_options.ReadOptions.parse({"path": sample_root}, default_parallelism=8))
    assert len(one) == 1 and len(many) >= 2


def test_latest_and_earliest(sample_root, oracle):
    rows = oracle.rows(sample_root, headers=False)
    opts = _options.ReadOptions.parse({"path": sample_root})
    for tp in _discovery.discover(opts):
        offs = [
            r["offset"] for r in rows if r["topic"] == tp.topic and r["partition"] == tp.partition
        ]
        assert tp.earliest() == 0
        # control markers may follow the last record
        assert tp.latest() >= max(offs) + 1
        if tp.topic != "payments":
            assert tp.latest() == max(offs) + 1


def test_offset_for_timestamp_matches_a_scan(sample_root, oracle):
    rows = oracle.rows(sample_root, headers=False)
    opts = _options.ReadOptions.parse({"path": sample_root})
    for tp in _discovery.discover(opts):
        mine = [r for r in rows if r["topic"] == tp.topic and r["partition"] == tp.partition]
        stamps = sorted({r["timestamp"] for r in mine})
        for ts in (stamps[0], stamps[len(stamps) // 3], stamps[-1]):
            ms = int(ts.timestamp() * 1000)
            if ms < 0:
                # a v0 record's "no timestamp" (-1): a negative timestamp is one of
                # ListOffsets' special codes (-1 latest, -2 earliest), not a time to look up
                continue
            want = min(
                (r["offset"] for r in mine if int(r["timestamp"].timestamp() * 1000) >= ms),
                default=None,
            )
            assert _offsets.offset_for_timestamp(tp, ms) == want, (tp.name, ms)
        assert _offsets.offset_for_timestamp(tp, int(stamps[-1].timestamp() * 1000) + 10**6) is None


def test_topic_selection(sample_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(sample_root, root)
    os.makedirs(root / "__consumer_offsets-0")
    os.makedirs(root / "__share_group_state-0")
    os.makedirs(root / "__heartbeats-0")  # a user topic: Kafka's subscriptions read it
    os.makedirs(root / "orders-0.0123456789abcdef0123456789abcdef-delete")

    def names(o):
        opts = _options.ReadOptions.parse({"path": str(root), **o})
        return [tp.name for tp in _discovery.discover(opts)]

    assert "__consumer_offsets-0" not in names({})
    assert "__share_group_state-0" not in names({})
    assert "__heartbeats-0" in names({})
    assert "__heartbeats-0" in names({"subscribePattern": "heart"})
    assert not any("delete" in n for n in names({}))
    assert "__consumer_offsets-0" in names({"includeInternalTopics": "true"})
    assert "__consumer_offsets-0" in names({"subscribe": "__consumer_offsets"})
    assert names({"subscribe": "orders,events"}) == [
        "events-0",
        "events-1",
        "orders-0",
        "orders-1",
        "orders-2",
    ]
    assert names({"subscribePattern": "ord.*"}) == ["orders-0", "orders-1", "orders-2"]
    # found anywhere in the name, as the connector's Regex.findFirstIn; ^...$ for the whole name
    assert names({"subscribePattern": "ord"}) == ["orders-0", "orders-1", "orders-2"]
    assert names({"subscribePattern": "^rders$"}) == []
    assert names({"assign": '{"orders":[2,0],"legacy":[1]}'}) == [
        "legacy-1",
        "orders-0",
        "orders-2",
    ]
    # a partition directory and a segment file work as paths too
    one = _discovery.discover(_options.ReadOptions.parse({"path": str(root / "orders-1")}))
    assert [tp.name for tp in one] == ["orders-1"]
    seg = sorted(p for p in os.listdir(root / "orders-1") if p.endswith(".log"))[0]
    f = _discovery.discover(_options.ReadOptions.parse({"path": str(root / "orders-1" / seg)}))
    assert [tp.name for tp in f] == ["orders-1"] and len(f[0].segments) == 1


def test_replica_policy(sample_root, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(os.path.join(sample_root, "orders-0"), a / "orders-0")
    shutil.copytree(os.path.join(sample_root, "orders-0"), b / "orders-0")
    segs = sorted(p for p in os.listdir(b / "orders-0") if p.endswith(".log"))
    os.unlink(b / "orders-0" / segs[-1])  # b is shorter
    both = {"paths": f'["{a}", "{b}"]'}
    with pytest.raises(_errors.OptionError, match="replicaPolicy"):
        _discovery.discover(_options.ReadOptions.parse(both))
    first = _discovery.discover(_options.ReadOptions.parse({**both, "replicaPolicy": "first"}))
    assert first[0].directory == str(a / "orders-0")
    longest = _discovery.discover(
        _options.ReadOptions.parse({"paths": f'["{b}", "{a}"]', "replicaPolicy": "longest"})
    )
    assert longest[0].directory == str(a / "orders-0")


@pytest.mark.parametrize(
    "options,match",
    [
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of"),
        ({"subscribe": " , "}, "No topics to subscribe"),
        ({"startingOffsets": "latest"}, "can't be latest"),
        ({"endingOffsets": "earliest"}, "can't be earliest"),
        ({"startingOffsets": '{"orders":{"0":-1}}'}, "can't be latest"),
        ({"endingOffsets": '{"orders":{"0":-2}}'}, "can't be earliest"),
        ({"startingOffsets": "{bad json"}, "Expected e.g."),
        ({"assign": '["orders"]'}, "Expected e.g."),
        ({"minPartitions": "0"}, ">= 1"),
        ({"kafka.isolation.level": "serializable"}, "isolation"),
        ({"failOnDataLoss": "maybe"}, "true or false"),
        ({"startingOffsetsByTimestampStrategy": "earliest"}, "error' or 'latest"),
    ],
)
def test_bad_options(sample_root, options, match):
    with pytest.raises(_errors.OptionError, match=match):
        _options.ReadOptions.parse({"path": sample_root, **options})


def test_streaming_rejects_ending_options(sample_root):
    with pytest.raises(_errors.OptionError, match="streaming"):
        _options.ReadOptions.parse({"path": sample_root, "endingOffsets": "latest"}, streaming=True)
    o = _options.ReadOptions.parse({"path": sample_root, "startingOffsets": "latest"},
                                   streaming=True)
    assert o.starting == "latest"


def test_broker_options_are_ignored_with_a_warning(sample_root):
    with pytest.warns(UserWarning, match="kafka.bootstrap.servers"):
        o = _options.ReadOptions.parse(
            {"path": sample_root, "kafka.bootstrap.servers": "b:9092", "groupIdPrefix": "x"}
        )
    assert o.ignored == ["groupidprefix", "kafka.bootstrap.servers"]


def test_missing_path():
    with pytest.raises(_errors.OptionError, match="no path"):
        _options.ReadOptions.parse({})
    with pytest.raises(_errors.OptionError, match="cannot mix local paths"):
        _options.ReadOptions.parse({"paths": '["/data/logs", "s3://bucket/logs"]'})
    with pytest.raises(FileNotFoundError):
        _discovery.discover(_options.ReadOptions.parse({"path": "/nonexistent/kafka-logs"}))


def test_pruning_offsets_and_timestamps(sample_root, oracle):
    rows = oracle.rows(sample_root, headers=False)
    opts = _options.ReadOptions.parse({"path": sample_root})
    pr = _planning.Pruning(topics={"orders"}, partitions={1}, offset_lo=100, offset_hi=250)
    got = _read_all(opts, pr)
    want = [
        r
        for r in rows
        if r["topic"] == "orders" and r["partition"] == 1 and 100 <= r["offset"] < 250
    ]
    assert oracle.norm(got) == oracle.norm(want)
    # seeks: only the pieces holding those offsets are read
    assert sum(s.nbytes for s in _planning.plan(opts, pr)) < 30_000
    ts = sorted(r["timestamp"] for r in rows)[len(rows) // 2]
    us = int(ts.timestamp() * 1_000_000)
    pr = _planning.Pruning(ts_lo_us=us)
    got = _read_all(opts, pr)
    want = [r for r in rows if r["timestamp"] >= ts]
    assert oracle.norm(got) == oracle.norm(want)


def test_rate_limit_is_the_connectors():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    end = {("t", 0): 1000, ("t", 1): 10, ("t", 2): 100}
    got = _offsets.rate_limit(start, end, 101)
    assert got == {("t", 0): 100, ("t", 1): 1, ("t", 2): 100}
    assert _offsets.rate_limit(start, end, 10**6) == end


def test_offsets_json_round_trip():
    offs = {("a", 0): 5, ("a", 10): 7, ("b-c", 1): 0}
    js = _offsets.offsets_json(offs)
    assert js == {"a": {"0": 5, "10": 7}, "b-c": {"1": 0}}
    assert _offsets.offsets_from_json(js) == offs


def test_read_committed_matches_arrow(sample_root, oracle):
    opts = _options.ReadOptions.parse(
        {
            "path": sample_root,
            "subscribe": "payments",
            "kafka.isolation.level": "read_committed",
            "maxPartitionBytes": "8192",
        }
    )
    got = _read_all(opts)
    want = [
        r
        for r in oracle.rows(sample_root, read_committed=True, headers=False)
        if r["topic"] == "payments"
    ]
    uncommitted = [r for r in oracle.rows(sample_root, headers=False) if r["topic"] == "payments"]
    assert 0 < len(want) < len(uncommitted)
    assert [r["offset"] for r in got] == [r["offset"] for r in want]


def test_murmur2_is_kafkas():
    # org.apache.kafka.common.utils.UtilsTest.testMurmur2
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        bytes([ord("a"), ord("b"), ord("c")]): 479470107,
    }
    for data, want in cases.items():
        assert partitioner.murmur2(data) == want, data


def test_task_writer_and_commit_without_spark(tmp_path, sample_root, oracle):
    """The sink's core: stage per task, commit on the driver; the result loads with Log.open."""
    from kafkalog.storage.log import Log

    rows = oracle.rows(sample_root, headers=True)
    table = pa.Table.from_pylist(rows)
    out = tmp_path / "out"
    opts = wcore.WriteOptions.parse(
        {"path": str(out), "compression": "gzip", "segmentBytes": "16384"}
    )
    staged = []
    wcore.prepare_job(opts, "job-x")
    # two tasks, each a contiguous half of every partition (as a read of several splits gives)
    for task in range(2):
        tw = wcore.TaskWriter(opts, "job-x", f"task-{task}", overwrite=False)
        for topic, part, _d in oracle.dirs(sample_root):
            mine = [r for r in rows if r["topic"] == topic and r["partition"] == part]
            half = mine[: len(mine) // 2] if task == 0 else mine[len(mine) // 2 :]
            if half:
                tw.write_batch(pa.RecordBatch.from_pylist(half, schema=table.schema))
        staged += tw.finish()
    wcore.commit_job(opts, "job-x", staged, overwrite=False)
    assert not (out / wcore.STAGING_DIR).exists()
    for topic, part, d in oracle.dirs(str(out)):
        with Log.open(d, read_only=True) as log:
            assert (
                log.log_end_offset
                == max(r["offset"] for r in rows if r["topic"] == topic and r["partition"] == part)
                + 1
            )
    assert oracle.norm(oracle.rows(str(out))) == oracle.norm(
        [dict(r, timestampType=0 if r["timestampType"] == -1 else r["timestampType"]) for r in rows]
    )


def test_commit_rejects_overlapping_pieces(tmp_path):
    out = tmp_path / "out"
    opts = wcore.WriteOptions.parse({"path": str(out), "topic": "t"})
    wcore.prepare_job(opts, "job-y")
    staged = []
    for task in range(2):
        tw = wcore.TaskWriter(opts, "job-y", f"task-{task}", overwrite=False)
        tw.write_batch(pa.RecordBatch.from_pydict({"value": [b"a", b"b"], "offset": [0, 1]}))
        staged += tw.finish()
    with pytest.raises(wcore.WriteError, match="overlapping"):
        wcore.commit_job(opts, "job-y", staged, overwrite=False)
    wcore.abort_job(opts, "job-y")
    assert os.listdir(out) == []


def test_ending_offsets_by_timestamp_and_batch_size(sample_root, oracle):
    rows = [r for r in oracle.rows(sample_root, headers=False) if r["topic"] == "orders"]
    p1 = [r for r in rows if r["partition"] == 1]
    t = int(p1[len(p1) // 2]["timestamp"].timestamp() * 1000)
    opts = _options.ReadOptions.parse(
        {
            "path": sample_root,
            "assign": '{"orders":[1]}',
            "endingOffsetsByTimestamp": f'{{"orders":{{"1":{t}}}}}',
            "maxRecordsPerBatch": "100",
        }
    )
    schema = _schema.arrow_schema(opts)
    got = []
    for s in _planning.plan(opts):
        for rb in _tasks.read_split(s, opts, schema):
            assert rb.num_rows <= 100
            got.extend(rb.column("offset").to_pylist())
    end = min(r["offset"] for r in p1 if r["timestamp"].timestamp() * 1000 >= t)
    assert got == [r["offset"] for r in p1 if r["offset"] < end]


def test_check_crcs_false_reads_a_damaged_batch(sample_root, tmp_path):
    d = tmp_path / "orders-0"
    shutil.copytree(os.path.join(sample_root, "orders-0"), d)
    seg = min(p for p in os.listdir(d) if p.endswith(".log"))
    with open(d / seg, "r+b") as f:
        f.seek(8)
        size = int.from_bytes(f.read(4), "big")
        f.seek(size + 12 - 3)  # the last byte of the first record's value
        b = f.read(1)
        f.seek(size + 12 - 3)
        f.write(bytes([b[0] ^ 0x01]))
    strict = _options.ReadOptions.parse({"path": str(d)})
    with pytest.raises(Exception, match="(?i)crc|corrupt"):
        _read_all(strict)
    lax = _options.ReadOptions.parse({"path": str(d), "checkCrcs": "false"})
    n = len(_read_all(lax))
    skipped = _options.ReadOptions.parse({"path": str(d), "failOnDataLoss": "false"})
    with pytest.warns(UserWarning, match="skipping corrupt data"):
        assert len(_read_all(skipped)) < n


def _junk_tree(base):
    """A directory of ordinary files, with names that parse as ``<topic>-<partition>`` (as
    /etc has dbus-1 and polkit-1) but nothing of a Kafka log in them."""
    (base / "dbus-1" / "session.d").mkdir(parents=True)
    (base / "dbus-1" / "system.conf").write_text("<busconfig/>\n")
    (base / "polkit-1").mkdir()
    (base / "polkit-1" / "rules.d").mkdir()
    (base / "polkit-1" / "rules.d" / "50-default.rules").write_text("\n")
    (base / "hosts").write_text("127.0.0.1 localhost\n")
    return base


@pytest.mark.parametrize("streaming", [False, True])
def test_a_path_without_any_kafka_log_is_an_error(sample_root, tmp_path, streaming):
    """load('/etc') was an empty result with warnings: a path under which nothing looks like a
    Kafka log is an error naming it, as a missing path is, whether it is given as a root, as
    a <topic>-<partition> directory, next to a good path or through a glob, and nothing under
    it is warned about first."""
    import warnings

    junk = _junk_tree(tmp_path / "etc")
    (tmp_path / "empty").mkdir()
    cases = [str(junk), str(junk / "dbus-1"), str(junk / "polkit-1" / "rules.d"),
             f'["{sample_root}", "{junk}"]', str(tmp_path / "et*")]
    if not streaming:
        cases.append(str(tmp_path / "empty"))
    for path in cases:
        key = "paths" if path.startswith("[") else "path"
        opts = _options.ReadOptions.parse({key: path}, streaming=streaming)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(_errors.NoKafkaLogError, match="no Kafka log") as ei:
                _discovery.discover(opts)
        assert str(junk if "empty" not in path else tmp_path / "empty") in str(ei.value), path
        assert isinstance(ei.value, KafkaLogError) and isinstance(ei.value, _errors.OptionError)
        assert not caught, [str(w.message) for w in caught]
    # a stream may start on an empty directory (a mirror that is not synced yet) and waits
    if streaming:
        assert _discovery.discover(_options.ReadOptions.parse({"path": str(tmp_path / "empty")},
                                                              streaming=True)) == []
    # what Kafka leaves is a log even without records: a root with only its checkpoints, a
    # partition directory with only its leader-epoch checkpoint
    root = tmp_path / "broker"
    (root / "t-0").mkdir(parents=True)
    (root / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    (root / "t-0" / "leader-epoch-checkpoint").write_text("0\n0\n")
    for path in (root, root / "t-0"):
        tps = _discovery.discover(_options.ReadOptions.parse({"path": str(path)},
                                                             streaming=streaming))
        assert [(tp.name, tp.segments) for tp in tps] == [("t-0", [])]


def test_each_warning_is_printed_once(sample_root, tmp_path):
    """A warning of the source is one UserWarning, not also a plain log line (a new process:
    the default warning and logging set-up, as in a Spark worker)."""
    import subprocess
    import sys

    root = tmp_path / "root"
    shutil.copytree(os.path.join(sample_root, "orders-0"), root / "orders-0")
    (root / "orders-0" / "00000000000099999999.index").mkdir()  # a log file name, not a file
    code = (
        "import sys; from kafkalog.spark import _discovery, _options; "
        "_discovery.discover(_options.ReadOptions.parse({'path': sys.argv[1]})); "
        "_options.ReadOptions.parse({'path': sys.argv[1], 'kafka.bootstrap.servers': 'b:9092'})"
    )
    import kafkalog

    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(kafkalog.__file__)))
    env.pop("PYTHONWARNINGS", None)
    p = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    for what in ("00000000000099999999.index: a directory", "ignoring option(s) kafka.bootstrap"):
        lines = [ln for ln in p.stderr.splitlines() if what in ln]
        assert len(lines) == 1 and "UserWarning: " in lines[0], p.stderr
