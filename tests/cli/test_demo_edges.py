"""The demo and kafkalog.arrow as a new user meets them: a missing extra is named, user errors
are one line, a closed pipe is a quiet exit."""

from __future__ import annotations

import subprocess
import sys

from .conftest import child_env

BLOCK_PYARROW = (
    "import sys; sys.modules['pyarrow'] = None\n"  # as if pyarrow were not installed
)


def _python(code: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=child_env(),
        timeout=300, **kw
    )


def test_arrow_without_pyarrow_names_the_extra():
    r = _python(
        BLOCK_PYARROW
        + "try:\n    import kafkalog.arrow\nexcept ModuleNotFoundError as e:\n"
        "    print(e.name); print(e)\n"
    )
    assert r.returncode == 0, r.stderr
    name, message = r.stdout.splitlines()[:2]
    assert name == "pyarrow"
    assert 'pip install "kafkalog[arrow]"' in message


def test_demo_without_pyarrow_runs_what_it_can(tmp_path):
    r = _python(
        BLOCK_PYARROW + "from kafkalog.demo import main; sys.exit(main(sys.argv[1:]))",
        "--out", str(tmp_path / "demo"), "--records", "300", "--no-spark",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    assert "kafkalog.arrow step skipped" in r.stdout and "kafkalog[arrow]" in r.stdout
    assert "$ kafkalog verify" in r.stdout  # the steps without pyarrow ran


def test_demo_out_pointing_at_a_file_is_one_line(tmp_path):
    f = tmp_path / "taken"
    f.write_text("x")
    r = _python(
        "from kafkalog.demo import main; sys.exit(main(sys.argv[1:]))".replace(
            "from", "import sys; from", 1
        ),
        "--out", str(f), "--no-spark",
    )
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr
    assert [line for line in r.stderr.splitlines() if "error" in line] == [
        line for line in r.stderr.splitlines() if line.startswith("python -m kafkalog.demo: error:")
    ]
    assert f"--out {f} exists and is not a directory" in r.stderr


def test_demo_into_a_closed_pipe_exits_quietly(tmp_path):
    p = subprocess.Popen(
        [sys.executable, "-m", "kafkalog.demo", "--out", str(tmp_path / "d"), "--records", "300",
         "--no-spark"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(),
    )
    p.stdout.readline()  # `| head -1`
    p.stdout.close()
    err = p.stderr.read().decode()
    rc = p.wait(timeout=300)
    assert rc == 0, err
    assert "Traceback" not in err and "BrokenPipeError" not in err
