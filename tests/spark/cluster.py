"""A Spark standalone cluster on this machine: one master and two workers, each its own JVM
(started with ``spark-class`` from the installed pyspark), bound to 127.0.0.1 on free ports and
stopped by process id.  A driver program runs against it in a subprocess (one SparkContext per
process: the test process may already hold the local ``spark`` session).

Used by tests/remote/test_spark_cluster.py; see :func:`start_cluster` and :func:`run_driver`.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import kafkalog


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_home() -> Optional[str]:
    try:
        import pyspark
    except ImportError:
        return None
    return str(Path(pyspark.__file__).resolve().parent)


def worker_env(extra: Optional[dict] = None) -> dict:
    """The environment for the master, workers and driver: this interpreter as every Python
    worker's, this kafkalog importable, the same twin setting, everything on 127.0.0.1."""
    env = dict(os.environ)
    pkg_parent = str(Path(kafkalog.__file__).resolve().parent.parent)
    pp = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + pp if pp else "")
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["SPARK_LOCAL_HOSTNAME"] = "127.0.0.1"
    home = _spark_home()
    if home:
        env["SPARK_HOME"] = home
    env.update(extra or {})
    return env


class Cluster:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: List[subprocess.Popen] = []
        self.master_url = ""
        self.logs: List[Path] = []

    def _start(self, name: str, args: List[str], env: dict) -> subprocess.Popen:
        home = env["SPARK_HOME"]
        log = self.workdir / f"{name}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            p = subprocess.Popen(
                [os.path.join(home, "bin", "spark-class")] + args,
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(self.workdir),
                start_new_session=True)
        self.procs.append(p)
        return p

    def log_tail(self, n: int = 3000) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-n:]}"
                         for p in self.logs if p.exists())

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
        self.procs = []


def start_cluster(workdir: Path, env: dict, workers: int = 2, timeout: float = 90.0) -> Cluster:
    """Start a master and ``workers`` workers (1 core, 512 MiB each); return once every worker
    has registered with the master.  Raises RuntimeError (with the daemons' logs) when that
    does not happen within ``timeout`` seconds; the daemons are stopped then."""
    c = Cluster(workdir)
    port, ui = _free_port(), _free_port()
    c.master_url = f"spark://127.0.0.1:{port}"
    try:
        c._start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                            "--port", str(port), "--webui-port", str(ui)], env)
        for i in range(workers):
            wdir = workdir / f"worker{i}"
            wdir.mkdir(exist_ok=True)
            c._start(f"worker{i}", [
                "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                "--port", str(_free_port()), "--webui-port", str(_free_port()),
                "--cores", "1", "--memory", "768m", "--work-dir", str(wdir), c.master_url],
                env)
        deadline = time.monotonic() + timeout
        master_log = workdir / "master.log"
        while True:
            text = master_log.read_text(errors="replace") if master_log.exists() else ""
            if text.count("Registering worker") >= workers:
                return c
            dead = [p for p in c.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError("the Spark standalone cluster did not start"
                                   + (" (a daemon exited)" if dead else "") + ":\n"
                                   + c.log_tail())
            time.sleep(0.3)
    except BaseException:
        c.stop()
        raise


# The driver program: reads (and optionally writes) through the cluster, saves what it read as
# an Arrow IPC file.  argv: master_url, json of {"read": path, "options": {...}, "out": file,
# "write": path or null, "write_options": {...}, "format": "kafkalog" (default) or "parquet"
# (Spark's own reader), "write_parquet": path or null (Spark's own writer), "out_back": file
# (with write_parquet: what Spark's own Parquet reader reads back from there), "conf": {extra
# session settings, e.g. spark.jars and S3A's}}.
DRIVER = r'''
import json, sys, warnings
warnings.filterwarnings("ignore", category=FutureWarning)
import pyarrow as pa
from pyspark.sql import SparkSession
import kafkalog.spark as ks
master, job = sys.argv[1], json.loads(sys.argv[2])
spark = (SparkSession.builder.master(master).appName("kafkalog-cluster-test")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
         .config("spark.cores.max", "2").config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.shuffle.partitions", "2"))
for k, v in job.get("conf", {}).items():
    spark = spark.config(k, v)
for k, v in __import__("os").environ.items():
    if k.startswith("AWS_") or k in ("PYTHONPATH", "KAFKALOG_PURE_PYTHON"):
        spark = spark.config("spark.executorEnv." + k, v)  # every executor's store access
spark = spark.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
ks.register(spark)
df = spark.read.format(job.get("format", "kafkalog")).options(**job.get("options", {})) \
    .load(job["read"])
t = df.toArrow()
with pa.OSFile(job["out"], "wb") as f, pa.ipc.new_file(f, t.schema) as w:
    w.write_table(t)
# which executors (hosts:pids) served the read: proof that the workers' Python did it
pids = sorted(set(spark.sparkContext.parallelize(range(8), 4)
                  .map(lambda _: __import__("os").getpid()).collect()))
info = {"rows": t.num_rows, "python_worker_pids": pids,
        "executors": spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1}
if job.get("write_parquet"):
    df.write.mode("overwrite").parquet(job["write_parquet"])
    info["written"] = job["write_parquet"]
    if job.get("out_back"):
        back = spark.read.parquet(job["write_parquet"]).toArrow()
        with pa.OSFile(job["out_back"], "wb") as f, pa.ipc.new_file(f, back.schema) as w:
            w.write_table(back)
if job.get("write"):
    ks.write(df, job["write"], mode="append", **job.get("write_options", {}))
    info["written"] = job["write"]
print("KAFKALOG-DRIVER " + json.dumps(info))
spark.stop()
'''


def run_driver(master_url: str, job: dict, env: dict, workdir: Path, timeout: float = 300.0):
    """Run :data:`DRIVER` with ``job``; return (the table it read, its info dict)."""
    import json

    import pyarrow as pa

    script = workdir / "driver.py"
    script.write_text(DRIVER)
    r = subprocess.run([sys.executable, str(script), master_url, json.dumps(job)], env=env,
                       cwd=str(workdir), capture_output=True, text=True, timeout=timeout)
    lines = [x for x in r.stdout.splitlines() if x.startswith("KAFKALOG-DRIVER ")]
    if r.returncode != 0 or not lines:
        raise AssertionError(f"driver failed (rc={r.returncode}):\n{r.stdout[-3000:]}\n"
                             f"{r.stderr[-6000:]}")
    info = json.loads(lines[-1].split(" ", 1)[1])
    with pa.memory_map(job["out"]) as f:
        table = pa.ipc.open_file(f).read_all()
    return table, info
