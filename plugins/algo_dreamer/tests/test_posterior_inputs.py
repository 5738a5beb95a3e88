"""The posterior head's first layer split in two: the embedding's part projected for all
steps before the scan (:meth:`RSSM.posterior_inputs`) plus the GRU state's part in each
step gives the head on the concatenated ``[deter, embed]``."""

from __future__ import annotations

import torch

from gbx_algo_dreamer.config import SIZES
from gbx_algo_dreamer.world_model import WorldModel


def test_the_split_head_gives_the_head_on_the_concatenated_input():
    torch.manual_seed(0)
    rssm = WorldModel((1, 16, 16), 3, SIZES["tiny"], 0.01, 17).rssm
    g = torch.Generator().manual_seed(1)
    embed = torch.randn(4, 7, rssm.post_net.torso[0].in_features - rssm.deter_dim, generator=g)
    deter = torch.randn(4, 7, rssm.deter_dim, generator=g)
    whole = rssm._logits(rssm.post_net, torch.cat([deter, embed], -1))
    split = rssm._post_head(deter, rssm.posterior_inputs(embed), None)[0]
    torch.testing.assert_close(split, whole, rtol=1e-5, atol=1e-6)
    # and per step, as the scan takes it: step t of the projected sequence
    step = rssm._post_head(deter[:, 3], rssm.posterior_inputs(embed)[:, 3], None)[0]
    torch.testing.assert_close(step, whole[:, 3], rtol=1e-5, atol=1e-6)
