"""scripts/trace_runs.py: one line per seed, a token per batch with who proposed each measurement."""

from __future__ import annotations

import re

import trace_runs

from autotune.testing.caches import NAMES, ampere_time, turing_time, write_cache

LINE = re.compile(r"^seed (\d+): (\d+|> \d+)  (.+)$")


def lines(out: str) -> list[re.Match]:
    found = [LINE.match(line) for line in out.strip().splitlines()]
    assert found and all(found)
    return found


def test_search_trace_counts_every_measurement_of_every_batch(tmp_path, capsys):
    cache = write_cache(tmp_path / "a.json.gz", NAMES["turing"], turing_time)
    assert trace_runs.main(["search", str(cache), "--seeds", "2", "--limit", "32"]) == 0
    for m in lines(capsys.readouterr().out):
        tokens = m.group(3).split()
        letters = "".join(t.split(":")[0] for t in tokens).replace("x", "")
        assert set(letters) == {"s"} and all(len(t.split(":")[0].replace("x", "")) <= 8 for t in tokens)
        if not m.group(2).startswith(">"):
            # the run stops at the batch that gets within 5%, counted to that measurement as the benchmarks count
            before = len(letters) - len(tokens[-1].split(":")[0].replace("x", ""))
            assert before < int(m.group(2)) <= len(letters)
            assert float(tokens[-1].split(":")[1]) <= 1.05


def test_transfer_trace_names_the_arm_of_each_measurement(tmp_path, capsys):
    src = write_cache(tmp_path / "a.json.gz", NAMES["turing"], turing_time)
    tgt = write_cache(tmp_path / "b.json.gz", NAMES["ampere"], ampere_time)
    assert trace_runs.main(["transfer", str(src), str(tgt), "--seeds", "1", "--limit", "32", "--warm", "top_k=4"]) == 0
    (m,) = lines(capsys.readouterr().out)
    first = m.group(3).split()[0].split(":")[0].replace("x", "")
    assert first.startswith("wwww")  # the source's 4 best configurations, measured first by the warm arm
    assert set("".join(t.split(":")[0] for t in m.group(3).split())) <= set("wcpx")
