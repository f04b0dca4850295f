"""`kafkalog dump|verify|stats` over a local root and over its copy on the S3 test server:
identical output (paths and timings aside), identical verify results, in both twins."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .s3_support import BUCKET  # noqa: E402

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


def _run(args, env_extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", *args],
                          capture_output=True, env=env, timeout=300)


def _norm(text: bytes, root: str) -> str:
    out = text.decode("utf-8", "replace").replace(root.rstrip("/"), "ROOT")
    out = re.sub(r"in [0-9.]+ s \([0-9.]+ MB/s\)", "in T", out)
    return re.sub(r'"(seconds|bytesPerSecond|mbPerSecond)":[0-9.e+-]+', r'"\1":T', out)


@pytest.mark.parametrize("cmd", [
    ["dump", "--deep-iteration", "--print-data-log"],
    ["dump", "--json"],
    ["dump", "--offsets-decoder"],
    ["verify"],
    ["verify", "--json"],
    ["stats"],
])
def test_cli_identical_over_s3(s3_root, log_root, cmd):
    local = _run(cmd + [log_root])
    remote = _run(cmd + [s3_root])
    assert remote.returncode == local.returncode, remote.stderr[-2000:]
    assert _norm(remote.stdout, s3_root) == _norm(local.stdout, log_root)
    assert _norm(remote.stderr, s3_root) == _norm(local.stderr, log_root)
    assert local.stdout


def test_cli_partition_and_segment_uris(s3_root, log_root):
    d = sorted(n for n in os.listdir(log_root) if os.path.isdir(os.path.join(log_root, n)))[0]
    seg = sorted(n for n in os.listdir(os.path.join(log_root, d)) if n.endswith(".log"))[0]
    for rel in (d, f"{d}/{seg}", f"{d}/{seg[:-4]}.index"):
        local = _run(["dump", "--deep-iteration", os.path.join(log_root, rel)])
        remote = _run(["dump", "--deep-iteration", f"{s3_root}/{rel}"])
        assert remote.returncode == local.returncode == 0, remote.stderr[-2000:]
        assert _norm(remote.stdout, s3_root) == _norm(local.stdout, log_root)


def test_cli_missing_prefix_names_uri(s3_root):
    uri = f"s3://{BUCKET}/no/such/prefix"
    r = _run(["verify", uri])
    assert r.returncode != 0
    assert uri in r.stderr.decode() or uri in r.stdout.decode()
    assert "Traceback" not in r.stderr.decode()


def test_cli_storage_options_from_environment(s3_root, log_root):
    """KAFKALOG_STORAGE_OPTIONS reaches the store: a wrong endpoint there fails naming it."""
    r = _run(["verify", s3_root], {"KAFKALOG_STORAGE_OPTIONS":
                                   '{"endpoint_override": "127.0.0.1:9", "scheme": "http", '
                                   '"retries": 0}'})
    assert r.returncode != 0 and s3_root in r.stderr.decode()
    assert "Traceback" not in r.stderr.decode()
    ok = _run(["verify", s3_root], {"KAFKALOG_STORAGE_OPTIONS": '{"block_size": 65536}'})
    assert ok.returncode == 0, ok.stderr[-2000:]
