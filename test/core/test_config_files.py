"""Where the package's configuration files are looked for (core/config_files.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from soft_inverse_ros.core import config_files


def test_a_sourced_workspace_comes_before_the_interpreter_prefix(tmp_path, monkeypatch):
    """A colcon install sourced over a venv that also registers the package: the first
    prefix of AMENT_PREFIX_PATH holding the package wins over ``sys.prefix``'s share."""
    pytest.importorskip("ament_index_python")
    overlay = tmp_path / "install"
    (overlay / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (overlay / "share" / "ament_index" / "resource_index" / "packages" / "soft_inverse_ros").touch()
    (overlay / "share" / "soft_inverse_ros" / "config").mkdir(parents=True)
    (overlay / "share" / "soft_inverse_ros" / "config" / "only_here.yaml").write_text("a: 1\n")
    monkeypatch.setenv("AMENT_PREFIX_PATH", f"{overlay}:{sys.prefix}")
    dirs = config_files.config_dirs()
    assert dirs[0] == Path(config_files.__file__).resolve().parents[2] / "config"
    assert dirs[1] == overlay / "share" / "soft_inverse_ros" / "config"
    assert dirs[-1] == Path(sys.prefix) / "share" / "soft_inverse_ros" / "config"
    assert config_files.find_config("only_here.yaml") == dirs[1] / "only_here.yaml"


def test_a_missing_file_names_every_folder_searched(tmp_path, monkeypatch):
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path))
    with pytest.raises(config_files.ConfigNotFoundError) as err:
        config_files.find_config("robots/no_such_robot.yaml")
    for folder in config_files.config_dirs():
        assert str(folder) in str(err.value)
