"""Large native buffers can be put in huge pages (the graph's walk: native_memory.py)."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

import numpy as np

from tooldb.selection.native_memory import HUGE_PAGE, back_with_huge_pages

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _collapsible() -> bool:
    """Linux 6.1+ (MADV_COLLAPSE) with transparent huge pages not turned off."""
    if not THP.exists() or "[never]" in THP.read_text():
        return False
    major, minor = (int(part) for part in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 1)


def _huge_kib(address: int, size: int) -> int:
    """AnonHugePages of the mappings over ``[address, address + size)`` (/proc/self/smaps;
    advice splits a mapping where it starts and ends)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            start, end = (int(part, 16) for part in head.split("-"))
            inside = start < address + size and address < end
        elif inside and head == "AnonHugePages:":
            total += int(line.split()[1])
    return total


def test_a_buffer_in_small_pages_is_collapsed_into_huge_pages_where_the_kernel_can() -> None:
    """Linux 6.1+ with huge pages allowed (this machine and CI): the whole 2 MiB pages
    inside the range become huge pages. Elsewhere the call says it could not, and the
    buffer stays as it was. Either way the contents are kept."""
    size = 8 * HUGE_PAGE
    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # 4 KiB pages
    try:
        region.write(b"x" * size)  # touched: resident in small pages
        address = ctypes.addressof(ctypes.c_char.from_buffer(region))
        assert _huge_kib(address, size) == 0
        collapsed = back_with_huge_pages(address + 100, size - 200)  # unaligned ends are fine
        assert collapsed == _collapsible()
        huge = _huge_kib(address, size)
        if collapsed:
            assert huge >= 6 * HUGE_PAGE // 1024  # the whole 2 MiB pages inside
        else:
            assert huge == 0
        assert region[:3] == b"xxx" and region[size - 3 :] == b"xxx"  # contents kept
    finally:
        region.close()


def test_a_range_without_a_whole_huge_page_is_left_alone() -> None:
    small = np.ones(HUGE_PAGE // 8, dtype=np.float32)  # 1 MiB
    assert not back_with_huge_pages(small.ctypes.data, small.nbytes)
    assert small.sum() == len(small)
