"""The Spark source over object stores and HDFS (``s3://``, ``gs://``, ``hdfs://``, ``abfs://``).

Planning runs on the driver and lists the store once: one listing of each root given, one
listing of each ``<topic>-<partition>`` directory under it (which also gives every object's
size, so no per-file HEAD request).  Segments are packed into splits of about
``maxPartitionBytes``; a split carries everything its task needs: the segment URIs, the
partition, the aborted transactions (read from the ``.txnindex`` objects on the driver when
``kafka.isolation.level=read_committed``) and the storage options.  A task reads its segments
straight from the store with :func:`kafkalog.arrow.iter_batches` (ranged reads of
``storage.block_size`` bytes, retried with backoff); no local path is shared or assumed.

Storage options come from Spark options prefixed ``storage.`` (``storage.endpoint_url``,
``storage.region``, ``storage.access_key``, ``storage.secret_key``, ``storage.anonymous``,
``storage.block_size``, ``storage.retries``, ``storage.request_timeout``, ...: the keys of
:func:`kafkalog.storage.fs.resolve`); without them the standard ``AWS_*`` variables of the
driver and of every executor apply.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ..errors import KafkaStorageError
from ..storage import files as _files
from ..storage import fs as _fs

STORAGE_PREFIX = "storage."
_INT_KEYS = ("block_size", "retries")
_FLOAT_KEYS = ("backoff", "connect_timeout", "request_timeout")
_BOOL_KEYS = ("anonymous", "allow_bucket_creation", "allow_bucket_deletion")


def is_remote(path: str) -> bool:
    """Whether a path given to the source names a store other than the local file system."""
    return _fs.is_uri(path) and path.split("://", 1)[0].lower() != "file"


def storage_options(opts: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``storage.*`` Spark options as ``storage_options`` (strings typed as the store's
    file system expects them)."""
    out: Dict[str, Any] = {}
    for k, v in opts.items():
        k = str(k).lower()
        if not k.startswith(STORAGE_PREFIX):
            continue
        name = k[len(STORAGE_PREFIX):]
        if isinstance(v, str):
            s = v.strip()
            if name in _INT_KEYS:
                v = int(s)
            elif name in _FLOAT_KEYS:
                v = float(s)
            elif name in _BOOL_KEYS:
                if s.lower() not in ("true", "false"):
                    raise ValueError(f"option {k!r} must be true or false, not {v!r}")
                v = s.lower() == "true"
        out[name] = v
    return out


@dataclass
class RemoteSplit:
    """One task's share: whole segments of one partition, read in order."""

    index: int
    directory: str
    topic: str
    partition: int
    segments: List[Tuple[str, int]]  # (URI, size)
    aborted: Optional[List[Tuple[int, int, int]]] = None
    storage_options: Dict[str, Any] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return sum(s for _, s in self.segments)


@dataclass
class _RemotePartition:
    directory: str
    topic: str
    partition: int
    segments: List[Tuple[int, str, int]]  # (base offset, URI, size)
    txn_indexes: List[str]


def _partition_dir(name: str):
    try:
        pd = _files.parse_partition_dir(name)
    except ValueError:
        return None
    if pd.kind:  # -delete / -future directories
        return None
    return pd.topic_partition


def _list_partition(fs, uri: str, tp) -> _RemotePartition:
    segs, txns = [], []
    for e in fs.list_dir(uri):
        if e.kind != _fs.FILE:
            continue
        sf = _files.parse_segment_file_name(e.name)
        if sf is None or sf.suffix:
            continue
        if sf.kind == ".log":
            segs.append((sf.base_offset, e.path, fs.size(e.path)))
        elif sf.kind == ".txnindex":
            txns.append(e.path)
    segs.sort()
    return _RemotePartition(uri, tp.topic, tp.partition, segs, sorted(txns))


def discover(paths: Sequence[str], sopts: Dict[str, Any]) -> List[_RemotePartition]:
    """Every partition directory under ``paths`` (roots or partition directories), one listing
    each; a missing root is a KafkaStorageError naming it."""
    out: List[_RemotePartition] = []
    for p in paths:
        fs, uri = _fs.resolve(p, sopts)
        tp = _partition_dir(_fs.basename(uri))
        if tp is not None:
            part = _list_partition(fs, uri, tp)
            if part.segments:
                out.append(part)
                continue
        kind = fs.kind(uri)
        if kind != _fs.DIRECTORY:
            raise KafkaStorageError(
                f"cannot read {p}: no such directory (or prefix) in the store ({kind}); give a "
                "log root (a broker's log.dirs entry) or a <topic>-<partition> directory",
                path=p, operation="listing")
        for e in fs.list_dir(uri):
            if e.kind != _fs.DIRECTORY:
                continue
            tp = _partition_dir(e.name)
            if tp is not None:
                out.append(_list_partition(fs, e.path, tp))
    return out


def _selected(part: _RemotePartition, opts) -> bool:
    import re

    from ._core import _is_internal, java_regex

    if opts.assign is not None:
        return part.partition in opts.assign.get(part.topic, ())
    if opts.subscribe is not None:
        return part.topic in opts.subscribe
    if opts.subscribe_pattern is not None:
        return re.fullmatch(java_regex(opts.subscribe_pattern), part.topic) is not None
    return opts.include_internal_topics or not _is_internal(part.topic)


def check_supported(opts) -> None:
    """Refuse (clearly) the options the object-store read does not implement yet."""
    from ._core import OptionError

    offsets = [
        name for name, v in (
            ("startingOffsets", opts.starting not in (None, "earliest")),
            ("endingOffsets", opts.ending not in (None, "latest")),
            ("startingTimestamp", opts.starting_timestamp is not None),
            ("endingTimestamp", opts.ending_timestamp is not None),
            ("startingOffsetsByTimestamp", opts.starting_by_timestamp is not None),
            ("endingOffsetsByTimestamp", opts.ending_by_timestamp is not None),
            ("includeBatchMetadata", opts.include_batch_metadata),
            ("includeSegmentMetadata", opts.include_segment_metadata),
        ) if v]
    if offsets:
        raise OptionError(
            f"option(s) {', '.join(offsets)} are not supported yet when reading from an object "
            "store or HDFS URI; read the whole range and filter in Spark, or copy the log "
            "directories to a local path")


def plan(opts, sopts: Dict[str, Any]) -> List[RemoteSplit]:
    """Splits for the remote paths of ``opts`` (see the module doc)."""
    check_supported(opts)
    parts = [p for p in discover(opts.paths, sopts) if _selected(p, opts)]
    target = max(1, int(opts.max_partition_bytes))
    splits: List[RemoteSplit] = []
    for part in sorted(parts, key=lambda p: (p.topic, p.partition)):
        aborted = None
        if opts.read_committed:
            from ..arrow import _remote_txnindex_aborted

            fs, _ = _fs.resolve(part.directory, sopts)
            aborted = _remote_txnindex_aborted(part.directory, fs)
        cur: List[Tuple[str, int]] = []
        size = 0
        for _base, uri, n in part.segments:
            if cur and size + n > target:
                splits.append(RemoteSplit(len(splits), part.directory, part.topic,
                                          part.partition, cur, aborted, sopts))
                cur, size = [], 0
            cur.append((uri, n))
            size += n
        if cur:
            splits.append(RemoteSplit(len(splits), part.directory, part.topic, part.partition,
                                      cur, aborted, sopts))
    return splits


def read_split(split: RemoteSplit, opts, target) -> Iterator[Any]:
    """The split's records as Arrow batches in ``target``'s schema (Spark's, exactly)."""
    import pyarrow as pa

    from .. import arrow as ka

    names = [f.name for f in target]
    for uri, _size in split.segments:
        for rb in ka.iter_batches(
            uri, names, topic=split.topic, partition=split.partition,
            timestamp_unit="us", check_crcs=opts.check_crcs,
            read_committed=opts.read_committed,
            aborted_transactions=split.aborted if opts.read_committed else None,
            max_rows=opts.max_records_per_batch, max_bytes=opts.max_batch_bytes,
            storage_options=split.storage_options,
        ):
            if rb.num_rows == 0:
                continue
            cols = [rb.column(i).cast(f.type) if rb.column(i).type != f.type else rb.column(i)
                    for i, f in enumerate(target)]
            yield pa.RecordBatch.from_arrays(cols, schema=target)


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


@dataclass
class RemoteStaged:
    """What a task uploaded: per partition, the staged directory URI and its file names."""

    task_prefix: str
    partitions: List[Tuple[str, str, int, List[str]]]  # (dir name, topic, partition, files)
    records: int = 0


def _remote_error(uri: str, why: str):
    from ._write import WriteError

    return WriteError(f"cannot write {uri}: {why}")


class RemoteWriteJob:
    """The sink's object-store side (see the comment above); picklable (it travels with every
    task)."""

    def __init__(self, uri: str, options: Mapping[str, Any], overwrite: bool,
                 save_mode: Optional[str], job_id: str) -> None:
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
        fs, _ = _fs.resolve(self.uri, self.sopts)
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

        from . import _write as w

        tmp = tempfile.mkdtemp(prefix="kafkalog-task-")
        try:
            local_root = _fs.join(tmp, "root")
            lopts = w.WriteOptions.parse({**self.options, "path": local_root})
            w.prepare_job(lopts, self.job_id)
            tw = w.TaskWriter(lopts, self.job_id, task_name, False, task_index=task_index)
            try:
                for rb in batches:
                    tw.write_batch(rb)
                staged = tw.finish()
            except BaseException:
                tw.cleanup()
                raise
            w.commit_job(lopts, self.job_id, staged, False, "append")
            fs = self._fs()
            prefix = f"{self.staging}/{task_name}"
            parts = []
            for s in staged:
                name = f"{s.topic}-{s.partition}"
                src = _fs.join(local_root, name)
                dst = fs._native(f"{prefix}/{name}")
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
        for st in staged:
            for name, _t, _p, files in st.partitions:
                def order(f):
                    sf = _files.parse_segment_file_name(f)
                    return (1, sf.base_offset) if sf is not None and sf.kind == ".log" else (0, 0)
                for f in sorted(files, key=lambda f: (order(f), f)):
                    fs._retry("copying", f"{self.uri}/{name}/{f}", lambda: fs.pafs.copy_file(
                        fs._native(f"{st.task_prefix}/{name}/{f}"),
                        fs._native(f"{self.uri}/{name}/{f}")))
        self.abort()

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
