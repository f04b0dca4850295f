"""Child process of test_concurrent_readers: reads a partition directory that another process
is appending to (and rolling), through the raw files and through kafkalog's read-only APIs,
until ``<dir>.stop`` appears; prints one JSON line with what it saw.

Rules checked on every pass (any violation is reported in ``errors``):

* ``MemoryRecords`` over the bytes of a ``.log`` file yields only CRC-valid batches with
  increasing offsets, and a torn tail (the writer's bytes not all there yet) shows up as
  ``truncated_bytes``, never as an exception;
* a read-only ``Segment`` walks the same complete batches;
* a read-only ``Log`` opens and iterates batches with contiguous offsets;
* every record's value starts with ``r<offset>|``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def _check_batches(batches, where, errors, prev_last=None):
    n = 0
    for b in batches:
        try:
            b.ensure_valid()
        except Exception as e:  # pragma: no cover - reported
            errors.append(f"{where}: invalid batch at offset {b.base_offset}: {e}")
            return n, prev_last
        if prev_last is not None and b.base_offset != prev_last + 1:
            errors.append(f"{where}: offset {b.base_offset} after {prev_last}")
        for r in b:
            if not r.value.startswith(b"r%d|" % r.offset):
                errors.append(f"{where}: record {r.offset} holds {r.value[:20]!r}")
                break
        prev_last = b.last_offset
        n += 1
    return n, prev_last


def main() -> None:
    directory = sys.argv[1]
    stop = directory + ".stop"
    from kafkalog import MemoryRecords
    from kafkalog.storage.files import parse_segment_file_name
    from kafkalog.storage.log import Log
    from kafkalog.storage.segment import Segment

    errors = []
    stats = {"passes": 0, "files": 0, "batches": 0, "torn_tails": 0, "log_opens": 0}
    print("READY", flush=True)
    while not os.path.exists(stop) and len(errors) < 5:
        stats["passes"] += 1
        try:
            names = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
        except FileNotFoundError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            stats["files"] += 1
            try:
                mr = MemoryRecords(data)
                n, _ = _check_batches(mr, path, errors)
                stats["batches"] += n
                if mr.truncated_bytes:
                    stats["torn_tails"] += 1
                if mr.valid_bytes + mr.truncated_bytes != len(data):
                    errors.append(f"{path}: valid {mr.valid_bytes} + torn {mr.truncated_bytes} "
                                  f"!= {len(data)} bytes")
            except Exception:
                errors.append(f"{path}: MemoryRecords: {traceback.format_exc(limit=3)}")
            # the read-only segment API over the same file
            base = parse_segment_file_name(name).base_offset
            try:
                seg = Segment.open(directory, base, read_only=True)
            except FileNotFoundError:
                continue
            try:
                _check_batches((b for _p, b in seg.iter_batches()), f"Segment {path}", errors)
            except Exception:
                errors.append(f"{path}: Segment: {traceback.format_exc(limit=3)}")
            finally:
                seg.close()
        if stats["passes"] % 4 == 1:
            # the read-only Log API over the whole directory
            try:
                log = Log.open(directory, read_only=True)
            except FileNotFoundError:
                continue
            except Exception:
                errors.append(f"Log.open(read_only): {traceback.format_exc(limit=4)}")
                continue
            try:
                stats["log_opens"] += 1
                _check_batches(log.iter_batches(), f"Log {directory}", errors)
            except Exception:
                errors.append(f"Log.iter_batches: {traceback.format_exc(limit=4)}")
            finally:
                log.close()
    print(json.dumps({"errors": errors, **stats}), flush=True)


if __name__ == "__main__":
    main()
