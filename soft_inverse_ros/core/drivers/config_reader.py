"""Typed, path-aware reading of driver configuration mappings (parsed YAML).

Every error is a :class:`DriverConfigError` whose message names the full key, e.g.
``servo_driver.actuators[2].spool_radius_m: must be > 0, got -0.01``; unknown keys are
rejected so that a typo never silently falls back to a default.
"""

from __future__ import annotations

import difflib
import math
import os
import pathlib
from typing import Any, Iterable, Mapping, Sequence

from soft_inverse_ros.core.config_files import ConfigNotFoundError, config_dirs, find_config
from soft_inverse_ros.core.yaml_files import load_yaml, yaml_problem

_MISSING = object()


class DriverConfigError(ValueError):
    """A driver configuration value is missing, of the wrong type or out of range."""


class ConfigReader:
    """Reads the keys of one mapping; call :meth:`finish` to reject unknown keys.

    Args:
        data: The mapping (from YAML).
        path: Its dotted location, used in error messages.
    """

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, Mapping):
            raise DriverConfigError(f"{path}: expected a mapping, got {type(data).__name__}")
        self._data = data
        self.path = path
        self._read: set[str] = set()

    def key_path(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return key in self._data

    def _get(self, key: str, default: Any) -> Any:
        self._read.add(key)
        if key in self._data and self._data[key] is None:  # ``key:`` or ``null``: not the default
            raise DriverConfigError(f"{self.key_path(key)}: given without a value: write one, or leave "
                                    "the key out for the default")
        if key in self._data:
            return self._data[key]
        if default is _MISSING:
            raise DriverConfigError(f"{self.key_path(key)}: required key is missing")
        return default

    def float(
        self,
        key: str,
        default: Any = _MISSING,
        *,
        min: float | None = None,
        max: float | None = None,
        min_exclusive: bool = False,
    ) -> float:
        """A finite float, optionally bounded (``min`` exclusive when ``min_exclusive``)."""
        value = self._get(key, default)
        if value is None:  # only reachable with default=None: an optional key
            return None  # type: ignore[return-value]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DriverConfigError(f"{self.key_path(key)}: expected a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise DriverConfigError(f"{self.key_path(key)}: must be finite, got {value}")
        if min is not None and (value <= min if min_exclusive else value < min):
            op = ">" if min_exclusive else ">="
            raise DriverConfigError(f"{self.key_path(key)}: must be {op} {min}, got {value}")
        if max is not None and value > max:
            raise DriverConfigError(f"{self.key_path(key)}: must be <= {max}, got {value}")
        return value

    def int(
        self, key: str, default: Any = _MISSING, *, min: int | None = None, max: int | None = None
    ) -> int:
        value = self._get(key, default)
        if value is None:  # only reachable with default=None: an optional key
            return None  # type: ignore[return-value]
        if isinstance(value, bool) or not isinstance(value, int):
            raise DriverConfigError(f"{self.key_path(key)}: expected an integer, got {value!r}")
        if min is not None and value < min:
            raise DriverConfigError(f"{self.key_path(key)}: must be >= {min}, got {value}")
        if max is not None and value > max:
            raise DriverConfigError(f"{self.key_path(key)}: must be <= {max}, got {value}")
        return value

    def bool(self, key: str, default: Any = _MISSING) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise DriverConfigError(f"{self.key_path(key)}: expected true/false, got {value!r}")
        return value

    def str(self, key: str, default: Any = _MISSING) -> str:
        value = self._get(key, default)
        if not isinstance(value, str) or not value:
            raise DriverConfigError(f"{self.key_path(key)}: expected a non-empty string, got {value!r}")
        return value

    def choice(self, key: str, choices: Iterable[str], default: Any = _MISSING) -> str:
        options = tuple(choices)
        value = self.str(key, default)
        if value not in options:
            raise DriverConfigError(
                f"{self.key_path(key)}: must be one of {', '.join(options)}, got {value!r}"
            )
        return value

    def section(self, key: str, *, required: bool = False) -> "ConfigReader":
        """A nested mapping (an empty one when absent and not required)."""
        value = self._get(key, _MISSING if required else {})
        return ConfigReader(value, self.key_path(key))

    def sections(self, key: str, *, min_items: int = 1) -> list["ConfigReader"]:
        """A list of mappings."""
        value = self._get(key, _MISSING)
        if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
            raise DriverConfigError(f"{self.key_path(key)}: expected a list, got {value!r}")
        if len(value) < min_items:
            raise DriverConfigError(
                f"{self.key_path(key)}: needs at least {min_items} item(s), got {len(value)}"
            )
        return [ConfigReader(item, f"{self.key_path(key)}[{i}]") for i, item in enumerate(value)]

    def error(self, key: str, message: str) -> DriverConfigError:
        """An error about ``key`` of this mapping (for cross-field checks)."""
        return DriverConfigError(f"{self.key_path(key)}: {message}")

    def finish(self) -> None:
        """Reject keys that were never read (typos, unsupported options)."""
        unknown = sorted(str(k) for k in self._data if k not in self._read)
        if unknown:
            known = sorted(self._read)
            hints = []
            for key in unknown:
                close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
                if close:
                    hints.append(f"{key}: did you mean {close[0]!r}?")
            hint = f" ({'; '.join(hints)})" if hints else ""
            raise DriverConfigError(
                f"{self.path or '<root>'}: unknown key(s) {', '.join(unknown)}{hint}"
            )


def unique_names(names: Sequence[str], path: str, what: str = "name") -> None:
    """Raise when a name repeats."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise DriverConfigError(f"{path}: duplicate {what} {name!r}")
        seen.add(name)


def _load_yaml_file(path: str | os.PathLike[str]) -> Any:
    """The parsed YAML of ``path``.

    Raises:
        DriverConfigError: not YAML (with the line), or not readable (a folder, a device,
            no permission, binary), the message without the path (the callers name it).
    """
    import yaml

    try:
        return load_yaml(pathlib.Path(path).read_text())
    except yaml.YAMLError as exc:
        raise DriverConfigError(f"not YAML ({yaml_problem(exc)})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DriverConfigError(f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None


def read_yaml_section(path: str | os.PathLike[str], key: str) -> Any:
    """The value under the top-level ``key`` of the YAML file at ``path``.

    Raises:
        DriverConfigError: unreadable, not YAML, or no top-level mapping holding ``key``
            (one line naming the file).
    """
    try:
        data = _load_yaml_file(path)
    except DriverConfigError as exc:
        raise DriverConfigError(f"{path}: {exc}") from None
    if not isinstance(data, dict) or key not in data:
        raise DriverConfigError(f"{path}: expected a top-level {key!r} mapping")
    return data[key]


def read_driver_section(path: pathlib.Path, key: str, backend: str | None) -> dict:
    """The mapping under the top-level ``key`` of the driver YAML file ``path``, with its
    ``backend`` set to ``backend`` when given (validation is the caller's, which names the
    file).

    Raises:
        DriverConfigError: unreadable, not YAML, or no top-level ``key`` mapping.
    """
    data = _load_yaml_file(path)
    if not isinstance(data, dict) or not isinstance(data.get(key), dict):
        raise DriverConfigError(f"expected a top-level '{key}' mapping")
    section = dict(data[key])
    if backend is not None:
        section["backend"] = backend
    return section


def resolve_device_config(value: str, default: str) -> pathlib.Path:
    """The driver YAML named by a ``device_config`` parameter.

    Tried in order: ``value`` as a path; ``config/<value>`` and ``config/drivers/<value>``
    in the package's config folders (:func:`~soft_inverse_ros.core.config_files.find_config`).
    An empty value means ``default`` (relative to ``config/``).

    Raises:
        FileNotFoundError: naming the value and every place searched.
    """
    if not value:
        return find_config(default)
    path = pathlib.Path(value).expanduser()
    if path.is_file():
        return path
    if not path.is_absolute():
        for relative in (value, f"drivers/{value}"):
            try:
                return find_config(relative)
            except ConfigNotFoundError:
                pass
    places = ", ".join(str(d) for d in config_dirs())
    raise FileNotFoundError(
        f"device_config {value!r}: no such file (also searched config/ and config/drivers/ in {places})"
    )
