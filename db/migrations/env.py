"""Alembic environment: runs on the connection autotune hands over (config.attributes["connection"])."""

from alembic import context

from autotune.db.models import Base

config = context.config
target_metadata = Base.metadata


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is None:  # plain `alembic` command line: connect to sqlalchemy.url
        from sqlalchemy import create_engine

        with create_engine(config.get_main_option("sqlalchemy.url")).connect() as conn:
            context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
            with context.begin_transaction():
                context.run_migrations()
            conn.commit()
        return
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


run()
