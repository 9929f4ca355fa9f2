"""SessionSight's own database: patients, sessions (date, note, the extraction once made)
and note chunks with their vectors, in SQLite or PostgreSQL (SQLAlchemy Core).

``prepare(url, tenant)`` creates the tables (``create_all`` is idempotent: a second
install changes nothing) and seeds the synthetic data set for the tenant when it has no
patients yet. Every row carries ``tenant`` and every query filters by it, like the
registry's own tables (docs/security.md).
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ...errors import NotFound, UsageError

DATA = Path(__file__).parent / "data"

metadata = sa.MetaData()

patients = sa.Table(
    "sessionsight_patients",
    metadata,
    sa.Column("tenant", sa.String(64), primary_key=True),
    sa.Column("patient_id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("birth_year", sa.Integer),
)

sessions = sa.Table(
    "sessionsight_sessions",
    metadata,
    sa.Column("tenant", sa.String(64), primary_key=True),
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("patient_id", sa.String(64), nullable=False),
    sa.Column("session_date", sa.Date, nullable=False),
    sa.Column("note", sa.Text, nullable=False),
    sa.Column("extraction", sa.JSON),
    sa.Column("extracted_at", sa.DateTime(timezone=True)),
    sa.Column("requires_review", sa.Boolean),
    sa.Index("ix_sessionsight_sessions_patient", "tenant", "patient_id", "session_date"),
)

chunks = sa.Table(
    "sessionsight_chunks",
    metadata,
    sa.Column("tenant", sa.String(64), primary_key=True),
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("embedder", sa.String(200)),
    sa.Column("vector", sa.LargeBinary),
)

_engines: dict[str, sa.Engine] = {}
_lock = threading.Lock()


def engine(url: str) -> sa.Engine:
    """One engine per database URL for the process (created with the folder of a file)."""
    with _lock:
        found = _engines.get(url)
        if found is None:
            parsed = sa.make_url(url)
            if parsed.get_backend_name() == "sqlite" and parsed.database not in (
                None,
                "",
                ":memory:",
            ):
                Path(str(parsed.database)).expanduser().parent.mkdir(parents=True, exist_ok=True)
            if parsed.get_backend_name() == "postgresql" and parsed.drivername == "postgresql":
                parsed = parsed.set(drivername="postgresql+psycopg")
            found = _engines[url] = sa.create_engine(parsed, pool_pre_ping=True)
        return found


def prepare(url: str, tenant: str) -> int:
    """Create the tables if missing and seed the synthetic data for ``tenant``; the
    number of sessions seeded (0 when the tenant already has its patients)."""
    db = engine(url)
    metadata.create_all(db)
    with db.begin() as conn:
        have = conn.execute(
            sa.select(sa.func.count()).select_from(patients).where(patients.c.tenant == tenant)
        ).scalar_one()
        if have:
            return 0
        people = json.loads((DATA / "patients.json").read_text(encoding="utf-8"))
        notes = [
            json.loads(line)
            for line in (DATA / "sessions.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        conn.execute(patients.insert(), [{**p, "tenant": tenant} for p in people])
        conn.execute(
            sessions.insert(),
            [
                {**n, "tenant": tenant, "session_date": date.fromisoformat(n["session_date"])}
                for n in notes
            ],
        )
        conn.execute(
            chunks.insert(),
            [
                {"tenant": tenant, "session_id": n["session_id"], "position": i, "text": text}
                for n in notes
                for i, text in enumerate(split_chunks(n["note"]))
            ],
        )
    return len(notes)


def split_chunks(note: str) -> list[str]:
    """A note's chunks for search: its non-empty lines (one section each in our layout),
    long lines cut at about 400 characters on a sentence end."""
    out: list[str] = []
    for line in (part.strip() for part in note.splitlines()):
        while len(line) > 400:
            cut = line.rfind(". ", 0, 400)
            cut = cut + 1 if cut > 100 else 400
            out.append(line[:cut].strip())
            line = line[cut:].strip()
        if line:
            out.append(line)
    return out


def _session_row(row: sa.Row[Any]) -> dict[str, Any]:
    return {
        "session_id": row.session_id,
        "patient_id": row.patient_id,
        "session_date": row.session_date.isoformat(),
        "note": row.note,
        "extraction": row.extraction,
        "requires_review": row.requires_review,
    }


def patient(url: str, tenant: str, patient_id: str) -> dict[str, Any]:
    with engine(url).connect() as conn:
        row = conn.execute(
            sa.select(patients).where(
                patients.c.tenant == tenant, patients.c.patient_id == patient_id
            )
        ).first()
        if row is None:
            known = conn.execute(
                sa.select(patients.c.patient_id).where(patients.c.tenant == tenant).limit(20)
            ).scalars()
            raise NotFound(f"no patient {patient_id!r}; patients: {', '.join(known) or 'none'}")
    return {"patient_id": row.patient_id, "name": row.name, "birth_year": row.birth_year}


def patient_sessions(
    url: str, tenant: str, patient_id: str, start: date | None = None, end: date | None = None
) -> list[dict[str, Any]]:
    """A patient's sessions, oldest first (NotFound for an unknown patient)."""
    patient(url, tenant, patient_id)
    query = sa.select(sessions).where(
        sessions.c.tenant == tenant, sessions.c.patient_id == patient_id
    )
    if start is not None:
        query = query.where(sessions.c.session_date >= start)
    if end is not None:
        query = query.where(sessions.c.session_date <= end)
    with engine(url).connect() as conn:
        rows = conn.execute(query.order_by(sessions.c.session_date)).all()
    return [_session_row(row) for row in rows]


def session(url: str, tenant: str, session_id: str) -> dict[str, Any]:
    with engine(url).connect() as conn:
        row = conn.execute(
            sa.select(sessions).where(
                sessions.c.tenant == tenant, sessions.c.session_id == session_id
            )
        ).first()
    if row is None:
        raise NotFound(f"no session {session_id!r} (session ids look like 'P01-S3')")
    return _session_row(row)


def save_extraction(
    url: str, tenant: str, session_id: str, extraction: dict[str, Any], requires_review: bool
) -> None:
    """Store the extraction made from a session's note (one statement: all or nothing)."""
    with engine(url).begin() as conn:
        done = conn.execute(
            sessions.update()
            .where(sessions.c.tenant == tenant, sessions.c.session_id == session_id)
            .values(
                extraction=extraction,
                requires_review=requires_review,
                extracted_at=datetime.now(UTC),
            )
        ).rowcount
    if not done:
        raise NotFound(f"no session {session_id!r}")


def all_chunks(url: str, tenant: str, patient_id: str | None) -> list[dict[str, Any]]:
    query = (
        sa.select(chunks, sessions.c.patient_id, sessions.c.session_date)
        .join(
            sessions,
            sa.and_(
                sessions.c.tenant == chunks.c.tenant, sessions.c.session_id == chunks.c.session_id
            ),
        )
        .where(chunks.c.tenant == tenant)
    )
    if patient_id is not None:
        patient(url, tenant, patient_id)
        query = query.where(sessions.c.patient_id == patient_id)
    with engine(url).connect() as conn:
        rows = conn.execute(query.order_by(chunks.c.session_id, chunks.c.position)).all()
    return [dict(row._mapping) for row in rows]


def store_vectors(url: str, tenant: str, embedder: str, rows: list[dict[str, Any]]) -> None:
    """Keep the vectors computed for chunks (so each chunk is embedded once per embedder)."""
    if not rows:
        return
    with engine(url).begin() as conn:
        for row in rows:
            conn.execute(
                chunks.update()
                .where(
                    chunks.c.tenant == tenant,
                    chunks.c.session_id == row["session_id"],
                    chunks.c.position == row["position"],
                )
                .values(embedder=embedder, vector=row["vector"])
            )


def parse_date(value: str | None, name: str) -> date | None:
    if value in (None, ""):
        return None
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise UsageError(f"{name} must be a date as YYYY-MM-DD, got {value!r}") from None
