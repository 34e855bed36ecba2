"""What the two Triton ops share around their launches: the entry checks, the kernel inputs
(decays, initial states), output buffers and the checks of launch parameters.

:func:`.fused_recurrent.fused_recurrent_bl` and :func:`.chunk.chunk_bl` both start with
:func:`enter` (the boundary checks of :mod:`._inputs` plus the kernels' own limits) and hand
their kernels the same inputs (:func:`decays`, :func:`initial_states`); their launch
configurations are in :mod:`.config`.
"""
from __future__ import annotations

import torch

from ._dispatch import mode_for
from ._inputs import Inputs, check_inputs

# Tests and the benchmark set this to fill every kernel output with NaN before the kernels run,
# so that an element a kernel forgets to write fails.
POISON = False
# the covariance passes hold the D×D fp32 covariance in one program's registers
MAX_D = 128


def _empty(shape, dtype, device):
    if POISON:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def capturing(t) -> bool:
    """Whether ``t`` is a CUDA tensor and the current stream is capturing a CUDA graph (then nothing may
    synchronise with the host: no value checks, no data-dependent choices)."""
    return torch.is_tensor(t) and t.is_cuda and torch.cuda.is_current_stream_capturing()


def enter(op: str, q, k, v, l2, r2, alpha, p0, initial_state, *, g, validate: bool, write_mask,
          needs_kernels: bool = False) -> tuple[Inputs, str]:
    """Validate a kernel op's arguments; return them and the dispatch mode
    (``"triton"``, ``"interpret"`` or ``"naive"``, :func:`._dispatch.mode_for`).

    ``needs_kernels``: the op has no torch fallback (the ``*_trace`` functions), so the
    ``"naive"`` mode is refused.  On a kernel mode: ``α`` with exact zeros cannot be
    differentiated (the decay gradient is computed as ``dL/dlog α / α``) and ``D`` must be at
    most :data:`MAX_D`.
    """
    mode = mode_for(q.device) if torch.is_tensor(q) else "naive"
    if validate and capturing(q):
        raise ValueError(f"{op}: validate=True reads the inputs on the host, which a CUDA graph capture "
                         "forbids; check them before the capture and pass validate=False inside it")
    # on a kernel mode the alpha-zeros rule joins the value checks (one synchronisation for all)
    x = check_inputs(q, k, v, l2, r2, alpha, p0, initial_state, g=g, values=validate, write_mask=write_mask,
                     forbid_alpha_zeros=validate and mode != "naive")
    if mode == "naive":
        if needs_kernels:
            raise ValueError(f"{op} needs CUDA tensors or TRITON_INTERPRET=1")
        return x, mode
    D = x.dims[3]
    if D > MAX_D:
        raise ValueError(f"q/k head dimension D={D} is above {MAX_D}: the kernels keep the D×D covariance "
                         "in one program's registers; use naive_bl or chunk_bl_torch")
    return x, mode


def decays(dec, log_alpha: bool):
    """The decay factors ``α`` the kernels read (fp32 ``exp(g)`` for a log-decay), contiguous; None stays None."""
    if dec is None:
        return None
    return (torch.exp(dec.float()) if log_alpha else dec).contiguous()


def initial_states(x: Inputs) -> tuple[torch.Tensor, torch.Tensor]:
    """The initial mean ``[B, H, D, m]`` and covariance ``[B, H, G, D, D]`` as kernel inputs
    (``M_0 = 0``, ``P_0 = p0 I`` without an ``initial_state``), fp32."""
    B, T, H, D, m = x.dims
    dev = x.q.device
    if x.M0 is None:
        M0 = torch.zeros(B, H, D, m, dtype=torch.float32, device=dev)
        P0 = (x.p0 * torch.eye(D, dtype=torch.float32, device=dev)).expand(B, H, x.G, D, D).contiguous()
        return M0, P0
    return x.M0, x.P0


def final_state(x: Inputs, MT, PT):
    """``(M_T [B, H, D, m], P_T)``, ``P_T`` without its group axis when ``r2`` had none."""
    return MT, PT if x.grouped else PT[:, :, 0]
