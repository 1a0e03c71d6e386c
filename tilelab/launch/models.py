"""The launch records' old address, kept only for the imports of :mod:`tilelab.launch.sweep`: the
records live beside the report's records in :mod:`tilelab._launch_model` (the records layer) and are
exported by :mod:`tilelab.launch`; import them from there."""

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
