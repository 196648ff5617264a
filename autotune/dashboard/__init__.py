"""The web dashboard (`autotune dashboard`): a read-only view of the tuning database."""
