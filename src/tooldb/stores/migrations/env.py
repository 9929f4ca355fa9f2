"""Alembic environment: always run on a connection tooldb hands over.

tooldb opens the transaction itself (``BEGIN IMMEDIATE`` on SQLite), so every
migration of one upgrade is applied atomically or not at all.
"""

from alembic import context

from tooldb.stores.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("tooldb migrations run through `tooldb init`, not the alembic CLI")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    transactional_ddl=True,
)
with context.begin_transaction():
    context.run_migrations()
