"""bench contact on a tiny box: the JSON line's shape, the contact counts it was asked for,
and bad arguments refused in one line (no timing assertions)."""

from __future__ import annotations

import json

import pytest

from soft_inverse_ros import cli

TIMES = ("detect_ms", "w_ms", "gs_ms", "exact_ms", "w_coulomb_ms", "coulomb_ms")


def test_json_shape_and_contact_counts(capsys):
    code = cli.main(["bench", "contact", "--contacts", "10,20", "--repeat", "3", "--json"])
    captured = capsys.readouterr()
    out = captured.out.strip().splitlines()
    assert code == 0, captured.err
    result = json.loads(out[-1])
    assert result["bench"] == "contact"
    assert isinstance(result["python"], str) and result["machine"]["machine"]
    assert [c["n_contacts"] for c in result["cases"]] == [10, 20]
    for case in result["cases"]:
        assert abs(case["actual_contacts"] - case["n_contacts"]) <= max(1, case["n_contacts"] // 10)
        for key in TIMES:
            t = case[key]
            assert set(t) == {"median", "p95", "n"} and 1 <= t["n"] <= 3
            assert 0 < t["median"] <= t["p95"]
        assert case["gs_sweeps"] >= 1 and case["gs_converged"]
        assert 0 <= case["residual"] < 1e-9 and case["exact_residual"] < 1e-9
        assert case["gs_vs_exact"] < 1e-3
        assert 0 < case["loaded_contacts"] <= case["actual_contacts"]
        assert case["coulomb_sweeps"] >= 1
        # the reduced solve (k = 5 default): timed, its forces compared with the exact ones
        assert case["basis_k"] == 5 and 0 < case["reduced_ms"]["median"]
        assert 0 <= case["reduced_force_error"] < 1.0 and case["reduced_total_force_N"] > 0
        noted = any(line.lstrip().startswith(f"note: {case['n_contacts']} contacts requested") for line in out)
        assert noted == (case["actual_contacts"] != case["n_contacts"])  # a differing count is said


@pytest.mark.parametrize("argv,message", [
    (["--contacts", "0"], "--contacts must be >= 1"),
    (["--contacts", "ten"], "--contacts must be an integer"),
    (["--contacts", "10,,20"], "comma-separated"),
    (["--repeat", "0"], "--repeat must be >= 1"),
    (["--alarm-mm", "-1"], "--alarm-mm must be > 0"),
    (["--basis-k", "-1"], "--basis-k must be >= 0"),
    (["--contacts", "100000"], "more than"),
    (["--contacts", "100", "--nodes", "200"], "bottom face has only"),
])
def test_bad_arguments_are_one_line_and_exit_2(argv, message, capsys):
    code = cli.main(["bench", "contact", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("bench contact:") and message in err[0]
