"""``kafkalog dump --deep-iteration --print-data-log`` against Apache Kafka's own
``kafka-dump-log`` (``org.apache.kafka.tools.DumpLogSegments``, from the jars the test suite's
Kafka harness fetches: tests/kafka/pom.xml) on the same segments, in one run.

    python bench/dump_vs_kafka.py [MEGABYTES [REPS]]      (default 1000 MB, best of 2)

Writes MEGABYTES of v2 segments (4 files holding the same batches; the peerbench record shape:
16-byte keys, 100-byte values, 200 records per batch, uncompressed) to a temporary directory,
then times each tool as a child process writing to /dev/null: wall time and CPU time (user +
system of the child, from getrusage), best of REPS. "Start excluded" subtracts each tool's own
time on a one-record segment (the JVM's start and class loading; Python's start and imports),
measured the same way. Both print the same bytes (checked here on the first file, and by
tests/kafka/test_dump_log.py on every file a broker writes); the ratio is Kafka's time /
kafkalog's (above 1: kafkalog is faster). Needs java and mvn (or the jars cached already)."""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.join(os.path.dirname(HERE), "tests", "kafka"))

from conftest import build_log, make_records  # noqa: E402

import kafka_support  # noqa: E402

RECORD_BYTES = 16 + 100 + 20  # key, value and a v2 record's framing, about


def timed(cmd, reps):
    """(best wall seconds, best CPU seconds) of ``cmd`` run ``reps`` times to /dev/null."""
    walls, cpus = [], []
    for _ in range(reps):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return min(walls), min(cpus)


def output_digest(cmd):
    """sha256 of what ``cmd`` prints."""
    h = hashlib.sha256()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE) as proc:
        for chunk in iter(lambda: proc.stdout.read(1 << 20), b""):
            h.update(chunk)
    assert proc.returncode == 0, cmd
    return h.hexdigest()


def _java_version(java):
    """The first line of ``java -version``."""
    return subprocess.run([java, "-version"], capture_output=True, text=True).stderr.splitlines()[0]


def write_segments(directory, megabytes, count=4):
    per_segment = int(megabytes * 1e6 / count / RECORD_BYTES)
    chunk = build_log(make_records(per_segment))
    paths, base = [], 0
    for _ in range(count):
        path = os.path.join(directory, f"{base:020d}.log")
        # the same batches in each file (offsets from 0): neither tool compares a file's
        # batches with its name, and both do the same work per file
        with open(path, "wb") as f:
            f.write(chunk)
        paths.append(path)
        base += per_segment
    return paths


def main() -> None:
    megabytes = float(sys.argv[1]) if len(sys.argv) > 1 else 1000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    libs = kafka_support.fetch_jars()
    java = [
        kafka_support.java(),
        "-cp",
        kafka_support.classpath(libs),
        "org.apache.kafka.tools.DumpLogSegments",
    ]
    py = [sys.executable, "-m", "kafkalog", "dump"]
    flags = ["--deep-iteration", "--print-data-log", "--files"]
    with tempfile.TemporaryDirectory() as d:
        paths = write_segments(d, megabytes)
        tiny_dir = os.path.join(d, "tiny")
        os.mkdir(tiny_dir)
        tiny = os.path.join(tiny_dir, "00000000000000000000.log")
        with open(tiny, "wb") as f:
            f.write(build_log(make_records(1)))
        size = sum(os.path.getsize(p) for p in paths)
        print(
            f"{size / 1e6:.0f} MB in {len(paths)} segments; load {os.getloadavg()[0]:.2f}; "
            f"java {_java_version(java[0])}; Kafka {kafka_support.KAFKA_VERSION}; best of {reps}"
        )
        files = ",".join(paths)
        # the two tools must print the same bytes, or the ratio compares different work
        same = output_digest(java + flags + [paths[0]]) == output_digest(py + flags + [paths[0]])
        print(f"same output on {os.path.basename(paths[0])}: {same}")
        assert same, "kafka-dump-log and kafkalog dump print different bytes"
        rows = {}
        for name, cmd in (("kafka-dump-log", java), ("kafkalog dump", py)):
            start = timed(cmd + flags + [tiny], 3)
            full = timed(cmd + flags + [files], reps)
            rows[name] = (full, start)
            print(
                f"{name:15s} wall {full[0]:7.2f} s  cpu {full[1]:7.2f} s   "
                f"start (one-record segment): wall {start[0]:.2f} s  cpu {start[1]:.2f} s"
            )
        (kw, kc), (ksw, ksc) = rows["kafka-dump-log"]
        (lw, lc), (lsw, lsc) = rows["kafkalog dump"]
        print(f"ratio kafka/kafkalog, start included: wall {kw / lw:.2f}x  cpu {kc / lc:.2f}x")
        print(
            f"ratio kafka/kafkalog, start excluded: wall {(kw - ksw) / (lw - lsw):.2f}x  "
            f"cpu {(kc - ksc) / (lc - lsc):.2f}x"
        )


if __name__ == "__main__":
    main()
