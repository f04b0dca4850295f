"""Cost of the ``headers`` column of ``to_arrow`` against the other four record columns
together (key, value, offset, timestamp), and ns per record of ``to_arrow`` on buffers of
10 MB, 100 MB and 1 GB (is it linear?), CPU time of this process, best of 5.

    python bench/arrow_headers_ratio.py [RECORDS]      # default 500k records, 2 headers each
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conftest import build_log, make_records  # noqa: E402

from kafkalog.arrow import to_arrow  # noqa: E402

FOUR = ["key", "value", "offset", "timestamp"]


def best(fn, reps=5):
    out = None
    for _ in range(reps):
        t = time.process_time()
        fn()
        d = time.process_time() - t
        out = d if out is None else min(out, d)
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
    load = os.getloadavg()[0]
    buf = build_log(make_records(n, headers=True))
    four = best(lambda: to_arrow(buf, FOUR))
    five = best(lambda: to_arrow(buf, FOUR + ["headers"]))
    hdr = best(lambda: to_arrow(buf, ["headers"]))
    print(f"{n} records with 2 headers, {len(buf) / 1e6:.0f} MB, load {load:.2f}")
    print(f"four columns {four * 1e9 / n:6.1f} ns/rec; + headers {five * 1e9 / n:6.1f} ns/rec; "
          f"headers alone {hdr * 1e9 / n:6.1f} ns/rec")
    print(f"headers column / the other four: {(five - four) / four:.2f}x (added cost), "
          f"{hdr / four:.2f}x (alone)")
    plain = build_log(make_records(100_000))
    for mb in (10, 100, 1000):
        reps = max(1, mb * 1_000_000 // len(plain))
        big = plain * reps
        recs = 100_000 * reps
        t0 = os.times()
        to_arrow(big, FOUR)
        t1 = os.times()
        print(f"{mb:5d} MB: user {(t1.user - t0.user) * 1e9 / recs:6.1f} ns/rec, "
              f"system {(t1.system - t0.system) * 1e9 / recs:6.1f} ns/rec (first call)")
        del big
    # The same 1 GB decode in a fresh process whose memory was touched once before (3 GB
    # written and freed): on a virtual machine the first touch of guest memory the host has not
    # backed yet is what costs, not the decoder.
    child = (
        "import os, sys\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        "from conftest import build_log, make_records\n"
        "from kafkalog.arrow import to_arrow\n"
        "plain = build_log(make_records(100_000))\n"
        "reps = max(1, 1000 * 1_000_000 // len(plain)); big = plain * reps\n"
        "t0 = os.times(); x = bytearray(3 << 30)\n"
        "for i in range(0, len(x), 4096): x[i] = 1\n"
        "del x; t1 = os.times()\n"
        f"t = to_arrow(big, {FOUR!r}); t2 = os.times(); n = 100_000 * reps\n"
        "print(f' 1000 MB after touching 3 GB once ({t1.system - t0.system:.2f} s of system "
        "time for that): user {(t2.user - t1.user) * 1e9 / n:6.1f} ns/rec, system "
        "{(t2.system - t1.system) * 1e9 / n:6.1f} ns/rec (first call)')\n"
    )
    import subprocess

    subprocess.run([sys.executable, "-c", child], check=True)


if __name__ == "__main__":
    main()
