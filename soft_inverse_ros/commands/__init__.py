"""Subcommands of the ``soft-inverse-ros`` console script.

Each module here defines ``register(subparsers) -> None``; it adds one subcommand whose
``func`` attribute is ``callable(args) -> int`` (the process exit code).
"""
