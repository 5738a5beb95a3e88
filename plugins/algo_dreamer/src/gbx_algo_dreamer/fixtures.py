"""Deterministic numeric fixtures of the DreamerV3 math, checked by the CPU gate.

:func:`compute_fixtures` evaluates every piece of math on fixed inputs and seeded
weights (tiny sizes, CPU, float32). ``gbx dreamer validate cpu-gate --regen`` writes
the result to ``fixtures/dreamer_math.json``; afterwards the gate and the tests fail when
any value drifts, i.e. when the math changes.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from gbx.config import write_json_atomic
from gbx_algo_dreamer.config import SizePreset
from gbx_algo_dreamer.math_ops import (
    ReturnNorm,
    kl_balanced,
    lambda_returns,
    make_bins,
    symexp,
    symlog,
    twohot_encode,
    twohot_mean,
)
from gbx_algo_dreamer.world_model import WorldModel

# A plain file in the installed package (``--regen`` rewrites it in an editable checkout).
FIXTURE_PATH = Path(str(resources.files("gbx_algo_dreamer").joinpath("fixtures",
                                                                     "dreamer_math.json")))
TOLERANCE = 1e-4
_SIZE = SizePreset(deter=16, units=16, depth=2, layers=1, stoch=3, classes=4)
_OBS = (1, 16, 16)
_ACTIONS = 3


def _round(t: torch.Tensor) -> list[Any]:
    return torch.round(t.detach().to(torch.float64) * 1e6).div(1e6).tolist()


def _fixed_model() -> WorldModel:
    torch.manual_seed(1234)
    return WorldModel(_OBS, _ACTIONS, _SIZE, unimix=0.01, num_bins=17)


def _fixed_batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(99)
    b, t = 2, 4
    obs = torch.randint(0, 4, (b, t, *_OBS), generator=g, dtype=torch.int64).to(torch.uint8)
    return {
        "obs": obs,
        "actions": torch.randint(0, _ACTIONS, (b, t), generator=g),
        "rewards": torch.tensor([[0.0, 1.0, 0.0, -2.5], [0.0, 0.0, 10.0, 0.0]]),
        "is_first": torch.tensor([[True, False, False, False], [True, False, True, False]]),
        "is_terminal": torch.tensor([[False, False, False, True], [False, False, False, False]]),
    }


def compute_fixtures() -> dict[str, Any]:
    """All fixture values (CPU, float32, single thread for bitwise-stable reductions)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _compute()
    finally:
        torch.set_num_threads(threads)


def _compute() -> dict[str, Any]:
    out: dict[str, Any] = {}
    x = torch.tensor([-1000.0, -3.0, -0.5, 0.0, 0.25, 2.0, 50.0, 1e4])
    out["symlog"] = _round(symlog(x))
    out["symexp_symlog"] = _round(symexp(symlog(x)))
    bins = make_bins(17, -5.0, 5.0)
    y = torch.tensor([-200.0, -1.0, 0.0, 0.3, 7.0, 150.0])
    target = twohot_encode(y, bins)
    out["twohot_encode"] = _round(target)
    out["twohot_mean_of_target_logits"] = _round(twohot_mean(torch.log(target + 1e-30), bins))

    rewards = torch.tensor([[1.0, 0.0], [0.0, 2.0], [0.5, 0.0]])
    values = torch.tensor([[0.1, 0.2], [0.3, -0.4], [0.5, 0.6], [1.0, -1.0]])
    discounts = torch.tensor([[0.9, 0.9], [0.9, 0.0], [0.9, 0.9]])
    out["lambda_returns"] = _round(lambda_returns(rewards, values, discounts, 0.8))

    norm = ReturnNorm("cpu", decay=0.9, limit=1.0)
    scales = [norm.update(torch.linspace(-k, 3 * k, 101)) for k in (1.0, 5.0, 20.0)]
    out["return_norm_scales"] = _round(torch.stack(scales))
    out["return_norm_low_high"] = _round(torch.stack([norm.low, norm.high]))

    g = torch.Generator().manual_seed(5)
    post = torch.randn(2, 3, 4, generator=g)
    prior = torch.randn(2, 3, 4, generator=g)
    dyn, rep, raw, clipped = kl_balanced(post, prior, free_bits=1.0)
    out["kl_dyn_rep_raw"] = _round(torch.stack([dyn, rep, raw]))
    out["kl_clipped"] = clipped.tolist()

    model = _fixed_model()
    batch = _fixed_batch()
    with torch.no_grad():
        rssm = model.rssm
        state = rssm.initial(2)
        act = torch.nn.functional.one_hot(torch.tensor([0, 2]), _ACTIONS).float()
        embed = model.embed(batch["obs"][:, 0])
        gen = torch.Generator().manual_seed(7)
        step, post_logits, prior_logits = rssm.obs_step(
            state, act, embed, torch.tensor([True, False]), gen)
        out["rssm_step_deter"] = _round(step.deter)
        out["rssm_step_post_logits"] = _round(post_logits)
        out["rssm_step_prior_logits"] = _round(prior_logits)
        out["rssm_step_stoch"] = _round(step.stoch)
        acts = torch.nn.functional.one_hot(batch["actions"], _ACTIONS).float()
        emb = model.embed(batch["obs"])
        seq, posts, priors, _ = rssm.observe(emb, acts, batch["is_first"],
                                             generator=torch.Generator().manual_seed(8))
        out["rssm_scan_deter_sum"] = _round(seq.deter.sum((-1,)))
        out["rssm_scan_post_logits_mean"] = _round(posts.mean((-1, -2)))
        out["rssm_scan_prior_logits_mean"] = _round(priors.mean((-1, -2)))
    res = model.loss(batch["obs"], batch["actions"], batch["rewards"], batch["is_first"],
                     batch["is_terminal"], make_bins(17), kl_dyn=0.5, kl_rep=0.1,
                     free_bits=1.0, generator=torch.Generator().manual_seed(9))
    out["world_model_loss"] = _round(res.loss)
    out["world_model_terms"] = {k: _round(v) for k, v in sorted(res.scalars.items())}
    return out


def _flatten(prefix: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for k, v in value.items():
            flat.update(_flatten(f"{prefix}.{k}" if prefix else k, v))
        return flat
    if isinstance(value, list):
        flat = {}
        for i, v in enumerate(value):
            flat.update(_flatten(f"{prefix}[{i}]", v))
        return flat or {prefix: []}
    return {prefix: value}


def compare_fixtures(actual: dict[str, Any], expected: dict[str, Any],
                     tol: float = TOLERANCE) -> list[str]:
    """Human-readable mismatches (empty when everything agrees within ``tol``)."""
    a, e = _flatten("", actual), _flatten("", expected)
    problems = [f"{k}: missing in computed values" for k in sorted(set(e) - set(a))]
    problems += [f"{k}: not in the fixture file (regenerate)" for k in sorted(set(a) - set(e))]
    for k in sorted(set(a) & set(e)):
        va, ve = a[k], e[k]
        if isinstance(ve, bool) or isinstance(va, bool) or not isinstance(ve, int | float):
            if va != ve:
                problems.append(f"{k}: {va!r} != {ve!r}")
        elif abs(float(va) - float(ve)) > tol * max(1.0, abs(float(ve))):
            problems.append(f"{k}: {va} != {ve}")
    return problems


def load_fixtures(path: Path = FIXTURE_PATH) -> dict[str, Any]:
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; run `gbx dreamer validate cpu-gate --regen`")
    return json.loads(path.read_text())


def write_fixtures(path: Path = FIXTURE_PATH) -> Path:
    data = {"torch": torch.__version__.split("+")[0], **compute_fixtures()}
    return write_json_atomic(path, json.dumps(data, indent=1) + "\n")


def check_fixtures(path: Path = FIXTURE_PATH) -> list[str]:
    expected = load_fixtures(path)
    expected.pop("torch", None)
    return compare_fixtures(compute_fixtures(), expected)
