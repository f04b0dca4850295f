"""The Spark source and sink over object stores and HDFS (``s3://``, ``gs://``, ``hdfs://``,
``abfs://``): the sink's object-store commit (the ``storage.*`` options: :mod:`._store`).

Reading goes through the same planning and decoding as local paths (:mod:`._planning` and
:mod:`._tasks`, over the store's :class:`kafkalog.storage.store_fs.ArrowFileSystem`):
planning lists the store once on the driver (one listing of each root, one of each
``<topic>-<partition>`` prefix, which also gives every object's size: no per-file HEAD
request), reads only the index objects and the batch headers the offset/timestamp options and
pushed filters need, and a task
reads its byte ranges straight from the store (windows of ``storage.block_size`` bytes, the
next fetched while one decodes, retried with backoff); no local path is shared or assumed.

Storage options come from Spark options prefixed ``storage.`` (``storage.endpoint_url``,
``storage.region``, ``storage.access_key``, ``storage.secret_key``, ``storage.anonymous``,
``storage.block_size``, ``storage.retries``, ``storage.request_timeout``, ...: the keys of
:func:`kafkalog.storage.store_fs.resolve`); without them the standard ``AWS_*`` variables of the
driver and of every executor apply.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..storage import files as _files
from ..storage import fs as _fs
from ..storage import store_fs as _store_fs
from . import _write
from ._local_paths import UnsupportedPathError
from ._store_clients import storage_options

#: the stores the sink writes to: S3 (``s3a://`` is Hadoop's name for the same store), with the
#: object-store commit below, and HDFS, whose commit renames (see below)
WRITABLE_SCHEMES = ("s3", "s3a", "hdfs", "viewfs")


def check_writable(uri: str) -> None:
    """:class:`~kafkalog.spark._local_paths.UnsupportedPathError` for a write to a store the
    sink has no commit for (``gs://``, ``abfs://``, ...), before any request is made."""
    scheme = uri.split("://", 1)[0].lower()
    if scheme not in WRITABLE_SCHEMES:
        raise UnsupportedPathError(
            f"cannot write {uri!r}: kafkalog writes log directories to local (or mounted) "
            f"paths, S3 (s3://, s3a://) and HDFS (hdfs://) only; the {scheme}:// scheme has no "
            "commit that keeps readers from seeing a partial segment there (write to a local "
            "path or to S3, then copy)",
            uri,
        )


def _partition_dir(name: str):
    try:
        pd = _files.parse_partition_dir(name)
    except ValueError:
        return None
    if pd.kind:  # -delete / -future directories
        return None
    return pd.topic_partition


# ------------------------------------------------------------------------------------------------
# Writing to an object store
# ------------------------------------------------------------------------------------------------
# An object store has no rename, so the local commit (stage, then swap directories) cannot be
# atomic there.  The sink therefore:
#   * refuses overwrite (replacing a partition would expose a mix of old and new segments, or
#     none, to a concurrent reader), and refuses to append to a partition the target already
#     holds (its segments would change under a reader); new partitions only;
#   * has each task build its partitions completely in a local temporary directory with the
#     local writer (same checks, indexes, checkpoints), then upload them under
#     ``<target>/.kafkalog-staging/<job>/<task>/`` (no reader looks there);
#   * commits on the driver by copying every staged object to its final name, per partition
#     the indexes first and the ``.log`` files last in offset order: an object is written whole
#     by one PUT/copy, and a reader finds a segment by its ``.log``, so at any moment a reader
#     sees a prefix of complete segments of new partitions, never a partial segment or old
#     data mixed with new; then deletes the staging prefix.  ``abort`` deletes it too.
# On HDFS the same commit renames each staged file into place instead of copying it (a rename
# there is atomic and moves no bytes; a copy would stream every byte through the driver).  The
# whole-directory swap of the local commit (overwrite, append) is not done on HDFS yet: the
# same rules as on object stores apply.


@dataclass
class RemoteStaged:
    """What a task uploaded: per partition, the staged directory URI and its file names."""

    task_prefix: str
    partitions: List[Tuple[str, str, int, List[str]]]  # (dir name, topic, partition, files)
    records: int = 0


def _remote_error(uri: str, why: str):
    return _write.WriteError(f"cannot write {uri}: {why}")


class RemoteWriteJob:
    """The sink's object-store side (see the comment above); picklable (it travels with every
    task)."""

    def __init__(self, uri: str, options: Mapping[str, Any], overwrite: bool,
                 save_mode: Optional[str], job_id: str) -> None:
        check_writable(uri)
        self.uri = uri.rstrip("/")
        self.options = {str(k).lower(): v for k, v in dict(options).items()
                        if str(k).lower() not in ("path", "paths")}
        self.sopts = storage_options(self.options)
        self.job_id = job_id
        self.save_mode = save_mode
        if overwrite:
            raise _remote_error(
                uri, "mode('overwrite') is not supported on an object store: it has no atomic "
                "rename, so replacing partitions would let a reader see a mix of old and new "
                "segments; write to a new prefix (and point readers at it), or delete the old "
                "partitions first and append")
        self.staging = f"{self.uri}/{_STAGING}/{job_id}"
        if job_id:  # on the driver, before any task: the store answers, with credentials
            self._fs().kind(self.uri)

    def _fs(self):
        fs, _ = _store_fs.resolve(self.uri, self.sopts)
        return fs

    def existing_partitions(self) -> List[str]:
        fs = self._fs()
        if fs.kind(self.uri) != _fs.DIRECTORY:
            return []
        return [e.name for e in fs.list_dir(self.uri)
                if e.kind == _fs.DIRECTORY and _partition_dir(e.name) is not None]

    def write_task(self, batches, task_name: str, task_index: int) -> RemoteStaged:
        """Build this task's partitions locally with the local writer, then upload them."""
        import shutil
        import tempfile

        import pyarrow.fs as pafs

        tmp = tempfile.mkdtemp(prefix="kafkalog-task-")
        try:
            local_root = _fs.join(tmp, "root")
            lopts = _write.WriteOptions.parse({**self.options, "path": local_root}, warn=False)
            _write.prepare_job(lopts, self.job_id)
            tw = _write.TaskWriter(lopts, self.job_id, task_name, False, task_index=task_index)
            try:
                for rb in batches:
                    tw.write_batch(rb)
                staged = tw.finish()
            except BaseException:
                tw.cleanup()
                raise
            _write.commit_job(lopts, self.job_id, staged, False, "append")
            fs = self._fs()
            prefix = f"{self.staging}/{task_name}"
            parts = []
            for s in staged:
                name = f"{s.topic}-{s.partition}"
                src = _fs.join(local_root, name)
                dst = fs._native(f"{prefix}/{name}")
                if self.renames:  # a file system with directories: make the parent first
                    fs.pafs.create_dir(dst, recursive=True)
                pafs.copy_files(src, dst, source_filesystem=pafs.LocalFileSystem(),
                                destination_filesystem=fs.pafs)
                files = [i.base_name for i in pafs.LocalFileSystem().get_file_info(
                    pafs.FileSelector(src)) if i.type == pafs.FileType.File]
                parts.append((name, s.topic, s.partition, sorted(files)))
            return RemoteStaged(prefix, parts, sum(s.records for s in staged))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def commit(self, staged: Sequence[RemoteStaged]) -> None:
        existing = set(self.existing_partitions())
        if self.save_mode == "errorifexists" and existing:
            raise _remote_error(self.uri, "the target already holds partitions "
                                f"({', '.join(sorted(existing)[:5])}) and the save mode is "
                                "errorifexists")
        if self.save_mode == "ignore" and existing:
            self.abort()
            return
        seen: Dict[str, str] = {}
        for st in staged:
            for name, _t, _p, _names in st.partitions:
                if name in existing:
                    raise _remote_error(
                        self.uri, f"partition {name} already exists there; appending to an "
                        "existing partition is not supported on an object store (its segments "
                        "would change under a reader): write new partitions or a new prefix")
                if name in seen:
                    raise _remote_error(
                        self.uri, f"partition {name} came from two tasks; repartition by "
                        "(topic, partition) first: use kafkalog.spark.write(df, path)")
                seen[name] = st.task_prefix
        fs = self._fs()
        rename = self.renames
        for st in staged:
            for name, _t, _p, files in st.partitions:
                def order(f):
                    sf = _files.parse_segment_file_name(f)
                    return (1, sf.base_offset) if sf is not None and sf.kind == ".log" else (0, 0)
                if rename:  # HDFS: a rename needs the parent directory
                    fs._retry("creating", f"{self.uri}/{name}", lambda: fs.pafs.create_dir(
                        fs._native(f"{self.uri}/{name}"), recursive=True))
                for f in sorted(files, key=lambda f: (order(f), f)):
                    src = fs._native(f"{st.task_prefix}/{name}/{f}")
                    dst = fs._native(f"{self.uri}/{name}/{f}")
                    if rename:
                        fs._retry("renaming", f"{self.uri}/{name}/{f}",
                                  lambda: fs.pafs.move(src, dst))
                    else:
                        fs._retry("copying", f"{self.uri}/{name}/{f}",
                                  lambda: fs.pafs.copy_file(src, dst))
        self.abort()

    @property
    def renames(self) -> bool:
        """Whether the commit renames the staged files into place (HDFS: a rename is atomic
        and moves no bytes) rather than copying them (object stores: a server-side copy; their
        "rename" is a copy and a delete, no better)."""
        return self.uri.split("://", 1)[0].lower() in _RENAMING_SCHEMES

    def abort(self) -> None:
        fs = self._fs()
        try:
            fs.pafs.delete_dir(fs._native(self.staging))
        except FileNotFoundError:
            pass
        try:  # the staging root, when no other job uses it
            root = f"{self.uri}/{_STAGING}"
            if not fs.list_dir(root):
                fs.pafs.delete_dir(fs._native(root))
        except Exception:
            pass


_STAGING = ".kafkalog-staging"
_RENAMING_SCHEMES = ("hdfs", "viewfs")
