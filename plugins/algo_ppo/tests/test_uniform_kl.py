"""``algo.uniform_kl_coef``: KL(uniform || policy) keeps an action the policy has all but
ruled out within reach, where the entropy bonus's pull on it has vanished."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from ppo_small import TOY, small_config, trained_state

from gbx.testing import InMemoryRunContext
from gbx.toy import ToyEnv
from gbx_algo_ppo import losses
from gbx_algo_ppo.trainer import PPOTrainer

RULED_OUT = 2  # the action whose policy-head bias the tests push far down


def test_uniform_kl_is_zero_for_the_uniform_policy_and_its_pull_does_not_vanish() -> None:
    assert float(losses.uniform_kl(torch.zeros(3, 7))) == pytest.approx(0.0, abs=1e-6)
    logits = torch.tensor([[0.0, -30.0, 0.0, 0.0]], requires_grad=True)
    value = losses.uniform_kl(logits)
    # KL(u || p) = -mean(log p) - log A
    expected = -torch.log_softmax(logits.detach(), -1).mean() - math.log(4)
    assert float(value.detach()) == pytest.approx(float(expected), rel=1e-6)
    (grad,) = torch.autograd.grad(value, logits)
    # on the ruled-out logit: p - 1/A, about -1/4 however small p is ...
    assert float(grad[0, 1]) == pytest.approx(-0.25, abs=1e-6)
    # ... where the entropy's pull on it is nothing
    ent_logits = logits.detach().clone().requires_grad_(True)
    (ent_grad,) = torch.autograd.grad(losses.categorical_entropy(ent_logits).sum(), ent_logits)
    assert abs(float(ent_grad[0, 1])) < 1e-9


@pytest.fixture(scope="module")
def ruled_out_state() -> dict[str, Any]:
    """A briefly trained policy whose head gives one action a log-probability near -40."""
    state = trained_state()
    state["model"]["policy_head.bias"][RULED_OUT] -= 40.0
    return state


def _ruled_out_logprob(coef: float, state: dict[str, Any], probe: torch.Tensor
                       ) -> tuple[float, float, list[dict[str, Any]]]:
    cfg = small_config(uniform_kl_coef=coef, lr=1e-2)
    ctx = InMemoryRunContext(cfg, steps=16 * cfg.batch_size, env_config=TOY)
    trainer = PPOTrainer(cfg, ctx)
    trainer.init_weights(state, "a policy with one action ruled out")
    with torch.no_grad():
        before = trainer.model_or_fail()(probe)[0].log_softmax(-1)[:, RULED_OUT].mean()
    ctx.run(trainer)
    with torch.no_grad():
        after = trainer.model_or_fail()(probe)[0].log_softmax(-1)[:, RULED_OUT].mean()
    return float(before), float(after), ctx.records


def test_the_term_brings_a_ruled_out_action_back_and_is_recorded(ruled_out_state) -> None:
    probe = ToyEnv(TOY, 64, "cpu", 3).reset()
    before, plain, plain_records = _ruled_out_logprob(0.0, ruled_out_state, probe)
    assert before < -35.0
    # the entropy bonus alone (ent_coef 0.01) leaves it where it was
    assert plain < -35.0
    assert all("uniform_kl" not in r for r in plain_records)
    _, lifted, records = _ruled_out_logprob(0.05, ruled_out_state, probe)
    assert lifted > before + 5.0 and lifted > plain + 5.0, (before, plain, lifted)
    train = [r for r in records if "uniform_kl" in r]
    assert train and all(r["uniform_kl"] > 0 for r in train)


def test_a_negative_weight_is_refused() -> None:
    with pytest.raises(ValueError, match="uniform_kl_coef"):
        small_config(uniform_kl_coef=-0.1)
