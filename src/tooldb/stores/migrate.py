"""Named, transactional schema migrations (Alembic, driven programmatically).

``upgrade`` applies every pending migration in one transaction, so a failed
upgrade leaves the registry exactly as it was. ``HEAD`` is pinned here so that
opening a registry only reads one row instead of loading Alembic.
"""

from __future__ import annotations

import sqlalchemy as sa

HEAD = "0015_run_steps"
VERSION_TABLE = "alembic_version"


def current_revision(engine: sa.Engine) -> str | None:
    """The registry's schema revision, or None for an empty database."""
    with engine.connect() as connection:
        if not sa.inspect(connection).has_table(VERSION_TABLE):
            return None
        row = connection.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).first()
        return row[0] if row else None


def upgrade(engine: sa.Engine) -> tuple[str | None, str]:
    """Bring the schema to HEAD in place, keeping data; returns (before, after)."""
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext

    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            from .postgres import migration_lock

            migration_lock(connection)
        before = MigrationContext.configure(connection).get_current_revision()
        config = Config()
        config.set_main_option("script_location", "tooldb.stores:migrations")
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        after = MigrationContext.configure(connection).get_current_revision()
        if connection.dialect.name == "postgresql":
            from .tenant_scope import grant_sql_role

            grant_sql_role(connection)  # the role SQL tools run as (creating it: CREATEROLE)
    return before, after or HEAD
