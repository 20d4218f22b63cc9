"""The ``soft-inverse-ros`` console script.

Subcommands are discovered from the modules of :mod:`soft_inverse_ros.commands`; each
module's ``register(subparsers)`` adds its own parser, so adding a command never edits
this file.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import pkgutil
import sys
from typing import Iterator, Sequence

from soft_inverse_ros import __version__, commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="soft-inverse-ros",
        description="Real-time inverse control of soft robots from FEM models (ROS 2).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub)
    return parser


#: exit status of a command refused for bad input (a file, a description, a value)
EXIT_USER_ERROR = 2


@contextlib.contextmanager
def _one_line_warnings(prefix: str) -> Iterator[None]:
    """Python warnings (a bag read several times warns about it each time) as one line each,
    ``PREFIX: warning: ...``, each text once."""
    import warnings

    previous = warnings.formatwarning
    with warnings.catch_warnings():
        warnings.simplefilter("once", UserWarning)
        warnings.formatwarning = lambda message, *_, **__: f"{prefix}: warning: {message}\n"
        try:
            yield
        finally:
            warnings.formatwarning = previous


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand. A user error (bad file, description, mesh, mapping, value:
    ``ValueError``; a path that cannot be read or written: ``OSError``; a file that is not
    YAML: ``yaml.YAMLError``; a robot without equilibrium under its load:
    ``ConvergenceError``) is one line on stderr and exit status 2, not a traceback;
    ``SOFT_INVERSE_ROS_TRACEBACK=1`` shows the traceback."""
    import os

    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras and getattr(args, "graph_arguments_anywhere", False) and all(
            ":=" in item and not item.startswith("-") for item in extras):
        args.arguments = [*args.arguments, *extras]  # launch's name:=value after its options
    elif extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    import yaml

    try:
        with _one_line_warnings(f"soft-inverse-ros {args.command}"):
            return int(args.func(args) or 0)
    except (ValueError, OSError, yaml.YAMLError) as exc:
        if os.environ.get("SOFT_INVERSE_ROS_TRACEBACK"):
            raise
        print(f"soft-inverse-ros {args.command}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USER_ERROR
    except RuntimeError as exc:
        from soft_inverse_ros.core.model.linear_solvers import ConvergenceError

        # the robot as described has no equilibrium under its load; anything else is a defect
        if not isinstance(exc, ConvergenceError) or os.environ.get("SOFT_INVERSE_ROS_TRACEBACK"):
            raise
        print(f"soft-inverse-ros {args.command}: error: {' '.join(str(exc).split())} (check the robot's "
              "material and units: `soft-inverse-ros mesh-info --robot ...` says what looks wrong)",
              file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
