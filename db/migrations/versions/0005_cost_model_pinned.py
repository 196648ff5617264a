"""cost models: a pinned flag (a model kept on purpose, never pruned as superseded)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 10:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cost_models") as batch:
        batch.add_column(sa.Column("pinned", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("cost_models") as batch:
        batch.drop_column("pinned")
