"""Every subpackage on disk is in pyproject.toml's package list, so that a wheel (and an editable
install's finder) ships it: a package left out imports in a checkout and fails once installed."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _on_disk(setuptools: dict) -> set[str]:
    found = set()
    for package, folder in setuptools["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            if "__pycache__" in rel.parts or any(p.startswith(".") for p in rel.parts):
                continue
            name = ".".join([package, *rel.parts])
            # the links autotune/db etc. point at the top-level folders, which are mapped on their own
            if not any(name.startswith(f"{other}.") or name == other
                       for other in setuptools["package-dir"] if other != package and other.startswith(f"{package}.")):
                found.add(name)
    return found


def test_every_subpackage_is_packaged():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    missing = _on_disk(setuptools) - set(setuptools["packages"])
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"


def test_the_check_sees_a_package_left_out():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packaged = set(setuptools["packages"]) - {"autotune.campaign"}
    assert "autotune.campaign" in _on_disk(setuptools) - packaged
