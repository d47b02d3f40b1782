"""Benchmarks for ``make bench``: each measures looptrace and a baseline side by side in one run.

They are measurements, not tests: a missed goal prints MISS and the process still exits 0. Each
benchmark alternates rounds of looptrace and its baseline in the same process and reports medians,
so that machine noise (another job, a cold cache, thermal throttling) lands on both figures and the
ratio stays meaningful on a shared 2-core box.
"""

from __future__ import annotations

__all__: list[str] = []
