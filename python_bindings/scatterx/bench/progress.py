"""A plain-text progress bar on stderr (no dependency): redrawn in place on a terminal, one line per step when
stderr is a file or a pipe (so a log keeps every step)."""

from __future__ import annotations

import sys
import time


class Progress:
    """bar = Progress(total); bar.step("what finished"); ...; bar.done(). Silent when enabled is False."""

    WIDTH = 30

    def __init__(self, total: int, enabled: bool = True, stream=None):
        self.total, self.count, self.enabled = max(0, total), 0, enabled
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def line(self, what: str) -> str:
        """The bar after self.count steps: '[#######.......]  7/22  12 s  gnn/uniform index_add_'."""
        filled = self.WIDTH * self.count // self.total if self.total else self.WIDTH
        elapsed = time.perf_counter() - self.start
        width = len(str(self.total))
        return (f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.count:>{width}}/{self.total} "
                f"{elapsed:4.0f} s  {what}")

    def step(self, what: str = "") -> None:
        self.count = min(self.total, self.count + 1)
        if not self.enabled:
            return
        text = self.line(what)
        if self.tty:
            self.stream.write("\r\033[K" + text[:200])
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        """A message between steps, on a line of its own."""
        if self.enabled:
            self.stream.write(("\r\033[K" if self.tty else "") + text + "\n")
            self.stream.flush()

    def done(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()
