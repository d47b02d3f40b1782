"""Context windows of model families, for runs whose trace does not carry the window.

A window-ratio diagnosis ("the context reached 90% of the window") is only as good as the window.
Assuming one size for every model calls a 32k model's runs healthy long after they overflowed, and a
2M model's runs bombs; so an unknown model gets no window at all, and the rules that need one stay
silent (an overflow the provider reported still counts: it needs no window).

Names are matched after dropping provider prefixes (``openai/``, ``@google/``, ``us.anthropic.``) and
lower-casing; the longest family prefix wins, so ``gpt-4o-mini`` and ``gpt-4`` are told apart. A size
written in the name (``doubao-pro-128k``) is taken at its word. Figures are the providers' published
input windows of each family's default serving (not extended-context betas).
"""

from __future__ import annotations

import functools
import re

__all__ = ["WINDOWS", "ALIASES", "window_for"]

WINDOWS: dict[str, int] = {
    # Anthropic
    "claude": 200_000,
    "claude-2.0": 100_000,
    "claude-instant": 100_000,
    # OpenAI
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4-1106": 128_000,
    "gpt-4-0125": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-5": 400_000,
    "gpt-oss": 131_072,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # Google
    "gemini-1.0": 32_760,
    "gemini-pro": 32_760,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2": 1_048_576,
    "gemini-3": 1_048_576,
    # Meta
    "llama-2": 4_096,
    "llama-3": 8_192,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "llama-4-scout": 10_000_000,
    "llama-4-maverick": 1_000_000,
    # Alibaba
    "qwen2": 32_768,
    "qwen2.5": 32_768,
    "qwen3": 32_768,
    "qwq": 32_768,
    # DeepSeek
    "deepseek-chat": 64_000,
    "deepseek-chat-v2": 128_000,
    "deepseek-coder-v2": 128_000,
    "deepseek-coder": 16_384,
    "deepseek-v2": 128_000,
    "deepseek-v3": 128_000,
    "deepseek-r1": 128_000,
    "deepseek-reasoner": 64_000,
    # Mistral
    "mistral-large": 128_000,
    "mistral-small": 32_000,
    "mistral-7b": 32_768,
    "mixtral-8x7b": 32_768,
    "mixtral-8x22b": 65_536,
    "codestral": 256_000,
    "devstral": 128_000,
    # Fine-tunes named for their use, windows from their base models
    "swe-agent-lm": 32_768,  # Qwen2.5-Coder-32B
    "scripted": 200_000,  # looptrace's own scripted model stands in for Claude
}

# Other spellings of the same families.
ALIASES: dict[str, str] = {
    "meta-llama-3": "llama-3",
    "llama3": "llama-3",
    "llama3.1": "llama-3.1",
    "qwen-2.5": "qwen2.5",
    "sweagent-lm": "swe-agent-lm",
    "chatgpt-4o": "gpt-4o",
}

_SIZE_IN_NAME = re.compile(r"(?<![0-9])(\d{1,4})k(?![a-z0-9])")
_VENDOR_DOT = re.compile(r"^(?:[a-z]{2}\.)?(?:anthropic|meta|mistral|amazon|cohere|ai21)\.")


def _names(model: str) -> list[str]:
    name = model.strip().lower().rsplit("/", 1)[-1].lstrip("@")
    name = _VENDOR_DOT.sub("", name)  # Bedrock: us.anthropic.claude-..., meta.llama3-...
    out = [name]
    for alias, family in ALIASES.items():
        if name.startswith(alias):
            out.append(family + name[len(alias):])
    return out


@functools.lru_cache(maxsize=1024)  # asked once per run, of a handful of model names
def window_for(model: str | None) -> int | None:
    """The model's window in tokens, or None when the family is not known."""
    if not model:
        return None
    names = _names(model)
    best = max(((p, n) for p in WINDOWS for n in names if n.startswith(p) and _boundary(n, p)),
               key=lambda pn: len(pn[0]), default=None)
    if best is not None:
        return WINDOWS[best[0]]
    sized = _SIZE_IN_NAME.search(names[0])
    return int(sized.group(1)) * 1000 if sized else None


def _boundary(name: str, prefix: str) -> bool:
    """The prefix ends at a separator: ``o1`` matches ``o1-2024-12-17`` but not ``o100``, and ``gpt-4``
    never matches ``gpt-4o`` (which has its own entry)."""
    rest = name[len(prefix):]
    return not rest or not rest[0].isalnum()
