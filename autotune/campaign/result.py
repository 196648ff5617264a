"""What a campaign run returns: its figures, counted as every report counts them."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.db.campaigns import CampaignFigures
from autotune.types import Device, Measurement, Task


@dataclass
class CampaignResult:
    """A campaign's figures count its *own* measurements: the trials whose campaign is this one, made
    by any of its runs and workers (autotune.db.campaigns.CampaignFigures, the rule ``autotune
    campaigns`` and ``autotune plot convergence`` use too). Look-ups of trials measured elsewhere are
    counted apart, in ``reused``, and a better reused trial is in ``best_including_reused``."""

    campaign: str
    task: Task
    device: Device
    status: str  # finished, exhausted, time-budget, simulated-budget, interrupted (failed: stored, not returned)
    trials: int  # the campaign's own measurements (all runs and workers)
    evaluations: int  # trials + reused
    errors: int  # own measurements that failed
    best: Measurement | None  # the best own measurement
    simulated_s: float  # simulated seconds of the own measurements
    wall_s: float
    resumed: bool = False
    measured_here: int = 0  # measurements this run made itself (the others' are in ``trials``)
    reused: int = 0  # look-ups of trials measured elsewhere (another campaign, an import, a deleted campaign)
    best_including_reused: Measurement | None = None  # a reused trial better than ``best``; None if none is

    def __post_init__(self):
        for name in ("trials", "evaluations", "errors", "measured_here", "reused"):
            assert getattr(self, name) >= 0, f"negative {name}: {getattr(self, name)}"
        assert self.evaluations == self.trials + self.reused, (self.evaluations, self.trials, self.reused)

    @property
    def best_cost(self) -> float | None:
        return self.best.cost if self.best is not None else None

    @property
    def best_config(self):
        """The configuration (candidate payload) of the best own measurement; None when none succeeded."""
        return self.best.candidate.payload if self.best is not None else None

    def __repr__(self) -> str:  # the figures a user looks for first; the task and device are attributes
        reused = f", reused={self.reused}" if self.reused else ""
        better = self.best_including_reused
        looked_up = (f", best_including_reused=({better.cost!r}, {better.candidate.payload!r})"
                     if better is not None else "")
        return (f"CampaignResult(campaign={self.campaign!r}, status={self.status!r}, trials={self.trials}, "
                f"errors={self.errors}{reused}, best_cost={self.best_cost!r}, best_config={self.best_config!r}"
                f"{looked_up})")

    @property
    def best_evaluated(self) -> Measurement | None:
        """The best of everything the campaign evaluated, look-ups included."""
        return self.best_including_reused or self.best

    def summary(self) -> dict:
        """The keys of ``autotune tune ... --json`` (later capabilities add keys, never rename these).
        ``trials``, ``best_cost`` and ``best_config`` are the campaign's own measurements; ``reused``
        counts its look-ups, and ``best_including_reused`` ({cost, config}) is there only when a
        reused trial is better than its own best."""
        out = {
            "campaign": self.campaign, "task": self.task.key, "device": self.device.name, "trials": self.trials,
            "reused": self.reused,
            "best_cost": self.best_cost, "best_config": self.best_config,
            "simulated_s": round(self.simulated_s, 6), "wall_s": round(self.wall_s, 6), "status": self.status,
            "measured_here": self.measured_here,
        }
        if self.best_including_reused is not None:
            out["best_including_reused"] = {"cost": self.best_including_reused.cost,
                                            "config": self.best_including_reused.candidate.payload}
        return out


def campaign_result(name: str, task: Task, device: Device, status: str, figures: CampaignFigures, wall_s: float,
            resumed: bool, measured_here: int) -> CampaignResult:
    return CampaignResult(
        campaign=name, task=task, device=device, status=status, trials=figures.trials,
        evaluations=figures.evaluations, errors=figures.errors, best=figures.best, simulated_s=figures.simulated_s,
        wall_s=wall_s, resumed=resumed, measured_here=measured_here, reused=figures.reused,
        best_including_reused=figures.best_including_reused,
    )
