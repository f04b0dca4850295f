"""Run one kafkalog fuzz harness.

    python fuzz/run.py HARNESS [--seconds N] [--corpus DIR] [--no-atheris] [--seed S]

With atheris installed (and not ``--no-atheris``) this is a coverage-guided libFuzzer run
over ``--corpus`` (seeded from the conformance corpus on first use); libFuzzer's own flags may
follow ``--``.  Without atheris it runs the built-in random mutator over the seeds for the
given time.  A failing input is written to ``<corpus>/../crash-<harness>-<sha1>`` and the run
exits non-zero.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import os
import random
import struct
import sys
import time
from collections.abc import Iterator
from typing import Callable

_INTERESTING32 = [0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 2**31 - 1, -(2**31),
                  2**31 - 61, 2**31 - 12, 61, 49, 14, 26]


# Python modules to instrument for coverage (the compiled twins cannot be).
_INSTRUMENTED = (
    "kafkalog", "kafkalog._batch_py", "kafkalog._legacy_py", "kafkalog._varint_py",
    "kafkalog._crc_py", "kafkalog.compression", "kafkalog.control", "kafkalog.tools.decoders",
    "kafkalog.storage.files", "kafkalog.storage.checkpoints", "kafkalog.storage.index",
    "kafkalog.storage.txn_index", "kafkalog.storage.log", "kafkalog.storage.producer_state",
    "kafkalog.storage.segment", "kafkalog.storage.file_records", "kafkalog.storage.framing",
    "kafkalog._arrow_py", "kafkalog.arrow",
)


def mutate(data: bytes, rng: random.Random, others: list[bytes]) -> bytes:
    """One to four random edits: bit flip, byte set, interesting int32, insert, delete,
    duplicate a slice, splice with another seed, truncate."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        n = len(buf)
        if op == 0 and n:
            i = rng.randrange(n)
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            buf[rng.randrange(n)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif op == 2 and n >= 4:
            i = rng.randrange(n - 3)
            v = rng.choice(_INTERESTING32)
            struct.pack_into(">I", buf, i, v & 0xFFFFFFFF)
        elif op == 3:
            i = rng.randrange(n + 1)
            buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 4 and n:
            i = rng.randrange(n)
            del buf[i : i + rng.randint(1, 16)]
        elif op == 5 and n:
            i = rng.randrange(n)
            j = min(n, i + rng.randint(1, 64))
            k = rng.randrange(n + 1)
            buf[k:k] = buf[i:j]
        elif op == 6 and others:
            o = rng.choice(others)
            if o:
                i = rng.randrange(len(o))
                buf += o[i : i + rng.randint(1, 256)]
        elif op == 7 and n:
            del buf[rng.randrange(n) :]
        elif op == 8 and n >= 8:
            i = rng.randrange(n - 7)
            struct.pack_into(">q", buf, i, rng.choice((0, -1, 2**63 - 1, -(2**63), 2**31)))
    return bytes(buf)


def mutations(seeds: list[bytes], count: int, seed: int = 0) -> Iterator[bytes]:
    rng = random.Random(seed)
    pool = list(seeds) or [b""]
    for _ in range(count):
        yield mutate(rng.choice(pool), rng, pool)


def _save_crash(corpus: str, name: str, data: bytes) -> str:
    path = os.path.join(os.path.dirname(os.path.abspath(corpus)),
                        f"crash-{name}-{hashlib.sha1(data).hexdigest()[:16]}")
    with open(path, "wb") as f:
        f.write(data)
    return path


def run_mutator(name: str, check: Callable[[bytes], None], seeds: list[bytes], seconds: float,
                corpus: str, seed: int) -> int:
    rng = random.Random(seed)
    pool = list(seeds) or [b""]
    t0 = time.time()
    n = 0
    for s in pool:
        check(s)
        n += 1
    while time.time() - t0 < seconds:
        data = mutate(rng.choice(pool), rng, pool)
        try:
            check(data)
        except BaseException:
            print(f"crash input saved to {_save_crash(corpus, name, data)}", file=sys.stderr)
            raise
        n += 1
    dt = time.time() - t0
    print(f"#{n} DONE (mutator) harness={name} execs={n} time={dt:.1f}s exec/s={n / dt:.0f}")
    return 0


def _setup_path() -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    # An installed kafkalog (or one on PYTHONPATH) wins; else the in-tree build under src/.
    if importlib.util.find_spec("kafkalog") is None:
        src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
        sys.path.insert(1, src)


def main() -> int:
    _setup_path()
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser()
    ap.add_argument("harness")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--corpus", default=None)
    ap.add_argument("--no-atheris", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    use_atheris = not args.no_atheris
    if use_atheris:
        try:
            import atheris
        except ImportError:
            print("atheris is not installed: the random mutator runs instead", file=sys.stderr)
            use_atheris = False
    if use_atheris:
        with atheris.instrument_imports(include=["kafkalog"]):
            for mod in _INSTRUMENTED:
                try:
                    importlib.import_module(mod)
                except ImportError:  # kafkalog.arrow without pyarrow
                    pass
    import harnesses
    import kafkalog

    compiled = [label for label, _m in harnesses.BATCH if label == "cython"]
    print(f"kafkalog from {os.path.dirname(kafkalog.__file__)}: twins compared: "
          f"{'compiled + pure' if compiled else 'pure only'}", file=sys.stderr)

    if args.harness not in harnesses.HARNESSES:
        ap.error(f"unknown harness {args.harness!r} (choose from {', '.join(harnesses.HARNESSES)})")
    check = harnesses.HARNESSES[args.harness][0]
    base = os.environ.get("KAFKALOG_FUZZ_DIR", os.path.join("/tmp", "kafkalog-fuzz"))
    corpus = args.corpus or os.path.join(base, "corpus", args.harness)
    if not os.path.isdir(corpus) or not os.listdir(corpus):
        n = harnesses.write_seeds(args.harness, corpus)
        print(f"seeded {corpus} with {n} inputs", file=sys.stderr)

    if not use_atheris:
        seeds = []
        for fn in sorted(os.listdir(corpus)):
            with open(os.path.join(corpus, fn), "rb") as f:
                seeds.append(f.read())
        return run_mutator(args.harness, check, seeds, args.seconds, corpus, args.seed)

    crash_prefix = os.path.join(os.path.dirname(os.path.abspath(corpus)), f"{args.harness}-")
    flags = [
        sys.argv[0],
        corpus,
        f"-max_total_time={int(args.seconds)}",
        f"-artifact_prefix={crash_prefix}",
        "-max_len=65536",
        "-timeout=10",
        "-rss_limit_mb=2048",
        "-print_final_stats=1",
        f"-seed={args.seed}" if args.seed else "-seed=0",
    ] + extra
    atheris.Setup(flags, check)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
