"""bench/analysis/trace_summary.py: a torch profiler trace becomes the GPU's busy share of the step and
the operators and kernels that take the time."""

from __future__ import annotations

import gzip
import json

import bench_modules

trace_summary = bench_modules.load("analysis/trace_summary.py", "trace_summary")


def event(cat: str, name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1}


def test_busy_time_is_the_union_of_overlapping_kernels_and_tables_rank_by_total(tmp_path):
    events = [
        event("cpu_op", "aten::mm", 0, 50_000),
        event("cpu_op", "aten::log_softmax", 60_000, 40_000),  # the trace spans 0-100 ms
        event("cpu_op", "aten::log_softmax", 20_000, 1_000),
        event("kernel", "gemm", 0, 10_000),
        event("kernel", "softmax", 5_000, 15_000),  # overlaps gemm: 0-20 ms busy
        event("gpu_memcpy", "Memcpy HtoD", 30_000, 10_000),  # 30-40 ms
        event("user_annotation", "FullyShardedDataParallel._pre_forward", 0, 2_000),
        event("user_annotation", "FullyShardedDataParallel._pre_forward", 50_000, 2_000),
        event("user_annotation", "micro_batch0", 0, 30_000),
        event("kernel", "k" * 300, 90_000, 1),  # a templated kernel's name, shortened in the table
        {"ph": "i", "name": "marker", "ts": 500_000},  # instant events are not work
        {"ph": "M", "name": "process_name", "args": {}},
    ]
    path = tmp_path / "trace.json.gz"
    with gzip.open(path, "wt") as handle:
        json.dump({"traceEvents": events}, handle)
    loaded = trace_summary.load_events(path)
    assert len(loaded) == 10
    assert trace_summary.busy_us(loaded[loaded["cat"].isin(trace_summary.KERNEL_CATEGORIES)]) == 30_001
    text = trace_summary.summary(loaded)
    assert text.splitlines()[0] == "span 100.0 ms; GPU busy 30.0 ms (30%); 4 kernels, 3 CPU operators"
    operators = text.split("CPU operators by total time")[1].split("Labelled ranges")[0]
    assert operators.index("aten::mm") < operators.index("aten::log_softmax")  # 50 ms against 41 ms
    assert operators.split("aten::log_softmax")[1].split()[:2] == ["41.0", "2"]
    ranges = text.split("Labelled ranges (record_function) by total time:")[1].split("GPU kernels")[0]
    assert ranges.index("micro_batch0") < ranges.index("FullyShardedDataParallel._pre_forward")
    assert ranges.split("FullyShardedDataParallel._pre_forward")[1].split()[:2] == ["4.0", "2"]
    kernels = text.split("GPU kernels by total time:")[1]
    assert kernels.index("softmax") < kernels.index("gemm")  # 15 ms against 10 ms
    assert "k" * 109 + "…" in kernels and "k" * 111 not in kernels
