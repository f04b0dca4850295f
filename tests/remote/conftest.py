"""An S3-compatible server on 127.0.0.1 for the remote-storage tests: moto's standalone server
(``moto[server]``, in the test extra), started once per session on a free port and stopped by
its pid, with a sample log root uploaded to a bucket.  The tests skip, saying why, only where
the server cannot start on this machine."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

BUCKET = "kafkalog-logs"
ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",  # never wait on an instance-metadata lookup
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """``http://127.0.0.1:PORT`` of a running S3-compatible server (AWS_* variables set)."""
    try:
        import moto.server  # noqa: F401
    except ImportError as e:  # pragma: no cover - the test extra installs it
        pytest.skip(f"moto[server] is not installed ({e}): pip install '.[test]'")
    pytest.importorskip("pyarrow.fs")
    port = _free_port()
    log = tmp_path_factory.mktemp("s3") / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.skip(f"the S3 server could not start: {log.read_text()[-500:]}")
            time.sleep(0.2)
    old = {k: os.environ.get(k) for k in (*ENV, "AWS_ENDPOINT_URL")}
    os.environ.update(ENV, AWS_ENDPOINT_URL=url)
    try:
        yield url
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()


def upload(local_root: str, bucket: str, prefix: str) -> None:
    """Copy a local directory tree to ``s3://bucket/prefix`` (the endpoint from the env)."""
    from urllib.parse import urlsplit

    from pyarrow import fs as pafs

    ep = urlsplit(os.environ["AWS_ENDPOINT_URL"])
    raw = pafs.S3FileSystem(endpoint_override=ep.netloc, scheme=ep.scheme, region="us-east-1",
                            access_key=ENV["AWS_ACCESS_KEY_ID"],
                            secret_key=ENV["AWS_SECRET_ACCESS_KEY"], allow_bucket_creation=True)
    if raw.get_file_info(bucket).type == pafs.FileType.NotFound:
        raw.create_dir(bucket)
    pafs.copy_files(local_root, f"{bucket}/{prefix}", source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=raw)


@pytest.fixture(scope="session")
def sample(s3_server, tmp_path_factory):
    """``(local root, s3 root URI)`` of the same sample log root (every codec, legacy v0/v1,
    transactions with aborts, several segments per partition)."""
    from kafkalog.tools.demo import generate

    root = tmp_path_factory.mktemp("remote-sample") / "logs"
    generate(str(root), 6000, segment_bytes=24 * 1024)
    upload(str(root), BUCKET, "backup/logs")
    return str(root), f"s3://{BUCKET}/backup/logs"
