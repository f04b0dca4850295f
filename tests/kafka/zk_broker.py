"""A Kafka 3.x broker in ZooKeeper mode, for the message formats v0 and v1 that a 4.x broker no
longer writes (``test_legacy_formats.py``).

* The jars are ``kafka3.pom.xml``'s (``kafka_2.13`` 3.9, whose dependencies include ZooKeeper's
  server), fetched like ``pom.xml``'s into ``<cache>/<3.x version>/libs``; ``KafkaTool`` is
  compiled against those clients into the same folder (:func:`prepare`).
* :class:`ZooKeeper` runs ``org.apache.zookeeper.server.ZooKeeperServerMain zoo.cfg`` on a free
  127.0.0.1 port.
* :class:`ZkBroker` is :class:`kafka_support.Broker` with ZooKeeper-mode properties and
  ``inter.broker.protocol.version`` below 3.0: only then does a broker still honour
  ``log.message.format.version`` / the topic's ``message.format.version`` (KIP-724) and write
  v0 or v1 message sets.  It needs no ``format`` step; stop it before its ZooKeeper.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Optional

import kafka_support as ks

KAFKA3_POM = ks.HERE / "kafka3.pom.xml"
KAFKA3_VERSION = ks.kafka_version(KAFKA3_POM)
# the newest inter-broker protocol under which a broker still writes message formats v0/v1
LEGACY_IBP = "2.8"


def prepare() -> Dict[str, Path]:
    """The 3.x jars and KafkaTool compiled against them (or :class:`kafka_support.Unavailable`)."""
    ks.java()
    libs = ks.fetch_jars(KAFKA3_POM)
    return {"libs": libs, "tool": ks.tool_classes(libs, KAFKA3_POM)}


class ZooKeeper:
    """A standalone ZooKeeper server in ``work`` on a free 127.0.0.1 port."""

    def __init__(self, env: Dict[str, Path], work: Path):
        self.env = env
        self.work = Path(work)
        self.port = ks.free_port()
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = self.work / "zookeeper.log"

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> None:
        assert self.proc is None, "already started"
        self.work.mkdir(parents=True, exist_ok=True)
        cfg = self.work / "zoo.cfg"
        cfg.write_text(f"dataDir={self.work / 'zk-data'}\nclientPort={self.port}\n"
                       "clientPortAddress=127.0.0.1\ntickTime=500\nadmin.enableServer=false\n"
                       "maxClientCnxns=0\n4lw.commands.whitelist=ruok\n")
        (self.work / "zk-log4j2.properties").write_text(ks._LOG4J2.format(path=self.log_path))
        cmd = [ks.java(), *ks._BROKER_JVM[:2], "-XX:+UseSerialGC",
               f"-Dlog4j2.configurationFile={self.work / 'zk-log4j2.properties'}",
               "-Dzookeeper.jmx.log4j.disable=true",
               "-cp", ks.classpath(self.env["libs"]),
               "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)]
        with open(self.work / "zookeeper.console", "ab") as console:
            self.proc = subprocess.Popen(cmd, stdout=console, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self.proc.poll() is not None:
                rc, self.proc = self.proc.returncode, None
                raise RuntimeError(f"ZooKeeper exited ({rc}) while starting:\n{self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ZooKeeper did not start in {timeout}s:\n{self.tail()}")
            time.sleep(0.2)

    def _answers(self) -> bool:
        """ZooKeeper's ``ruok`` (a four-letter word it answers before any session)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"ruok")
                return s.recv(4) == b"imok"
        except OSError:
            return False

    def tail(self, n: int = 4000) -> str:
        text = ""
        for p in (self.log_path, self.work / "zookeeper.console"):
            if p.exists():
                text += p.read_text(errors="replace")[-n:]
        return text

    def stop(self, timeout: float = 30) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


class ZkBroker(ks.Broker):
    """A Kafka 3.x broker (ZooKeeper mode, id 0) with ``inter.broker.protocol.version`` below
    3.0."""

    started_line = "[KafkaServer id=0] started"

    def __init__(self, env: Dict[str, Path], work: Path, zookeeper: ZooKeeper,
                 overrides: Optional[Dict[str, Any]] = None):
        super().__init__(env, work, overrides)
        self.zookeeper = zookeeper

    def properties(self) -> Dict[str, Any]:
        props: Dict[str, Any] = {
            "broker.id": 0,
            "zookeeper.connect": self.zookeeper.connect,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            "inter.broker.protocol.version": LEGACY_IBP,
            **ks.SINGLE_NODE,
            "log.cleaner.enable": "false",
            "zookeeper.session.timeout.ms": 18000,
        }
        props.update(self.overrides)
        return props

    def format(self) -> None:  # a ZooKeeper-mode broker formats nothing
        self._write_config()


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["fetch"]:
        sys.exit("usage: python tests/kafka/zk_broker.py fetch")
    try:
        print(prepare()["libs"])
    except ks.Unavailable as e:
        sys.exit(f"unavailable: {e}")
