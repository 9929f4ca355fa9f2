"""Small date and people tools for the README's router tour (arguments from plain text)."""

from __future__ import annotations

from datetime import date

from tooldb import tool


@tool(category="calendar")
def days_between(start: str, end: str) -> int:
    """Count the days from a start date to an end date.

    Args:
        start: The first date, YYYY-MM-DD.
        end: The last date, YYYY-MM-DD.
    """
    return (date.fromisoformat(end) - date.fromisoformat(start)).days


@tool(category="calendar")
def schedule_meeting(person: str, day: str, time: str = "09:00") -> str:
    """Schedule a meeting with a person on a day (returns the confirmation).

    Args:
        person: Who to meet, by name.
        day: The date of the meeting, YYYY-MM-DD.
        time: The start time, HH:MM.
    """
    date.fromisoformat(day)  # a clear error for a day that is no date
    return f"meeting with {person} on {day} at {time}"
