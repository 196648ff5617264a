"""Ctrl-C in any command: one line on standard error, exit status 130. A campaign says how to resume it
(its own line, the only one); any other interruption says "interrupted" and what became of the database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import typer
from typer.testing import CliRunner

from autotune.cli.common import DEFAULT_DB, DbOption, handle_interrupts
from autotune.cli.main import app
from autotune.errors import Interrupted

cli = CliRunner()


def interrupting_app() -> typer.Typer:
    """A test-only app whose commands raise KeyboardInterrupt where a real command meets Ctrl-C."""
    demo = typer.Typer()
    sub = typer.Typer()
    demo.add_typer(sub, name="group")

    @demo.command("read")
    def read() -> None:  # no database: stores nothing
        raise KeyboardInterrupt

    @demo.command("store")
    def store(db: DbOption = DEFAULT_DB) -> None:  # a command with a database
        raise KeyboardInterrupt

    @sub.command("campaign")
    def campaign(db: DbOption = DEFAULT_DB) -> None:  # a campaign says how to resume it, then raises Interrupted
        print("interrupted: 3 trials stored; resume with: autotune tune replay --campaign c", file=sys.stderr)
        raise Interrupted

    @demo.command("ask")
    def ask(eof: bool = False) -> None:  # click's prompts turn Ctrl-C (and end of input) into Abort
        try:
            raise EOFError if eof else KeyboardInterrupt
        except (KeyboardInterrupt, EOFError):
            raise typer.Abort() from None

    handle_interrupts(demo)
    return demo


def test_an_interrupt_without_a_database_says_nothing_was_stored():
    r = cli.invoke(interrupting_app(), ["read"])
    assert r.exit_code == 130
    assert r.stderr == "interrupted; nothing was stored\n"


def test_an_interrupt_in_a_command_with_a_database_says_what_was_stored_stays(tmp_path):
    r = cli.invoke(interrupting_app(), ["store", "--db", f"sqlite:///{tmp_path / 'w.db'}"])
    assert r.exit_code == 130
    assert r.stderr == "interrupted; what was stored before stays in the database\n"


def test_a_campaigns_resume_line_is_the_only_line(tmp_path):
    r = cli.invoke(interrupting_app(), ["group", "campaign", "--db", f"sqlite:///{tmp_path / 'w.db'}"])
    assert r.exit_code == 130
    assert r.stderr.splitlines() == ["interrupted: 3 trials stored; resume with: autotune tune replay --campaign c"]


def test_ctrl_c_at_a_prompt_is_an_interrupt_and_the_end_of_input_still_aborts():
    r = cli.invoke(interrupting_app(), ["ask"])
    assert r.exit_code == 130 and r.stdout == "\n"  # the prompt's line ended
    assert r.stderr == "interrupted; nothing was stored\n"
    r = cli.invoke(interrupting_app(), ["ask", "--eof"])
    assert r.exit_code == 1 and "interrupted" not in r.output


def test_every_command_of_the_cli_handles_ctrl_c():
    def callbacks(command, path: str):
        if command.callback is not None:
            yield path, command.callback
        for name, sub in getattr(command, "commands", {}).items():
            yield from callbacks(sub, f"{path} {name}")

    found = dict(callbacks(typer.main.get_command(app), "autotune"))
    assert {"autotune tune replay", "autotune tune graph", "autotune tune parallel", "autotune trials",
            "autotune space check", "autotune campaigns", "autotune campaigns delete"} <= set(found)
    unhandled = [path for path, fn in found.items() if not getattr(fn, "_on_interrupt", False)]
    assert not unhandled


def _cli_process(args, cwd, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from autotune.cli.main import main; main()", *args], cwd=cwd,
                            stdout=subprocess.PIPE, text=True, **kwargs)


@pytest.mark.skipif(os.name != "posix", reason="a pseudo-terminal and SIGINT")
def test_ctrl_c_while_space_check_counts_a_large_space(tmp_path):
    """A real slow step outside a campaign: counting a space's valid points (its bar, drawn on a terminal,
    says when the count is under way; the count takes some 10 s)."""
    import pty
    import select

    (tmp_path / "big.yaml").write_text("knobs:\n  x: {range: [1, 100000]}\n  y: {range: [1, 100000]}\n"
                                       "constraints:\n  - x * y == 7\n")
    master, slave = pty.openpty()
    proc = _cli_process(["space", "check", "big.yaml"], tmp_path, stderr=slave)
    os.close(slave)
    seen, counting_since, deadline = b"", None, time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the process has exited and closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            if counting_since is None and b"valid points" in seen:
                counting_since = time.monotonic()
            if counting_since is not None and time.monotonic() - counting_since > 0.5 and proc.returncode is None:
                proc.send_signal(signal.SIGINT)
                counting_since = float("inf")
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert counting_since == float("inf"), seen[-300:]
    assert proc.stdout.read() == ""
    lines = seen.decode(errors="replace").replace("\r", "").splitlines()
    assert lines[-1].endswith("interrupted; nothing was stored")  # after the bar's "show the cursor"
    assert sum("interrupted" in line for line in lines) == 1


@pytest.mark.skipif(os.name != "posix", reason="SIGINT")
def test_ctrl_c_in_a_campaign_prints_its_resume_line_only(tmp_path):
    """tune command's program leaves a file when it starts, then sleeps: SIGINT then reaches the campaign."""
    (tmp_path / "space.yaml").write_text("knobs:\n  x: [1, 2, 3]\n")
    (tmp_path / "slow.py").write_text("import pathlib, sys, time\npathlib.Path(sys.argv[1]).touch()\ntime.sleep(60)\n")
    proc = _cli_process(["tune", "command", "--space", "space.yaml", "--db", "sqlite:///c.db", "--trials", "3",
                         "--batch", "1", "--no-progress", "--", sys.executable, "slow.py", "started"],
                        tmp_path, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.splitlines() == [line for line in err.splitlines() if line.startswith("interrupted")]
    assert len(err.splitlines()) == 1 and "resume with: autotune tune command" in err
