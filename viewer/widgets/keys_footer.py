"""Textual's Footer, rebuilt only when the keys it shows change.

The Footer rebuilds all its key widgets on every bindings update, and pushing a screen sends several
with the same keys (mount, focus, resume; the screen underneath gets one too). Opening a run that
was four rebuilds of ~10-20 ms each, three of them identical, run on the event loop while the run
was loading in its thread and before its rows could be shown.
"""

from __future__ import annotations

from textual.widgets import Footer

__all__ = ["KeysFooter"]


class KeysFooter(Footer):
    _shown: tuple[object, ...] | None = None

    def _keys(self) -> tuple[object, ...]:
        """What ``Footer.compose`` shows: the shown bindings, enabled or not, with their tooltips."""
        return tuple((binding.key, binding.action, binding.description, enabled, tooltip)
                     for _, binding, enabled, tooltip in self.screen.active_bindings.values() if binding.show)

    async def recompose(self) -> None:
        keys = self._keys()
        if keys != self._shown:
            self._shown = keys
            await super().recompose()
