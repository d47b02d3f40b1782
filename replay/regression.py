"""``looptrace export-test``: a pytest file that replays a run offline from a cassette and asserts
its invariants (same final status, same tool sequence, at most N tool calls, no stagnation unless
the original stagnated). It needs no API key and no store."""

from __future__ import annotations

from pathlib import Path

from .cassette import save_cassette
from .recording import Recording

__all__ = ["export_test", "TEMPLATE"]

TEMPLATE = '''"""Regression test exported by looptrace from run {run_id} ({agent}: {task!r}).

Replays the run offline from {cassette_name} and checks that the loop still behaves the same.
"""

from pathlib import Path

from looptrace.replay.cassette import load_cassette
from looptrace.replay.replayer import replay
from looptrace.tracer import Tracing
from looptrace.tracer.store import Store

CASSETTE = Path(__file__).with_name({cassette_name!r})


def test_run_{short_id}_replays_the_same(tmp_path):
    recording = load_cassette(CASSETTE)
    db = tmp_path / "replay.duckdb"
    with Tracing(db) as tracing:
        report = replay(recording, tracing)
    result = report.result
    assert report.model.drift is None, report.model.drift
    assert result.status == {status!r}
    with Store(db).reader() as conn:
        tools = [row[0] for row in conn.execute(
            "SELECT tool FROM tool_calls WHERE run_id = ? ORDER BY step, call_index", [result.run_id]).fetchall()]
    assert tools == {tools!r}
    assert len(tools) <= {max_tool_calls}
    assert {stagnated!r} or result.status != "stagnated"
'''


def export_test(recording: Recording, test_path: str | Path) -> tuple[Path, Path]:
    test_path = Path(test_path)
    cassette = test_path.with_name(test_path.stem + ".cassette.json")
    test_path.parent.mkdir(parents=True, exist_ok=True)
    save_cassette(recording, cassette)
    tools = [t.tool for t in sorted(recording.tools, key=lambda t: (t.step, t.call_index))]
    test_path.write_text(TEMPLATE.format(
        run_id=recording.run_id, agent=recording.agent, task=recording.task[:80], cassette_name=cassette.name,
        short_id=recording.run_id[:8], status=recording.status, tools=tools, max_tool_calls=len(tools),
        stagnated=recording.status == "stagnated",
    ))
    return test_path, cassette
