"""The package layers only point down (import-linter contract in pyproject.toml), and the library
imports without the command line."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["autotune", "autotune.search_spaces", "autotune.cost_models", "autotune.runners", "autotune.db",
            "autotune.algorithms", "autotune.campaign", "autotune.transfer", "autotune.drivers",
            "autotune.drivers.replay", "autotune.drivers.kernel", "autotune.drivers.graph",
            "autotune.drivers.parallel"]


def test_import_layers_contract_is_kept():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "lint_imports.py")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "1 kept, 0 broken" in r.stdout or "0 broken" in r.stdout


def test_lint_detects_an_upward_import(tmp_path, monkeypatch):
    """The check can fail: a search space importing the database breaks the contract."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import lint_imports
    finally:
        sys.path.pop(0)
    tree = lint_imports.assemble(tmp_path)
    (tree / "autotune" / "search_spaces" / "upward.py").write_text("import autotune.db.queries\n")
    import shutil

    r = subprocess.run([shutil.which("lint-imports"), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                       cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "autotune.search_spaces.upward" in r.stdout


@pytest.mark.parametrize("module", PACKAGES)
def test_library_imports_without_the_cli(module):
    code = (f"import sys, {module}; "
            "bad = [m for m in sys.modules if m.startswith('autotune.cli')]; "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
