"""Every snippet of README.md runs as written, and the documentation's links and imports hold.

The README's fenced blocks run in document order, as a reader following it would run them.
The blocks of one section (the text under one heading) share a temporary working directory, so a
block may use what an earlier one of its section wrote (the graph quick start's ONNX model; the
default database ``sqlite:///autotune.db``, which lands there); each section starts in an empty
one, so a section's campaigns do not find another section's trials. Running one block alone
(``-k``) first runs the blocks of its section before it.

- A ```python block is executed as written, in a fresh namespace, with that directory as the
  working directory.
- A ```bash block's commands run in bash (``set -euo pipefail``) in that directory, with this
  interpreter's ``autotune`` and ``python`` first on PATH. The two exceptions: ``pip install``
  commands are not run but checked (every extra they name exists in pyproject.toml), and the
  ``pytest`` command itself is not run from inside the tests.

Blocks of the graph quick start skip when onnx or onnxruntime is missing (the ``graphs``
extra), the kernel quick start without a C compiler, and blocks using ``--ray`` without ray,
saying so.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAX_README_LINES = 200
BLOCK_TIMEOUT_S = 300


@dataclass
class Block:
    path: Path
    line: int  # line of the opening fence, 1-based
    lang: str
    code: str
    section: str  # the nearest heading above the block

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.line}:{self.lang}"


def fenced_blocks(path: Path) -> list[Block]:
    blocks, section, lang, start, body = [], "", None, 0, []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if lang is None:
            if line.startswith("#"):
                section = line.lstrip("#").strip()
            m = re.match(r"^```(\w*)\s*$", line)
            if m:
                lang, start, body = m.group(1), i, []
        elif line.startswith("```"):
            blocks.append(Block(path, start, lang, "\n".join(body) + "\n", section))
            lang = None
        else:
            body.append(line)
    assert lang is None, f"{path.name}: the code block opened at line {start} is never closed"
    return blocks


README_BLOCKS = [b for b in fenced_blocks(README) if b.lang in ("python", "bash")]


# -- bash: which commands run, which are only checked ----------------------------------------------

def logical_lines(code: str) -> list[str]:
    """Lines with backslash continuations joined."""
    out, cur = [], ""
    for line in code.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    if cur:
        out.append(cur)
    return out


def is_pip_install(cmd: str) -> bool:
    words = cmd.split()
    return words[:2] == ["pip", "install"] or words[:4] == ["python", "-m", "pip", "install"]


def is_pytest(cmd: str) -> bool:
    words = cmd.split()
    return words[:1] == ["pytest"] or words[:3] == ["python", "-m", "pytest"]


def split_commands(line: str) -> list[str]:
    """The commands of one line joined by && (the README's snippets use no other operators)."""
    code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
    return [c.strip() for c in code.split("&&") if c.strip()]


def runnable_script(code: str) -> tuple[str, list[str]]:
    """(the bash script to run, the pip install commands left out of it); pytest commands are left out."""
    kept, pips = [], []
    for line in logical_lines(code):
        cmds = split_commands(line)
        pips += [c for c in cmds if is_pip_install(c)]
        run = [c for c in cmds if not is_pip_install(c) and not is_pytest(c)]
        if run:
            kept.append(" && ".join(run))
    return "\n".join(kept), pips


def pip_extras(cmd: str) -> list[str]:
    """Extras a pip install command names: .[a,b] or autotune[a]."""
    extras = []
    for word in shlex.split(cmd)[2:]:
        m = re.fullmatch(r"(?:\.|autotune)\[([\w,\s-]+)\]", word)
        if m:
            extras += [e.strip() for e in m.group(1).split(",")]
    return extras


def defined_extras() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


# -- running the README in order ----------------------------------------------------------------------

def skip_reason(block: Block) -> str | None:
    section = block.section.lower()
    if "graph" in section:
        for module in ("onnx", "onnxruntime"):
            try:
                __import__(module)
            except ImportError:
                return f"the graph quick start needs {module} (pip install -e \".[graphs]\")"
    if "kernel" in section and not shutil.which(os.environ.get("CC", "gcc")):
        return "the kernel quick start needs a C compiler (gcc or $CC)"
    if "--ray" in block.code and importlib.util.find_spec("ray") is None:
        return "the scale-out quick start needs ray (pip install -e \".[ray]\")"
    return None


class ReadmeRun:
    """Runs the README's blocks once each, in order, in one working directory per section."""

    def __init__(self, tmp_path_factory):
        self.tmp = tmp_path_factory
        self.dirs: dict[str, Path] = {}
        self.done: dict[int, str | None] = {}  # block index -> failure text, None when it passed or skipped

    def workdir(self, block: Block) -> Path:
        if block.section not in self.dirs:
            self.dirs[block.section] = self.tmp.mktemp(re.sub(r"\W+", "-", block.section.lower()).strip("-") or "top")
        return self.dirs[block.section]

    def env(self) -> dict[str, str]:
        bindir = str(Path(sys.executable).parent)
        return {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "COLUMNS": "120",
                "PYTHONUNBUFFERED": "1"}

    def run_python(self, block: Block) -> str | None:
        cwd = os.getcwd()
        os.chdir(self.workdir(block))
        try:
            exec(compile(block.code, block.id, "exec"), {"__name__": "__main__"})
        except BaseException as exc:  # noqa: BLE001 - reported as the block's failure
            import traceback

            return "".join(traceback.format_exception(exc))[-6000:]
        finally:
            os.chdir(cwd)
        return None

    def run_bash(self, block: Block) -> str | None:
        script, _ = runnable_script(block.code)
        if not script:
            return None
        try:
            r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=self.workdir(block), env=self.env(),
                               capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"timed out after {BLOCK_TIMEOUT_S} s:\n{script}"
        if r.returncode != 0:
            return f"exit status {r.returncode}:\n{script}\n--- stdout\n{r.stdout[-4000:]}\n--- stderr\n{r.stderr[-4000:]}"
        return None

    def run(self, index: int) -> str | None:
        section = README_BLOCKS[index].section
        for i in range(index + 1):
            if i not in self.done and README_BLOCKS[i].section == section:
                block = README_BLOCKS[i]
                if skip_reason(block):
                    self.done[i] = None
                    continue
                self.done[i] = self.run_python(block) if block.lang == "python" else self.run_bash(block)
        return self.done[index]


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory):
    return ReadmeRun(tmp_path_factory)


def readme_params() -> list:
    """One parameter per README block. A block using ``--ray`` starts a Ray cluster in a fresh process (20 to
    40 s on two cores) and runs with the slow tests; the default run covers that path (a fresh process with
    ``--ray local`` measures and stores its trials) in tests/scale/test_ray.py."""
    return [pytest.param(i, id=b.id, marks=[pytest.mark.slow] if "--ray" in b.code else [])
            for i, b in enumerate(README_BLOCKS)]


@pytest.mark.parametrize("index", readme_params())
def test_readme_snippet_runs(readme_run, index):
    block = README_BLOCKS[index]
    reason = skip_reason(block)
    if reason:
        pytest.skip(reason)
    failure = readme_run.run(index)
    assert failure is None, f"{block.id} (section {block.section!r}) failed:\n{failure}"


# -- static checks over the README and docs/ -------------------------------------------------------------

def test_readme_is_short():
    n = len(README.read_text().splitlines())
    assert n <= MAX_README_LINES, f"README.md has {n} lines; keep it at most {MAX_README_LINES}, the rest in docs/"


def test_readme_has_a_snippet_per_domain():
    text = README.read_text()
    for command in ("autotune tune replay", "autotune tune kernel", "autotune tune graph", "autotune tune parallel"):
        assert command in text, f"README.md shows no {command!r}"
    python = "".join(b.code for b in README_BLOCKS if b.lang == "python")
    assert "from autotune import tune_kernel" in python and "autotune.minimize(" in python, \
        "README.md shows no quick start of the user's own kernel or function"
    for function in ("tune_replay", "tune_template", "optimize_graph", "parallelize"):
        assert f"autotune.{function}(" in python, f"README.md has no Python quick start calling autotune.{function}"


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    out, fenced = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def markdown_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)  # not inside code blocks
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: p.name)
def test_relative_links_point_to_files_that_exist(path):
    broken = []
    for link in markdown_links(path):
        if re.match(r"^[a-z]+:", link):  # http:, https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        if not file.exists():
            broken.append(f"{link} (no file {target})")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{link} (no heading #{anchor} in {file.name})")
    assert not broken, f"{path.name}: broken links: {', '.join(broken)}"


ALL_BLOCKS = [b for p in [README, *DOCS] for b in fenced_blocks(p)]


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.lang == "python"], ids=lambda b: b.id)
def test_python_snippets_import_from_autotune_only(block):
    tree = ast.parse(block.code, filename=block.id)  # also: every Python snippet is valid Python
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        assert all(n in ("autotune", "numpy") for n in names), (  # numpy: the arrays a kernel is tuned on
            f"{block.id}: imports {names}; snippets use the public API, `import autotune` (and numpy) only")


def test_pip_install_lines_name_existing_extras():
    extras = defined_extras()
    checked = 0
    for block in ALL_BLOCKS:
        if block.lang != "bash":
            continue
        for line in logical_lines(block.code):
            for cmd in filter(is_pip_install, split_commands(line)):
                unknown = set(pip_extras(cmd)) - extras
                assert not unknown, f"{block.id}: {cmd!r} names extras {sorted(unknown)} not in pyproject.toml"
                checked += 1
    assert checked, "the README shows no pip install command"


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: p.name)
def test_no_paths_outside_the_repository(path):
    text = path.read_text()
    assert str(ROOT.parent) + "/" not in text, f"{path.name} names an absolute path of this machine"
    for m in re.finditer(r"\.\./shared\S*", text):
        assert m.group(0).startswith("../shared/datasets/replay"), (
            f"{path.name} refers to {m.group(0)}; only the replay datasets live outside the repository")
