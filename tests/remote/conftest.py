"""An S3-compatible server on 127.0.0.1 (moto's standalone server), started and stopped here,
and a log-dir root uploaded to it.  Tests that need it skip with the reason only when the
server truly cannot start (moto not installed, or it never answered)."""
from __future__ import annotations

import os

import pytest

from .s3_support import (
    BUCKET,
    KEY_ID,
    PREFIX,
    SECRET,
    start_server,
    stop_server,
    upload_tree,
    write_partition,
)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """``http://127.0.0.1:PORT`` of a moto server that lives for the session."""
    try:
        import moto.server  # noqa: F401
    except ImportError as e:
        pytest.skip(f"the S3 test server cannot start: moto[server] is not installed ({e})")
    try:
        proc, url = start_server(tmp_path_factory.mktemp("moto") / "server.log")
    except RuntimeError as e:
        pytest.skip(str(e))
    try:
        yield url
    finally:
        stop_server(proc)


@pytest.fixture(scope="session")
def s3_env(s3_server):
    """The standard AWS variables pointing at the test server (set for the session)."""
    old = {k: os.environ.get(k) for k in (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL",
        "AWS_EC2_METADATA_DISABLED")}
    os.environ.update(AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET,
                      AWS_REGION="us-east-1", AWS_ENDPOINT_URL=s3_server,
                      AWS_EC2_METADATA_DISABLED="true")
    try:
        yield s3_server
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def log_root(tmp_path_factory):
    """A local log-dir root of several topics, codecs, message formats and transactions."""
    from kafkalog.demo import generate

    root = str(tmp_path_factory.mktemp("remote") / "root")
    generate(root, records=6000, segment_bytes=64 * 1024)
    return root


@pytest.fixture(scope="session")
def s3_root(s3_env, log_root):
    """The same root uploaded to the test server: ``s3://BUCKET/PREFIX``."""
    upload_tree(s3_env, log_root, BUCKET, PREFIX)
    return f"s3://{BUCKET}/{PREFIX}"


@pytest.fixture(scope="session")
def big_partition(s3_env, tmp_path_factory):
    """(local directory, S3 URI) of one partition of about 4 MiB in 4 segments."""
    root = tmp_path_factory.mktemp("big")
    d = root / "big-0"
    write_partition(str(d))
    upload_tree(s3_env, str(root), BUCKET, "big")
    return str(d), f"s3://{BUCKET}/big/big-0"
