"""Throughput of ``Log.append`` for idempotent producers with the producer-state validation
(sequence/epoch checks, duplicate lookup) on against the same appends with it off, in one run.

``python bench/producer_state_ratio.py [BATCHES] [RECORDS_PER_BATCH] [PRODUCERS]`` from the
repository root (default 20000 batches of 1 record, 100-byte values, 8 producers: small batches
are the worst case, the check is per batch).  Each mode appends the same pre-built batches to a
fresh log; modes alternate, best of 7 each (CPU time of the appending loop).  Prints
batches/s of both and their ratio (on/off).
``KAFKALOG_PURE_PYTHON=1`` measures the pure twin."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

from kafkalog import IMPLEMENTATION
from kafkalog.records import MemoryRecordsBuilder
from kafkalog.storage.log import Log


def build(batches: int, per_batch: int, producers: int):
    seq = [0] * producers
    out = []
    value = b"x" * 100
    for i in range(batches):
        p = i % producers
        b = MemoryRecordsBuilder(producer_id=1000 + p, producer_epoch=0, base_sequence=seq[p])
        for j in range(per_batch):
            b.append(1_700_000_000_000 + i, b"key-%d" % j, value)
        seq[p] += per_batch
        out.append(b.build())
    return out


def run(data, validate: bool, root: str) -> float:
    d = tempfile.mkdtemp(dir=root)
    log = Log.open(os.path.join(d, "bench-0"), {"segment.bytes": 1 << 30})
    log.producer_state.validation_enabled = validate
    append = log.append
    t0 = time.process_time()
    for b in data:
        append(b)
    elapsed = time.process_time() - t0
    log.close()
    shutil.rmtree(d)
    return elapsed


def main() -> None:
    batches = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    per_batch = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    producers = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    data = build(batches, per_batch, producers)
    root = tempfile.mkdtemp(prefix="kafkalog-pstate-bench-")
    try:
        best = {True: float("inf"), False: float("inf")}
        for _ in range(7):
            for mode in (False, True):
                best[mode] = min(best[mode], run(data, mode, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    on, off = batches / best[True], batches / best[False]
    print(
        f"{IMPLEMENTATION}: {batches} batches x {per_batch} records, {producers} producers: "
        f"validation on {on:,.0f} batches/s, off {off:,.0f} batches/s, ratio {on / off:.3f}"
    )


if __name__ == "__main__":
    main()
