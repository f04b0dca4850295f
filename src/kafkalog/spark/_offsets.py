"""Offsets: where a read of each partition starts and ends (the connector's offset and
timestamp options against the storage read model's log start, log end and last stable offset),
and the streaming source's offsets."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ._discovery import DiscoveredPartition
from ._errors import OptionError, warn
from ._options import EARLIEST, EARLIEST_TIMESTAMP, LATEST, LATEST_TIMESTAMP, ReadOptions


def offset_for_timestamp(tp: DiscoveredPartition, ts: int) -> Optional[int]:
    """Kafka's ``fetchOffsetByTimestamp`` (:meth:`LogView.offset_for_timestamp`): the earliest
    offset at or after the log start whose record timestamp is >= ``ts`` (>= 0), or None."""
    if not tp.segments:
        return None
    with tp.viewing():
        found = tp._view.offset_for_timestamp(ts)
    return None if found is None else found.offset


@dataclass
class Range:
    tp: DiscoveredPartition
    start: int
    end: int  # exclusive


def _spec_lookup(spec: Any, tp: DiscoveredPartition) -> Optional[int]:
    if isinstance(spec, dict) and tp.topic in spec:
        return spec[tp.topic].get(tp.partition)
    return None


def _check_spec_tps(
    spec: Any, name: str, tps: Sequence[DiscoveredPartition], opts: ReadOptions
) -> None:
    if not isinstance(spec, dict):
        return
    have = {tp.key for tp in tps}
    missing = [f"{t}-{p}" for t, ps in spec.items() for p in ps if (t, p) not in have]
    if missing:
        msg = (
            f"{name} names partitions not found under the path(s) (or not selected): "
            f"{', '.join(sorted(missing))}"
        )
        if opts.fail_on_data_loss:
            raise OptionError(msg + " (set failOnDataLoss=false to ignore)")
        warn(msg)


def resolve_start(tp: DiscoveredPartition, opts: ReadOptions) -> int:
    earliest, latest = tp.earliest(), tp.latest(opts.read_committed)
    ts = None
    if opts.starting_timestamp is not None:
        ts = opts.starting_timestamp
    elif opts.starting_by_timestamp is not None:
        ts = _spec_lookup(opts.starting_by_timestamp, tp)
        if ts is None:
            if opts.starting_by_timestamp and tp.topic in opts.starting_by_timestamp:
                raise OptionError(
                    f"startingOffsetsByTimestamp has no entry for partition {tp.name}"
                )
            return earliest if not opts.streaming else latest
    if ts == EARLIEST_TIMESTAMP:
        return earliest
    if ts == LATEST_TIMESTAMP:
        return latest
    if ts is not None:
        off = offset_for_timestamp(tp, ts)
        if off is None:
            if opts.starting_strategy == "latest":
                return latest
            raise OptionError(
                f"No offset matched from request of topic-partition {tp.name} and timestamp {ts}."
            )
        return off
    spec = opts.starting
    if spec is None:
        spec = "latest" if opts.streaming else "earliest"
    if spec == "earliest":
        return earliest
    if spec == "latest":
        return latest
    off = _spec_lookup(spec, tp)
    if off is None:
        return latest if opts.streaming else earliest
    if off == EARLIEST:
        return earliest
    if off == LATEST:
        return latest
    if off < earliest:
        msg = (
            f"Cannot fetch offset {off} of {tp.name}: the earliest available offset is {earliest}. "
            "Some data may have been lost because they are not available any more (deleted by "
            "retention or missing segments)."
        )
        if opts.fail_on_data_loss:
            raise OptionError(
                msg + " If you want your query to fail in this case set failOnDataLoss=true; "
                "to skip the lost data set it to false."
            )
        warn(msg + " Starting from the earliest offset (failOnDataLoss=false).")
        return earliest
    return off


def resolve_end(tp: DiscoveredPartition, opts: ReadOptions) -> int:
    latest = tp.latest(opts.read_committed)
    ts = None
    if opts.ending_timestamp is not None:
        ts = opts.ending_timestamp
    elif opts.ending_by_timestamp is not None:
        ts = _spec_lookup(opts.ending_by_timestamp, tp)
    if ts == EARLIEST_TIMESTAMP:
        return tp.earliest()
    if ts == LATEST_TIMESTAMP:
        return latest
    if ts is not None:
        off = offset_for_timestamp(tp, ts)
        return latest if off is None else off
    spec = opts.ending
    if spec is None or spec == "latest":
        return latest
    off = _spec_lookup(spec, tp)
    if off is None or off == LATEST:
        return latest
    if off > latest:
        # the connector's consumer cannot fetch up to such an end: data loss
        msg = (
            f"Cannot fetch offset {latest} of {tp.name}: endingOffsets asks for offsets up to "
            f"{off} but "
            + (f"the last stable offset (read_committed) is {latest}"
               if opts.read_committed else f"the log ends at {latest}")
            + ". Some data may have been lost, or the offset was never written."
        )
        if opts.fail_on_data_loss:
            raise OptionError(
                msg + " To read up to that offset instead, set failOnDataLoss=false."
            )
        warn(msg + " Reading up to the log end (failOnDataLoss=false).")
        return latest
    return off


def check_specs(tps: Sequence[DiscoveredPartition], opts: ReadOptions) -> None:
    """``assign`` and the offset/timestamp JSON options must name partitions that were found."""
    if opts.assign is not None:
        have = {tp.key for tp in tps}
        missing = [f"{t}-{p}" for t, ps in opts.assign.items() for p in ps if (t, p) not in have]
        if missing:
            # the connector fails too (its admin client cannot list offsets of a partition
            # that does not exist)
            raise OptionError(
                f"assign names partitions not found under the path(s): {', '.join(missing)}"
            )
    for spec, name in (
        (opts.starting, "startingOffsets"),
        (opts.ending, "endingOffsets"),
        (opts.starting_by_timestamp, "startingOffsetsByTimestamp"),
        (opts.ending_by_timestamp, "endingOffsetsByTimestamp"),
    ):
        _check_spec_tps(spec, name, tps, opts)


def resolve_ranges(
    tps: Sequence[DiscoveredPartition], opts: ReadOptions, check: bool = True
) -> List[Range]:
    if check:
        check_specs(tps, opts)
    out = []
    for tp in tps:
        with tp.viewing():
            start = resolve_start(tp, opts)
            end = resolve_end(tp, opts)
        if start > end:
            msg = f"starting offset {start} of {tp.name} is after its ending offset {end}"
            if opts.fail_on_data_loss and not opts.streaming:
                raise OptionError(msg)
            start = end
        out.append(Range(tp, start, end))
    return out


# ------------------------------------------------------------------------------------------------
# Streaming offsets
# ------------------------------------------------------------------------------------------------
def offsets_json(offsets: Mapping[Tuple[str, int], int]) -> Dict[str, Dict[str, int]]:
    """``{(topic, partition): offset}`` -> the connector's ``{"topic": {"0": offset}}``."""
    out: Dict[str, Dict[str, int]] = {}
    for (t, p), off in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(off)
    return out


def offsets_from_json(obj: Any) -> Dict[Tuple[str, int], int]:
    if isinstance(obj, str):
        obj = json.loads(obj)
    out = {}
    for t, ps in (obj or {}).items():
        for p, off in ps.items():
            out[(t, int(p))] = int(off)
    return out


def rate_limit(
    start: Mapping[Tuple[str, int], int], end: Mapping[Tuple[str, int], int], limit: int
) -> Dict[Tuple[str, int], int]:
    """The connector's ``rateLimit``: ``limit`` offsets spread over the partitions in
    proportion to what each has available."""
    sizes = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(sizes.values())
    if total <= limit or total == 0:
        return dict(end)
    out = {}
    for tp, e in end.items():
        b = start.get(tp, e)
        size = sizes[tp]
        prorate = limit * (size / total)
        off = b + (math.ceil(prorate) if prorate < 1 else math.floor(prorate))
        out[tp] = min(e, off)
    return out
