"""gbx-env-pyboy: the gbx pixel and goal envs on PyBoy, one emulator per env in worker processes.

The CPU baseline next to the Warp backend: same env API, action codecs, observation
downsampling, start states and goal semantics, so ``gbx bench backends`` compares the
two on one task.
"""

__version__ = "0.1.0"
