"""The launch records, where they have always been importable: they live beside the report's records
in :mod:`tilelab._launch_model` (the records layer), so that renderers type against them."""

from __future__ import annotations

from .._launch_model import (
    BENCH_MODES,
    BenchResult,
    Ceilings,
    Finding,
    InputState,
    LaunchOverhead,
    OutputCheck,
    RunResult,
    SanitizerReport,
    SweepRow,
    SweepTable,
    Telemetry,
    TileMap,
    WorstElement,
)

__all__ = [
    "BENCH_MODES",
    "BenchResult",
    "Ceilings",
    "Finding",
    "InputState",
    "LaunchOverhead",
    "OutputCheck",
    "RunResult",
    "SanitizerReport",
    "SweepRow",
    "SweepTable",
    "Telemetry",
    "TileMap",
    "WorstElement",
]
