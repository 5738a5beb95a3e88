"""Observations from the framebuffer: downsampling, 2-bit packing, frame stacks.

Everything here runs on the framebuffer's device (no host copies), writing into
preallocated buffers (``out=``) so an env step allocates nothing: torch ops, and on a CUDA
device the 72x80 frames from one Warp kernel (:class:`ObsExtractor`,
:mod:`gbx_gameboy.obs_kernel`), which gives the same bytes.

Shades are indices 0..3 after the palette, 0 = white and 3 = black.

* ``72x80``: each output pixel is the **max** of a 2x2 block. Most Game Boy
  pictures draw dark detail on a light background (text, outlines, 1-pixel
  bullets and cursors); the max keeps such a detail visible at half size,
  while taking every second pixel drops 3 of 4 such features and a mean
  fades them to a lighter shade (and leaves non-integer values).
* ``144x160``: the frame as rendered.
* Packed: 4 shades per byte (a 4x smaller replay buffer), by
  :func:`gbx_toolkit.shades.pack_shades` / :func:`gbx_toolkit.shades.unpack_shades`,
  re-exported here.
"""

from __future__ import annotations

import torch

from gbx_gameboy.layout import SCREEN_H, SCREEN_W
from gbx_toolkit.shades import pack_shades, unpack_shades

__all__ = [
    "FrameStack", "ObsExtractor", "extract_obs", "obs_hw", "pack_shades", "unpack_shades",
]

OBS_SIZES: dict[str, tuple[int, int]] = {"72x80": (72, 80), "144x160": (SCREEN_H, SCREEN_W)}


def obs_hw(size: str) -> tuple[int, int]:
    """``"72x80"`` -> ``(72, 80)``; a clear error for any other name."""
    if size not in OBS_SIZES:
        raise ValueError(f"unknown obs size {size!r}; choose one of {', '.join(OBS_SIZES)}")
    return OBS_SIZES[size]


def downsample_max2x2(fb: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Write the 2x2 max of ``fb [N, H, W]`` into ``out [N, H/2, W/2]``; return ``out``.

    Three elementwise maxima over the four strided quarter views: on the CPU about 10x
    faster than one ``amax`` over the two block dimensions (uint8 reductions over short
    strided dimensions are slow there), and like it they allocate nothing."""
    n, h, w = fb.shape
    v = fb.view(n, h // 2, 2, w // 2, 2)
    torch.maximum(v[:, :, 0, :, 0], v[:, :, 0, :, 1], out=out)
    torch.maximum(out, v[:, :, 1, :, 0], out=out)
    return torch.maximum(out, v[:, :, 1, :, 1], out=out)


def extract_obs(fb: torch.Tensor, size: str, out: torch.Tensor) -> torch.Tensor:
    """Observation frame ``[N, H, W]`` of ``size`` from the framebuffer, into ``out``."""
    if size == "144x160":
        return out.copy_(fb)
    obs_hw(size)
    return downsample_max2x2(fb, out)


class ObsExtractor:
    """:func:`extract_obs` from one framebuffer into one buffer, set up once.

    On a CUDA device at ``72x80`` the frames come from one Warp kernel
    (:mod:`gbx_gameboy.obs_kernel`), which reads the framebuffer once where the three
    torch maxima read it piece by piece; elsewhere from :func:`extract_obs`. Both give the
    same bytes. ``fb`` and ``out`` must stay where they are (both contiguous).
    ``kernel``: use the kernel (True, also on the CPU device) or not (False); default on a
    CUDA device at ``72x80``.
    """

    def __init__(self, fb: torch.Tensor, size: str, out: torch.Tensor,
                 kernel: bool | None = None) -> None:
        n = fb.shape[0]
        if tuple(out.shape) != (n, *obs_hw(size)):
            raise ValueError(f"out must have shape {(n, *obs_hw(size))}, got {tuple(out.shape)}")
        self.fb, self.size, self.out = fb, size, out
        if kernel is None:
            kernel = size == "72x80" and fb.device.type == "cuda"
        elif kernel and size != "72x80":
            raise ValueError(f"the observation kernel makes 72x80 frames, not {size}")
        self._kernel = kernel
        self._any = torch.tensor(False)  # whether a mask flags any env (CPU masks)
        if kernel:
            from gbx_gameboy.warp_setup import wp

            if not (fb.is_contiguous() and out.is_contiguous()):
                raise ValueError("fb and out must be contiguous for the observation kernel")
            from gbx_gameboy.obs_kernel import max2x2_kernel

            wp.init()
            self._wp = wp
            self._max2x2 = max2x2_kernel
            self._fb_words = wp.from_torch(fb.view(torch.int32), dtype=wp.int32)
            self._out_words = wp.from_torch(out.view(torch.int32), dtype=wp.int32)
            self._no_mask = wp.zeros(1, dtype=wp.uint8, device=str(fb.device))

    def __call__(self, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Make the frames of every env, or of the envs flagged in ``mask [N] bool`` only:
        a mask says that the other envs' screens have not changed since the last call, so
        their frames in ``out`` are still right. Without the kernel every frame is made,
        unless the mask is on the CPU and flags no env."""
        if not self._kernel:
            if mask is not None and mask.device.type == "cpu" and not bool(
                torch.any(mask, out=self._any)
            ):
                return self.out  # no screen changed (on the CPU the check waits for nothing)
            return extract_obs(self.fb, self.size, self.out)
        wp = self._wp
        flags = self._no_mask
        if mask is not None:
            flags = wp.from_torch(mask.view(torch.uint8), dtype=wp.uint8)
        n, h, w = self.out.shape
        wp.launch(
            self._max2x2, dim=(n, h, w // 4),
            inputs=[self._fb_words, flags, int(mask is not None), self._out_words],
            device=self._fb_words.device,
            stream=wp.stream_from_torch(self.fb.device) if self.fb.is_cuda else None,
        )
        return self.out


class FrameStack:
    """The last ``k`` observation frames of every env in one preallocated buffer.

    ``buffer`` is ``uint8 [N, K, H, W]``, oldest frame first. ``push`` shifts
    the frames in place (K - 1 non-overlapping slice copies, oldest slot first)
    and copies the new frame into the last slot; ``k == 1`` is a single copy.
    The buffer never moves: callers that keep an observation past the next
    ``push`` must clone it.
    """

    def __init__(self, num_envs: int, k: int, hw: tuple[int, int], device: torch.device) -> None:
        if k < 1:
            raise ValueError(f"stack_k must be >= 1, got {k}")
        self.k = k
        self.buffer = torch.zeros((num_envs, k, *hw), dtype=torch.uint8, device=device)

    def push(self, frame: torch.Tensor, reset_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Append ``frame [N, H, W]``; envs in ``reset_mask`` get ``frame`` in every slot."""
        buf = self.buffer
        for i in range(self.k - 1):
            buf[:, i].copy_(buf[:, i + 1])
        buf[:, self.k - 1].copy_(frame)
        if reset_mask is not None and self.k > 1:
            self.reset_where(reset_mask, frame)
        return buf

    def reset_where(self, mask: torch.Tensor, frame: torch.Tensor) -> torch.Tensor:
        """Fill every slot of the envs flagged in ``mask [N] bool`` with ``frame [N, H, W]``.

        A masked ``where`` over the whole buffer: no index compaction, so no
        host sync; its cost is the size of the buffer, the same as one push.
        """
        torch.where(mask.view(-1, 1, 1, 1), frame.unsqueeze(1), self.buffer, out=self.buffer)
        return self.buffer

    def fill(self, frame: torch.Tensor) -> torch.Tensor:
        """Every slot of every env = ``frame`` (after a full reset)."""
        self.buffer.copy_(frame.unsqueeze(1).expand_as(self.buffer))
        return self.buffer
