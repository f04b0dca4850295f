"""CPU time of ``kafkalog dump --deep-iteration --print-data-log`` (and ``stats``) against
``cat`` of the same segment, each a child process writing to /dev/null (user + system time
from getrusage, best of 3).  ``python bench/cli_ratio.py [RECORDS [TREE ...]]`` from the
repository root (default 2M records of the peerbench shape: 16-byte keys, 100-byte values,
~250 MB).  Each TREE (a checkout; its ``src`` goes first on the children's PYTHONPATH) is
measured in turn in the same run, so two trees compare on the same file and the same ``cat``
figure; without one, the children import kafkalog as this process would.

Where ``PYTHONDONTWRITEBYTECODE`` is set (so every start compiles kafkalog's sources, ~35 ms
here, which an installed package does not), each figure is also taken with a bytecode cache
in the temporary directory (``PYTHONPYCACHEPREFIX``), as an installed package runs."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conftest import build_log, make_records  # noqa: E402


def child_cpu(cmd, env=None, reps=3):
    best = None
    for _ in range(reps):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = t if best is None else min(best, t)
    return best


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    trees = sys.argv[2:] or [None]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "00000000000000000000.log")
        with open(path, "wb") as f:
            f.write(build_log(make_records(n)))
        size = os.path.getsize(path)
        py = [sys.executable, "-m", "kafkalog"]
        cat = child_cpu(["cat", path])
        print(f"{size / 1e6:.0f} MB, load {os.getloadavg()[0]:.2f}; cat {cat:.3f} s")
        modes = [("", {})]
        if os.environ.get("PYTHONDONTWRITEBYTECODE"):
            modes = [("sources compiled at each start", {}),
                     ("bytecode cached", {"PYTHONPYCACHEPREFIX": os.path.join(d, "pyc"),
                                          "PYTHONDONTWRITEBYTECODE": None})]
        for label, extra in modes:
            for tree in trees:
                env = dict(os.environ)
                if tree is not None:
                    src = os.path.join(os.path.abspath(tree), "src")
                    old = env.get("PYTHONPATH")
                    env["PYTHONPATH"] = src + (os.pathsep + old if old else "")
                for k, v in extra.items():
                    if v is None:
                        env.pop(k, None)
                    else:
                        env[k] = v
                start = child_cpu(py + ["--version"], env)
                head = ", ".join(x for x in (tree, label) if x)
                print(f"[{head or 'this interpreter'}] interpreter start-up {start:.3f} s")
                dump = ["dump", "--deep-iteration", "--print-data-log", "--files", path]
                for name, args in (("dump --deep-iteration --print-data-log", dump),
                                   ("stats", ["stats", path])):
                    t = child_cpu(py + args, env)
                    print(f"  {name}: {t:.3f} s CPU, {size / t / 1e6:.0f} MB per CPU-s, "
                          f"{t / cat:.1f}x cat ({(t - start) / cat:.1f}x without start-up)")


if __name__ == "__main__":
    main()
