"""``looptrace collect --alert COMMAND`` / ``--alert-url URL``: the guard's rules on runs still going.

Each preview of an open trace (``live.py``, about once a second) maps the trace's spans to records;
``Alerts.check`` reads the running runs among them, evaluates the rules layer's repeat rules over
their calls so far (``rules.repeat_findings``, the analyzer's definitions and thresholds) and the
optional spend limit, and fires a hook once per run and finding: a command (``/bin/sh -c COMMAND``,
the finding as JSON on stdin and in ``LOOPTRACE_*`` environment variables) or a JSON POST.

Hooks never slow ingest: ``check`` runs on the flusher thread (never in a request), findings wait in
a bounded queue (past ``max_queued`` they are dropped and counted), one worker thread runs them with
a timeout (a command that outlives it is killed with its process group), and failures are counted
(``AlertStats``), never raised. A tool's arguments and observations are not sent: they may hold what
the sink would redact; the tool's name, the steps and the spend are.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import threading
import urllib.request
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ...records.actions import call_key
from ...rules import DEFAULT_THRESHOLDS, Act, Thresholds, outcome_key, repeat_findings
from .live import RUNNING

__all__ = ["Alerts", "AlertStats", "run_findings"]

log = logging.getLogger("looptrace.alerts")


@dataclass
class AlertStats:
    findings: int = 0  # distinct (run, finding) pairs found
    fired: int = 0  # hooks that ran and succeeded
    failed: int = 0  # a command that exited non-zero or could not start; a POST that failed
    timed_out: int = 0  # killed at the timeout
    dropped: int = 0  # the queue was full


def _acts(calls: Sequence[Mapping[str, Any]], steps: Mapping[int, Mapping[str, Any]], t: Thresholds) -> list[Act]:
    """A run's calls (tool_call_records rows) and steps (step_records rows by step) as the rules' acts."""
    by_step: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for c in calls:
        by_step[int(c.get("step") or 0)].append(c)
    acts = []
    for step in sorted(set(by_step) | set(steps)):
        s = steps.get(step) or {}
        tokens = (s.get("input_tokens") or 0) + (s.get("output_tokens") or 0) if s else None
        cost = s.get("cost_usd")
        own = sorted(by_step.get(step, ()), key=lambda c: c.get("call_index") or 0)
        if not own:
            acts.append(Act(step, None, None, False, None, tokens, cost))
        for i, c in enumerate(own):
            obs = c.get("observation")
            acts.append(Act(step, call_key(c.get("tool"), c.get("args")), outcome_key(obs, t), bool(c.get("is_error")),
                            c.get("tool"), tokens if i == 0 else None, cost if i == 0 else None,
                            len(obs.encode("utf-8")) if isinstance(obs, str) else 0))
    return acts


def run_findings(rows: Mapping[str, Sequence[Mapping[str, Any]]], t: Thresholds = DEFAULT_THRESHOLDS,
                 max_usd: float | None = None) -> list[dict[str, Any]]:
    """The findings of every running run in one trace's record rows, as the JSON a hook receives."""
    runs = {r["run_id"]: r for r in rows.get("run_records", ()) if r.get("run_id")}
    running = {rid for rid, r in runs.items() if r.get("status") in (None, RUNNING) and r.get("ended_at") is None}
    calls: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for c in rows.get("tool_call_records", ()):
        calls[c.get("run_id")].append(c)
    steps: dict[str, dict[int, Mapping[str, Any]]] = defaultdict(dict)
    for s in rows.get("step_records", ()):
        steps[s.get("run_id")][int(s.get("step") or 0)] = s
    out = []
    for rid in sorted(running):
        spend = sum(s.get("cost_usd") or 0.0 for s in steps[rid].values())
        base = {"run_id": rid, "agent": runs[rid].get("agent"), "status": RUNNING, "run_spend_usd": round(spend, 6)}
        for f in repeat_findings(_acts(calls[rid], steps[rid], t), t):
            out.append({**base, "rule": f.rule, "message": f.message, "steps": list(f.steps),
                        "first_step": f.first_step, "last_step": f.last_step, "tool": f.tool,
                        "tokens": f.tokens, "cost_usd": f.cost_usd})
        if max_usd is not None and spend >= max_usd:
            out.append({**base, "rule": "max_usd", "message": f"${spend:.4f} spent; max_usd={max_usd:g}",
                        "steps": [], "first_step": None, "last_step": None, "tool": None, "tokens": None,
                        "cost_usd": round(spend, 6)})
    return out


class Alerts:
    """Fire ``command`` and/or POST to ``url`` once per running run and finding. ``close()`` at the end."""

    def __init__(self, command: str | None = None, url: str | None = None, *,
                 thresholds: Thresholds = DEFAULT_THRESHOLDS, max_usd: float | None = None, timeout: float = 10.0,
                 max_queued: int = 100) -> None:
        if not command and not url:
            raise ValueError("Alerts needs a command or a url")
        self.command, self.url = command, url
        self.thresholds, self.max_usd, self.timeout = thresholds, max_usd, timeout
        self.stats = AlertStats()
        self._seen: set[tuple[Any, ...]] = set()
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=max_queued)
        self._worker = threading.Thread(target=self._work, name="looptrace-alerts", daemon=True)
        self._worker.start()

    def check(self, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> int:
        """Queue the new findings of one open trace's rows; how many were new. Never raises."""
        try:
            new = 0
            for finding in run_findings(rows, self.thresholds, self.max_usd):
                # One streak is one finding, whichever repeat rules it trips (the same failing call is
                # both ``repeat`` and ``failing``): the first, in the rules layer's order, is sent.
                kind = "max_usd" if finding["rule"] == "max_usd" else "stagnation"
                key = (finding["run_id"], kind, finding["first_step"])
                if key in self._seen:
                    continue
                self._seen.add(key)
                self.stats.findings += 1
                new += 1
                try:
                    self._queue.put_nowait(finding)
                except queue.Full:
                    self.stats.dropped += 1
            return new
        except Exception:  # noqa: BLE001 - an alert is never a reason to stop ingesting
            log.warning("looptrace collect: could not evaluate alerts", exc_info=True)
            return 0

    def close(self, timeout: float | None = None) -> None:
        """Run what is queued (each hook bounded by its own timeout), then stop the worker."""
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._worker.join(timeout)

    def _work(self) -> None:
        while (finding := self._queue.get()) is not None:
            for fire in ((self._run, self.command), (self._post, self.url)):
                if fire[1]:
                    try:
                        ok = fire[0](finding)
                    except Exception as exc:  # noqa: BLE001
                        log.warning("looptrace collect: alert hook failed: %s", exc)
                        ok = False
                    if ok:
                        self.stats.fired += 1
                    elif ok is False:
                        self.stats.failed += 1

    def _run(self, finding: dict[str, Any]) -> bool | None:
        env = {**os.environ, **environment(finding)}
        proc = subprocess.Popen(["/bin/sh", "-c", str(self.command)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=env, start_new_session=True)
        try:
            _, err = proc.communicate(json.dumps(finding).encode(), timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            self.stats.timed_out += 1
            log.warning("looptrace collect: alert command killed after %ss", self.timeout)
            return None
        if proc.returncode != 0:
            log.warning("looptrace collect: alert command exited %d: %s", proc.returncode,
                        err.decode(errors="replace").strip()[-300:])
            return False
        return True

    def _post(self, finding: dict[str, Any]) -> bool:
        request = urllib.request.Request(str(self.url), data=json.dumps(finding).encode(), method="POST",
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - the user's URL
            return 200 <= response.status < 300

    def summary(self) -> dict[str, int]:
        return asdict(self.stats)


def environment(finding: Mapping[str, Any]) -> dict[str, str]:
    """The finding as ``LOOPTRACE_*`` environment variables for an alert command."""
    return {"LOOPTRACE_RUN_ID": str(finding["run_id"]), "LOOPTRACE_AGENT": str(finding.get("agent") or ""),
            "LOOPTRACE_RULE": str(finding["rule"]), "LOOPTRACE_MESSAGE": str(finding.get("message") or ""),
            "LOOPTRACE_STEPS": ",".join(map(str, finding.get("steps") or [])),
            "LOOPTRACE_TOOL": str(finding.get("tool") or ""),
            "LOOPTRACE_SPEND_USD": f"{finding.get('run_spend_usd') or 0:.6f}"}
