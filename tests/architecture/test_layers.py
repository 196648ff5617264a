"""The package layers only point down (import-linter contracts in pyproject.toml), and the library
imports without the command line.

The namespace `autotune` spans the top-level folders; links autotune/search_spaces, cost_models,
runners and db (to ../search_spaces etc.) let import-linter see it as one tree, so plain
`lint-imports` at the repository root checks it.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["autotune", "autotune.search_spaces", "autotune.cost_models", "autotune.runners", "autotune.db",
            "autotune.algorithms", "autotune.campaign", "autotune.transfer", "autotune.drivers",
            "autotune.drivers.replay", "autotune.drivers.kernel", "autotune.drivers.graph",
            "autotune.drivers.parallel"]


def lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports")
    assert exe, "lint-imports is not installed: pip install -e '.[dev]'"
    env = {"PATH": "/usr/bin:/bin", **({"PYTHONPATH": str(pythonpath)} if pythonpath else {})}
    return subprocess.run([exe, "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_import_layers_contract_is_kept():
    r = lint_imports(ROOT)
    assert r.returncode == 0 and "0 broken" in r.stdout, r.stdout[-4000:] + r.stderr[-2000:]


def test_lint_detects_an_upward_import(tmp_path):
    """The check can fail: in a copy of the package, a search space importing the database breaks it."""
    shutil.copytree(ROOT / "autotune", tmp_path / "autotune", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "autotune" / "search_spaces" / "upward.py").write_text("import autotune.db.queries\n")
    r = lint_imports(tmp_path, pythonpath=tmp_path)
    assert r.returncode != 0 and "autotune.search_spaces.upward" in r.stdout, r.stdout[-2000:]


@pytest.mark.parametrize("module", PACKAGES)
def test_library_imports_without_the_cli(module):
    code = (f"import sys, {module}; "
            "bad = [m for m in sys.modules if m.startswith('autotune.cli')]; "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_the_search_and_its_models_import_xgboost_only_when_a_model_is_used_and_never_scipy_stats():
    """A process that never fits a model (a benchmark script refusing its arguments, `--help`) does not pay
    xgboost's import (a second); the first fit imports it. A model's Spearman figure never imports
    scipy.stats (another second)."""
    code = ("import sys, numpy as np; "
            "import autotune.algorithms.model_guided, autotune.cost_models.pooled, autotune.cost_models.graph_ops; "
            "early = [m for m in ('xgboost', 'scipy.stats') if m in sys.modules]; assert not early, early; "
            "from autotune.cost_models.failures import FailureModel; "
            "from autotune.cost_models.metrics import quality; "
            "assert quality(np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0]), k=1)['spearman'] == 1.0; "
            "FailureModel().fit(np.arange(20.0).reshape(10, 2), np.array([0, 1] * 5, dtype=bool)); "
            "assert 'xgboost' in sys.modules and 'scipy.stats' not in sys.modules")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
