"""Text from files (cache names, device names, knob names and values) cannot inject code into the
C header written by `autotune export-configs`: closing comments, newlines, '#', quotes and
backslashes all come out inert, and the header compiles to exactly the values recorded."""

import gzip
import json
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.search_spaces.kernels.macros import macro_name

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

ATTACKS = [
    '*/ int pwned(void){ system("touch /tmp/pwned"); return 0; } /*',
    'evil\n#define pwned 1\nint pwned_line;',
    'back\\slash\\',
    'quote " and ?? trigraph ??= and */ /* end',
    'unicode é ✓ \x01 tab\t',
]


def attack_cache(path, name: str) -> str:
    """A cache whose kernel name, device name, a knob name and a string knob value all carry ``name``."""
    knob = "k" + name
    cache = {}
    for i, v in enumerate([name, "plain"]):
        cache[str(i)] = {knob: v, "n": 1, "time": 1.0 + i, "times": [1.0 + i]}
    doc = {"device_name": name, "kernel_name": name, "problem_size": [1], "tune_params_keys": [knob, "n"],
           "tune_params": {knob: [name, "plain"], "n": [1]}, "cache": cache}
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return str(path)


@needs_gcc
@pytest.mark.parametrize("attack", ATTACKS)
def test_export_configs_header_is_inert(tmp_path, attack):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    cli = CliRunner()
    r = cli.invoke(app, ["import-kt", attack_cache(tmp_path / "c.json.gz", attack), "--db", url])
    assert r.exit_code == 0, r.output
    header = tmp_path / "tuned.h"
    r = cli.invoke(app, ["export-configs", "--task", attack, "--format", "c-header", "--prefix", "T",
                         "-o", str(header), "--db", url])
    assert r.exit_code == 0, r.output
    text = header.read_text()
    prog = tmp_path / "use.c"
    knob_macro = [line.split()[1] for line in text.splitlines() if line.startswith("#define T_K")][0]
    prog.write_text('#include <stdio.h>\n#include "tuned.h"\n'
                    f"int main(void) {{ fputs(T_DEVICE, stdout); putchar(0); fputs({knob_macro}, stdout); return 0; }}\n")
    exe = tmp_path / "use"
    device_macro = f"-DAUTOTUNE_DEVICE_{macro_name(attack)}"
    subprocess.run(["gcc", "-Wall", "-Werror", device_macro, "-I", str(tmp_path), str(prog), "-o", str(exe)],
                   check=True, capture_output=True)
    symbols = subprocess.run(["nm", str(exe)], capture_output=True, text=True).stdout
    assert "pwned" not in symbols
    out = subprocess.run([str(exe)], capture_output=True, check=True).stdout
    device, value = out.split(b"\0")
    assert device.decode() == attack and value.decode() == attack  # the recorded text, byte for byte
    for line in text.splitlines():  # every line is a directive, a comment or blank
        assert line == "" or line.startswith(("#", "/*", " *")), line
