from __future__ import annotations

import copy

from gbx_algo_dreamer.fixtures import compare_fixtures, compute_fixtures, load_fixtures


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
