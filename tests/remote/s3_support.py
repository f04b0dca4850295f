"""Helpers of the remote-storage tests and bench: the S3 test server's credentials, a free
port, uploading a tree, writing a partition."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

BUCKET = "kafkalog-test"
PREFIX = "backup/logs"
KEY_ID = "testing-key"
SECRET = "testing-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(log_path=None, timeout: float = 30.0):
    """Start moto's S3 server on 127.0.0.1 (a free port, its own session): ``(process, url)``
    once it answers; RuntimeError (with the end of its log) when it does not start."""
    port = _free_port()
    out = open(log_path, "wb") if log_path else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        if log_path:
            out.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).read()
            return proc, url
        except Exception:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_server(proc)
                tail = open(log_path, errors="replace").read()[-2000:] if log_path else ""
                raise RuntimeError(f"the S3 test server did not start: {tail}") from None
            time.sleep(0.2)


def stop_server(proc) -> None:
    """Stop a server :func:`start_server` started, by its pid."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def s3_client(endpoint: str):
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY_ID,
                        aws_secret_access_key=SECRET, region_name="us-east-1")


def upload_tree(endpoint: str, local_root: str, bucket: str, prefix: str) -> None:
    """Copy a local directory tree to ``s3://bucket/prefix`` (creating the bucket), as a
    backup job would."""
    client = s3_client(endpoint)
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    for dirpath, _, files in os.walk(local_root):
        for f in files:
            src = os.path.join(dirpath, f)
            rel = os.path.relpath(src, local_root).replace(os.sep, "/")
            with open(src, "rb") as i:
                client.put_object(Bucket=bucket, Key=f"{prefix}/{rel}", Body=i.read())


def write_partition(directory: str, batches: int = 400, per_batch: int = 50,
                    value_bytes: int = 200, segment_bytes: int = 1024 * 1024,
                    compression: str = "none") -> None:
    """One partition of several segments (uncompressed v2 batches, an offset index entry
    every 4 KiB as a broker writes it): a few MiB, for counting fetched bytes."""
    from kafkalog import MemoryRecordsBuilder
    from kafkalog.storage.log import Log

    log = Log.open(directory, {"segment.bytes": segment_bytes})
    try:
        for b in range(batches):
            mb = MemoryRecordsBuilder(magic=2, compression_type=compression,
                                      base_offset=log.log_end_offset)
            for j in range(per_batch):
                i = b * per_batch + j
                mb.append(1_700_000_000_000 + i, b"k%d" % i, (b"v%d-" % i).ljust(value_bytes, b"x"))
            log.append_as_follower(mb.build())
    finally:
        log.close()


# -- Spark's own S3 connector (S3A) ----------------------------------------------------------------
HADOOP_AWS_POM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hadoop-aws.pom.xml")
# pyspark ships these itself; a second copy on the classpath would clash with its own
S3A_PROVIDED_GROUPS = "org.slf4j,io.netty,commons-codec,commons-logging,org.apache.httpcomponents"


def append_records(directory, lo: int, hi: int, segment_bytes: int = 1 << 30) -> None:
    """Append offsets ``lo``..``hi`` to the partition ``directory`` as a follower does, in
    batches of ten (key ``k<n>``, value ``v<n>``)."""
    from kafkalog.records import MemoryRecordsBuilder
    from kafkalog.storage.log import Log

    log = Log.open(str(directory), {"segment.bytes": segment_bytes})
    try:
        for i in range(lo, hi, 10):
            mb = MemoryRecordsBuilder(magic=2, base_offset=log.log_end_offset)
            for j in range(i, i + 10):
                mb.append(1_700_000_000_000 + j, b"k%d" % j, b"v%d" % j)
            log.append_as_follower(mb.build())
    finally:
        log.close()


def pyspark_hadoop_version() -> str:
    """The Hadoop version pyspark bundles (from its ``hadoop-client-api`` jar's name)."""
    import glob
    import re

    import pyspark

    jars = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars",
                                  "hadoop-client-api-*.jar"))
    m = re.search(r"hadoop-client-api-(\d[\w.]*)\.jar$", jars[0]) if jars else None
    if not m:
        raise RuntimeError(f"no hadoop-client-api jar in pyspark ({pyspark.__file__})")
    return m.group(1)


class S3AUnavailable(Exception):
    """hadoop-aws cannot be fetched here (no Maven, or Maven Central unreachable, and nothing
    cached): not a fault of the code under test."""


def s3a_jars() -> list:
    """The jars of hadoop-aws (S3A) for the installed pyspark, fetched with Maven on first use
    into ``~/.cache/kafkalog/hadoop-aws-<version>`` (see hadoop-aws.pom.xml), then reused.
    Raises :class:`S3AUnavailable` when Maven or Maven Central cannot be reached and nothing
    is cached."""
    import re
    import shutil
    import sys
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kafka"))
    import kafka_support as ks  # the Maven machinery of the Kafka tests

    version = pyspark_hadoop_version()
    base = Path(os.environ.get("KAFKALOG_KAFKA_CACHE") or
                Path.home() / ".cache" / "kafkalog" / "kafka").parent / f"hadoop-aws-{version}"
    libs, marker = base / "libs", base / "libs.complete"
    stamp = f"{ks._digest(Path(HADOOP_AWS_POM))}:{version}"
    if marker.is_file() and marker.read_text().strip() == stamp and libs.is_dir():
        return sorted(str(p) for p in libs.glob("*.jar"))
    try:
        mvn = ks._which("mvn")
    except ks.Unavailable as e:
        raise S3AUnavailable(str(e)) from None
    with ks._FileLock(base / ".lock"):
        if not (marker.is_file() and marker.read_text().strip() == stamp and libs.is_dir()):
            with tempfile.TemporaryDirectory(dir=base) as tmp:
                # the AWS SDK version this Hadoop release was built with (hadoop-project's pom)
                got = subprocess.run(
                    [mvn, "-B", "-q", f"{ks.DEPENDENCY_PLUGIN}:copy",
                     f"-Dartifact=org.apache.hadoop:hadoop-project:{version}:pom",
                     f"-DoutputDirectory={tmp}"],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                poms = list(Path(tmp).glob("hadoop-project-*.pom"))
                m = poms and re.search(r"<aws-java-sdk-v2\.version>([^<]+)<",
                                       poms[0].read_text())
                if got.returncode != 0 or not m:
                    if not ks._central_reachable():
                        raise S3AUnavailable(f"Maven Central is unreachable and hadoop-aws "
                                             f"{version} is not cached in {libs}")
                    raise RuntimeError(f"no AWS SDK version for Hadoop {version}:\n"
                                       f"{got.stdout[-3000:]}")
                out = Path(tmp) / "libs"
                proc = subprocess.run(
                    [mvn, "-B", "-q", "-f", HADOOP_AWS_POM, f"-Dhadoop.version={version}",
                     f"-Dawssdk.version={m.group(1)}",
                     f"{ks.DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
                     f"-DexcludeGroupIds={S3A_PROVIDED_GROUPS}", f"-DoutputDirectory={out}"],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                if proc.returncode != 0:
                    raise RuntimeError(f"mvn could not fetch hadoop-aws {version}:\n"
                                       f"{proc.stdout[-4000:]}")
                if marker.exists():
                    marker.unlink()
                shutil.rmtree(libs, ignore_errors=True)
                os.rename(out, libs)
            marker.write_text(stamp + "\n")
    return sorted(str(p) for p in libs.glob("*.jar"))


def s3a_conf(endpoint: str) -> dict:
    """Spark settings of S3A for the S3 test server at ``endpoint`` (path-style, plain HTTP)."""
    return {
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.access.key": KEY_ID,
        "spark.hadoop.fs.s3a.secret.key": SECRET,
    }
