"""``to_arrow`` of a log root read from an S3-compatible server on 127.0.0.1 (moto, started
here) against the same read from local disk and against a Parquet copy of the same table read
with pyarrow from the same server, in one run (best of ``--reps``, wall clock).

    python bench/remote_arrow_ratio.py [--records 400000] [--reps 3]

moto keeps objects in its own process's memory and serves them over HTTP on the loopback, so
this measures kafkalog's reading (listing, ranged reads, windows, decoding) against pyarrow's
Parquet reader under the same server, not a real store's bandwidth.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--window-mib", type=float, default=None, help="kafkalog.arrow.REMOTE_READ_BYTES")
    a = ap.parse_args()
    import pyarrow.parquet as pq

    import kafkalog.arrow as ka
    from kafkalog.arrow import to_arrow
    from kafkalog.storage import remote
    from kafkalog.tools.demo import generate

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                          AWS_REGION="us-east-1", AWS_ENDPOINT_URL=url, AWS_EC2_METADATA_DISABLED="true")
        if a.window_mib:
            ka.REMOTE_READ_BYTES = int(a.window_mib * (1 << 20))
        tmp = tempfile.mkdtemp(prefix="kl-remote-bench-")
        root = os.path.join(tmp, "logs")
        generate(root, a.records, segment_bytes=64 << 20, codecs=["none"])
        parts = sorted(n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n)))
        import boto3  # moto's dependency: one PUT per object (moto's multipart completion fails)

        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
        s3.create_bucket(Bucket="bench")
        for p in parts:
            for f in os.listdir(os.path.join(root, p)):
                with open(os.path.join(root, p, f), "rb") as fh:
                    s3.put_object(Bucket="bench", Key=f"logs/{p}/{f}", Body=fh.read())
        cols = ["key", "value", "offset", "timestamp"]
        tables = [to_arrow(os.path.join(root, p), cols) for p in parts]
        for p, t in zip(parts, tables):
            local_pq = os.path.join(tmp, f"{p}.parquet")
            pq.write_table(t, local_pq, compression="none")
            with open(local_pq, "rb") as fh:
                s3.put_object(Bucket="bench", Key=f"parquet/{p}.parquet", Body=fh.read())
        size = sum(os.path.getsize(os.path.join(root, p, f)) for p in parts
                   for f in os.listdir(os.path.join(root, p)) if f.endswith(".log"))
        rows = sum(t.num_rows for t in tables)
        s3fs, _ = remote.resolve("s3://bench")

        def local():  # one call over every partition, as a reader of a whole root does
            return to_arrow([os.path.join(root, p) for p in parts], cols).num_rows

        def from_s3():
            return to_arrow([f"s3://bench/logs/{p}" for p in parts], cols).num_rows

        def parquet():
            return sum(pq.read_table(f"bench/parquet/{p}.parquet", filesystem=s3fs._fs).num_rows
                       for p in parts)

        best = {}
        for _ in range(a.reps):
            for name, fn in (("local", local), ("s3", from_s3), ("parquet-s3", parquet)):
                t = time.perf_counter()
                assert fn() == rows
                d = time.perf_counter() - t
                best[name] = min(best.get(name, d), d)
        print(f"window {ka.REMOTE_READ_BYTES / (1 << 20):g} MiB; "
              f"{rows} records, {size / 1e6:.0f} MB of segments in {len(parts)} partitions, "
              f"load {os.getloadavg()[0]:.2f}, best of {a.reps}")
        for name, d in best.items():
            print(f"{name:11s} {d:7.3f} s  {size / d / 1e6:7.0f} MB/s")
        print(f"to_arrow from S3 / from local disk: {best['s3'] / best['local']:.2f}x; "
              f"/ Parquet from the same S3 server: {best['s3'] / best['parquet-s3']:.2f}x")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
