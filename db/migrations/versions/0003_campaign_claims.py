"""campaign claims: trial-budget claims per worker

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 23:40:00
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "campaign_claims",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("heartbeat", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["campaign_id"], ["campaigns.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("campaign_id", "worker", name="uq_campaign_claim_worker"),
    )
    op.create_index("ix_campaign_claims_campaign_id", "campaign_claims", ["campaign_id"])


def downgrade() -> None:
    op.drop_index("ix_campaign_claims_campaign_id", table_name="campaign_claims")
    op.drop_table("campaign_claims")
