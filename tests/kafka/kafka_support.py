"""Apache Kafka itself, run by the tests: its jars, a single-node KRaft broker, and a small
Java client (``KafkaTool.java``) on the same classpath.

* The jars are the runtime classpath named by ``pom.xml``, fetched with Maven into a cache
  outside the checkout: ``$KAFKALOG_KAFKA_CACHE`` (default ``~/.cache/kafkalog/kafka``)
  ``/<kafka version>/libs``.  A marker file holding the pom's hash says the copy is complete,
  so a rerun downloads nothing.  Fetch them ahead of a test run with
  ``python tests/kafka/kafka_support.py fetch`` (prints the libs directory).
* :class:`Broker` formats a log directory (``kafka.tools.StorageTool format``, a random cluster
  id) and starts ``kafka.Kafka server.properties``: one process that is broker and controller,
  listening on free 127.0.0.1 ports, its log (log4j2) in ``<work>/broker.log``.  ``stop()``
  sends SIGTERM (a clean shutdown), ``kill()`` SIGKILL (an unclean one), by pid.
* :func:`run_tool` runs ``KafkaTool`` (compiled once into the cache) with a JSON spec on
  stdin and returns its JSON-line output.
* :func:`fetch_spark_connector` fetches Spark's own Kafka connector (``spark-connector.pom.xml``)
  for the installed pyspark: pyspark's version when Maven Central serves it, else the newest
  release Central serves of the same major version (:func:`pick_connector_version`), without
  the Hadoop, Scala and SLF4J jars pyspark ships, into
  ``$KAFKALOG_KAFKA_CACHE/spark-connector-<pyspark version>/libs`` (``python
  tests/kafka/kafka_support.py fetch-spark-connector`` prints the choice and the jars).

Only a missing ``java``/``javac``/``mvn`` or an unreachable Maven Central is a reason to skip
(:class:`Unavailable`); anything else that goes wrong fails the test.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
TOOL_SOURCE = HERE / "KafkaTool.java"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
MAVEN_CENTRAL = ("repo.maven.apache.org", 443)


class Unavailable(Exception):
    """Kafka cannot be run here for a reason that is not a fault of the code under test."""


def kafka_version(pom: Path = POM) -> str:
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom.read_text())
    assert m, f"no <kafka.version> in {pom}"
    return m.group(1)


KAFKA_VERSION = kafka_version()


def cache_dir(pom: Path = POM) -> Path:
    """The cache of the Kafka release ``pom`` names (``pom.xml``'s by default)."""
    root = os.environ.get("KAFKALOG_KAFKA_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "kafkalog", "kafka")
    return Path(root) / kafka_version(pom)


def _digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _which(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise Unavailable(f"{name} is not on PATH (the Kafka tests need Java 17+ and Maven)")
    return path


def _central_reachable(timeout: float = 10.0) -> bool:
    try:
        with socket.create_connection(MAVEN_CENTRAL, timeout=timeout):
            return True
    except OSError:
        return False


class _FileLock:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)

    def __enter__(self):
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def fetch_jars(pom: Path = POM) -> Path:
    """The directory of the jars ``pom`` names (the broker's of ``pom.xml`` by default), fetched
    with Maven on first use (then reused)."""
    cache = cache_dir(pom)
    libs = cache / "libs"
    marker = cache / "libs.complete"
    digest = _digest(pom)
    if marker.is_file() and marker.read_text().strip() == digest and libs.is_dir():
        return libs
    mvn = _which("mvn")
    with _FileLock(cache / ".lock"):
        if marker.is_file() and marker.read_text().strip() == digest and libs.is_dir():
            return libs
        tmp = cache / f"libs.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        proc = subprocess.run(
            [mvn, "-B", "-q", "-f", str(pom), f"{DEPENDENCY_PLUGIN}:copy-dependencies",
             "-DincludeScope=runtime", f"-DoutputDirectory={tmp}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            if not _central_reachable():
                raise Unavailable(
                    f"Maven Central ({MAVEN_CENTRAL[0]}) is unreachable and the Kafka "
                    f"{kafka_version(pom)} jars are not cached in {libs}")
            raise RuntimeError(f"mvn could not fetch the Kafka jars:\n{proc.stdout[-4000:]}")
        if marker.exists():
            marker.unlink()
        shutil.rmtree(libs, ignore_errors=True)
        os.rename(tmp, libs)
        marker.write_text(digest + "\n")
    return libs


def classpath(libs: Path) -> str:
    return str(libs / "*")


def tool_classes(libs: Path, pom: Path = POM) -> Path:
    """KafkaTool compiled once (per version of its source) against ``libs`` (the jars of
    ``pom``) into that release's cache."""
    cache = cache_dir(pom)
    out = cache / f"tool-{_digest(TOOL_SOURCE, pom)}"
    if (out / "KafkaTool.class").is_file():
        return out
    javac = _which("javac")
    with _FileLock(cache / ".lock"):
        if (out / "KafkaTool.class").is_file():
            return out
        tmp = cache / f"tool.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        proc = subprocess.run([javac, "-cp", classpath(libs), "-d", str(tmp), str(TOOL_SOURCE)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"javac {TOOL_SOURCE.name} failed:\n{proc.stdout[-4000:]}")
        os.rename(tmp, out)
    return out


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    return _which("java")


def prepare() -> Dict[str, Path]:
    """Everything the Kafka tests need on disk: the jars and the compiled tool (or
    :class:`Unavailable`)."""
    java()
    libs = fetch_jars()
    return {"libs": libs, "tool": tool_classes(libs)}


# -- the tool ------------------------------------------------------------------------------------
_CLIENT_JVM = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


def tool_command(env: Dict[str, Path]) -> List[str]:
    cp = os.pathsep.join([str(env["tool"]), classpath(env["libs"])])
    return [java(), *_CLIENT_JVM, "-cp", cp, "KafkaTool"]


def parse_lines(text: str) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def run_tool(env: Dict[str, Path], spec: Dict[str, Any],
             timeout: float = 180) -> List[Dict[str, Any]]:
    """Run KafkaTool on ``spec``; its JSON lines (a non-zero exit raises with its stderr)."""
    proc = subprocess.run(tool_command(env), input=json.dumps(spec), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"KafkaTool failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    return parse_lines(proc.stdout)


# -- the broker ----------------------------------------------------------------------------------
def _ephemeral_range() -> Tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A free 127.0.0.1 port BELOW the kernel's ephemeral range.

    A broker's port must never be one the OS can hand out to a ``bind(0)``: the clients a test
    leaves behind (Spark's Kafka connector caches its producers in the JVM, which outlives the
    Spark session) keep reconnecting to a stopped broker's port, and when a later Spark session's
    Python-worker server socket is given that same ephemeral port, the stale producer connects
    to it and the worker's authentication fails ("Python worker failed to connect back")."""
    lo, _hi = _ephemeral_range()
    top = max(lo, 12000)
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        port = rng.randrange(10000, top)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free 127.0.0.1 port in 10000..{top} after 200 tries")


_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {path}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
"""

_BROKER_JVM = ["-Xmx512m", "-Xms128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.awt.headless=true"]


# what a one-broker test cluster needs whatever its mode (KRaft here, ZooKeeper in zk_broker.py):
# replication factor 1 for the internal topics, no waiting, few threads on a 2-core machine
SINGLE_NODE: Dict[str, Any] = {
    "num.partitions": 1,
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.state.log.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
    "num.network.threads": 2,
    "num.io.threads": 2,
    "background.threads": 2,
    "num.recovery.threads.per.data.dir": 1,
}


class Broker:
    """A single-node KRaft Kafka (broker + controller in one process) in ``work``.

    ``log_dir`` holds the partitions (and ``__cluster_metadata-0``); ``log_path`` is the
    broker's own log.  ``overrides`` replace or add server properties for the next start."""

    started_line = "Kafka Server started"  # the broker's log line that ends its start-up

    def __init__(self, env: Dict[str, Path], work: Path,
                 overrides: Optional[Dict[str, Any]] = None):
        self.env = env
        self.work = Path(work)
        self.log_dir = self.work / "data"
        self.log_path = self.work / "broker.log"
        self.console_path = self.work / "broker.console"
        self.port = free_port()
        self.controller_port = free_port()
        self.overrides = dict(overrides or {})
        self.proc: Optional[subprocess.Popen] = None
        self.cluster_id: Optional[str] = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> Dict[str, Any]:
        props: Dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            **SINGLE_NODE,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "log.cleaner.threads": 1,
            "log.cleaner.dedupe.buffer.size": 8 << 20,
            "log.cleaner.backoff.ms": 300,
            "log.initial.task.delay.ms": 0,
            "log.retention.check.interval.ms": 500,
        }
        props.update(self.overrides)
        return props

    def _write_config(self) -> Path:
        self.work.mkdir(parents=True, exist_ok=True)
        cfg = self.work / "server.properties"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.work / "log4j2.properties").write_text(_LOG4J2.format(path=self.log_path))
        return cfg

    def _java(self, main: str, *args: str) -> List[str]:
        return [java(), *_BROKER_JVM,
                f"-Dlog4j2.configurationFile={self.work / 'log4j2.properties'}",
                "-cp", classpath(self.env["libs"]), main, *args]

    def format(self) -> None:
        cfg = self._write_config()
        self.cluster_id = base64_uuid()
        proc = subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                                         "-c", str(cfg)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{proc.stdout[-4000:]}")

    def start(self, timeout: float = 120) -> None:
        assert self.proc is None, "already started"
        cfg = self._write_config()
        started_at = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.console_path, "ab") as console:
            self.proc = subprocess.Popen(self._java("kafka.Kafka", str(cfg)), stdout=console,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                rc, self.proc = self.proc.returncode, None
                raise RuntimeError(f"the broker exited ({rc}) while starting:\n{self.log_tail()}")
            if self.started_line in self.log_text(started_at) and self._answers():
                return
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the broker did not start in {timeout}s:\n{self.log_tail()}")
            time.sleep(0.2)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def log_text(self, since: int = 0) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, n: int = 6000) -> str:
        text = self.log_text()
        console = (self.console_path.read_text(errors="replace") if self.console_path.exists()
                   else "")
        return text[-n:] + ("\n--- console ---\n" + console[-2000:] if console.strip() else "")

    def stop(self, timeout: float = 120) -> None:
        """SIGTERM: Kafka's clean shutdown (every log closed, ``.kafka_cleanshutdown`` written)."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        os.kill(proc.pid, signal.SIGTERM)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            raise RuntimeError(f"the broker did not stop in {timeout}s:\n{self.log_tail()}")
        if rc not in (0, 143):
            raise RuntimeError(f"the broker exited with {rc} on SIGTERM:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL: an unclean shutdown (nothing flushed or closed by the broker)."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        return self.log_dir / f"{topic}-{partition}"


def base64_uuid() -> str:
    """A random cluster id in Kafka's form; never one starting with '-' (kafka-storage's
    ``-t`` would take it for an option, about 1 run in 64), as Kafka's ``Uuid.randomUuid``
    draws again."""
    import base64

    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


# -- Spark's own Kafka connector -------------------------------------------------------------------
SPARK_CONNECTOR_POM = HERE / "spark-connector.pom.xml"
SPARK_CONNECTOR = ("org.apache.spark", "spark-sql-kafka-0-10_2.13")
# pyspark ships its own Hadoop client, Scala library and SLF4J: a second copy would clash
SPARK_PROVIDED_GROUPS = "org.apache.hadoop,org.scala-lang,org.slf4j"


def served_connector_versions(timeout: float = 30.0) -> List[str]:
    """The versions of ``spark-sql-kafka-0-10_2.13`` that Maven Central lists (its
    ``maven-metadata.xml``)."""
    import urllib.error
    import urllib.request

    group, artifact = SPARK_CONNECTOR
    url = (f"https://{MAVEN_CENTRAL[0]}/maven2/{group.replace('.', '/')}/{artifact}/"
           "maven-metadata.xml")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            text = resp.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as e:
        if not _central_reachable():
            raise Unavailable(f"Maven Central ({MAVEN_CENTRAL[0]}) is unreachable and Spark's "
                              f"Kafka connector is not cached") from e
        raise RuntimeError(f"could not read {url}: {e}") from e
    return re.findall(r"<version>([^<]+)</version>", text)


def pick_connector_version(pyspark_version: str, served: List[str]) -> str:
    """The connector release to run against ``pyspark_version``: the same version when it is
    served, else the newest served release (no previews) of the same major version."""
    releases = [v for v in served if re.fullmatch(r"\d+\.\d+\.\d+", v)]
    if pyspark_version in releases:
        return pyspark_version
    major = pyspark_version.split(".")[0]
    same_major = [v for v in releases if v.split(".")[0] == major]
    if not same_major:
        raise Unavailable(f"Maven Central serves no {SPARK_CONNECTOR[1]} release of Spark "
                          f"{major}.x (pyspark is {pyspark_version})")
    return max(same_major, key=lambda v: tuple(int(x) for x in v.split(".")))


def spark_connector_cache(pyspark_version: str) -> Path:
    return cache_dir().parent / f"spark-connector-{pyspark_version}"


def fetch_spark_connector(pyspark_version: str) -> Tuple[str, List[Path]]:
    """(connector version, its jars) for the installed ``pyspark_version``: the runtime
    classpath of ``spark-connector.pom.xml`` at the version :func:`pick_connector_version`
    chose, fetched with Maven on first use into :func:`spark_connector_cache` (then reused
    without any network access; delete that directory to choose again)."""
    base = spark_connector_cache(pyspark_version)
    libs, marker, chosen = base / "libs", base / "libs.complete", base / "version"

    def cached() -> Optional[Tuple[str, List[Path]]]:
        if not (marker.is_file() and chosen.is_file() and libs.is_dir()):
            return None
        version = chosen.read_text().strip()
        if marker.read_text().strip() != f"{_digest(SPARK_CONNECTOR_POM)}:{version}":
            return None
        return version, sorted(libs.glob("*.jar"))

    hit = cached()
    if hit:
        return hit
    mvn = _which("mvn")
    with _FileLock(base / ".lock"):
        hit = cached()
        if hit:
            return hit
        version = pick_connector_version(pyspark_version, served_connector_versions())
        tmp = base / f"libs.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        proc = subprocess.run(
            [mvn, "-B", "-q", "-f", str(SPARK_CONNECTOR_POM),
             f"-Dspark.connector.version={version}",
             f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
             f"-DexcludeGroupIds={SPARK_PROVIDED_GROUPS}", f"-DoutputDirectory={tmp}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            if not _central_reachable():
                raise Unavailable(f"Maven Central ({MAVEN_CENTRAL[0]}) is unreachable and "
                                  f"{SPARK_CONNECTOR[1]} {version} is not cached in {libs}")
            raise RuntimeError(f"mvn could not fetch {SPARK_CONNECTOR[1]} {version}:\n"
                               f"{proc.stdout[-4000:]}")
        if marker.exists():
            marker.unlink()
        shutil.rmtree(libs, ignore_errors=True)
        os.rename(tmp, libs)
        chosen.write_text(version + "\n")
        marker.write_text(f"{_digest(SPARK_CONNECTOR_POM)}:{version}\n")
    return version, sorted(libs.glob("*.jar"))


if __name__ == "__main__":
    usage = "usage: python tests/kafka/kafka_support.py fetch | fetch-spark-connector"
    if sys.argv[1:] == ["fetch-spark-connector"]:
        import pyspark

        try:
            found, jars = fetch_spark_connector(pyspark.__version__)
        except Unavailable as e:
            sys.exit(f"unavailable: {e}")
        print(f"{SPARK_CONNECTOR[1]} {found} for pyspark {pyspark.__version__}:")
        print("\n".join(str(j) for j in jars))
        sys.exit(0)
    if sys.argv[1:] != ["fetch"]:
        sys.exit(usage)
    try:
        print(prepare()["libs"])
    except Unavailable as e:
        sys.exit(f"unavailable: {e}")
