"""Output files of the commands (soft_inverse_ros/output_paths.py): what is written where,
or one line saying why not."""

from __future__ import annotations

from pathlib import Path

from soft_inverse_ros.output_paths import writable_figure, writable_output


def test_a_folder_as_out_is_refused_not_suffixed(tmp_path):
    (tmp_path / "results").mkdir()
    assert writable_output(tmp_path / "results", "--out", ".npz") == f"--out {tmp_path / 'results'} is a directory"
    assert writable_output(tmp_path / "basis", "--out", ".npz") == tmp_path / "basis.npz"


def test_a_figure_is_the_file_matplotlib_writes(tmp_path):
    assert writable_figure(str(tmp_path / "noext"), "--figure") == tmp_path / "noext.png"
    assert writable_figure(tmp_path / "f.PDF", "--figure") == tmp_path / "f.PDF"
    assert writable_figure(str(tmp_path / "sub" / "f.svg"), "--plot") == tmp_path / "sub" / "f.svg"


def test_a_figure_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / "afolder").mkdir()
    refused = {
        f"{tmp_path}/figdir/": "is a directory: give the figure's file name",
        str(tmp_path / "afolder"): "is a directory: give the figure's file name",
        str(tmp_path / "fig.xyz"): "matplotlib writes no '.xyz' images (it writes ",
        "": "--plot needs a file name",
    }
    for figure, needle in refused.items():
        problem = writable_figure(figure, "--plot")
        assert isinstance(problem, str) and needle in problem and "\n" not in problem, (figure, problem)
    assert not Path(f"{tmp_path}/figdir.png").exists() and not (tmp_path / "figdir").exists()
