"""Helpers of the remote-storage tests and bench: the S3 test server's credentials, a free
port, uploading a tree, writing a partition."""
from __future__ import annotations

import os
import socket

BUCKET = "kafkalog-test"
PREFIX = "backup/logs"
KEY_ID = "testing-key"
SECRET = "testing-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
