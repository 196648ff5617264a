"""`autotune dashboard`: bad databases and a port in use are one sentence and exit status 2, and the command
serves until Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from typer.testing import CliRunner

from autotune.cli.main import app as cli_app


def test_bad_databases_are_one_sentence_and_exit_2(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    cases = [(f"sqlite:///{tmp_path / 'missing.db'}", "no database file"), ("nosuch://x", "unsupported backend"),
             (f"sqlite:///{empty}", "no autotune schema"), ("sqlite:///", "names no file")]
    for url, words in cases:
        r = CliRunner().invoke(cli_app, ["dashboard", "--db", url, "--port", "1"])
        assert r.exit_code == 2, (url, r.output)
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in r.output, (url, r.output)
    assert not (tmp_path / "missing.db").exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_port_in_use_is_a_usage_error(demo_db):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = CliRunner().invoke(cli_app, ["dashboard", "--db", demo_db["url"], "--port", str(port)])
    assert r.exit_code == 2 and f"port {port}" in r.output and "in use" in r.output


def test_the_command_serves_until_ctrl_c(demo_db, tmp_path):
    import httpx

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", "from autotune.cli.main import main; main()", "dashboard",
                             "--db", demo_db["url"], "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in line, line + proc.stderr.read()
        deadline = time.monotonic() + 20
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/api/campaigns", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the dashboard did not answer"
                time.sleep(0.1)
        assert r.status_code == 200 and r.json()["total"] >= 9
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "dashboard stopped" in out and "Traceback" not in err
    assert os.listdir(tmp_path) == []
