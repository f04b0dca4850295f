"""Child process of test_log_crash: appends to a Log until it is killed.

Usage: python _crash_child.py <partition dir> <seed> <mode>

Every record's value starts with ``r<offset>|`` so the parent can check each offset holds the
record written for it.  After each flush becomes durable the child prints ``F <recovery
point>``; before a truncation it prints ``T <target>``; ``READY <log end offset>`` once open.
"""

from __future__ import annotations

import random
import sys

from kafkalog.records import MemoryRecordsBuilder
from kafkalog.storage.log import Log

BASE_TS = 1_700_000_000_000


def config_for(seed: int, mode: str) -> dict:
    rng = random.Random(seed)
    config = {
        "segment.bytes": rng.choice([4096, 8192, 65536]),
        "index.interval.bytes": rng.choice([0, 100, 4096]),
        "segment.index.bytes": rng.choice([64, 4096, 10485760]),
    }
    if mode == "flush_messages":
        config["flush.messages"] = rng.choice([1, 7, 50])
    elif mode == "flush_ms":
        config["flush.ms"] = rng.choice([1, 10])
    if rng.random() < 0.5:
        config["retention.bytes"] = rng.choice([20000, 100000])
    return config


def main() -> None:
    directory, seed, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rng = random.Random(seed * 7919 + 1)
    log = Log.open(directory, config_for(seed, mode))
    out = sys.stdout
    out.write(f"READY {log.log_end_offset}\n")
    out.flush()
    next_offset = log.log_end_offset
    batch_starts = []
    reported = -1
    while True:
        n = rng.randint(1, 12)
        b = MemoryRecordsBuilder(compression_type=rng.choice(["none", "none", "gzip"]))
        for i in range(n):
            pad = b"x" * rng.randint(0, 200)  # a batch stays below 4096 bytes
            b.append(BASE_TS + next_offset + i, None, b"r%d|" % (next_offset + i) + pad)
        info = log.append(b.build())
        assert info.first_offset == next_offset, (info, next_offset)
        batch_starts.append(next_offset)
        next_offset = info.last_offset + 1
        r = rng.random()
        if mode == "explicit" and r < 0.15:
            log.flush()
        elif r < 0.17:
            log.roll()
        elif r < 0.19:
            log.delete_retention()
        elif r < 0.195 and len(batch_starts) > 3:
            target = batch_starts[-rng.randint(1, 3)]
            if target >= log.log_start_offset:
                out.write(f"T {target}\n")
                out.flush()
                log.truncate_to(target)
                while batch_starts and batch_starts[-1] >= target:
                    batch_starts.pop()
                next_offset = log.log_end_offset
                assert next_offset == target
        rp = log.recovery_point
        if rp != reported:
            reported = rp
            out.write(f"F {rp}\n")
            out.flush()


if __name__ == "__main__":
    main()
