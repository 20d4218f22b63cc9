"""Finding the package's configuration files (robot descriptions, node parameters).

Searched, in order:

1. the source tree's ``config/`` (repository checkout or editable install);
2. the ament share directory of ``soft_inverse_ros`` (colcon install), when
   ``ament_index_python`` is importable and the package is registered: the first prefix
   of ``AMENT_PREFIX_PATH`` that has it, so a sourced workspace overlays the rest;
3. ``<sys.prefix>/share/soft_inverse_ros/config`` (pip / wheel install, data_files).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE = "soft_inverse_ros"


class ConfigNotFoundError(FileNotFoundError):
    """A configuration file found in none of the searched folders (message lists them)."""


def config_dirs() -> list[Path]:
    """Candidate ``config`` folders, in search order (existing or not)."""
    dirs = [Path(__file__).resolve().parents[2] / "config"]
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    except ImportError:
        pass
    else:
        try:
            dirs.append(Path(get_package_share_directory(PACKAGE)) / "config")
        except (PackageNotFoundError, LookupError, ValueError, OSError):  # OSError: AMENT_PREFIX_PATH unset
            pass
    dirs.append(Path(sys.prefix) / "share" / PACKAGE / "config")
    out: list[Path] = []
    for d in dirs:
        if d not in out:
            out.append(d)
    return out


def find_config(relative: str | os.PathLike[str]) -> Path:
    """Path of a config file such as ``"robots/diamond.yaml"``.

    Raises:
        ConfigNotFoundError: listing every folder searched.
    """
    searched = config_dirs()
    for d in searched:
        candidate = d / relative
        if candidate.is_file():
            return candidate
    folders = "\n  ".join(str(d) for d in searched)
    raise ConfigNotFoundError(f"config file {str(relative)!r} not found; searched:\n  {folders}")


def available_robots() -> list[str]:
    """Names of the robot descriptions in the searched ``config/robots`` folders."""
    names: set[str] = set()
    for d in config_dirs():
        names.update(p.stem for p in (d / "robots").glob("*.yaml"))
    return sorted(names)


def resolve_robot(name_or_path: str | os.PathLike[str]) -> Path:
    """A robot description file: ``name_or_path`` if it is an existing file, else
    ``robots/<name>.yaml`` from :func:`find_config`.

    Raises:
        ConfigNotFoundError: naming the path tried, the folders searched and the known robots.
    """
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    text = str(name_or_path)
    folder = ConfigNotFoundError(f"robot description {path} is a folder, not a YAML file")
    if os.sep in text or (os.altsep and os.altsep in text):
        raise folder if path.is_dir() else ConfigNotFoundError(f"robot description file {path} not found")
    name = path.stem if path.suffix in (".yaml", ".yml") else text
    try:  # a name first: a folder of that name in the working folder does not hide a robot
        return find_config(Path("robots") / f"{name}.yaml")
    except ConfigNotFoundError:
        if path.is_dir():
            raise folder from None
        known = ", ".join(available_robots()) or "none"
        folders = ", ".join(str(d / "robots") for d in config_dirs())
        raise ConfigNotFoundError(
            f"robot {text!r} is neither an existing file nor a known robot name (known: {known}; "
            f"searched {folders})"
        ) from None
