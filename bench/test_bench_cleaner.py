"""Compaction benchmark: clean a >= 1 GiB compacted log with a realistic (Pareto) key
distribution and report throughput (MB of log cleaned per second) and peak memory.

    python bench/test_bench_cleaner.py                    # 1024 MiB, 32 MiB offset map
    KAFKALOG_BENCH_CLEANER_MB=256 python -m pytest bench/test_bench_cleaner.py -s

The log is written under $TMPDIR with cleanup.policy=delete (the fast append path), then
reopened with cleanup.policy=compact and cleaned in a *separate process* whose peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is reported next to the RSS of the same
process just before cleaning (the interpreter + kafkalog baseline).  The directory is deleted
afterwards.  Settings: ``KAFKALOG_BENCH_CLEANER_MB`` (log size, default 1024),
``KAFKALOG_BENCH_CLEANER_MAP_MB`` (log.cleaner.dedupe.buffer.size, default 32).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

LOG_MB = int(os.environ.get("KAFKALOG_BENCH_CLEANER_MB", "1024"))
MAP_MB = int(os.environ.get("KAFKALOG_BENCH_CLEANER_MAP_MB", "32"))
BASE_TS = 1_700_000_000_000
SEGMENT_BYTES = 128 * 1024 * 1024


def _templates(n_batches: int = 4096, seed: int = 11):
    """~16 KiB client batches of ~100 records: 16-byte keys, 70% from a Pareto-distributed hot
    set (a few very hot keys), 30% uniform over 1M users (a long tail), ~100-byte values, 1%
    tombstones.  The log repeats these 4096 batches (64 MiB) until it reaches its size."""
    from kafkalog.records import MemoryRecordsBuilder

    rnd = random.Random(seed)
    out = []
    i = 0
    for _ in range(n_batches):
        b = MemoryRecordsBuilder(write_limit=16 * 1024)
        while True:
            if rnd.random() < 0.7:
                uid = int(rnd.paretovariate(0.8)) % 50_000
            else:
                uid = rnd.randrange(1_000_000)
            key = b"user-%011d" % uid
            val = (
                None
                if rnd.random() < 0.01
                else (b'{"id":%10d,"u":%8d,"e":"page_view"}' % (i, uid)).ljust(100, b" ")
            )
            if not b.has_room_for(BASE_TS + i, key, val):
                break
            b.append(BASE_TS + i, key, val)
            i += 1
        out.append(b.build())
    return out


def write_log(directory: str, mb: int) -> int:
    from kafkalog.storage.log import Log

    tpl = _templates()
    target = mb * 1024 * 1024
    with Log.open(directory, {"segment.bytes": SEGMENT_BYTES}) as log:
        k = 0
        while log.size < target:
            log.append(tpl[k % len(tpl)])
            k += 1
        log.roll()
        return log.size


_CHILD = r"""
import json, resource, sys, time
from kafkalog.storage.log import Log
from kafkalog.storage.cleaner import Cleaner, CleanerConfig
d, map_mb = sys.argv[1], int(sys.argv[2])
log = Log.open(d, {"cleanup.policy": "compact", "segment.bytes": %d,
                  "delete.retention.ms": 86400000})
cleaner = Cleaner(CleanerConfig(dedupe_buffer_size=map_mb * 1024 * 1024))
def vmrss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1
rss_now = vmrss_kib()
ru0 = resource.getrusage(resource.RUSAGE_SELF)
base_rss = ru0.ru_maxrss
size0 = log.size
t0 = time.perf_counter()
st = log.compact(cleaner, force=True)
dt = time.perf_counter() - t0
ru1 = resource.getrusage(resource.RUSAGE_SELF)
peak = ru1.ru_maxrss
cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
out = dict(seconds=dt, size_before=size0, size_after=log.size, bytes_read=st.bytes_read,
           map_bytes_read=st.map_bytes_read, bytes_written=st.bytes_written, passes=st.passes,
           messages_read=st.messages_read, messages_written=st.messages_written,
           rss_before_kib=base_rss, rss_current_before_kib=rss_now, peak_rss_kib=peak,
           cpu_seconds=cpu, slots=cleaner.offset_map.slots)
log.close()
print(json.dumps(out))
""" % SEGMENT_BYTES


def run(mb: int = LOG_MB, map_mb: int = MAP_MB) -> dict:
    tmp = tempfile.mkdtemp(prefix="kafkalog-bench-cleaner-")
    try:
        d = os.path.join(tmp, "bench-0")
        t0 = time.perf_counter()
        size = write_log(d, mb)
        wrote = time.perf_counter() - t0
        p = subprocess.run(
            [sys.executable, "-c", _CHILD, d, str(map_mb)],
            capture_output=True,
            text=True,
            check=True,
        )
        res = json.loads(p.stdout.strip().splitlines()[-1])
        res["write_seconds"] = wrote
        res["log_mb"] = size / 2**20
        res["throughput_mb_s"] = res["size_before"] / 2**20 / res["seconds"]
        res["throughput_mb_per_cpu_s"] = res["size_before"] / 2**20 / res["cpu_seconds"]
        res["map_mb"] = map_mb
        res["peak_rss_mb"] = res["peak_rss_kib"] / 1024
        res["rss_before_mb"] = res["rss_before_kib"] / 1024
        res["rss_current_before_mb"] = res["rss_current_before_kib"] / 1024
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_bench_cleaner():
    res = run()
    print("\n" + json.dumps(res, indent=1))
    assert res["size_after"] < res["size_before"]
    # bounded memory: the offset map plus I/O buffers, far below the log size
    assert res["peak_rss_mb"] < res["rss_before_mb"] + map_mb_budget(res)


def map_mb_budget(res) -> float:
    return res["map_mb"] * 2 + 128


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
