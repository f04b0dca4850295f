"""``kafkalog verify s3://.../orders-0``: the partition's ``partition.metadata`` and
``leader-epoch-checkpoint`` and the root's checkpoints are read through the store that holds
them (they were opened as local paths: ``partition.metadata`` failed every broker-written
partition with "cannot read ...: no such file", and the checkpoints read as missing, so
nothing in them was checked).  Over the S3 test server of tests/remote."""
from __future__ import annotations

import uuid

from .conftest import BASE_TS, run_cli, v2_batch
from remote.conftest import s3_env, s3_server  # noqa: F401  (the session's S3 test server)
from remote.s3_support import BUCKET, upload_tree


def _broker_root(root):
    """A root as a broker leaves it: partition.metadata with the topic id, a leader-epoch
    checkpoint, the root's checkpoints."""
    from kafkalog.storage.log import Log

    d = root / "orders-0"
    with Log.open(str(d), {"segment.bytes": 4096}, topic_id=uuid.UUID(int=0x1234)) as log:
        for i in range(20):
            log.append_as_follower(v2_batch([(BASE_TS + 3 * i + j, b"k", b"v" * 50)
                                             for j in range(3)], base_offset=3 * i,
                                            leader_epoch=i // 10))
    assert (d / "partition.metadata").exists() and (d / "leader-epoch-checkpoint").exists()
    return d


def _problems(r):
    return [ln for ln in r.lines if not ln.startswith(("OK:", "FAILED:"))]


def test_verify_reads_partition_metadata_through_the_store(s3_env, tmp_path):  # noqa: F811
    root = tmp_path / "root"
    d = _broker_root(root)
    upload_tree(s3_env, str(root), BUCKET, "meta/good")
    uri = f"s3://{BUCKET}/meta/good"
    local = run_cli("verify", str(d))
    assert local.rc == 0 and _problems(local) == [], local
    for path in (f"{uri}/orders-0", uri):
        r = run_cli("verify", path)
        assert r.rc == 0, r
        assert _problems(r) == [], r
        assert r.lines[-1].startswith("OK: 1 partition(s), "), r


def test_verify_checks_metadata_files_in_the_store(s3_env, tmp_path):  # noqa: F811
    """What is wrong in them is found over the store as it is locally (it read as nothing)."""
    root = tmp_path / "root"
    d = _broker_root(root)
    (d / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    (d / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n1 999\n")
    (root / "recovery-point-offset-checkpoint").write_text("0\n1\norders 0 5000\n")
    upload_tree(s3_env, str(root), BUCKET, "meta/bad")
    uri = f"s3://{BUCKET}/meta/bad"
    local = run_cli("verify", str(root))
    remote = run_cli("verify", uri)
    assert local.rc == remote.rc == 1, (local, remote)
    want = [p.replace(str(root), uri) for p in _problems(local)]
    assert len(want) == 3, local  # the zero topic id, the epoch and the recovery point past the end
    assert _problems(remote) == want, remote
