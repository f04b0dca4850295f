"""The PySpark Python Data Source ``kafkalog`` (batch read, streaming read, Arrow write).

Use :func:`kafkalog.spark.register` rather than these classes directly.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)

from . import (
    _columns,
    _discovery,
    _errors,
    _object_stores,
    _offsets,
    _options,
    _planning,
    _schema,
    _store_clients,
    _tasks,
)
from . import _write as wcore

try:  # PySpark >= 4.1: filter pushdown
    from pyspark.sql.datasource import (
        EqualNullSafe,
        EqualTo,
        Filter,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        IsNotNull,
        LessThan,
        LessThanOrEqual,
        StringStartsWith,
    )

    HAS_PUSHDOWN = True
except ImportError:  # pragma: no cover - PySpark 4.0
    HAS_PUSHDOWN = False

try:  # PySpark >= 4.2: admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    HAS_ADMISSION_CONTROL = True
except ImportError:  # pragma: no cover - PySpark 4.0/4.1
    HAS_ADMISSION_CONTROL = False

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


def _option_flags(options) -> Dict[str, bool]:
    o = {str(k).lower(): v for k, v in dict(options).items()}
    return {
        "include_headers": _options.parse_bool(o, "includeheaders", False),
        "batch_metadata": _options.parse_bool(o, "includebatchmetadata", False),
        "segment_metadata": _options.parse_bool(o, "includesegmentmetadata", False),
    }


def _arrow_target(schema):
    """The Arrow schema Spark expects back for ``schema`` (exactly, SPARK-55583)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # pragma: no cover - older signature
        return to_arrow_schema(schema)


def _in_spark_worker() -> bool:
    """Whether this process is a Python worker that Spark started (``python -m
    pyspark.daemon``, or ``pyspark.worker`` without the daemon)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return str(getattr(spec, "name", "") or "").startswith("pyspark.")


def _for_spark(batches: Iterator[Any]) -> Iterator[Any]:
    """The batches a task yields to Spark.  A query that needs fewer rows than the split holds
    (``LIMIT``) ends the task while the reader still yields: the executor closes the worker's
    socket, PySpark's write to it fails and closes this generator, and the worker is done for
    (nothing can reach the executor any more; PySpark's daemon would end it after printing a
    ``BrokenPipeError`` traceback when it flushes the dead socket).  The rows Spark took are
    complete, so the worker ends here, quietly.  Any other early close (or one outside a Spark
    worker) goes on as usual."""
    try:
        yield from batches
    except GeneratorExit as e:
        if isinstance(e.__context__, ConnectionError) and _in_spark_worker():
            for f in (sys.stdout, sys.stderr):
                try:
                    f.flush()
                except Exception:
                    pass
            os._exit(0)
        raise


class KafkaLogSplit(InputPartition):
    """One Spark task's share of the log: a :class:`kafkalog.spark._planning.Split`, with the
    pruning of the scan that planned it (pushed filters travel with the split they were planned
    for, never on an object a later scan could reuse)."""

    def __init__(self, split: _planning.Split, pruning: Optional[_planning.Pruning] = None) -> None:
        super().__init__(split.index)
        self.split = split
        self.pruning = pruning

    def __repr__(self) -> str:
        return (
            f"KafkaLogSplit({self.split.index}, {len(self.split.pieces)} pieces, "
            f"{self.split.nbytes} bytes)"
        )


class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafkalog").load(path)``: Kafka log directories in the schema of
    Spark's Kafka connector.  See docs/spark.md for the options."""

    #: set by :func:`kafkalog.spark.register` (``spark.sparkContext.defaultParallelism``)
    default_parallelism: Optional[int] = None

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> str:
        f = _option_flags(self.options)
        o = {str(k).lower(): v for k, v in dict(self.options).items()}
        columns = _columns.parse_columns(
            o, f["include_headers"], f["batch_metadata"], f["segment_metadata"]
        )
        return _schema.schema_ddl(
            f["include_headers"], f["batch_metadata"], f["segment_metadata"], columns
        )

    def reader(self, schema) -> "KafkaLogReader":
        r = KafkaLogReader(self.options, schema, self.default_parallelism)
        _schema.check_schema(_arrow_target(schema), r.opts)
        return r

    def streamReader(self, schema) -> "KafkaLogStreamReader":
        try:
            r = KafkaLogStreamReader(self.options, schema, self.default_parallelism)
            _schema.check_schema(_arrow_target(schema), r.opts)
        except Exception as e:
            # PySpark 4.3's stream runner calls stop() on the reader in a ``finally`` and hides
            # an error raised here behind an UnboundLocalError: hand it a reader that raises
            # the real error at the first call instead
            return _FailedStreamReader(e)
        return r

    def writer(self, schema, overwrite: bool) -> "KafkaLogArrowWriter":
        return KafkaLogArrowWriter(self.options, schema, overwrite)


class KafkaLogReader(DataSourceReader):
    """Batch reader.  Holds only the parsed options (it travels with every task); partitions
    are discovered and planned in :meth:`partitions`, on the driver."""

    def __init__(self, options, schema, default_parallelism: Optional[int] = None) -> None:
        self.opts = _options.ReadOptions.parse(options, default_parallelism=default_parallelism)
        self.schema = schema
        #: set by ``pushFilters`` for the scan being planned; only ``partitions()`` reads it
        self.pruning: Optional[_planning.Pruning] = None
        self._target = None

    def partitions(self) -> List[InputPartition]:
        pruning = self.pruning
        splits = _planning.plan(self.opts, pruning)
        return [KafkaLogSplit(s, pruning) for s in splits]

    def read(self, partition: KafkaLogSplit) -> Iterator[Any]:
        if self._target is None:
            self._target = _arrow_target(self.schema)
        split = getattr(partition, "split", None)
        if split is None:  # the placeholder Spark uses for an empty plan
            return iter(())
        # only the split's own pruning: the reader may be the one of an earlier scan
        return _for_spark(
            _tasks.read_split(split, self.opts, self._target, getattr(partition, "pruning", None))
        )


def _col(f) -> Optional[str]:
    attr = getattr(f, "attribute", None)
    if isinstance(attr, tuple) and len(attr) == 1:
        return attr[0]
    return None


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _micros(v: Any) -> Optional[int]:
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.timezone.utc)
        return (v - _EPOCH) // _dt.timedelta(microseconds=1)
    return None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def apply_filters(filters: Sequence[Any], pruning: _planning.Pruning) -> List[Any]:
    """Fold pushed filters into ``pruning``; return those Spark must still evaluate."""
    rest = []
    for f in filters:
        if not _apply_filter(f, pruning):
            rest.append(f)
    return rest


def _apply_filter(f, pr: _planning.Pruning) -> bool:  # noqa: C901 - one case per filter
    """True when the filter is applied exactly (Spark can drop it)."""
    col = _col(f)
    if col is None:
        return False
    if isinstance(f, IsNotNull):
        if col in ("topic", "partition"):
            pr.exclude_unknown_tp = True
            return True
        return col in ("offset", "timestamp")
    value = getattr(f, "value", None)
    eq = isinstance(f, EqualTo) or (isinstance(f, EqualNullSafe) and value is not None)
    if col == "topic":
        if eq and isinstance(value, str):
            vals = {value}
        elif isinstance(f, In) and all(isinstance(v, str) for v in value):
            vals = set(value)
        elif isinstance(f, StringStartsWith) and isinstance(value, str):
            pr.topic_prefixes = (pr.topic_prefixes or []) + [value]
            pr.exclude_unknown_tp = True
            return True
        else:
            return False
        pr.topics = vals if pr.topics is None else (pr.topics & vals)
        pr.exclude_unknown_tp = True
        if not pr.topics:
            pr.empty = True
        return True
    if col == "partition":
        if eq and _is_int(value):
            vals = {value}
        elif isinstance(f, In) and all(_is_int(v) for v in value):
            vals = set(value)
        elif _is_int(value) and isinstance(
            f, (GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)
        ):
            if isinstance(f, GreaterThan):
                pr.partition_lo = max(
                    pr.partition_lo if pr.partition_lo is not None else -(2**31), value + 1
                )
            elif isinstance(f, GreaterThanOrEqual):
                pr.partition_lo = max(
                    pr.partition_lo if pr.partition_lo is not None else -(2**31), value
                )
            elif isinstance(f, LessThan):
                pr.partition_hi = min(
                    pr.partition_hi if pr.partition_hi is not None else 2**31, value - 1
                )
            else:
                pr.partition_hi = min(
                    pr.partition_hi if pr.partition_hi is not None else 2**31, value
                )
            pr.exclude_unknown_tp = True
            return True
        else:
            return False
        pr.partitions = vals if pr.partitions is None else (pr.partitions & vals)
        pr.exclude_unknown_tp = True
        if not pr.partitions:
            pr.empty = True
        return True
    if col == "offset":
        lo, hi = pr.offset_lo, pr.offset_hi

        def set_lo(v):
            pr.offset_lo = v if lo is None else max(lo, v)

        def set_hi(v):
            pr.offset_hi = v if hi is None else min(hi, v)

        if eq and _is_int(value):
            set_lo(value)
            set_hi(value + 1)
            return True
        if isinstance(f, In) and value and all(_is_int(v) for v in value):
            set_lo(min(value))
            set_hi(max(value) + 1)
            return False  # a range covering the set: Spark keeps the exact test
        if not _is_int(value):
            return False
        if isinstance(f, GreaterThan):
            set_lo(value + 1)
        elif isinstance(f, GreaterThanOrEqual):
            set_lo(value)
        elif isinstance(f, LessThan):
            set_hi(value)
        elif isinstance(f, LessThanOrEqual):
            set_hi(value + 1)
        else:
            return False
        return True
    if col == "timestamp":
        us = _micros(value)
        if us is None:
            return False
        if eq:
            pr.ts_lo_us = us if pr.ts_lo_us is None else max(pr.ts_lo_us, us)
            pr.ts_hi_us = us if pr.ts_hi_us is None else min(pr.ts_hi_us, us)
        elif isinstance(f, GreaterThan):
            pr.ts_lo_us = us + 1 if pr.ts_lo_us is None else max(pr.ts_lo_us, us + 1)
        elif isinstance(f, GreaterThanOrEqual):
            pr.ts_lo_us = us if pr.ts_lo_us is None else max(pr.ts_lo_us, us)
        elif isinstance(f, LessThan):
            pr.ts_hi_us = us - 1 if pr.ts_hi_us is None else min(pr.ts_hi_us, us - 1)
        elif isinstance(f, LessThanOrEqual):
            pr.ts_hi_us = us if pr.ts_hi_us is None else min(pr.ts_hi_us, us)
        return False  # pruned and filtered here, re-checked by Spark (timestamps are not ordered)
    return False


if HAS_PUSHDOWN:

    class KafkaLogPushdownReader(KafkaLogReader):
        """The batch reader with ``pushFilters`` (PySpark >= 4.1, needs
        ``spark.sql.python.filterPushdown.enabled=true``; :func:`kafkalog.spark.register` sets
        it)."""

        def pushFilters(self, filters: List["Filter"]):
            # a fresh pruning per call: nothing of an earlier scan's filters may remain
            pr = _planning.Pruning()
            rest = apply_filters(filters, pr)
            self.pruning = pr
            return iter(rest)

    class KafkaLogPushdownDataSource(KafkaLogDataSource):
        def reader(self, schema) -> "KafkaLogReader":
            r = KafkaLogPushdownReader(self.options, schema, self.default_parallelism)
            _schema.check_schema(_arrow_target(schema), r.opts)
            return r


# ------------------------------------------------------------------------------------------------
# Streaming
# ------------------------------------------------------------------------------------------------
class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader of growing log directories.  Offsets are the connector's JSON
    (``{"topic": {"0": nextOffset}}``); ``maxOffsetsPerTrigger`` limits a micro-batch;
    ``Trigger.AvailableNow`` reads up to the end seen when the query starts (PySpark >= 4.2).
    With ``kafka.isolation.level=read_committed`` a micro-batch ends at each partition's last
    stable offset, as the connector's consumer does.  A partition whose log end moved below
    where the stream is (deleted and recreated, or rewritten shorter) is data loss, reported
    as the connector reports it (see ``failOnDataLoss``)."""

    def __init__(self, options, schema, default_parallelism: Optional[int] = None) -> None:
        self.opts = _options.ReadOptions.parse(
            options, streaming=True, default_parallelism=default_parallelism
        )
        self.schema = schema
        self._available_now: Optional[Dict] = None
        self._last_end: Optional[Dict] = None
        self._target = None

    def _scan(self) -> Dict[Any, _discovery.DiscoveredPartition]:
        out = {}
        for tp in _discovery.discover(self.opts):
            if tp.topic is None:
                continue
            out[(tp.topic, tp.partition)] = tp
        return out

    def _end_of(self, tp: _discovery.DiscoveredPartition) -> int:
        """Where a micro-batch may end: the log end, or the LSO for read_committed."""
        if self.opts.read_committed:
            return tp.last_stable()
        return tp.latest()

    def _data_loss(self, msg: str) -> None:
        """The connector's ``reportDataLoss``: fail, or warn when failOnDataLoss is false."""
        if self.opts.fail_on_data_loss:
            raise _errors.DataLossError(
                msg + ". Some data may have been lost because they are not available in the "
                "log directories any more; either the data was aged out (retention) or the "
                "topic may have been deleted (or rewritten) before all the data in it was "
                "processed. If you don't want your streaming query to fail on such cases, set "
                'the source option "failOnDataLoss" to "false".'
            )
        _errors.warn(
            msg + ". Some data may have been lost because they are not available in the log "
            "directories any more; either the data was aged out (retention) or the topic may "
            "have been deleted (or rewritten) before all the data in it was processed. If you "
            'want your streaming query to fail on such cases, set the source option '
            '"failOnDataLoss" to "true".'
        )

    @_planning.replanned
    def initialOffset(self) -> dict:
        tps = self._scan()
        _offsets.check_specs(list(tps.values()), self.opts)
        start = {}
        for k, tp in tps.items():
            with tp.viewing():
                start[k] = _offsets.resolve_start(tp, self.opts)
        return _offsets.offsets_json(start)

    def _latest(self, tps) -> Dict:
        latest = {k: self._end_of(tp) for k, tp in tps.items()}
        if self._available_now is not None:
            latest = {
                k: min(v, self._available_now[k])
                for k, v in latest.items()
                if k in self._available_now
            }
        return latest

    @_planning.replanned
    def latestOffset(self, start: Optional[dict] = None, limit: Any = None) -> dict:
        tps = self._scan()
        latest = self._latest(tps)
        if start is not None:
            s = _offsets.offsets_from_json(start)
        else:
            s = dict(self._last_end or {})
        for k, tp in tps.items():
            if k not in s and k in latest:
                s[k] = tp.earliest()  # a new partition is read from its beginning
        shrunk = {k for k, v in latest.items() if k in s and v < s[k]}
        if shrunk and self.opts.fail_on_data_loss:
            # the log end moved back: the connector's "offset was changed" data loss (with
            # failOnDataLoss=false, partitions() warns when it plans the micro-batch)
            k = min(shrunk)
            self._data_loss(
                f"Partition {k[0]}-{k[1]}'s offset was changed from {s[k]} to {latest[k]}, "
                "some data may have been missed"
            )
        max_rows = None
        if limit is None:
            max_rows = self.opts.max_offsets_per_trigger
        elif HAS_ADMISSION_CONTROL and isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        # a partition that moved back ends this micro-batch at its new log end, and the
        # micro-batch reads it from its new beginning (see partitions)
        end = {k: (v if k in shrunk else max(v, s.get(k, v))) for k, v in latest.items()}
        if max_rows is not None:
            end = _offsets.rate_limit(s, end, max_rows)
        # a partition gone from the directories leaves the offsets (partitions() reports it)
        result = {k: v for k, v in s.items() if k in tps}
        result.update(end)
        self._last_end = result
        return _offsets.offsets_json(result)

    if HAS_ADMISSION_CONTROL:

        def getDefaultReadLimit(self):
            if self.opts.max_offsets_per_trigger is not None:
                return ReadMaxRows(self.opts.max_offsets_per_trigger)
            return ReadAllAvailable()

        @_planning.replanned
        def reportLatestOffset(self) -> Optional[dict]:
            return _offsets.offsets_json(self._latest(self._scan()))

    @_planning.replanned
    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = {k: self._end_of(tp) for k, tp in self._scan().items()}

    @_planning.replanned
    def partitions(self, start: dict, end: dict) -> List[InputPartition]:
        s = _offsets.offsets_from_json(start)
        e = _offsets.offsets_from_json(end)
        tps = self._scan()
        ranges = []
        gone = sorted(k for k in s if k not in e) + sorted(k for k in e if k not in tps)
        if gone:
            self._data_loss(
                ", ".join(f"{t}-{p}" for t, p in gone) + " are gone from the log directories"
            )
        for k, eoff in sorted(e.items()):
            tp = tps.get(k)
            if tp is None:
                continue
            earliest = tp.earliest()
            soff = s.get(k, earliest)
            if eoff < soff:
                # the log end moved back (reported when this micro-batch was planned): the
                # partition was recreated or rewritten, its new records are read from the
                # start
                self._data_loss(
                    f"Partition {tp.name}'s offset was changed from {soff} to {eoff}, some "
                    "data may have been missed"
                )
                soff = earliest
            if soff < earliest:
                self._data_loss(
                    f"Cannot fetch offsets {soff}..{earliest - 1} of {tp.name}: the earliest "
                    f"available offset is {earliest}"
                )
                soff = earliest
            if eoff > soff:
                ranges.append(_offsets.Range(tp, soff, eoff))
        return [KafkaLogSplit(sp) for sp in _planning.plan(self.opts, ranges=ranges)]

    def read(self, partition: KafkaLogSplit) -> Iterator[Any]:
        if self._target is None:
            self._target = _arrow_target(self.schema)
        return _for_spark(_tasks.read_split(partition.split, self.opts, self._target))

    def commit(self, end: dict) -> None:
        pass


class _FailedStreamReader(DataSourceStreamReader):
    """Stands in for a stream reader whose options were refused: every call raises the
    error (its message reaches the user as is), ``stop()`` does nothing."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def _raise(self, *args, **kwargs):
        raise self.error

    initialOffset = latestOffset = partitions = read = commit = _raise

    def stop(self) -> None:
        pass


# ------------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------------
class KafkaLogCommitMessage(WriterCommitMessage):
    def __init__(self, staged: List[wcore.StagedPartition], remote=None) -> None:
        self.staged = staged
        self.remote = remote  # an object store's upload (_object_stores.RemoteStaged)


class KafkaLogArrowWriter(DataSourceArrowWriter):
    """``df.write.format("kafkalog").mode("append"|"overwrite").save(path)``; the
    ``saveMode`` option (``errorifexists`` or ``ignore``, with ``mode("append")``) gives
    Spark's other save modes, which PySpark refuses for Python data sources."""

    def __init__(self, options, schema, overwrite: bool) -> None:
        path = str(dict((str(k).lower(), v) for k, v in dict(options).items()).get("path", ""))
        #: the object-store side of the job (None for a local or mounted path)
        self.remote: Optional[_object_stores.RemoteWriteJob] = None
        if _store_clients.is_remote(path):
            _object_stores.check_writable(path)
            opts = wcore.WriteOptions.parse({**dict(options), "path": "/nonexistent"})
            wcore.check_columns(schema.fieldNames(), opts)
            self.overwrite = bool(overwrite)
            self.mode = wcore.effective_mode(opts, self.overwrite)
            self.job_id = "job-" + uuid.uuid4().hex
            self.skip = False
            self.remote = _object_stores.RemoteWriteJob(path, options, self.overwrite, self.mode,
                                                 self.job_id)
            return
        self.opts = wcore.WriteOptions.parse(options)
        wcore.check_columns(schema.fieldNames(), self.opts)
        self.overwrite = bool(overwrite)
        self.mode = wcore.effective_mode(self.opts, self.overwrite)
        self.job_id = "job-" + uuid.uuid4().hex
        # ignore mode on an existing target: the job writes nothing
        self.skip = not wcore.check_save_mode(self.opts, self.mode)
        if not self.skip:
            wcore.prepare_job(self.opts, self.job_id)

    def write(self, iterator) -> KafkaLogCommitMessage:
        if self.skip:
            return KafkaLogCommitMessage([])
        try:
            from pyspark import TaskContext

            ctx = TaskContext.get()
        except Exception:  # pragma: no cover
            ctx = None
        tag = uuid.uuid4().hex[:8]
        name = (
            f"task-{ctx.partitionId():05d}-{ctx.attemptNumber()}-{tag}"
            if ctx is not None
            else f"task-{tag}"
        )
        if self.remote is not None:
            return KafkaLogCommitMessage(
                [], self.remote.write_task(iterator, name, ctx.partitionId() if ctx else 0))
        tw = wcore.TaskWriter(
            self.opts, self.job_id, name, self.overwrite,
            task_index=ctx.partitionId() if ctx is not None else 0,
        )
        try:
            for rb in iterator:
                tw.write_batch(rb)
            staged = tw.finish()
        except BaseException:
            tw.cleanup()
            raise
        return KafkaLogCommitMessage(staged)

    def commit(self, messages) -> None:
        if self.skip:
            return
        if self.remote is not None:
            self.remote.commit([m.remote for m in messages
                                if m is not None and getattr(m, "remote", None) is not None])
            return
        staged = [s for m in messages if m is not None for s in m.staged]
        wcore.commit_job(self.opts, self.job_id, staged, self.overwrite, self.mode)

    def abort(self, messages) -> None:
        if self.remote is not None:
            self.remote.abort()
        elif not self.skip:
            wcore.abort_job(self.opts, self.job_id)
