"""`ArrivingRows`: verl's training set for a trainer started once per run (`verl.resident`), whose rows arrive
one part per iteration while it trains.

verl reads its training rows through a dataset of a fixed length, in the order its sampler gives
(`data.shuffle=False`: in order), fetching a step's batch at the step's start (the V1 sync trainer's
`prepare_step`). A resident trainer's rows are each iteration's converted groups, which exist only once the
model of the iteration before has played its games, and that model is the trainer's own checkpoint. So this
dataset is as long as the whole run (`parts` x `rows_per_part`), and a row of part k, looked up before part k
was written, waits for it: the trainer saves its checkpoint at the end of part k-1's steps
(`trainer.save_freq` = steps per part), the loop serves that checkpoint, plays, converts, and writes part k,
and the trainer's next step goes on. A part is written whole (a rename), holds exactly `rows_per_part` rows,
and is read through verl's own `RLHFDataset`, so a row is what it would be from a file verl read itself.

`data.train_files` names the run's spec (`parts.Spec`); any other data
file (the validation set) is verl's `RLHFDataset` unchanged. verl loads this class by name
(`data.custom_cls.path` / `.name`).
"""

from __future__ import annotations

import time
from typing import Any

from verl.utils.dataset.rl_dataset import RLHFDataset

from .parts import Spec, is_spec

POLL_S = 1.0
WAIT_NOTE_S = 60.0  # how often a wait for a part says so in the trainer's log


class ArrivingRows(RLHFDataset):
    """The rows of every part of a spec, each part waited for when first read (see the module docstring);
    `data_files` that name no spec: verl's RLHFDataset."""

    def __init__(self, data_files: Any, tokenizer: Any, config: Any, processor: Any = None, max_samples: int = -1):
        self.spec: Spec | None = None
        if not is_spec(data_files):
            super().__init__(data_files, tokenizer, config, processor, max_samples)
            return
        name = data_files if isinstance(data_files, str) else list(data_files)[0]
        self.spec = Spec.read(name)
        self._arguments = (tokenizer, config, processor)
        self._loaded: tuple[int, RLHFDataset] | None = None

    def __len__(self) -> int:
        if self.spec is None:
            return super().__len__()
        return self.spec.parts * self.spec.rows_per_part

    def __getitem__(self, item: int) -> dict:
        if self.spec is None:
            return super().__getitem__(item)
        if not 0 <= item < len(self):
            raise IndexError(f"row {item} of {len(self)}")
        k, row = divmod(int(item), self.spec.rows_per_part)
        return self._part(k + 1)[row]

    def _part(self, k: int) -> RLHFDataset:
        """Part k, read once it is there (the latest part read is kept)."""
        if self._loaded is not None and self._loaded[0] == k:
            return self._loaded[1]
        assert self.spec is not None
        path, started, note_at = self.spec.part(k), time.monotonic(), 0.0
        while not path.exists():
            waited = time.monotonic() - started
            if waited >= note_at:
                print(f"selfplay_gen: waiting for part {k} of {self.spec.parts} ({path}), {waited:.0f} s so far")
                note_at = waited + WAIT_NOTE_S
            time.sleep(POLL_S)
        tokenizer, config, processor = self._arguments
        part = RLHFDataset(str(path), tokenizer, config, processor)
        if len(part) != self.spec.rows_per_part:
            raise ValueError(
                f"{path}: {len(part)} rows as verl reads them, not the {self.spec.rows_per_part} of every part "
                "(a part is written whole, with data.filter_overlong_prompts=False)"
            )
        self._loaded = (k, part)
        return part
