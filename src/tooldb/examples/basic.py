"""A handful of small, real tools used by the README demo and the tests."""

from __future__ import annotations

import asyncio
import re
import statistics
import unicodedata
from typing import Literal

from tooldb import tool


@tool(category="text")
def word_count(text: str) -> dict[str, int]:
    """Count the words, lines and characters of a text.

    Args:
        text: The text to measure.
    """
    return {"words": len(text.split()), "lines": len(text.splitlines()), "characters": len(text)}


@tool(category="text")
def slugify(text: str, separator: str = "-") -> str:
    """Turn a title into a URL slug (lowercase ASCII words joined by a separator).

    Args:
        text: The title to convert.
        separator: What goes between words.
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return separator.join(re.findall(r"[a-z0-9]+", ascii_text.lower()))


@tool(category="math")
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool(category="math")
def describe_numbers(values: list[float]) -> dict[str, float]:
    """Summary statistics of a list of numbers: count, mean, median, min, max, stdev.

    Args:
        values: The numbers to summarise.
    """
    if not values:
        raise ValueError("values must not be empty")
    return {
        "count": len(values),
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


@tool(category="units")
def convert_temperature(
    value: float, from_unit: Literal["C", "F", "K"], to_unit: Literal["C", "F", "K"]
) -> float:
    """Convert a temperature between Celsius, Fahrenheit and Kelvin.

    Args:
        value: The temperature to convert.
        from_unit: Unit of the value: C, F or K.
        to_unit: Unit to convert to: C, F or K.
    """
    celsius = {"C": value, "F": (value - 32) * 5 / 9, "K": value - 273.15}[from_unit]
    return round({"C": celsius, "F": celsius * 9 / 5 + 32, "K": celsius + 273.15}[to_unit], 6)


@tool(category="diagnostics", timeout_s=5)
async def wait(seconds: float = 0.1) -> str:
    """Wait asynchronously for a number of seconds (for trying timeouts and parallelism).

    Args:
        seconds: How long to wait.
    """
    await asyncio.sleep(seconds)
    return f"waited {seconds} s"
