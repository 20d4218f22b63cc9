"""A ``rosbags`` typestore holding the standard ROS 2 messages and soft_inverse_ros_msgs.

The standard types come from the rosbags store of the ROS 2 distribution in use
(``ROS_DISTRO``, Kilted when unset, as with the PyPI wheels). Our own messages are parsed
from their ``.msg`` text, found (first hit wins) in:

1. ``$SOFT_INVERSE_ROS_MSG_DIR``;
2. the source tree (``<repo>/msg``);
3. ``<prefix>/share/soft_inverse_ros/msg`` or ``<prefix>/share/soft_inverse_ros_msgs/msg``
   for every prefix of ``AMENT_PREFIX_PATH`` and the running interpreter's prefix.

Types of other packages can be added on demand from the ``share/<pkg>/msg/*.msg`` files of
an ament prefix (:func:`register_from_share`), so the recorder can store any topic it sees.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Iterable

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

#: ROS package name of our interfaces.
MSG_PACKAGE = "soft_inverse_ros_msgs"
#: Environment variable overriding where our ``.msg`` files are looked for.
MSG_DIR_ENV = "SOFT_INVERSE_ROS_MSG_DIR"

_DISTRO_STORES = {
    "humble": Stores.ROS2_HUMBLE,
    "iron": Stores.ROS2_IRON,
    "jazzy": Stores.ROS2_JAZZY,
    "kilted": Stores.ROS2_KILTED,
}
_DEFAULT_STORE = Stores.ROS2_KILTED
_REPO_MSG_DIR = Path(__file__).resolve().parents[2] / "msg"
_PRIMITIVES = {
    "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16",
    "int32", "uint32", "int64", "uint64", "string", "wstring",
}


def ament_prefixes() -> list[Path]:
    """Install prefixes to search for ``share/<pkg>/msg``: AMENT_PREFIX_PATH, then sys.prefix."""
    prefixes = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes.append(Path(sys.prefix))
    seen: list[Path] = []
    for prefix in prefixes:
        if prefix not in seen:
            seen.append(prefix)
    return seen


def find_msg_dir() -> Path:
    """Folder holding ``ActuatorCommand.msg`` & co.

    Raises:
        FileNotFoundError: if no candidate folder has our message files (lists the places tried).
    """
    candidates: list[Path] = []
    if env := os.environ.get(MSG_DIR_ENV):
        candidates.append(Path(env))
    candidates.append(_REPO_MSG_DIR)
    for prefix in ament_prefixes():
        candidates += [prefix / "share" / "soft_inverse_ros" / "msg",
                       prefix / "share" / MSG_PACKAGE / "msg"]
    for folder in candidates:
        if (folder / "ActuatorCommand.msg").is_file():
            return folder
    tried = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"soft_inverse_ros message definitions not found; tried {tried}")


def custom_types(msg_dir: Path | None = None) -> dict:
    """Type definitions (rosbags ``Typesdict``) of every ``.msg`` of soft_inverse_ros_msgs."""
    folder = Path(msg_dir) if msg_dir is not None else find_msg_dir()
    files = sorted(folder.glob("*.msg"))
    if not files:
        raise FileNotFoundError(f"no .msg files in {folder}")
    types: dict = {}
    for path in files:
        types.update(get_types_from_msg(path.read_text(), f"{MSG_PACKAGE}/msg/{path.stem}"))
    return types


def store_for_distro(distro: str | None = None) -> Stores:
    """rosbags store matching ``distro`` (default ``$ROS_DISTRO``; Kilted if unset/unknown)."""
    name = (distro if distro is not None else os.environ.get("ROS_DISTRO", "")).lower()
    return _DISTRO_STORES.get(name, _DEFAULT_STORE)


def build_typestore(msg_dir: Path | None = None, distro: str | None = None) -> Typestore:
    """Standard ROS 2 types of ``distro`` plus soft_inverse_ros_msgs (see module doc)."""
    store = get_typestore(store_for_distro(distro))
    store.register(custom_types(msg_dir))
    return store


def _dependencies(msg_text: str, package: str) -> set[str]:
    """Full names (``pkg/msg/Type``) of the non-primitive field types of a ``.msg`` text.

    Constants are always primitive, so the first token of every line is enough.
    """
    deps: set[str] = set()
    for line in msg_text.splitlines():
        tokens = line.split("#", 1)[0].split()
        if len(tokens) < 2:
            continue
        name = re.sub(r"(\[[^\]]*\]|<=\d+)+$", "", tokens[0])
        if name in _PRIMITIVES:
            continue
        if name == "Header":
            deps.add("std_msgs/msg/Header")
        elif "/" not in name:
            deps.add(f"{package}/msg/{name}")
        elif name.count("/") == 1:
            pkg, typ = name.split("/")
            deps.add(f"{pkg}/msg/{typ}")
        else:
            deps.add(name)
    return deps


def find_share_msg(msgtype: str, prefixes: Iterable[Path] | None = None) -> Path | None:
    """``share/<pkg>/msg/<Type>.msg`` of ``msgtype`` (``pkg/msg/Type``) in an ament prefix."""
    pkg, kind, typ = _split(msgtype)
    for prefix in prefixes if prefixes is not None else ament_prefixes():
        path = prefix / "share" / pkg / kind / f"{typ}.msg"
        if path.is_file():
            return path
    return None


def register_from_share(
    store: Typestore, msgtype: str, prefixes: Iterable[Path] | None = None
) -> bool:
    """Add ``msgtype`` and its missing dependencies from installed ``.msg`` files.

    Types already in ``store`` are kept. Returns True when ``msgtype`` is (now) known.
    """
    if msgtype in store.fielddefs:
        return True
    prefixes = list(prefixes) if prefixes is not None else ament_prefixes()
    found: dict = {}
    pending = [msgtype]
    while pending:
        name = pending.pop()
        if name in found or name in store.fielddefs:
            continue
        path = find_share_msg(name, prefixes)
        if path is None:
            return False
        text = path.read_text()
        found.update(get_types_from_msg(text, name))
        pending += sorted(_dependencies(text, _split(name)[0]))
    store.register(found)
    return msgtype in store.fielddefs


def message_definition(store: Typestore, msgtype: str) -> tuple[str, str]:
    """(concatenated ``ros2msg`` definition with dependencies, ``RIHS01_...`` type hash)."""
    msgdef, _ = store.generate_msgdef(msgtype, ros_version=2)
    return msgdef, store.hash_rihs01(msgtype)


def _split(msgtype: str) -> tuple[str, str, str]:
    parts = msgtype.split("/")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"message type {msgtype!r} is not of the form 'pkg/msg/Type'")
    return parts[0], parts[1], parts[2]
