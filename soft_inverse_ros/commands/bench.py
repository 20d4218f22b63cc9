"""``soft-inverse-ros bench NAME``: benchmarks, discovered from :mod:`soft_inverse_ros.bench`.

Each benchmark module defines ``register(subparsers)`` (modules named ``_*`` are shared
helpers); with ``--json`` a benchmark
prints one JSON object as its last output line.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil


def register(subparsers: argparse._SubParsersAction) -> None:
    from soft_inverse_ros import bench

    parser = subparsers.add_parser(
        "bench", help="run a benchmark (fem, qp, pipeline, ...)", description=__doc__
    )
    sub = parser.add_subparsers(dest="bench", metavar="NAME")
    for info in sorted(pkgutil.iter_modules(bench.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):  # helpers shared by the benchmarks
            continue
        importlib.import_module(f"{bench.__name__}.{info.name}").register(sub)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
