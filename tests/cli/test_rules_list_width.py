"""`autotune rules list` at 80 columns (and at the 100 of a pipe): every rule's name shown whole, a long file
provenance cut in its middle instead (it took the room and cut the names: three rules of one file read
'my_gen_elem…' alike)."""

from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.db import open_database
from autotune.search_spaces.graphs.builtin_rules import builtin_rules
from autotune.search_spaces.graphs.rule_files import file_provenance, rule_record


def test_rule_names_are_whole_beside_a_long_file_provenance(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    database = open_database(url)
    records = [rule_record(r) for r in builtin_rules()]
    path = "projects/model-optimisation/rules/generated-and-edited/by-hand/my-rules.json"  # a long provenance
    mine = [{**records[0], "name": f"my_gen_elementwise_{i}_rev", "key": f"k{i}", "provenance": file_provenance(path),
             "status": "unverified"} for i in (1, 2, 3)]
    database.save_rules(records + mine)
    database.close()
    names = [r["name"] for r in records + mine]
    for columns in ("80", "100"):
        r = CliRunner().invoke(app, ["rules", "list", "--db", url], env={"COLUMNS": columns})
        assert r.exit_code == 0, r.output
        lines = r.stdout.splitlines()
        assert max(len(line) for line in lines) <= int(columns)
        shown = [line.split()[1] for line in lines[2:]]
        assert sorted(shown) == sorted(names)
        assert sum("my-rules.json" in line for line in lines) == 3  # the file's name stays in its provenance
