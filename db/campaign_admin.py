"""Database methods that change a campaign as a whole (mixed into Database): its status, delete it, with or
without the trials it measured, and rename it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from autotune.db.engine import waits_out_locks
from autotune.db.models import (
    AlgorithmStateRow,
    CampaignClaimRow,
    CampaignPendingRow,
    CampaignRow,
    CampaignTrialRow,
    CostModelRow,
    TrialRow,
    utcnow,
)
from autotune.errors import UsageError, check_campaign_name


class CampaignAdmin:
    """Campaign administration methods of the Database facade (which provides session, dialect and
    refuse_live_workers)."""

    @waits_out_locks
    def set_campaign_status(self, campaign_id: int, status: str) -> None:
        """Set a campaign's status (nothing when it was deleted meanwhile)."""
        with self.session() as s:
            row = s.get(CampaignRow, campaign_id)
            if row is not None:
                row.status, row.updated = status, utcnow()

    def campaign_created(self, campaign_id: int) -> datetime | None:
        """When the campaign of this id was created (None: there is none): with the id, what names one
        campaign for its whole life, where SQLite may give a deleted campaign's id to the next."""
        with self.session() as s:
            return s.scalar(select(CampaignRow.created).where(CampaignRow.id == campaign_id))

    def _campaign_id_for_change(self, s: Session, name: str) -> int:
        """The id of the campaign named exactly ``name``, its row locked on PostgreSQL (as record_batch
        locks it), or UsageError naming the closest campaign names."""
        from autotune.db.names import unknown_name

        query = select(CampaignRow.id).where(CampaignRow.name == name)
        cid = s.scalar(query.with_for_update() if self.dialect == "postgresql" else query)
        if cid is None:
            raise unknown_name("campaign", name, s.scalars(select(CampaignRow.name)).all())
        return cid

    def delete_campaign(self, name: str, with_trials: bool = False, force: bool = False) -> dict:
        """Delete the campaign ``name`` in one transaction: its row, its history (campaign_trials), its
        algorithm state, its workers' claims and reservations, and its cost models (a pinned model is
        kept, detached from the campaign). The trials it measured stay, with campaign_id NULL: they
        are measurements of the task on the device, which other campaigns reuse. ``with_trials`` deletes
        them too, with every other campaign's links to them. A campaign with live workers is refused
        (``refuse_live_workers``) unless ``force``. Returns what was deleted and kept."""
        links, trials, models = CampaignTrialRow.__table__, TrialRow.__table__, CostModelRow.__table__
        with self.session() as s:
            cid = self._campaign_id_for_change(s, name)
            if not force:
                self.refuse_live_workers(cid, name)
            own = select(trials.c.id).where(trials.c.campaign_id == cid)
            n_own = s.scalar(select(func.count()).select_from(own.subquery()))
            n_links = s.scalar(select(func.count(links.c.id)).where(links.c.campaign_id == cid))
            if with_trials:
                s.execute(links.delete().where(links.c.trial_id.in_(own)))
            s.execute(links.delete().where(links.c.campaign_id == cid))
            if with_trials:
                s.execute(trials.delete().where(trials.c.campaign_id == cid))
            else:
                s.execute(update(trials).where(trials.c.campaign_id == cid).values(campaign_id=None))
            for table in (AlgorithmStateRow.__table__, CampaignClaimRow.__table__, CampaignPendingRow.__table__):
                s.execute(table.delete().where(table.c.campaign_id == cid))
            kept = s.execute(update(models).where(models.c.campaign_id == cid, models.c.pinned.is_(True))
                             .values(campaign_id=None)).rowcount
            dropped = s.execute(models.delete().where(models.c.campaign_id == cid)).rowcount
            s.execute(CampaignRow.__table__.delete().where(CampaignRow.__table__.c.id == cid))
        return {"campaign": name, "links": int(n_links or 0), "trials_deleted": int(n_own) if with_trials else 0,
                "trials_kept": 0 if with_trials else int(n_own), "models_deleted": int(dropped),
                "models_kept": int(kept)}

    def rename_campaign(self, old: str, new: str, force: bool = False) -> None:
        """Rename the campaign ``old`` to ``new`` (refused when a campaign ``new`` exists); its history,
        trials, models and workers' claims follow, as they refer to it by id. A campaign with live workers is
        refused (``refuse_live_workers``: they would go on naming it ``old``) unless ``force``."""
        if not new or not new.strip() or new != new.strip():
            raise UsageError(f"the new campaign name {new!r} must be non-empty, without leading or trailing spaces")
        check_campaign_name(new, "new campaign name")
        if len(new) > CampaignRow.__table__.c.name.type.length:
            raise UsageError(f"the new campaign name is {len(new)} characters long; at most "
                             f"{CampaignRow.__table__.c.name.type.length}")
        table = CampaignRow.__table__
        with self.session() as s:
            cid = self._campaign_id_for_change(s, old)
            if not force:
                self.refuse_live_workers(cid, old, rename=True)
            if s.scalar(select(table.c.id).where(table.c.name == new)) is not None:
                raise UsageError(f"campaign {new!r} already exists; choose another name, or delete it first "
                                 "(autotune campaigns delete)")
            s.execute(update(table).where(table.c.id == cid).values(name=new))

