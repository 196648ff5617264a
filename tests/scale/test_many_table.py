"""`autotune tune many`'s closing table, written to a pipe or a file: one line per campaign within 100 columns,
as the listing commands' tables are (no cell folded over several lines)."""

from typer.testing import CliRunner

from autotune.cli.main import app

EXAMPLE = "example:pnpoly-rtx3090"


def test_the_summary_table_off_a_terminal_has_one_line_per_campaign(tmp_path, sqlite_url, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    long_name = "a-campaign-whose-name-is-long-enough-to-be-shortened-in-the-table"
    missing = tmp_path / "a-recording-that-is-not-there.json"
    spec = tmp_path / "many.yaml"
    spec.write_text(f"- {{kind: replay, cache: '{EXAMPLE}', campaign: {long_name}, trials: 4}}\n"
                    f"- {{kind: replay, cache: '{missing}', campaign: bad}}\n")
    r = CliRunner().invoke(app, ["tune", "many", str(spec), "--db", sqlite_url])
    assert r.exit_code == 1, r.output  # one campaign failed
    lines = r.stdout.splitlines()
    assert lines[0].strip() == "2 campaigns" and lines[1].split() == [
        "campaign", "kind", "status", "trials", "best_cost", "error"]
    assert len(lines) == 5 and all(len(line) <= 100 for line in lines), r.stdout
    ok, bad = lines[3].split(), lines[4].split()
    assert ok[0].startswith("a-campaign-") and ok[0].endswith("-in-the-table") and "…" in ok[0]  # cut, both ends kept
    assert ok[1:4] == ["replay", "finished", "4"] and ok[5] == "ms"
    assert bad[:3] == ["bad", "replay", "failed"] and bad[3].startswith("cache")
    # the whole error is in the line the campaign printed on standard error as it ended, one line each too
    assert [line.split(":")[0] for line in r.stderr.splitlines()] == [f"[1/2] {long_name}", "[2/2] bad"]
    assert str(missing) in r.stderr.splitlines()[1]
