"""Data-parallel training across processes: one rank per GPU (or per CPU process).

``torchrun --nproc-per-node G -m gbx run ...`` starts G copies of ``gbx run``;
each reads its rank from the variables torchrun sets (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``) and :func:`init_from_env`
joins the process group: NCCL when the run's device is CUDA, gloo on the CPU.

What each rank does (see docs/scaling.md):

* owns its own env shard on its own device (``cuda:LOCAL_RANK``) with its own
  seed (:func:`gbx.seeds.rank_seed`), so ranks see different episodes;
* trains the same model: :func:`wrap_model` returns a
  ``DistributedDataParallel`` wrapper whose backward pass averages gradients
  over ranks (and whose construction copies rank 0's parameters to all);
* reduces its metrics with :func:`reduce_record` (counters summed, everything
  else averaged) so every rank holds the same global record;
* only rank 0 writes run files and runs observers (the run loop does that).

With one process (no torchrun) every helper is a cheap no-op, so trainers call
them unconditionally.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import torch
import torch.distributed as dist
from torch import nn

from gbx.errors import GbxError

# Keys summed over ranks: totals and throughputs of the whole job. Every other numeric
# key is averaged (losses, per-episode returns, rates per rank such as updates/s).
SUM_KEYS = frozenset({
    "step", "env_steps", "frames", "episodes", "sps", "env_steps_per_s", "frames_per_s",
    "fps", "episodes_done",
})
# A reduced record carries this key; reducing it again is a no-op.
REDUCED_KEY = "ranks"
_TIMEOUT = _dt.timedelta(minutes=10)
# With NCCL, small host-side agreements (metric records, stop flags, checkpoints handed
# from rank 0) go through a gloo group instead: no device copies and no stream syncs.
_control_group: Any = None


@attrs.frozen
class DistInfo:
    """Where this process sits in the job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def launched_by_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    """True when the process was started by torchrun with more than one rank."""
    env = os.environ if environ is None else environ
    return int(env.get("WORLD_SIZE", "1")) > 1


def info() -> DistInfo:
    """This process's rank and world size (rank 0 of 1 without a process group)."""
    if dist.is_available() and dist.is_initialized():
        return DistInfo(dist.get_rank(), dist.get_world_size(),
                        int(os.environ.get("LOCAL_RANK", "0")), dist.get_backend())
    return DistInfo()


def rank() -> int:
    return info().rank


def world_size() -> int:
    return info().world_size


def is_main() -> bool:
    return info().is_main


def device_for_rank(spec: str, local_rank: int) -> torch.device:
    """``auto``/``cuda`` -> ``cuda:LOCAL_RANK``; ``cpu`` stays ``cpu``.

    Asking for an explicit ``cuda:i`` with several ranks is an error: every rank
    would share one GPU.
    """
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "auto" and not torch.cuda.is_available():
        return torch.device("cpu")
    if spec not in ("auto", "cuda"):
        raise GbxError(
            f"run.device={spec!r} with several ranks: use --device cuda (each rank takes "
            "cuda:LOCAL_RANK) or --device cpu"
        )
    if not torch.cuda.is_available():
        raise GbxError("run.device='cuda' with several ranks but CUDA is not available; "
                       "use --device cpu (gloo backend)")
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise GbxError(
            f"local rank {local_rank} needs cuda:{local_rank} but only {count} GPU(s) are "
            "visible; lower --nproc-per-node"
        )
    return torch.device("cuda", local_rank)


def init_from_env(device_spec: str) -> tuple[DistInfo, torch.device]:
    """Join the process group torchrun describes; return (info, this rank's device).

    Without torchrun (``WORLD_SIZE`` unset or 1) nothing is initialised and the
    device is left to the caller (``None`` device spec resolution stays in the run loop).
    """
    if not launched_by_torchrun():
        from gbx.resolve import resolve_device

        return DistInfo(), resolve_device(device_spec)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = device_for_rank(device_spec, local_rank)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        kwargs: dict[str, Any] = {"backend": backend, "timeout": _TIMEOUT}
        if device.type == "cuda":
            kwargs["device_id"] = device  # binds NCCL to this GPU at once
        dist.init_process_group(**kwargs)
    global _control_group
    _control_group = dist.new_group(backend="gloo") if backend == "nccl" else None
    return info(), device


def shutdown(*, wait: bool = True) -> None:
    """Leave the process group when one was joined.

    ``wait``: meet the other ranks first (a clean end); after a failure the other
    ranks may never arrive, so leave at once.
    """
    global _control_group
    if dist.is_available() and dist.is_initialized():
        if wait:
            dist.barrier(group=_control_group)
        _control_group = None
        dist.destroy_process_group()


def barrier() -> None:
    if world_size() > 1:
        dist.barrier(group=_control_group)


def wrap_model(model: nn.Module, **ddp_options: Any) -> nn.Module:
    """The module to run forward/backward on in the update.

    With several ranks: ``DistributedDataParallel`` (gradients averaged over ranks
    during ``backward``; rank 0's parameters copied to every rank now). Buffers
    are not re-broadcast on every forward (``broadcast_buffers=False``): gbx
    models keep none that training changes. With one rank: ``model`` itself.
    """
    if world_size() == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel

    device = next(model.parameters()).device
    options: dict[str, Any] = {"broadcast_buffers": False}
    if device.type == "cuda":
        options["device_ids"] = [device]
        options["output_device"] = device
    options.update(ddp_options)
    return DistributedDataParallel(model, **options)


def sync_parameters(module: nn.Module, src: int = 0) -> nn.Module:
    """Copy rank ``src``'s parameters and buffers into ``module`` on every rank (in place).

    For models trained with :func:`average_gradients` instead of :func:`wrap_model`
    (which does this itself). One rank: nothing happens.
    """
    if world_size() > 1:
        with torch.no_grad():
            for t in [*module.parameters(), *module.buffers()]:
                dist.broadcast(t.data, src=src)
    return module


def average_gradients(parameters: Iterable[torch.Tensor]) -> None:
    """Replace every gradient by its mean over ranks (call between backward and step).

    For training code that calls sub-modules directly (world models, imagination
    rollouts), where a DDP wrapper's forward is not the one entry point. Gradients
    are averaged in one flat all-reduce per dtype and device. One rank: nothing happens.
    """
    n = world_size()
    if n == 1:
        return
    groups: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for p in parameters:
        if p.grad is not None:
            groups.setdefault((p.grad.dtype, p.grad.device), []).append(p.grad)
    for grads in groups.values():
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat.div_(n)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()


def unwrap_model(model: nn.Module) -> nn.Module:
    """The plain module under a DDP wrapper (for state dicts and acting)."""
    return getattr(model, "module", model)


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            return None
        value = value.item()
    if isinstance(value, int | float):
        return value
    return None


def _is_count_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value)


def _per_episode(key: str) -> bool:
    """Statistics over finished episodes: averaged weighted by each rank's episode count."""
    return key.startswith("episode_") or key == "success_rate"


def _mean(key: str, vals: list[float | int], weights: list[float]) -> float | int:
    if all(isinstance(v, int) for v in vals) and len(set(vals)) == 1:
        return vals[0]  # counters every rank shares (updates, opt_steps) stay integers
    if _per_episode(key) and len(weights) == len(vals) and sum(weights) > 0:
        return sum(float(v) * w for v, w in zip(vals, weights, strict=True)) / sum(weights)
    return sum(float(v) for v in vals) / len(vals)


def merge_records(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One record from one record per rank (pure; rank 0's first).

    * numeric keys in :data:`SUM_KEYS` are summed (the job's totals and throughputs);
    * histograms (``*_hist``, lists of counts of one length) are summed bin by bin;
    * per-episode statistics (``episode_*``, ``success_rate``) are averaged weighted
      by each rank's ``episodes``;
    * other numbers are averaged over the ranks that have them (integers every rank
      shares stay integers);
    * anything else (strings, lists) is rank 0's, or the first rank's that has the key.

    The result carries ``ranks`` = len(records).
    """
    out: dict[str, Any] = {}
    keys: list[str] = []
    for rec in records:
        keys.extend(k for k in rec if k not in keys)
    for key in keys:
        having = [rec for rec in records if key in rec]
        present = [rec[key] for rec in having]
        nums = [_number(v) for v in present]
        if all(n is not None for n in nums):
            vals = [n for n in nums if n is not None]
            if key in SUM_KEYS:
                out[key] = sum(vals)
            else:
                weights = [float(_number(rec.get("episodes")) or 0.0) for rec in having]
                out[key] = _mean(key, vals, weights)
        elif key.endswith("_hist") and all(_is_count_list(v) for v in present) and len(
                {len(v) for v in present}) == 1:
            out[key] = [sum(col) for col in zip(*present, strict=True)]
        else:
            out[key] = present[0]
    out[REDUCED_KEY] = len(records)
    return out


def reduce_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """Merge this rank's metrics record with every other rank's (a collective call).

    Every rank must call it the same number of times; all get the same result.
    Keys may differ between ranks (e.g. episode returns only where an episode
    ended). One rank, or a record that was already reduced: returned as is.
    """
    if world_size() == 1 or REDUCED_KEY in record:
        return dict(record)
    local = {k: (_number(v) if _number(v) is not None else v) for k, v in record.items()}
    gathered: list[Any] = [None] * world_size()
    dist.all_gather_object(gathered, local, group=_control_group)
    return merge_records(gathered)


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """``obj`` from rank ``src`` on every rank (any picklable object; one rank: itself)."""
    if world_size() == 1:
        return obj
    box = [obj if rank() == src else None]
    dist.broadcast_object_list(box, src=src, group=_control_group)
    return box[0]


def broadcast_state(state: Mapping[str, Any] | None, src: int = 0) -> Mapping[str, Any] | None:
    """A checkpoint (or any state dict) read on rank ``src``, handed to every rank."""
    return broadcast_object(state, src=src)


def any_rank(flag: bool) -> bool:
    """True on every rank when ``flag`` is True on at least one (a collective call)."""
    if world_size() == 1:
        return flag
    t = torch.tensor([1 if flag else 0], dtype=torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=_control_group)
    return bool(t.item())


def fingerprint(modules: Mapping[str, nn.Module]) -> str:
    """sha256 over the parameters and buffers of ``modules`` (names sorted)."""
    h = hashlib.sha256()
    for name in sorted(modules):
        for key, tensor in sorted(unwrap_model(modules[name]).state_dict().items()):
            h.update(f"{name}.{key}".encode())
            h.update(tensor.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


def trainer_modules(trainer: Any) -> dict[str, nn.Module]:
    """The ``nn.Module`` attributes of a trainer object (what its state holds)."""
    return {k: v for k, v in vars(trainer).items() if isinstance(v, nn.Module)}
