"""Test settings for the PPO plugin."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

# pytest's importlib mode does not put this folder on sys.path; the helper module next to
# the tests (ppo_small) is imported by name.
sys.path.insert(0, str(Path(__file__).parent))

# Tests run on small shared CPUs: one intra-op thread avoids oversubscription,
# which otherwise slows tiny convolutions down by an order of magnitude.
torch.set_num_threads(1)
