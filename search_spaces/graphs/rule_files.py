"""Rules files: read as rules of the file's provenance and unverified (each rule checked by
:func:`~autotune.search_spaces.graphs.rules.rule_fault` first, the file, the rule and the fault named),
written back, and a rule as the database stores it."""

from __future__ import annotations

import json

from autotune.errors import UsageError
from autotune.search_spaces.graphs.rules import Rule, rule_fault

#: the status of rules read from a file: nothing this program did verified them (a rule the database
#: already holds, proved or tested by `autotune rules generate` or built in, keeps its own row)
FILE_STATUS = "unverified"


def file_provenance(path: str) -> str:
    """The provenance of rules read from the file ``path``: ``file:PATH`` (its end, within the 100 characters
    the database keeps)."""
    text = f"file:{path}"
    return text if len(text) <= 100 else "file:..." + text[-92:]


def load_rules(path: str) -> list[Rule]:
    """The rules of a JSON file (a list of rules, or ``{"rules": [...]}`` as `autotune rules generate -o`
    writes); UsageError naming the file, the rule and its fault. Their provenance is the file
    (:func:`file_provenance`) and their status ``FILE_STATUS``, whatever the file says: a claim such as
    "proved" in a file is not a proof."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as exc:
        raise UsageError(f"cannot read rules file {path!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"rules file {path!r} is not valid JSON: {exc}") from None
    items = data.get("rules") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise UsageError(f"rules file {path!r}: expected a list of rules or {{\"rules\": [...]}}")
    out, names = [], set()
    for i, d in enumerate(items, 1):
        name = d.get("name") if isinstance(d, dict) else None
        where = f"rules file {path!r}, rule {i}" + (f" ({name!r})" if isinstance(name, str) else "")
        fault = rule_fault(d)
        if fault is None and name in names:
            fault = "its name is given twice (names identify rewrites)"
        if fault:
            raise UsageError(f"{where}: {fault}")
        names.add(name)
        out.append(Rule.from_json({**d, "provenance": file_provenance(path), "status": FILE_STATUS}))
    return out


def save_rules(rules, path: str) -> None:
    """Write ``rules`` as a rules file, whole or not at all (``write_whole``). UsageError naming the file when it
    cannot be written."""
    from autotune.files import write_whole

    def write(name: str) -> None:
        with open(name, "w") as f:
            json.dump({"rules": [r.to_json() for r in rules]}, f, indent=1)

    try:
        write_whole(path, write)
    except OSError as exc:
        raise UsageError(f"cannot write the rules file {str(path)!r}: {exc.strerror or exc}") from None


def rule_record(rule) -> dict:
    """A rule as stored in the database: its JSON plus a content key (code rules are keyed by their JSON)."""
    from autotune.types import stable_key

    d = rule.to_json()
    return {**d, "key": getattr(rule, "key", None) or stable_key(d, 12)}
