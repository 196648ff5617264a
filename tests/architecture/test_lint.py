"""The repository passes `ruff check` with the rules pyproject.toml names, so CI catches an unused import, an
undefined name or a syntax error in a module no test imports."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    exe = shutil.which("ruff")
    assert exe, "ruff is not installed: pip install -e '.[dev]'"
    return subprocess.run([exe, "check", "--no-cache", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


def test_the_repository_passes_ruff():
    r = ruff(".")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_ruff_finds_an_undefined_name(tmp_path):
    """The check can fail: with the repository's settings, a module using a name it never defines fails."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    return undefined_name\n")
    r = ruff("--config", str(ROOT / "pyproject.toml"), str(bad), cwd=tmp_path)
    assert r.returncode != 0 and "F821" in r.stdout, r.stdout[-2000:]
