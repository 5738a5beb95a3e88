from __future__ import annotations

import copy
import json

from gbx_algo_dreamer.fixtures import (
    check_fixtures,
    compare_fixtures,
    compute_fixtures,
    load_fixtures,
    write_fixtures,
)


def test_math_matches_recorded_fixtures():
    expected = load_fixtures()
    expected.pop("torch", None)
    assert compare_fixtures(compute_fixtures(), expected) == []


def test_fixture_comparison_detects_a_changed_value():
    expected = load_fixtures()
    expected.pop("torch", None)
    changed = copy.deepcopy(expected)
    changed["lambda_returns"][0][0] += 0.01
    changed["world_model_terms"]["kl_dyn"] *= 1.5
    problems = compare_fixtures(changed, expected)
    assert any("lambda_returns[0][0]" in p for p in problems)
    assert any("kl_dyn" in p for p in problems)


def test_regen_writes_a_file_that_then_checks_clean(tmp_path):
    path = write_fixtures(tmp_path / "math.json")
    assert check_fixtures(path) == []
    data = json.loads(path.read_text())
    data["symlog"][0] = 0.0  # the file no longer matches the math
    path.write_text(json.dumps(data))
    assert any(p.startswith("symlog[0]") for p in check_fixtures(path))
