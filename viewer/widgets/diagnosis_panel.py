"""What the analyzer found: the primary diagnosis with its explanation and evidence, then the rest."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ..badges import label_badge
from ..data import DiagnosisRow
from ..format import evidence_lines
from ..safe import safe

__all__ = ["DiagnosisPanel", "diagnosis_text"]


def _steps(d: DiagnosisRow) -> str:
    if d.first_step is None:
        return ""
    if d.last_step is None or d.last_step == d.first_step:
        return f"step {d.first_step}"
    return f"steps {d.first_step}–{d.last_step}"


def diagnosis_text(diagnoses: Sequence[DiagnosisRow], *, analysing: bool = False) -> Text:
    if not diagnoses:
        if analysing:
            return Text("Analysing this run…", style="dim italic")
        return Text("No diagnosis: none of the analyzer's rules explains how this run ended "
                    "(`looptrace analyze` re-analyses, with other thresholds if you like).", style="dim")
    primary, *others = diagnoses if diagnoses[0].is_primary else (None, *diagnoses)
    text = Text()
    if primary is not None:
        badge = label_badge(primary.label, solid=True)
        text.append_text(Text.assemble(badge, "  ", (_steps(primary), "bold")))
        text.append("\n")
        text.append_text(safe(primary.explanation))
        evidence = evidence_lines(primary.evidence)
        if evidence:
            text.append("\n\nevidence\n", style="dim")
            text.append_text(safe(evidence))
        if primary.first_step is not None:
            text.append(f"\n\npress e to jump to step {primary.first_step}", style="dim italic")
    for d in others:
        text.append("\n\nalso  ", style="dim")
        text.append_text(Text.assemble(label_badge(d.label), "  ", _steps(d), "\n"))
        text.append_text(safe(d.explanation))
    return text


class DiagnosisPanel(VerticalScroll):
    def compose(self) -> ComposeResult:
        yield Static(id="diagnosis-text")

    def show(self, diagnoses: Sequence[DiagnosisRow], *, analysing: bool = False) -> None:
        self.query_one("#diagnosis-text", Static).update(diagnosis_text(diagnoses, analysing=analysing))
