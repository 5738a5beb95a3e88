"""What RL algorithms share, for any algorithm plugin to use (or not).

Modules: :mod:`~gbx_toolkit.rl_common` (policy math, GAE, step storage, RNG and env
batch state), :mod:`~gbx_toolkit.on_policy` (the on-policy trainer shell),
:mod:`~gbx_toolkit.models` (named policy networks), :mod:`~gbx_toolkit.evaluation`
(evaluation episodes and the random baseline), :mod:`~gbx_toolkit.guard` (the
non-finite guard), :mod:`~gbx_toolkit.metrics` (device-side reducers), and the
shade-frame vocabulary algorithms, envs and observers share:
:mod:`~gbx_toolkit.shades` (four shades per byte) and :mod:`~gbx_toolkit.pictures`
(palettes, PNG and GIF encoding).
"""
