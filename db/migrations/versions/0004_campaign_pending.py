"""campaign pending: candidates reserved by a worker and not yet stored

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 01:20:00
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "campaign_pending",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("candidate_key", sa.String(length=64), nullable=False),
        sa.Column("candidate", sa.JSON(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=False),
        sa.Column("claimed", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["campaign_id"], ["campaigns.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("campaign_id", "candidate_key", name="uq_campaign_pending_key"),
    )
    op.create_index("ix_campaign_pending_campaign_id", "campaign_pending", ["campaign_id"])


def downgrade() -> None:
    op.drop_index("ix_campaign_pending_campaign_id", table_name="campaign_pending")
    op.drop_table("campaign_pending")
