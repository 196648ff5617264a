"""The command line that resumes a campaign, rebuilt from the recipe stored with it."""

from __future__ import annotations

import json
import os
import shlex

from sqlalchemy.engine import make_url

from autotune.algorithms.registry import DEFAULT_ALGORITHM, DEFAULT_COST_MODEL, DEFAULT_TRANSFER_TOP
from autotune.db.database import Database
from autotune.errors import COMMAND_LINE

#: how each recipe kind is run from the command line: (command, positional arguments, options)
_COMMANDS = {
    "replay": ("autotune tune replay", (), {
        "cache": "--cache", "algorithm": "--algorithm", "cost_model": "--cost-model", "trials": "--trials",
        "time_budget": "--time-budget", "simulated_budget": "--simulated-budget", "seed": "--seed", "batch": "--batch",
        "measure_delay": "--measure-delay", "transfer_from": "--transfer-from", "transfer_top": "--transfer-top"}),
    "kernel": ("autotune tune kernel", ("name",), {
        "shape": "--shape", "target": "--target", "algorithm": "--algorithm", "cost_model": "--cost-model",
        "trials": "--trials", "time_budget": "--time-budget", "seed": "--seed", "batch": "--batch",
        "threads": "--threads", "device_index": "--device", "backend": "--backend", "transfer_from": "--transfer-from",
        "transfer_top": "--transfer-top", "retry_failed": "--retry-failed"}),
    "command": ("autotune tune command", (), {
        "space_file": "--space", "algorithm": "--algorithm", "cost_model": "--cost-model", "trials": "--trials",
        "time_budget": "--time-budget", "seed": "--seed", "batch": "--batch", "timeout_s": "--timeout",
        "retry_failed": "--retry-failed"}),
    "graph": ("autotune tune graph", ("model",), {
        "device": "--device", "algorithm": "--algorithm", "alpha": "--alpha", "trials": "--trials",
        "time_budget": "--time-budget", "seed": "--seed", "batch": "--batch", "rules_file": "--rules",
        "max_measure": "--max-measure", "rounds": "--rounds", "start_from": "--start-from"}),
    "parallel": ("autotune tune parallel", (), {
        "model": "--model", "cluster": "--cluster", "batch": "--batch", "microbatches": "--microbatches",
        "optimizer": "--optimizer", "recompute": "--recompute", "algorithm": "--algorithm", "trials": "--trials",
        "time_budget": "--time-budget", "seed": "--seed", "measured_db": "--measured-db",
        "measured_device": "--measured-device"}),
}
#: values the command line gives when an option is left out (not repeated in a resume command)
_CLI_DEFAULTS = {"algorithm": DEFAULT_ALGORITHM, "cost_model": DEFAULT_COST_MODEL, "seed": 0, "batch": 8,
                 "measure_delay": 0.0, "target": "cpu", "device_index": 0, "backend": "auto",
                 "transfer_top": DEFAULT_TRANSFER_TOP, "retry_failed": False}
#: a kind's own defaults where they differ from those above
_KIND_DEFAULTS = {"graph": {"algorithm": "taso-queue", "batch": 16, "device": "cpu", "rounds": 25},
                  "parallel": {"algorithm": "mcmc", "batch": None, "microbatches": 1, "optimizer": "megatron"}}
#: arguments a kind's command line needs to be spelled (the output model of ``tune graph``: its ``-o``)
_REQUIRED = {"graph": ("model", "output"), "parallel": ("model", "cluster")}
#: the files a command writes its result to (kept in the recipe's "files", not passed to the driver)
_FILES = {"graph": {"output": "-o"}, "parallel": {"output": "-o", "timeline": "--timeline"}}
#: driver arguments no command-line option sets, with the value the command line runs with: a recipe
#: that sets another cannot be resumed by a command line (its campaign is resumed by ``autotune worker``)
_UNSPELLED = {"graph": {"threads": 1, "fusion": None, "tolerance": 1e-3}}
DEFAULT_DB_URL = "sqlite:///autotune.db"


def recipe_path(value: str | os.PathLike | None, written: bool = False) -> str | None:
    """A file named in a recipe, as a resume or a worker started in another folder finds it: the absolute path
    of an existing file, or of any file the command writes (``written``); anything else (a built-in model or
    cluster, an ``example:`` recording) as given."""
    if value is None:
        return None
    return os.path.abspath(value) if written or os.path.isfile(value) else str(value)


def _db_arg(db: Database | None) -> list[str]:
    """The --db words of a resume command: none for the default database or the one AUTOTUNE_DB names
    (the variable names it again); a URL with a password as "$AUTOTUNE_DB", since the password is never
    printed (the command then runs once the variable holds the URL)."""
    if db is None or db.url in (DEFAULT_DB_URL, os.environ.get("AUTOTUNE_DB")):
        return []
    if make_url(db.url).password is not None:
        return ["--db", "$AUTOTUNE_DB"]
    return ["--db", db.url]


def _shell(words: list[str]) -> str:
    """``words`` quoted for a POSIX shell, "$AUTOTUNE_DB" left for the shell to expand."""
    return shlex.join(words).replace("'$AUTOTUNE_DB'", '"$AUTOTUNE_DB"')


def _word(value) -> str:
    """An option's value as a user types it: a whole number given as a float without its ".0" (45, not 45.0)."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _spelled(kind: str, args: dict, files: dict) -> bool:
    """Whether a command line can run a recipe of ``kind``: it has what the command needs, and every
    argument no option sets has the value the command line runs with."""
    have = {**args, **files}
    return (all(have.get(k) is not None for k in _REQUIRED.get(kind, ()))
            and all(args.get(k, v) == v for k, v in _UNSPELLED.get(kind, {}).items()))


#: the kinds whose command measures on Ray actors (``--ray``, ``--ray-actors``)
_RAY_KINDS = ("replay", "kernel")


def resume_command(name: str, recipe: dict | None, db: Database | None = None, ray: str | None = None,
                   ray_actors: int | None = None, command_line: bool | None = None) -> str:
    """``autotune tune KIND ... --campaign NAME`` rebuilt from a campaign's recipe; for a recipe the
    command line cannot spell, or none, what to run instead: the same command with ``--campaign NAME`` on the
    command line, the script again (or the call with the campaign's name) in a script (``command_line``; None:
    whether a command of the command line is running, ``autotune.errors.COMMAND_LINE``). ``ray``,
    ``ray_actors``: the run measured on that Ray cluster (the recipe, which workers on any host share, does
    not say where a run measures), and its resume does too."""
    db_arg = _db_arg(db)
    kind, args = (recipe or {}).get("kind"), dict((recipe or {}).get("args") or {})
    files = {k: v for k, v in ((recipe or {}).get("files") or {}).items() if v}
    if kind not in _COMMANDS or not _spelled(kind, args, files):
        worker = _shell(["autotune", "worker", "--campaign", name, *db_arg])
        also = f" (or: {worker})" if kind else ""  # a script's campaign keeps no kind: no worker makes it
        if command_line if command_line is not None else COMMAND_LINE.get():
            return f"rerun the same command with --campaign {shlex.quote(name)}{also}"
        return f"rerun the script, or call it again with the campaign name {name!r}{also}"
    command, positional, flags = _COMMANDS[kind]
    defaults = {**_CLI_DEFAULTS, **_KIND_DEFAULTS.get(kind, {})}
    words = [str(args.get(p)) for p in positional]
    for key, flag in flags.items():
        value = args.get(key)
        if key == "cost_model" and value in (None, "", "none"):
            value = "none"
        if value is None or (key in defaults and value == defaults[key]):
            continue
        words += [flag] if value is True else [flag, _word(value)]  # a switch (--retry-failed) takes no value
    for key, flag in _FILES.get(kind, {}).items():
        if key in files:
            words += [flag, str(files[key])]
    for key, shape in (args.get("input_shapes") or {}).items():
        words += ["--input-shape", f"{key}={'x'.join(str(int(d)) for d in shape)}"]
    for key, value in (args.get("options") or {}).items():
        words += ["--option", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    if ray is not None and kind in _RAY_KINDS:
        words += ["--ray", ray or "local"] + (["--ray-actors", str(int(ray_actors))] if ray_actors is not None else [])
    words += ["--campaign", name, *db_arg]
    if kind == "command":
        words += ["--", *[str(a) for a in args.get("argv") or []]]
    return " ".join([command, _shell(words)])
