"""Campaigns: tune a space with an algorithm and a runner, every measurement logged to the database.

- campaign: `Campaign`, what a campaign is made of and how one run of it starts and ends
- loop: the rounds of one run (ask, look up, measure, store, tell) and the budgets that end them
- batches: a plain runner seen as a streaming one, and the checks of what a runner returns
- heartbeat: the thread that tells the other workers a worker is alive
- result: `CampaignResult`, the figures a run returns
- resume: the command line that resumes a campaign from its stored recipe
"""

from autotune.campaign.campaign import Campaign, check_run, checked_seed
from autotune.campaign.result import CampaignResult
from autotune.campaign.resume import resume_command

__all__ = ["Campaign", "CampaignResult", "check_run", "checked_seed", "resume_command"]
