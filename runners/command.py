"""CommandRunner: measure a configuration by running the user's program with the knob values.

Each argument of the command is a template: ``{name}`` is replaced by the knob's value (``{{`` and
``}}`` are literal braces; a format spec such as ``{x:.3f}`` is applied). The program runs without
a shell (an argument list: a value such as ``; rm -rf ~`` arrives as one literal argument), in a
session of its own. When it times out, on Ctrl-C, and once it has exited, every process it started
is killed: on Linux a small launcher (runners/command_launcher.py) runs it as a child subreaper, so
that even a process that left the session (``setsid``, a daemon's double fork) stays within reach,
and dies with this process; elsewhere the program's process group is killed.

The cost is read from its output with the space file's objective (the number in the regular
expression's group, from the last match in standard output then standard error, times ``scale``) or
is its wall time. A non-zero exit status, a timeout or output without the number is a failed trial
(RUNTIME_ERROR or TIMEOUT) whose error holds the last 2,000 characters of both outputs.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence

from autotune.errors import UsageError, argument
from autotune.runners.base import Runner, measure_each
from autotune.runners.function import host_device
from autotune.runners.processes import kill_group
from autotune.search_spaces.space_file import Objective
from autotune.types import Candidate, Measurement, Status, Task

TAIL_CHARS = 2000
MAX_OUTPUT_BYTES = 8 * 1024 * 1024  # of each output, read from its end, for the objective's regex

# Linux: the process between this one and the program (runners/command_launcher.py, standard library only)
_LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "command_launcher.py")
STOP_GRACE_S = 10.0  # how long the launcher may take to kill the run's processes before it is killed itself


def placeholders(argv: Sequence[str]) -> list[str]:
    """The knob names the arguments use, in order (UsageError for a malformed template)."""
    names: list[str] = []
    for arg in argv:
        for field, _spec, _conv in _fields(arg):
            if field not in names:
                names.append(field)
    return names


def _fields(arg: str) -> Iterable[tuple[str, str, str | None]]:
    try:
        parsed = list(string.Formatter().parse(arg))
    except ValueError as exc:
        raise UsageError(f"the argument {arg[:80]!r} is not a valid template ({exc}); write {{name}} for a knob's "
                         "value and {{ or }} for a literal brace") from None
    for _literal, field, spec, conv in parsed:
        if field is None:
            continue
        if not field.isidentifier():
            raise UsageError(f"the argument {arg[:80]!r} has the placeholder {{{field[:40]}}}; a placeholder is "
                             "a knob name in braces, such as {block}")
        if spec and ("{" in spec or "}" in spec):
            raise UsageError(f"the argument {arg[:80]!r} nests placeholders in a format spec; not supported")
        if conv not in (None, "r", "s", "a"):
            raise UsageError(f"the argument {arg[:80]!r} has the placeholder {{{field}!{conv}}}; a conversion is "
                             "!r, !s or !a")
        yield field, spec or "", conv


def _fill(value, spec: str, conv: str | None) -> str:
    """One knob value as a placeholder ``{name!conv:spec}`` writes it."""
    if conv == "r":
        value = repr(value)
    elif conv == "a":
        value = ascii(value)
    elif conv == "s":
        value = str(value)
    return format(value, spec) if spec else str(value)


def substitute(arg: str, config: dict) -> str:
    """``arg`` with each ``{name}`` replaced by the knob's value (str() of it, or the format spec's)."""
    out = []
    for literal, field, spec, conv in string.Formatter().parse(arg):
        out.append(literal)
        if field is not None:
            out.append(_fill(config[field], spec, conv))
    return "".join(out)


def check_template(argv: Sequence[str], knobs: Iterable[str] | Mapping[str, Sequence]) -> None:
    """UsageError when an argument names a placeholder that is not a knob, or (``knobs`` a mapping of each
    knob's values) has a format spec or conversion that cannot write one of the knob's values, such as
    ``{layout:.3f}`` for a knob of strings (before anything runs)."""
    names = list(knobs)
    unknown = [n for n in placeholders(argv) if n not in names]
    if unknown:
        raise UsageError(f"the command uses the placeholder(s) {', '.join('{' + n + '}' for n in unknown)}, which "
                         f"are not knobs of the space; knobs: {', '.join(names)}")
    if not isinstance(knobs, Mapping):
        return
    for arg in argv:
        for field, spec, conv in _fields(arg):
            if not spec and conv is None:
                continue  # str() writes any value
            for value in knobs[field]:
                try:
                    _fill(value, spec, conv)
                except (ValueError, TypeError) as exc:
                    shown = "{" + field + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
                    raise UsageError(f"the placeholder {shown} in the argument {arg[:80]!r} cannot write the value "
                                     f"{value!r} ({type(value).__name__}) of the knob {field!r}: {exc}; a format "
                                     "spec must suit every value of its knob (e.g. {x:.3f} for numbers only, "
                                     f"{{{field}}} for any value)"[:600]) from None


#: an empty argv (the words after -- on the command line)
EMPTY_COMMAND = "the command is empty; " + argument(
    "give argv as a list of the program and its arguments, e.g. ['./bench', '--block', '{block}']",
    "give the program to run after --, e.g. -- ./bench --block {block}")


def resolve_program(program: str) -> str:
    """The program's path (searched on PATH when it has no folder), or UsageError saying why it cannot run."""
    if not program or "\0" in program:
        raise UsageError(EMPTY_COMMAND)
    shown = program if len(program) <= 200 else program[:197] + "..."
    try:
        found = shutil.which(program)
        if found:
            return os.path.abspath(found) if os.sep in program else found
        if os.sep in program and os.path.exists(program):
            why = "is a folder" if os.path.isdir(program) else "is not executable (chmod +x, or run it with its interpreter)"
            raise UsageError(f"the program {shown!r} {why}")
    except (OSError, ValueError) as exc:
        raise UsageError(f"the program {shown!r} cannot be run: {exc}") from None
    where = "does not exist" if os.sep in program else "was not found on PATH"
    raise UsageError(f"the program {shown!r} {where}; give a path (./bench) or a command on PATH")


def _tail(data: bytes, limit: int = TAIL_CHARS) -> str:
    text = data.decode("utf-8", errors="replace")
    return text[-limit:]


def _read_end(f) -> tuple[bytes, int]:
    """The last MAX_OUTPUT_BYTES of the output file ``f`` and how many bytes it holds in all."""
    limit = MAX_OUTPUT_BYTES
    f.flush()
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - limit))
    return f.read(), size


def _stop(proc: subprocess.Popen, linux: bool) -> int:
    """End a run before the program exits (a timeout, Ctrl-C); its exit status. On Linux the launcher is
    asked (SIGTERM) and kills every process of the run; else, or if it does not end, the group is killed."""
    if linux:
        try:
            proc.send_signal(signal.SIGTERM)
            return proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    kill_group(proc.pid)
    return proc.wait()


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks)


class CommandRunner(Runner):
    """Run ``argv`` (templates over the knobs) for each candidate and read its cost. ``knobs``: the knob
    names, or each knob's values (then every format spec is also tried on every value), checked against
    the placeholders before anything runs."""

    def __init__(self, argv: Sequence[str], objective: Objective | None = None, timeout_s: float | None = None,
                 knobs: Iterable[str] | Mapping[str, Sequence] | None = None, env: dict | None = None,
                 cwd: str | None = None):
        argv = [str(a) for a in argv]
        if not argv:
            raise UsageError(EMPTY_COMMAND)
        if timeout_s is not None and not (isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool)
                                          and math.isfinite(timeout_s) and timeout_s > 0):
            raise UsageError(f"the timeout must be a positive number of seconds, not {timeout_s!r}")
        placeholders(argv)  # a malformed template fails here
        if knobs is not None:
            check_template(argv, knobs)
        self.argv, self.objective, self.timeout_s = argv, objective or Objective(), timeout_s
        self._regex = re.compile(self.objective.regex) if self.objective.regex else None
        self._fixed_program = not placeholders(argv[:1])
        self.program = resolve_program(argv[0]) if self._fixed_program else argv[0]
        self.env, self.cwd = env, cwd
        self.device = host_device("program")

    def measure(self, task: Task, candidates: list[Candidate]) -> list[Measurement]:
        return measure_each(candidates, self._one)  # Ctrl-C: BatchInterrupted, with the runs completed

    def command(self, config: dict) -> list[str]:
        """The argument list for one configuration."""
        return [substitute(a, config) for a in self.argv]

    def _one(self, c: Candidate) -> Measurement:
        if not isinstance(c.payload, dict):
            return Measurement(c, Status.INVALID, error=f"a configuration is a dict of knob values, not {c.payload!r}"[:300])
        try:
            argv = self.command(c.payload)
        except (KeyError, ValueError, TypeError) as exc:
            return Measurement(c, Status.INVALID, error=f"cannot fill in the command for {c.payload}: "
                                                        f"{type(exc).__name__}: {exc}"[:500])
        # a program named by a placeholder is looked up now (not found: the launcher says so, a failed trial)
        program = self.program if self._fixed_program else (shutil.which(argv[0]) or argv[0])
        return self._run(c, program, argv)

    def _run(self, c: Candidate, program: str, argv: list[str]) -> Measurement:
        linux = sys.platform.startswith("linux")
        r, w = os.pipe()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            t0 = time.monotonic()
            try:
                if linux:
                    cmd = [sys.executable, "-S", _LAUNCHER, str(w), str(os.getpid()), program, *argv[1:]]
                    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, pass_fds=(w,),
                                            start_new_session=True, env=self.env, cwd=self.cwd)
                else:
                    proc = subprocess.Popen([program, *argv[1:]], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                            start_new_session=True, env=self.env, cwd=self.cwd)
            except OSError as exc:
                os.close(r)
                os.close(w)
                return Measurement(c, Status.RUNTIME_ERROR, error=f"cannot run {program!r}: {exc.strerror or exc}")
            os.close(w)
            timed_out = False
            try:
                try:
                    code = proc.wait(self.timeout_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    code = _stop(proc, linux)
            except BaseException:  # Ctrl-C (KeyboardInterrupt) while the program runs: its processes go too
                _stop(proc, linux)
                os.close(r)
                raise
            t1 = time.monotonic()
            kill_group(proc.pid)  # whatever is left in the group (a launcher that was killed, or not Linux)
            report = _read_all(r).split()
            os.close(r)
            if linux and len(report) in (2, 3):  # [the program's start,] its end and its wait status
                try:
                    t0, t1 = max(t0, float(report[0])) if len(report) == 3 else t0, float(report[-2])
                    code = os.waitstatus_to_exitcode(int(report[-1]))
                except ValueError:
                    pass
            wall = t1 - t0
            (stdout, out_size), (stderr, err_size) = _read_end(out), _read_end(err)
        tails = self._tails(stdout, stderr)
        meta = {"returncode": code, "wall_s": wall, "argv": argv[:64]}
        if timed_out:
            return Measurement(c, Status.TIMEOUT, run_s=wall, meta=meta,
                               error=f"did not finish within {self.timeout_s:g} s; killed{tails}")
        if code != 0:
            why = f"ended with exit status {code}"
            if code < 0:
                try:
                    why = f"was killed by {signal.Signals(-code).name}"
                except ValueError:
                    why = f"was killed by signal {-code}"
            return Measurement(c, Status.RUNTIME_ERROR, run_s=wall, meta=meta, error=f"the program {why}{tails}")
        if self._regex is None:
            cost = wall
        else:
            cost, why = self._parse(stdout, stderr, max(out_size, err_size) > MAX_OUTPUT_BYTES)
            if cost is None:
                return Measurement(c, Status.RUNTIME_ERROR, run_s=wall, meta=meta, error=f"{why}{tails}")
        return Measurement(c, Status.OK, times=[cost], cost=cost, run_s=wall, meta=meta)

    def _parse(self, stdout: bytes, stderr: bytes, cut: bool = False) -> tuple[float | None, str]:
        """The cost: the last match in standard output, else the last in standard error (a program's report
        is its output; a warning on stderr that happens to match does not override it). ``cut``: an output
        was longer than MAX_OUTPUT_BYTES, and only its end was read."""
        last = None
        for stream in (stdout, stderr):
            for last in self._regex.finditer(stream.decode("utf-8", errors="replace")):
                pass
            if last is not None:
                break
        if last is None:
            where = (f"the last {MAX_OUTPUT_BYTES // 2**20} MiB of each of the program's outputs (only their ends are "
                     "read: print the cost after the rest)" if cut else "the program's output")
            return None, f"no match of the objective regex {self.objective.regex!r} in {where}"
        raw = last.group(1)
        try:
            value = float(raw) * self.objective.scale
        except (TypeError, ValueError):
            return None, f"the objective regex matched {str(raw)[:80]!r}, which is not a number"
        if not (math.isfinite(value) and value >= 0):
            return None, f"the program reported {str(raw)[:80]!r}; a cost must be a finite number >= 0"
        return value, ""

    @staticmethod
    def _tails(stdout: bytes, stderr: bytes) -> str:
        parts = []
        if stderr.strip():
            parts.append(f"\n--- stderr (last {TAIL_CHARS} characters) ---\n{_tail(stderr)}")
        if stdout.strip():
            parts.append(f"\n--- stdout (last {TAIL_CHARS} characters) ---\n{_tail(stdout)}")
        return "".join(parts)
