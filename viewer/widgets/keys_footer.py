"""Textual's Footer, rebuilt only when the keys it shows change.

The Footer rebuilds all its key widgets on every bindings update, and pushing a screen sends several
with the same keys (mount, focus, resume; the screen underneath gets one too). Opening a run that
was four rebuilds of ~10-20 ms each, three of them identical, run on the event loop while the run
was loading in its thread and before its rows could be shown.

Below ``COMPACT_BELOW`` columns the footer drops the padding around each key, so that at 80x24
every key hint of a screen still fits on its one line.
"""

from __future__ import annotations

from textual import events
from textual.dom import NoScreen
from textual.widgets import Footer

__all__ = ["KeysFooter", "COMPACT_BELOW"]

COMPACT_BELOW = 120  # terminal columns


class KeysFooter(Footer):
    _shown: tuple[object, ...] | None = None

    def on_resize(self, event: events.Resize) -> None:
        self.compact = event.size.width < COMPACT_BELOW

    def _keys(self) -> tuple[object, ...]:
        """What ``Footer.compose`` shows: the shown bindings, enabled or not, with their tooltips."""
        return tuple((binding.key, binding.action, binding.description, enabled, tooltip)
                     for _, binding, enabled, tooltip in self.screen.active_bindings.values() if binding.show)

    async def recompose(self) -> None:
        try:
            keys = self._keys()
        except NoScreen:  # a rebuild scheduled before its screen was popped: nothing left to show
            return
        if keys != self._shown:
            self._shown = keys
            await super().recompose()
