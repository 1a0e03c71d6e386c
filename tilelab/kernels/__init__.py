"""Kernels that ship with tilelab: the one copy its workshop, tests, examples and benchmarks use.

Each module imports TileLang when it is imported; ``import tilelab`` never imports this package.
"""
