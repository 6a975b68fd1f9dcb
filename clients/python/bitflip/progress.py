"""A progress bar for campaigns: tqdm's when it is installed, else a small one.

On a terminal the bar redraws in place; elsewhere (a CI log, a notebook's
captured stderr) a plain line every few seconds, so that logs stay readable.
"""
import sys
import time


class Progress:
    """``update(done, planned)``; ``close()``. Writes to ``stream`` (stderr)."""

    def __init__(self, desc="trials", stream=None, every=5.0):
        self.stream = stream or sys.stderr
        self.desc = desc
        self.every = every
        self.start = time.monotonic()
        self.last = 0.0
        self.done = 0
        self.planned = None
        self._tqdm = None
        try:
            from tqdm.auto import tqdm   # optional: not a dependency
            self._tqdm = tqdm(desc=desc, unit="trial", file=self.stream)
        except ImportError:
            pass
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def update(self, done, planned=None):
        if planned:
            self.planned = planned
        if self._tqdm is not None:
            if self.planned and self._tqdm.total != self.planned:
                self._tqdm.total = self.planned
            self._tqdm.update(max(0, done - self.done))
            self.done = done
            return
        self.done = done
        now = time.monotonic()
        if self.tty or now - self.last >= self.every:
            self.last = now
            self._draw(now)

    def _draw(self, now, end=False):
        el = now - self.start
        rate = self.done / el if el > 0 else 0.0
        if self.planned:
            frac = min(1.0, self.done / self.planned)
            width = 30
            fill = int(frac * width)
            line = (f"{self.desc} |{'#' * fill}{' ' * (width - fill)}| {100 * frac:3.0f}% "
                    f"{self.done}/{self.planned} [{el:.0f}s, {rate:.0f}/s]")
        else:
            line = f"{self.desc}: {self.done} [{el:.0f}s, {rate:.0f}/s]"
        if self.tty:
            self.stream.write("\r" + line + ("\n" if end else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self):
        if self._tqdm is not None:
            self._tqdm.close()
        else:
            self._draw(time.monotonic(), end=True)
