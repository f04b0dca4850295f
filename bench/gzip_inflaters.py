"""Inflate the same gzip members with each installed inflater (zlib, isal, zlib-ng) through
kafkalog.compression, interleaved in one process (CPU time per member, and the ratio to zlib).
``python bench/gzip_inflaters.py [RECORDS]``, from the repository root: the members are the
records sections of the v2-gzip batches that bench/decode_ratio.py decodes."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conftest import build_log, make_records  # noqa: E402

import kafkalog  # noqa: E402
from kafkalog import compression  # noqa: E402


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    buf = build_log(make_records(n), 1, 2)
    members = [bytes(b.view()[61:]) for b in kafkalog.MemoryRecords(buf, check_crcs=False)]
    names = []
    for name in compression.GZIP_INFLATERS:
        try:
            compression.set_gzip_inflater(name)
            names.append(name)
        except kafkalog.KafkaLogError as exc:
            print(f"{name}: not installed ({exc})")
    times = {name: [] for name in names}
    for _ in range(7):
        for name in names:
            compression.set_gzip_inflater(name)
            t = time.process_time()
            for m in members:
                compression.decompress(1, m)
            times[name].append(time.process_time() - t)
    avg = sum(map(len, members)) / len(members)
    print(f"{len(members)} members of {avg / 1024:.1f} KiB, load {os.getloadavg()[0]:.2f}")
    base = statistics.median(times["zlib"])
    for name in names:
        t = statistics.median(times[name])
        print(f"{name:8s} {t / len(members) * 1e6:6.1f} us per member  {base / t:.2f}x zlib")


if __name__ == "__main__":
    main()
