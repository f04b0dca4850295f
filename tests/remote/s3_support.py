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
