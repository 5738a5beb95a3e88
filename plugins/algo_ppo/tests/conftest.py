"""Test settings for the PPO plugin."""

from __future__ import annotations

import torch

# Tests run on small shared CPUs: one intra-op thread avoids oversubscription,
# which otherwise slows tiny convolutions down by an order of magnitude.
torch.set_num_threads(1)
