"""Shell-command agents as tool calls: which "tool" an action names, and when it named none.

SWE-agent and mini-swe-agent declare no tool list: the model writes a shell command and the
environment runs it. We call the command's first word the tool, so a hallucinated tool shows up
where it does in a tool-calling agent: the shell answers ``foo: command not found``. A second
failure of the same kind is the model's prose run as a command (``DISCUSSION``, ``Let's ...``):
bash then reports "command not found" or a syntax error (an apostrophe opens a quote that never
closes). Both are judged from the action and the observation alone, so these are plain functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ShellCall",
    "classify_command",
    "command_not_found",
    "first_word",
    "is_prose_as_command",
    "looks_like_prose",
    "return_code",
]

# Sentence openers models write before (or instead of) a command. Capitalised, so they cannot be
# confused with ordinary commands, which are lower-case.
_PROSE_OPENERS = frozenset({
    "I", "I'll", "I'm", "I've", "Let", "Let's", "Now", "The", "This", "That", "These", "There", "First",
    "Next", "Then", "Finally", "It", "It's", "We", "We'll", "We're", "After", "Okay", "OK", "Ok", "Great",
    "Sure", "Here", "Since", "Looking", "Based", "However", "So", "Please", "Perfect", "Excellent", "Thank",
    "Thanks", "Wait", "Alright", "Unfortunately", "To", "Step", "Note", "Yes", "No", "Good",
})
_SHELL_FAILURE = re.compile(r"command not found|syntax error|unexpected EOF while looking for matching")
_RETURN_CODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_QUOTES = str.maketrans("", "", "'\"`")


@dataclass(frozen=True)
class ShellCall:
    tool: str | None
    args: Any
    is_error: bool = False
    error_type: str | None = None


def first_word(action: str) -> str:
    """The command's first word as written (``edit`` for a multi-line SWE-agent edit block)."""
    parts = action.split(None, 1)
    return parts[0] if parts else ""


def command_not_found(observation: str | None, word: str) -> bool:
    """The shell says it has no command ``word`` (bash, zsh or dash wording).

    Bash removes quotes before looking the word up, so ``I'll`` is reported as ``Ill``.
    """
    if not observation or not word or "not found" not in observation:
        return False
    for w in {word, word.translate(_QUOTES)}:
        if not w:
            continue
        e = re.escape(w)
        if re.search(rf"(?:^|[\s:]){e}: command not found|command not found: {e}(?:$|\s)|\d+: {e}: not found",
                     observation, re.MULTILINE):
            return True
    return False


def looks_like_prose(word: str) -> bool:
    """A first word that starts English text or markup rather than a command."""
    if not word:
        return False
    if word.endswith(":") or word.startswith(("```", "**")):
        return True
    if word.isalpha() and word.isupper() and len(word) >= 4:  # DISCUSSION, THOUGHT, NOTE
        return True
    if word in _PROSE_OPENERS:
        return True
    return word[0].isupper() and "'" in word and word.replace("'", "").isalpha()  # Here's, Don't


def is_prose_as_command(action: str, observation: str | None) -> bool:
    """The model's text was executed as a command and the shell choked on it."""
    return bool(observation) and looks_like_prose(first_word(action)) and bool(
        _SHELL_FAILURE.search(observation or "")
    )


def return_code(observation: str | None) -> int | None:
    """The exit code an observation states explicitly (mini-swe-agent's ``<returncode>``), else None."""
    if not observation:
        return None
    m = _RETURN_CODE.search(observation[:200])
    return int(m.group(1)) if m else None


def classify_command(action: str | None, observation: str | None) -> ShellCall:
    """One shell action as a tool call: tool = first word, args = the whole command.

    An empty action is ``unparseable`` (the model wrote no command); a missing command or prose run
    as a command is ``tool_not_found``; an explicit non-zero return code is ``command_error``.
    Other failures of real commands (a Traceback, ``grep`` finding nothing) are not flagged: without a
    return code we cannot tell them from output that merely mentions an error.
    """
    text = (action or "").strip()
    if not text:
        return ShellCall(None, None, True, "unparseable")
    word = first_word(text)
    args = {"command": action}
    if command_not_found(observation, word) or is_prose_as_command(text, observation):
        return ShellCall(word, args, True, "tool_not_found")
    code = return_code(observation)
    if code is not None and code != 0:
        return ShellCall(word, args, True, "command_error")
    return ShellCall(word, args)
