"""Write options the driver used to accept and every task then refused (issue item 20): a
zero topic id, a compression level outside its codec's range, a leader epoch past int32.  They
are checked when the options are parsed on the driver, before anything is written, with the
option error (``OptionError``, also a ``WriteError``) naming the option and the allowed range."""

from __future__ import annotations

import os

import pytest

pa = pytest.importorskip("pyarrow")

from kafkalog.spark import _write as w  # noqa: E402
from kafkalog.spark._errors import OptionError  # noqa: E402


def _parse(tmp_path, **extra):
    o = {"path": str(tmp_path / "out"), "topic": "t", "fsync": "false"}
    o.update(extra)
    return w.WriteOptions.parse(o)


@pytest.mark.parametrize("extra, match", [
    ({"topicId": "00000000-0000-0000-0000-000000000000"}, r"'topicId'.*zero"),
    ({"topicId": "AAAAAAAAAAAAAAAAAAAAAA"}, r"'topicId'.*zero"),
    ({"compression": "gzip", "compressionLevel": "99"}, r"'compressionLevel'.*gzip.*1\.\.9"),
    ({"compression": "gzip", "compressionLevel": "0"}, r"'compressionLevel'.*gzip.*1\.\.9"),
    ({"compression": "lz4", "compressionLevel": "18"}, r"'compressionLevel'.*lz4.*1\.\.17"),
    ({"compression": "zstd", "compressionLevel": "23"},
     r"'compressionLevel'.*zstd.*-131072\.\.22"),
    ({"kafka.compression.type": "gzip", "compressionLevel": "10"}, r"'compressionLevel'.*gzip"),
    ({"leaderEpoch": str(2 ** 31)}, r"'leaderEpoch'.*0\.\.2147483647"),
    ({"leaderEpoch": "-1"}, r"'leaderEpoch'.*0\.\.2147483647"),
], ids=["zero-uuid", "zero-base64", "gzip-99", "gzip-0", "lz4-18", "zstd-23",
        "kafka-compression-type", "epoch-2^31", "epoch-negative"])
def test_out_of_range_write_options_are_refused_on_the_driver(tmp_path, extra, match):
    with pytest.raises(OptionError, match=match) as ei:
        _parse(tmp_path, **extra)
    assert isinstance(ei.value, w.WriteError)  # what the sink raised for options before
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("extra", [
    {"compression": "gzip", "compressionLevel": "9"},
    {"compression": "gzip", "compressionLevel": "-1"},
    {"compression": "gzip", "compressionLevel": "1"},
    {"compression": "lz4", "compressionLevel": "17"},
    {"compression": "zstd", "compressionLevel": "-5"},
    {"compression": "zstd", "compressionLevel": "22"},
    {"leaderEpoch": str(2 ** 31 - 1)},
    {"topicId": "AAAAAAAAAAAAAAAAAAAAAQ"},
], ids=lambda e: ",".join(f"{k}={v}" for k, v in e.items()))
def test_the_edges_of_each_range_write(tmp_path, extra):
    """The largest and smallest accepted values are accepted by the tasks too."""
    opts = _parse(tmp_path, **extra)
    w.prepare_job(opts, "job")
    tw = w.TaskWriter(opts, "job", "task-0", False)
    tw.write_batch(pa.record_batch({"value": pa.array([b"x" * 100] * 20, pa.binary())}))
    w.commit_job(opts, "job", tw.finish(), False)
    from kafkalog.storage.log import Log

    with Log.open(tmp_path / "out" / "t-0", read_only=True) as log:
        batches = list(log.iter_batches())
        assert sum(1 for _ in log.iter_records()) == 20
    if "leaderEpoch" in extra:
        assert {b.partition_leader_epoch for b in batches} == {int(extra["leaderEpoch"])}


def test_spark_write_refuses_a_bad_level_before_any_task(spark, tmp_path):
    """Through Spark: the option error is raised when the write is planned, on the driver,
    and names the option; nothing is staged."""
    out = str(tmp_path / "out")
    df = spark.createDataFrame([(b"v",)], "value BINARY")
    with pytest.raises(Exception, match=r"compressionLevel.*1\.\.9") as ei:
        (df.write.format("kafkalog").mode("append").option("topic", "t")
         .option("compression", "gzip").option("compressionLevel", "99").save(out))
    assert "cannot encode" not in str(ei.value)  # not a task's failure
    assert not os.path.exists(os.path.join(out, w.STAGING_DIR))
