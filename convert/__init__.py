"""selfplay-convert: games JSONL -> verl parquet (GRPO rows with group-relative advantages,
or SFT / DPO data). See pipeline.py for the passes and rows.py for the row contract."""
from .pipeline import ConvertError, Options, convert

__all__ = ["ConvertError", "Options", "convert"]
