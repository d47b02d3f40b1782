"""The built-in import formats, named once: what ``looptrace --help``, ``looptrace import --help``
and ``looptrace import --formats`` print.

Those lists were written by hand in three places and fell behind (the Codex CLI and Gemini CLI
importers were missing from both ``--help`` texts). They are now derived from ``BUILT_IN``, which
tests/test_zero_steps.py checks against the parsers, so a new importer is listed everywhere once it
is here. The module imports nothing, so ``--help`` stays quick (no parser is loaded to print it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Format", "BUILT_IN", "DESCRIPTIONS", "help_list", "format_lines"]


@dataclass(frozen=True)
class Format:
    name: str  # as `import --formats` and `runs by format` print it
    label: str  # a few words for --help
    description: str  # one line for `import --formats` (docs/importers.md has the mapping)


BUILT_IN: tuple[Format, ...] = (
    Format("swe-agent", "SWE-agent .traj", "SWE-agent 0.x/1.x trajectories (.traj, .traj.gz)"),
    Format("mini-swe-agent", "mini-swe-agent .traj.json",
           "mini-swe-agent 1.x (bash blocks) and 2.x (tool calls) trajectories (.traj.json)"),
    Format("openai-chat", "tau-bench and other OpenAI-style transcripts",
           "OpenAI-style tool-calling transcripts: tau-bench results, {messages: [...]}, bare message lists "
           "(JSON, JSONL one run per line, or Python literals)"),
    Format("chat", "AutoGen/AG2 and Magentic-One chat logs",
           "chat transcripts without tool calls, multi-agent logs included: AutoGen/AG2 group chats (code "
           "blocks and exitcode replies as tool calls), Magentic-One orchestrator logs (agents as roles)"),
    Format("inspect-ai", "Inspect AI .eval/.json logs",
           "Inspect AI eval logs (.eval archives and .json), one run per sample and epoch"),
    Format("openhands", "OpenHands event streams",
           "OpenHands event streams (trajectory exports, evaluation output.jsonl, [action, observation] pairs)"),
    Format("autogen-agentchat", "AutoGen AgentChat task results",
           "AutoGen AgentChat task results ({messages: [{source, type, content}], stop_reason}): Magentic-One "
           "and other teams, each agent's turns also a sub-run"),
    Format("crewai", "CrewAI task logs",
           "CrewAI task logs (Crew(output_log_file=...json)), each agent's tasks also a sub-run"),
    Format("claude-code", "Claude Code sessions",
           "Claude Code session transcripts (~/.claude/projects/*/*.jsonl), subagents as sub-runs"),
    Format("codex-cli", "Codex CLI rollouts",
           "OpenAI Codex CLI rollouts (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl), one run per session"),
    Format("gemini-cli", "Gemini CLI session logs",
           "Google Gemini CLI session logs (~/.gemini/tmp/*/chats/session-*.jsonl), one run per session"),
    Format("otlp-json", "OTLP JSON files",
           "OTLP JSON trace files (the Collector's file exporter), mapped as `looptrace collect` does"),
    Format("span-tree", "span-tree exports",
           "nested span-tree exports ({trace_id, spans: [{span_id, span_attributes, child_spans}]}), "
           "mapped as OTLP"),
    Format("phoenix-spans", "Phoenix span dataframes",
           "Phoenix span dataframes (context.span_id, parent_id, attributes.*) as JSON or Parquet"),
    Format("jaeger-json", "Jaeger JSON",
           "Jaeger JSON trace downloads (data[].spans[] with references and tags), mapped as OTLP"),
    Format("zipkin-json", "Zipkin JSON", "Zipkin v2 JSON spans, mapped as OTLP"),
    Format("otel-sdk-json", "OpenTelemetry SDK span JSON",
           "the OpenTelemetry SDK's own span JSON (ConsoleSpanExporter, ReadableSpan.to_json: one object per "
           "span, a list, JSON lines or {spans: [...]}), mapped as OTLP"),
)

DESCRIPTIONS: dict[str, str] = {f.name: f.description for f in BUILT_IN}


def help_list(plugins: list[str]) -> str:
    """The formats for a ``--help`` line: every built-in one's label, then the plug-ins' names."""
    text = ", ".join(f.label for f in BUILT_IN)
    if plugins:
        text += "; plug-ins: " + ", ".join(plugins)
    return text


def format_lines(rows: list[tuple[str, str]]) -> list[str]:
    """``name  description`` lines, the descriptions aligned after the longest name."""
    width = max((len(name) for name, _ in rows), default=0)
    return [f"{name:{width}}  {description}" for name, description in rows]
