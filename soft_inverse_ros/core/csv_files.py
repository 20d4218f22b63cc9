"""Reading the CSV files users write (registration pairs, pneumatic step responses)."""

from __future__ import annotations

from pathlib import Path


def data_lines(path: str | Path) -> list[str]:
    """The header and data lines of the CSV file ``path``: blank lines and comments (lines
    starting with ``#``) dropped, a UTF-8 byte-order mark (a CSV saved by a spreadsheet)
    ignored.

    Raises:
        OSError: the file cannot be read.
        UnicodeDecodeError: not UTF-8 text.
    """
    with Path(path).open(newline="", encoding="utf-8-sig") as fh:
        return [line for line in fh if line.strip() and not line.lstrip().startswith("#")]
