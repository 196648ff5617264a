"""Check the import layers (pyproject.toml, [tool.importlinter]) with import-linter.

The `autotune` namespace is assembled from several top-level folders (pyproject's
package-dir), which import-linter cannot follow, so this copies the Python files into one
`autotune/` tree in a temporary folder and runs `lint-imports` there. Exit status is
lint-imports' own (0: every contract kept).

    python scripts/lint_imports.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def assemble(dest: Path) -> Path:
    """Copy every package of the `autotune` namespace to dest/autotune/..., as it imports."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    package_dir = cfg["package-dir"]
    for package, folder in sorted(package_dir.items(), key=lambda kv: kv[0].count(".")):
        target = dest / package.replace(".", "/")
        shutil.copytree(ROOT / folder, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.gz", "*.md"))
    return dest


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="autotune-layers-") as tmp:
        assemble(Path(tmp))
        env = {**os.environ, "PYTHONPATH": tmp}
        exe = shutil.which("lint-imports")
        if exe is None:
            print("lint-imports is not installed: pip install -e '.[dev]'", file=sys.stderr)
            return 2
        return subprocess.run([exe, "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=tmp, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
