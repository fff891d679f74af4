"""selfplay-convert: games JSONL -> verl parquet (one GRPO row per group of K games
of one instance and seat, or SFT / DPO data). See pipeline.py for the passes and rows.py for the row contract."""

from .pipeline import ConvertError, Options, convert

__all__ = ["ConvertError", "Options", "convert"]
