"""Work a run does beside training (`overlap` one-step, verl's one-step-off-policy schedule): the next
iteration's games, played by the model the training iteration started from, and that model's evaluation,
in one background thread at a time. The loop waits for it where it needs its result (the next iteration's
games) and stops it when the run stops. A dry run does the work at once, so its printed plan reads in one
order."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from .shell import Shell
from .stages import Stage


class Ahead:
    """The background work of a run: at most one at a time, owned by the stage that needs its result (the
    stage whose games it plays; the last iteration, whose model it evaluates, itself)."""

    def __init__(self, shell: Shell):
        self.shell = shell
        self.owner: Stage | None = None  # the stage whose result it makes, while it runs or is not yet joined
        self.played: dict[str, str] = {}  # stages whose games it played to the end: name -> the player's label
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, owner: Stage, work: Callable[[], None]) -> None:
        """Run `work` for `owner` beside the caller (in a dry run, now), after the work before it has ended."""
        self.join()
        self.owner = owner
        if self.shell.dry_run:
            work()
            return

        def body() -> None:
            try:
                work()
            except BaseException as error:  # raised where the loop joins it
                self._error = error

        self._thread = threading.Thread(target=body, name=f"ahead-{owner.name}")
        self._thread.start()

    def join(self) -> None:
        """Wait for the work to end, and raise what it raised."""
        if self._thread is not None:
            self._thread.join()  # stopped meanwhile (Ctrl-C), the thread stays here for `stop`
        self._thread, self.owner = None, None
        error, self._error = self._error, None
        if error is not None:
            raise error

    def stop(self) -> None:
        """Kill the commands of the run (the work's among them) and wait for the work to end; what it raised is
        dropped, since the run stops for a reason of its own."""
        if self._thread is not None and self._thread.is_alive():
            self.shell.stop()
        try:
            self.join()
        except BaseException:
            pass

    def __enter__(self) -> Ahead:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if kind is None:
            self.join()
        else:
            self.stop()
