"""Database methods for graph substitution rules (mixed into Database): store generated and
hand-written rules with their provenance and verification status."""

from __future__ import annotations

from sqlalchemy import select

from autotune.db.models import RuleRow, utcnow


class GraphRules:
    """Rule storage methods of the Database facade (which provides session and _insert)."""

    def save_rules(self, rules: list[dict]) -> int:
        """Store rules (each with key, name, provenance, status); a stored rule gets the newer status.
        Returns how many were new."""
        table = RuleRow.__table__
        with self.session() as s:
            known = set(s.scalars(select(table.c.key).where(table.c.key.in_([r["key"] for r in rules]))).all())
            for r in rules:
                values = {"name": r["name"], "provenance": r["provenance"], "status": r["status"], "rule": r}
                s.execute(self._insert(table).values(key=r["key"], created=utcnow(), **values)
                          .on_conflict_do_update(index_elements=["key"], set_=values))
        return len({r["key"] for r in rules} - known)
