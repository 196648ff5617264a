"""Installed size of a fresh `pip install -e .` (no extras) in a new virtual environment: the whole
environment and its largest packages (target: under 700 MB).

    python scripts/bench_install_size.py [--extras EXTRA,...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--extras", default="", help="extras to install too, e.g. graphs")
    ap.add_argument("--keep", help="make the environment in this folder and keep it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = Path(args.keep or tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
        target = f"{ROOT}[{args.extras}]" if args.extras else str(ROOT)
        subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", "-e", target], check=True)
        site = next((env / "lib").glob("python*/site-packages"))
        sizes = sorted(((tree_bytes(p), p.name) for p in site.iterdir() if p.is_dir()), reverse=True)
        total = tree_bytes(env)
        print(f"fresh install of {target}: {total / 1e6:,.0f} MB in {env} (pip and setuptools included)")
        for size, name in sizes[:10]:
            print(f"  {size / 1e6:8,.1f} MB  {name}")


if __name__ == "__main__":
    main()
