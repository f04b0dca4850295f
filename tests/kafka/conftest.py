"""Fixtures of the tests that hold kafkalog against Apache Kafka itself (``-m kafka``).

``kafka_env`` fetches the broker's jars (once, into a cache outside the checkout; see
``kafka_support``) and skips only where Java or Maven is missing or Maven Central cannot be
reached.  ``broker_matrix`` (session scope) runs one real broker through the whole matrix:

1. format and start; create the topics; produce, with Kafka's own Java producer, every codec,
   null/empty/large keys and values, headers, out-of-order and broker-assigned timestamps,
   LogAppendTime, idempotent and non-idempotent producers, three transactional producers
   interleaved (committed, aborted, one left open), a compacted topic the cleaner has cleaned
   twice (tombstones, aborted transactional data), a topic whose old segments retention deleted,
   and a consumer-group commit (``__consumer_offsets``);
2. produce to ``crash`` without pause and SIGKILL the broker mid-produce; copy its log directory
   as the crash left it (``unclean_dir``);
3. restart it (cleaner and retention off, so nothing changes what was read), read everything
   with the Java consumer at both isolation levels, ``offsetsForTimes``, beginning/end offsets
   and the Admin's ListOffsets; stop it with SIGTERM (``clean_dir``).

The tests then read ``clean_dir`` and ``unclean_dir`` with kafkalog only.
"""
from __future__ import annotations

import shutil
import time

import pytest

import kafka_support as ks
from kafka_matrix import (
    PARTITIONS,
    Matrix,
    checkpoint_entry,
    compacted_round,
    crash,
    first_segment_base,
    produce_spec,
    read_back,
    wait_for,
)


@pytest.fixture(scope="session")
def kafka_env():
    try:
        return ks.prepare()
    except ks.Unavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def broker_matrix(kafka_env, tmp_path_factory) -> Matrix:
    work = tmp_path_factory.mktemp("kafka-broker")
    broker = ks.Broker(kafka_env, work)
    broker.format()
    broker.start()
    base_ts = (int(time.time() * 1000) // 1000) * 1000 - 3600 * 1000
    try:
        steps = produce_spec(base_ts)
        steps.append({"op": "consume", "topic": "codecs", "partitions": PARTITIONS["codecs"],
                      "isolation": "read_committed", "group": "g-matrix", "commit": True})
        ks.run_tool(kafka_env, {"bootstrap": broker.bootstrap, "steps": steps})
        for rnd in range(2):
            sent = ks.run_tool(kafka_env, {"bootstrap": broker.bootstrap,
                                           "steps": compacted_round(rnd, base_ts)})
            sentinel = sent[-1]["offsets"][0]
            # the cleaner cleans everything below the active segment, which the sentinel opened
            wait_for(f"the cleaner to clean compacted-0 up to {sentinel}",
                     lambda: (checkpoint_entry(broker.log_dir / "cleaner-offset-checkpoint",
                                               "compacted", 0) or 0) >= sentinel, broker)
        wait_for("retention to delete old segments of retention-0",
                 lambda: (first_segment_base(broker.partition_dir("retention")) or 0) > 0, broker)
        crash_acked = crash(kafka_env, broker)
        unclean = work / "unclean"
        shutil.copytree(broker.log_dir, unclean)
        # restart: the broker recovers; nothing may change what is read from here on
        broker.overrides.update({"log.cleaner.enable": "false",
                                 "log.retention.check.interval.ms": 3600_000,
                                 "log.initial.task.delay.ms": 3600_000})
        broker.start()
        m = Matrix(clean_dir=broker.log_dir, unclean_dir=unclean, partitions=PARTITIONS,
                   crash_acked=crash_acked)
        read_back(kafka_env, broker, m)
    finally:
        broker.stop()
    m.broker_log = broker.log_text()
    assert (broker.log_dir / ".kafka_cleanshutdown").exists(), \
        "the broker did not shut down cleanly"
    return m
