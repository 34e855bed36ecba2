"""The collision experiment (BL App. E.4) through the numpy filter family.

One function, :func:`run_collision`, used by the CLI, the claim checks, the
figures, the tests and the GPU cross-check.  Numeric parameters (``rho``,
``p0``, ``r2``, ``l2``, ``iso_c``, ``reset_lambda``, ``la_gain``) may be arrays:
they broadcast to a batch of independent configurations that run together.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from assocmem import validate as V
from assocmem.protocol import CollisionProtocol

from .bl_filter import VARIANTS, bl_filter


@dataclass
class VariantRun:
    p_ab: np.ndarray      # [..., T]  pairwise retrieval at k_B after each step
    gain: np.ndarray      # [..., T]  gain of the write at each step
    y_a: np.ndarray       # [..., T]  read-out at k_B, A's coordinate
    y_b: np.ndarray       # [..., T]  read-out at k_B, B's coordinate
    var_a: np.ndarray | None   # [..., T]  k_Aᵀ P_t k_A (posterior uncertainty along A)
    var_b: np.ndarray | None   # [..., T]  k_Bᵀ P_t k_B

    @property
    def margin(self) -> np.ndarray:
        return 2.0 * self.p_ab - 1.0


def collision_inputs(rho, D: int, m: int, schedule: list[int]):
    """Keys ``[..., T, D]``, values ``[T, m]`` and the two probe keys."""
    rho = np.asarray(rho, dtype=float)
    K = np.zeros(rho.shape + (m, D))
    K[..., 0, 0] = 1.0
    K[..., 1, 0] = rho
    K[..., 1, 1] = np.sqrt(np.clip(1.0 - rho ** 2, 0.0, None))
    for i in range(2, m):
        K[..., i, i] = 1.0
    idx = np.asarray(schedule)
    return K[..., idx, :], np.eye(m)[idx], K[..., 0, :], K[..., 1, :]


def run_collision(protocol: CollisionProtocol | None = None, *, variants=("dense", "diag", "reset", "linear"),
                  rho=None, p0=None, r2=None, l2=None, iso_c=None, reset_lambda=None,
                  la_gain=0.5, uncertainty: bool = False) -> dict[str, VariantRun]:
    """Run the protocol for each variant.  Array-valued ``rho/p0/r2/l2`` override
    the protocol's scalars and form a batch.  ``protocol`` is a
    :class:`CollisionProtocol` or ``None`` (the paper's); anything else, a
    variant not in :data:`VARIANTS` or a value out of its domain raises
    ``ValueError`` naming the parameter.  ``uncertainty=True`` also records
    the posterior variance along ``k_A`` and ``k_B`` (covariance variants)."""
    if protocol is not None and not isinstance(protocol, CollisionProtocol):
        raise V.ParamError("protocol", f"protocol must be a CollisionProtocol or None (got {protocol!r}); "
                                       f"the paper's setting is assocmem.protocol.PAPER")
    pr = protocol or CollisionProtocol()
    for v in variants:
        V.choice("variants", v, VARIANTS)
    rho = pr.rho if rho is None else V.in_closed("rho", rho, -1.0, 1.0)
    p0 = pr.p0 if p0 is None else V.nonnegative("p0", p0)
    r2 = pr.r2 if r2 is None else V.positive("r2", r2)
    l2 = pr.l2 if l2 is None else V.nonnegative("l2", l2)
    if "iso" in variants and iso_c is None:
        raise ValueError("iso_c is required for the iso variant (--iso-c)")
    batch = np.broadcast_shapes(*(np.shape(x) for x in (rho, p0, r2, l2, la_gain)
                                  if x is not None),
                                *(np.shape(x) for x in (iso_c, reset_lambda) if x is not None))
    keys, values, kA, kB = collision_inputs(rho, pr.D, pr.m, pr.schedule())
    keys = np.broadcast_to(keys, batch + keys.shape[-2:])
    q = np.broadcast_to(kB[..., None, :], batch + (pr.T, pr.D))
    per_step = lambda x: np.asarray(x, dtype=float)[..., None]   # noqa: E731  batch -> [..., T]
    out = {}
    for v in variants:
        tr = bl_filter(keys, values, q, l2=per_step(l2), r2=per_step(r2), p0=np.asarray(p0, float),
                       variant=v, lam=None if reset_lambda is None else per_step(reset_lambda),
                       iso_c=None if iso_c is None else per_step(iso_c), omega=per_step(la_gain),
                       keep_states=uncertainty and v in ("dense", "diag"))
        y_a, y_b = tr.y[..., 0], tr.y[..., 1]
        if tr.Ps is not None:
            kA_b = np.broadcast_to(kA, batch + (pr.D,))
            kB_b = np.broadcast_to(kB, batch + (pr.D,))
            var_a = np.einsum("...i,...tij,...j->...t", kA_b, tr.Ps, kA_b)
            var_b = np.einsum("...i,...tij,...j->...t", kB_b, tr.Ps, kB_b)
        else:
            var_a = var_b = None
        out[v] = VariantRun(p_ab=expit(y_b - y_a), gain=np.broadcast_to(tr.gain, batch + (pr.T,)),
                            y_a=y_a, y_b=y_b, var_a=var_a, var_b=var_b)
    return out


def collision_summary(runs: dict[str, VariantRun], pr: CollisionProtocol) -> dict:
    """The quantities of the published table (App. E.4) from unbatched runs."""
    b, a = pr.end_of_b - 1, min(pr.first_a, pr.T) - 1
    return {v: {"p_ab_end_of_b": float(r.p_ab[b]), "p_ab_final": float(r.p_ab[-1]),
                "margin_final": float(r.margin[-1]), "gain_first_a": float(r.gain[a]),
                "gain_long_run": float(r.gain[-1])} for v, r in runs.items()}
