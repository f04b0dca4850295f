"""to_arrow from an S3-compatible server on 127.0.0.1 (moto) vs from local disk vs a Parquet
copy of the same data read through pyarrow from the same server.  One run; ratios.

    PYTHONPATH=src python bench/remote_read.py --batches 20000 --reps 5

Every read pays moto's (Python) request handling, so the S3/Parquet ratio is the meaningful
figure (both cross the same server); local disk is the floor.  Also counts the bytes an
offset-pruned read fetches against a full read.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "remote"))


def best(fn, reps):
    out = None
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--block-size", type=int, default=8 << 20)
    ap.add_argument("--compression", default="snappy",
                    help="codec of the log's batches (the Parquet copy uses snappy)")
    ap.add_argument("--segment-mb", type=int, default=16)
    args = ap.parse_args()

    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    import kafkalog.arrow as ka
    from kafkalog.storage import store_fs as _store_fs

    import s3_support as rc  # tests/remote/s3_support.py: server helpers

    work = tempfile.mkdtemp(prefix="kl-remote-bench-")
    server = None
    try:
        server, url = rc.start_server()
        os.environ.update(AWS_ACCESS_KEY_ID=rc.KEY_ID, AWS_SECRET_ACCESS_KEY=rc.SECRET,
                          AWS_REGION="us-east-1", AWS_ENDPOINT_URL=url)
        local = os.path.join(work, "root", "bench-0")
        rc.write_partition(local, batches=args.batches, per_batch=50, value_bytes=100,
                           segment_bytes=args.segment_mb << 20, compression=args.compression)
        rc.upload_tree(url, os.path.join(work, "root"), rc.BUCKET, "bench")
        uri = f"s3://{rc.BUCKET}/bench/bench-0"
        so = {"block_size": args.block_size}
        cols = ["key", "value", "offset", "timestamp"]

        t_local, tab = best(lambda: ka.to_arrow(local, cols), args.reps)
        # the Parquet copy, on the same server
        s3 = pafs.S3FileSystem(access_key=rc.KEY_ID, secret_key=rc.SECRET, region="us-east-1",
                               endpoint_override=url.split("://")[1], scheme="http")
        pq.write_table(tab, os.path.join(work, "copy.parquet"))
        rc.s3_client(url).put_object(Bucket=rc.BUCKET, Key="bench/copy.parquet",
                                     Body=open(os.path.join(work, "copy.parquet"), "rb").read())
        t_s3, tab_s3 = best(lambda: ka.to_arrow(uri, cols, storage_options=so), args.reps)
        assert tab_s3.equals(tab)
        t_pq, tab_pq = best(lambda: pq.read_table(f"{rc.BUCKET}/bench/copy.parquet",
                                                  filesystem=s3), args.reps)
        assert tab_pq.num_rows == tab.num_rows
        seg_mb = sum(os.path.getsize(os.path.join(local, n)) for n in os.listdir(local)
                     if n.endswith(".log")) / 1e6
        pq_mb = os.path.getsize(os.path.join(work, "copy.parquet")) / 1e6

        counted = []
        orig = _store_fs.ArrowFileSystem.for_uri
        _store_fs.ArrowFileSystem.for_uri = staticmethod(
            lambda u, o=None: counted.append(orig(u, o)) or counted[-1])
        try:
            mid = tab.num_rows // 2
            ka.to_arrow(uri, cols, start_offset=mid, end_offset=mid + 100, storage_options=so)
            pruned = sum(f.bytes_read for f in counted)
            counted.clear()
            ka.to_arrow(uri, cols, storage_options=so)
            full = sum(f.bytes_read for f in counted)
        finally:
            _store_fs.ArrowFileSystem.for_uri = orig

        nseg = sum(1 for n in os.listdir(local) if n.endswith(".log"))
        print(f"rows {tab.num_rows}, log {seg_mb:.1f} MB in {nseg} segment(s) "
              f"({args.compression}), parquet {pq_mb:.1f} MB (snappy), "
              f"block {args.block_size >> 20} MiB, best of {args.reps}")
        print(f"to_arrow local disk      {t_local:8.3f} s  {seg_mb / t_local:8.1f} MB/s")
        print(f"to_arrow s3 (moto)       {t_s3:8.3f} s  {seg_mb / t_s3:8.1f} MB/s")
        print(f"parquet  s3 (moto)       {t_pq:8.3f} s  (pyarrow.parquet.read_table)")
        print(f"ratio s3 / parquet-s3    {t_s3 / t_pq:8.2f}x   (goal <= 1.2x)")
        print(f"ratio s3 / local         {t_s3 / t_local:8.2f}x")
        print(f"offset-pruned read (100 offsets) fetched {pruned} of {full} bytes "
              f"({100 * pruned / full:.2f}%)")
    finally:
        if server is not None:
            rc.stop_server(server)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
