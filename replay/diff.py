"""Diffing two runs: align their actions (longest common subsequence over the steps' action keys,
``records/actions.py``), find the first divergent decision, and compare steps' tokens, cost and
latency (pure functions).

A step whose model call failed (refused, out of retries) made no decision: it has no tool call, like a
final answer, but it is not one, so it has an identity of its own (``CALL_FAILED``) and two such steps
align. Where the runs part, the steps of one that stand where the other's differ are put on one line
(as ``difflib`` pairs a replaced block), so a refused call sits beside the answer that replaced it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import zip_longest

import duckdb

from looptrace.tracer.records.actions import STEP_ACTION_KEY_SQL

__all__ = ["StepFacts", "Aligned", "RunDiff", "align", "diff_runs", "load_step_facts", "STEP_FACTS_SQL", "MAX_TABLE",
           "delta", "CALL_FAILED"]

# The identity of a step whose model call failed: not an action key (those are md5 hex), not a call's text.
CALL_FAILED = "(model call failed)"


@dataclass(frozen=True)
class StepFacts:
    step: int
    action: str  # the step's calls as text, to show ("" for a step without a tool)
    tokens: int | None  # None: the source recorded no token counts (not zero)
    cost_usd: float | None
    latency_ms: int | None  # None: no model call of the step recorded its latency (not zero)
    key: str | None = None  # the step's action key (``records/actions.py``); without one, ``action``
    call_error: str | None = None  # the step's model call failed: its error (the step is no answer)
    tool_errors: tuple[str, ...] = ()  # its failed tool calls' error types ("error" where none was given)

    @property
    def failed(self) -> bool:
        """A tool call or the model call of the step failed."""
        return self.call_error is not None or bool(self.tool_errors)

    @property
    def answered(self) -> bool:
        """No tool call and no failed model call: the step is a final answer."""
        return not self.action and self.key is None and self.call_error is None

    @property
    def identity(self) -> str | None:
        if self.key is not None:
            return self.key
        return CALL_FAILED if not self.action and self.call_error is not None else self.action


@dataclass(frozen=True)
class Aligned:
    a: StepFacts | None
    b: StepFacts | None

    @property
    def same(self) -> bool:
        return self.a is not None and self.b is not None and self.a.identity == self.b.identity


@dataclass(frozen=True)
class RunDiff:
    pairs: list[Aligned]
    first_divergence: int | None  # index into pairs

    @property
    def common(self) -> int:
        return sum(p.same for p in self.pairs)


# Past this many cells the longest-common-subsequence table (a list of Python ints per cell) costs
# seconds and hundreds of MB: the steps between the common ends are then paired in order.
MAX_TABLE = 1_000_000


def align(a: Sequence[StepFacts], b: Sequence[StepFacts]) -> list[Aligned]:
    """The two runs' steps paired by a longest common subsequence of their actions.

    Common leading and trailing steps are paired first (they belong to some longest common
    subsequence): a replay or fork usually matches its original up to a point, so the table is
    built only for what lies between.
    """
    n, m = len(a), len(b)
    head = 0
    while head < min(n, m) and a[head].identity == b[head].identity:
        head += 1
    tail = 0
    while tail < min(n, m) - head and a[n - 1 - tail].identity == b[m - 1 - tail].identity:
        tail += 1
    middle_a, middle_b = a[head:n - tail], b[head:m - tail]
    if len(middle_a) * len(middle_b) > MAX_TABLE:
        middle = [Aligned(x, y) for x, y in zip_longest(middle_a, middle_b)]
    else:
        middle = _lcs(middle_a, middle_b)
    return ([Aligned(x, y) for x, y in zip(a[:head], b[:head])] + _paired(middle)
            + [Aligned(x, y) for x, y in zip(a[n - tail:], b[m - tail:])])


def _paired(pairs: list[Aligned]) -> list[Aligned]:
    """Each stretch of one-sided lines between two alike pairs, its two runs' steps put side by side in
    order (the longer side's rest stays one-sided): what stands where the other run did something else."""
    out: list[Aligned] = []
    k = 0
    while k < len(pairs):
        if pairs[k].same:
            out.append(pairs[k])
            k += 1
            continue
        end = k
        while end < len(pairs) and not pairs[end].same:
            end += 1
        a = [p.a for p in pairs[k:end] if p.a is not None]
        b = [p.b for p in pairs[k:end] if p.b is not None]
        out += [Aligned(x, y) for x, y in zip_longest(a, b)]
        k = end
    return out


def _lcs(a: Sequence[StepFacts], b: Sequence[StepFacts]) -> list[Aligned]:
    n, m = len(a), len(b)
    lcs = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            lcs[i][j] = lcs[i + 1][j + 1] + 1 if a[i].identity == b[j].identity else max(lcs[i + 1][j], lcs[i][j + 1])
    out, i, j = [], 0, 0
    while i < n or j < m:
        if i < n and j < m and a[i].identity == b[j].identity:
            out.append(Aligned(a[i], b[j]))
            i, j = i + 1, j + 1
        elif j < m and (i == n or lcs[i][j + 1] >= lcs[i + 1][j]):
            out.append(Aligned(None, b[j]))
            j += 1
        else:
            out.append(Aligned(a[i], None))
            i += 1
    return out


def diff_runs(a: Sequence[StepFacts], b: Sequence[StepFacts]) -> RunDiff:
    pairs = align(a, b)
    first = next((k for k, p in enumerate(pairs) if not p.same), None)
    return RunDiff(pairs, first)


# One row per step: the step's actions in call order (as text to show, and as the key they are
# compared by), its tokens and cost, its model latency (NULL when a call of the step has none, or the step
# no call: an import without model calls has no latency, which is not 0 ms), the error of its failed model call (the latest,
# cut to 300 characters) and the error types of its failed tool calls.
STEP_FACTS_SQL = """
WITH calls AS (
    SELECT step, CASE WHEN count(*) = count(latency_ms) THEN sum(latency_ms) END AS latency_ms,
           arg_max(left(error, 300), started_at) FILTER (WHERE error IS NOT NULL) AS error
    FROM llm_calls WHERE run_id = $run_id AND step IS NOT NULL GROUP BY step
)
SELECT s.step,
       string_agg(coalesce(s.tool, '') || ' ' || coalesce(CAST(json(s.args) AS VARCHAR), ''), ' | '
                  ORDER BY s.call_index) AS action,
       sum(s.input_tokens + s.output_tokens) AS tokens, sum(s.cost_usd) AS cost_usd,
       any_value(c.latency_ms) AS latency_ms,
       {step_key} AS action_key,
       any_value(c.error) AS call_error,
       list(coalesce(s.error_type, 'error') ORDER BY s.call_index) FILTER (WHERE s.is_error) AS tool_errors
FROM steps s LEFT JOIN calls c ON c.step = s.step
WHERE s.run_id = $run_id GROUP BY s.run_id, s.step ORDER BY s.step
""".format(step_key=STEP_ACTION_KEY_SQL)


def load_step_facts(conn: duckdb.DuckDBPyConnection, run_id: str) -> list[StepFacts]:
    return [StepFacts(int(r[0]), str(r[1]).strip(), None if r[2] is None else int(r[2]),
                      None if r[3] is None else float(r[3]), None if r[4] is None else int(r[4]), r[5], r[6], tuple(r[7] or ()))
            for r in conn.execute(STEP_FACTS_SQL, {"run_id": run_id}).fetchall()]


def delta(a: int | float | None, b: int | float | None, *, a_exists: bool, b_exists: bool) -> int | float | None:
    """B minus A, a missing step counting 0; None when a step that exists has no figure (imports
    without token counts), so an unknown never reads as a saving or a cost."""
    if (a_exists and a is None) or (b_exists and b is None):
        return None
    return (b or 0) - (a or 0)
