"""How busy the GPUs were while a step ran, sampled by `nvidia-smi` (there wherever NVIDIA's driver
is), so the run report can say beside each step's seconds whether they were GPU work: a server's
start-up, the tail of a generation or a launch-bound trainer hold the GPU without using it.

`utilization.gpu` is nvidia-smi's share of a sample period in which at least one kernel ran; the
mean over the samples of the run's GPUs (CUDA_VISIBLE_DEVICES where set, else every GPU) is one
figure per step. Without nvidia-smi (a CPU machine) there is no figure, and nothing else changes."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time

SAMPLE_MS = 500


class GpuUsage:
    """`with GpuUsage() as usage: ...`, then `usage.mean_percent()`: nvidia-smi samples `utilization.gpu`
    every `interval_ms` in a process of its own while the block runs; a thread reads its lines."""

    def __init__(self, enabled: bool = True, command: str = "nvidia-smi", interval_ms: int = SAMPLE_MS):
        self.enabled, self.command, self.interval_ms = enabled, command, interval_ms
        self.samples: list[tuple[float, float]] = []  # (seconds since the block began, percent)
        self._process: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._started = 0.0

    def __enter__(self) -> GpuUsage:
        self._started = time.monotonic()
        found = shutil.which(self.command) if self.enabled else None
        if found is None:
            return self
        query = ["--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", str(self.interval_ms)]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
        if visible:  # indices or UUIDs, as nvidia-smi -i takes them
            query += ["-i", visible]
        self._process = subprocess.Popen(
            [found, *query], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
        )
        self._reader = threading.Thread(target=self._read, name="gpu-usage", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            try:
                percent = float(line.strip())
            except ValueError:  # "[N/A]" on a GPU that does not report it, or a partial line at the end
                continue
            self.samples.append((time.monotonic() - self._started, percent))

    def __exit__(self, *exc: object) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)

    def mean_percent(self, after_s: float = 0.0) -> float | None:
        """The mean utilization of the samples taken `after_s` seconds into the block or later (a
        trainer's steps, past its start-up), or None without any."""
        kept = [percent for at, percent in self.samples if at >= after_s]
        return round(sum(kept) / len(kept), 1) if kept else None
