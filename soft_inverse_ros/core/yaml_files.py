"""Reading the YAML files users write (robot descriptions, driver, motion-capture and
parameters files): safe loading that refuses a key given twice in one mapping.

PyYAML keeps the last of two equal keys without a word, so ``command_period: 1 ms`` followed
further down by ``command_period: 1 s`` ran with 1 s. A duplicate is a
:class:`yaml.constructor.ConstructorError` (a ``yaml.YAMLError``: every reader's existing
"not YAML" handling reports it, with its line).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError

__all__ = ["load_yaml", "yaml_problem"]


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping holding one key twice (merge keys ``<<``
    keep their meaning: a key a merge brings in may be overridden)."""

    def construct_mapping(self, node, deep=False):  # noqa: D102 (PyYAML's hook)
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    repeated = key in seen
                except TypeError:  # an unhashable key: SafeLoader's own error follows
                    break
                if repeated:
                    raise ConstructorError("while constructing a mapping", node.start_mark,
                                           f"found duplicate key {key!r}", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                 _UniqueKeyLoader.construct_mapping)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, refusing duplicate keys (module docstring).

    Raises:
        yaml.YAMLError: not YAML, or a key repeated in a mapping (with its line).
    """
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)


def yaml_problem(exc: Exception) -> str:
    """What a YAML parser error says and where, on one line (``expected ',' or ']' at line
    2, column 1``)."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{getattr(exc, 'problem', None) or ' '.join(str(exc).split())}{where}"
