"""SQLAlchemy 2.0 declarative models of the experiment database.

Every value is JSON or a number: no pickle anywhere. Trials are unique per
(task, device, candidate): results from different devices never mix unless a
query asks for it, and no candidate is measured twice on one device.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from autotune.types import Candidate, Measurement

#: rows per IN (...) list or per batch of statements (keeps statements within the drivers' limits)
CHUNK = 500


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class DeviceRow(Base):
    __tablename__ = "devices"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    properties: Mapped[dict] = mapped_column(JSON, default=dict)


class TaskRow(Base):
    __tablename__ = "tasks"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(String(200), index=True)
    params: Mapped[dict] = mapped_column(JSON, default=dict)


class CampaignRow(Base):
    __tablename__ = "campaigns"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"))
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id"))
    algorithm: Mapped[str] = mapped_column(String(100))
    options: Mapped[dict] = mapped_column(JSON, default=dict)  # algorithm options, seed, batch, budget
    status: Mapped[str] = mapped_column(String(32), default="running")
    created: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class TrialRow(Base):
    __tablename__ = "trials"
    __table_args__ = (
        UniqueConstraint("task_id", "device_id", "candidate_key", name="uq_trial_task_device_candidate"),
        Index("ix_trials_task_device_cost", "task_id", "device_id", "cost"),
        Index("ix_trials_campaign", "campaign_id", "id"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"))
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id"))
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaigns.id"), nullable=True)
    candidate_key: Mapped[str] = mapped_column(String(64))
    candidate: Mapped[dict] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(32))
    cost: Mapped[float | None] = mapped_column(Float, nullable=True)
    times: Mapped[list] = mapped_column(JSON, default=list)
    predicted: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str] = mapped_column(Text, default="")
    build_s: Mapped[float] = mapped_column(Float, default=0.0)
    run_s: Mapped[float] = mapped_column(Float, default=0.0)
    simulated_s: Mapped[float] = mapped_column(Float, default=0.0)
    meta: Mapped[dict] = mapped_column(JSON, default=dict)
    created: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    worker: Mapped[str] = mapped_column(String(200), default="")


def row_to_measurement(row: TrialRow) -> Measurement:
    """The measurement a trial row holds."""
    return Measurement(
        Candidate(row.candidate, row.candidate_key), row.status, times=list(row.times or []), cost=row.cost,
        error=row.error or "", meta=dict(row.meta or {}), build_s=row.build_s or 0.0, run_s=row.run_s or 0.0,
        simulated_s=row.simulated_s or 0.0, predicted=row.predicted,
    )


def measurement_row(m: Measurement, task_id: int, device_id: int, campaign_id: int | None, worker: str) -> dict:
    """A trial row's columns for a measurement."""
    return {
        "task_id": task_id, "device_id": device_id, "campaign_id": campaign_id,
        "candidate_key": m.candidate.key, "candidate": m.candidate.payload, "status": m.status.value,
        "cost": float(m.cost) if m.ok else None, "times": [float(t) for t in m.times], "predicted": None if m.predicted is None else float(m.predicted), "error": m.error or "",
        "build_s": float(m.build_s), "run_s": float(m.run_s), "simulated_s": float(m.simulated_s),
        "meta": m.meta or {}, "created": utcnow(), "worker": worker,
    }


class CampaignTrialRow(Base):
    """Every evaluation a campaign made, in order: its own measurements and look-ups of known trials."""

    __tablename__ = "campaign_trials"
    __table_args__ = (UniqueConstraint("campaign_id", "trial_id", name="uq_campaign_trial"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"), index=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"))
    reused: Mapped[bool] = mapped_column(Boolean, default=False)  # answered from the database, not measured


class AlgorithmStateRow(Base):
    __tablename__ = "algorithm_states"
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"), primary_key=True)
    state: Mapped[dict] = mapped_column(JSON)
    updated: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class CostModelRow(Base):
    __tablename__ = "cost_models"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    task_id: Mapped[int | None] = mapped_column(ForeignKey("tasks.id"), nullable=True, index=True)
    device_id: Mapped[int | None] = mapped_column(ForeignKey("devices.id"), nullable=True)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaigns.id"), nullable=True)
    n_samples: Mapped[int] = mapped_column(Integer, default=0)
    metrics: Mapped[dict] = mapped_column(JSON, default=dict)  # spearman, top-k recall, ...
    data: Mapped[bytes] = mapped_column(LargeBinary)  # the library's own format (XGBoost JSON), never pickle
    format: Mapped[str] = mapped_column(String(32), default="json")
    created: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    # kept on purpose (`autotune models --pin ID`): never pruned as a superseded model
    pinned: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class RuleRow(Base):
    """A graph substitution rule (JSON) with its provenance and verification status."""

    __tablename__ = "rules"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)  # content hash of the patterns
    name: Mapped[str] = mapped_column(String(200))
    provenance: Mapped[str] = mapped_column(String(100))  # builtin, generated:<domain>
    status: Mapped[str] = mapped_column(String(32))  # hand-written, proved, tested
    rule: Mapped[dict] = mapped_column(JSON)
    created: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class CampaignClaimRow(Base):
    """A worker of a campaign: what it holds of the trial budget, and when it was last heard of.

    ``n`` counts the measurements the worker has claimed and not yet stored (those in flight and
    those it may start next), so the campaign's stored trials plus every live worker's ``n`` never
    exceed the budget. ``heartbeat`` is refreshed by a thread of the running worker
    (``Database.HEARTBEAT_S``); a worker silent for longer than ``Database.CLAIM_GRACE_S``, or whose
    process on this host is gone, is dead: its claim is dropped and the candidates it reserved
    (CampaignPendingRow) are taken over by the next worker that claims.
    """

    __tablename__ = "campaign_claims"
    __table_args__ = (UniqueConstraint("campaign_id", "worker", name="uq_campaign_claim_worker"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"), index=True)
    worker: Mapped[str] = mapped_column(String(200))
    n: Mapped[int] = mapped_column(Integer, default=0)
    heartbeat: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class CampaignPendingRow(Base):
    """A candidate a worker has reserved for measurement and not yet stored.

    One row per (campaign, candidate): a second worker asking for the same candidate is refused it,
    so no candidate is measured twice. Storing the trial removes the row; a dead worker's rows are
    reassigned to a live worker, which measures them.
    """

    __tablename__ = "campaign_pending"
    __table_args__ = (UniqueConstraint("campaign_id", "candidate_key", name="uq_campaign_pending_key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"), index=True)
    candidate_key: Mapped[str] = mapped_column(String(64))
    candidate: Mapped[dict] = mapped_column(JSON)
    worker: Mapped[str] = mapped_column(String(200))
    claimed: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
