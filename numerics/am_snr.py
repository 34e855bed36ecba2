r"""Monte Carlo inverse SNR of a kernel associative memory (AM Sec. 2.1, Eqs. 5-10).

Written from the model only: sample ``N`` keys ``k_j ~ N(0, I_d)`` and values
(equal-norm with uniform directions, or ``N(0, I_{d_v})``), pick the queried
pair ``i`` uniformly, form

    c = κ(k_i, k_i),   r = Σ_{j≠i} v_j κ(k_j, k_i),   X = ‖r‖² / (c² ‖v_i‖²)

literally, and average ``X`` over independent memories, with its standard
error.  No closed form is used here; :mod:`assocmem.theory.am_snr` derives the
expectation and the claim checks compare the two.

The standard error is meaningful only where ``X`` has a finite variance:
linear/ReLU need ``d > 4`` (``E[1/‖k‖⁴]``); the exponential kernel needs
``τ > 4(√2 − 1) ≈ 1.66``; Gaussian values need ``d_v > 4``.
:func:`variance_finite` states it.

Also here: the Softmax read-out decomposition used by ``am.snr_softmax``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from assocmem import validate as V

KERNELS = ("linear", "relu", "exp")
VALUE_MODELS = ("sphere", "gaussian")


@dataclass
class MCResult:
    mean: float
    stderr: float
    samples: int
    values: np.ndarray | None = None   # the per-memory ratios, if kept

    def as_dict(self) -> dict:
        return {"mean": self.mean, "stderr": self.stderr, "samples": self.samples}


def variance_finite(kernel: str, d: int, tau: float | None = None, values: str = "sphere",
                    dv: int | None = None) -> bool:
    """Whether the per-memory ratio ``X`` has a finite variance (so that the
    standard error is a valid error bar).  Conditions from the fourth moments:
    ``E[1/‖k‖⁴] < ∞ ⇔ d > 4``; ``E[κ⁴/c⁴] = E[exp(−(4/τ − 8/τ²)‖k‖²)] < ∞ ⇔
    τ² + 8τ − 16 > 0``; ``E[1/‖v‖⁴] < ∞ ⇔ d_v > 4``."""
    ok = True
    if kernel in ("linear", "relu"):
        ok &= d > 4
    else:
        ok &= tau is not None and tau * tau + 8 * tau - 16 > 0
    if values == "gaussian":
        ok &= dv is not None and dv > 4
    return bool(ok)


def _ratios(kernel, K, V_, i, tau):
    """Per-memory ``‖r‖²/(c²‖v_i‖²)`` for a batch ``K [B,N,d]``, ``V_ [B,N,dv]``."""
    B = K.shape[0]
    rows = np.arange(B)
    ki = K[rows, i]                                   # [B, d]
    scores = np.einsum("bnd,bd->bn", K, ki)           # k_jᵀ k_i
    self_score = np.einsum("bd,bd->b", ki, ki)        # ‖k_i‖²
    if kernel == "linear":
        kap, c = scores, self_score
        w = kap / c[:, None]                          # κ_j / c
    elif kernel == "relu":
        kap, c = np.maximum(scores, 0.0), np.maximum(self_score, 0.0)
        w = kap / c[:, None]
    else:
        # κ_j / c = exp((k_jᵀk_i − ‖k_i‖²)/τ): the same ratio, without overflowing
        w = np.exp((scores - self_score[:, None]) / tau)
    w[rows, i] = 0.0                                  # r sums over j ≠ i
    r_over_c = np.einsum("bn,bnv->bv", w, V_)
    vi2 = np.einsum("bv,bv->b", V_[rows, i], V_[rows, i])
    return np.einsum("bv,bv->b", r_over_c, r_over_c) / vi2


def mc_inverse_snr(kernel: str, n: int, d: int, *, tau: float | None = None, values: str = "sphere",
                   dv: int | None = None, samples: int = 10_000, seed: int = 0,
                   batch_elems: int = 4_000_000, keep: bool = False) -> MCResult:
    """Monte Carlo ``E[‖r‖²/(c²‖v_i‖²)]`` over ``samples`` independent memories.

    ``values="sphere"``: unit-norm values with uniform directions in ``dv``
    dimensions (``dv`` defaults to ``d``); ``"gaussian"``: ``N(0, I_dv)``.
    Batches are sized to about ``batch_elems`` floats; results depend only on
    ``seed`` and the arguments (the batching is fixed by them).
    """
    V.choice("kernel", kernel, KERNELS)
    V.choice("values", values, VALUE_MODELS)
    n = V.count("n", n, 1)
    d = V.count("d", d, 1)
    samples = V.count("samples", samples, 2)
    if kernel == "exp":
        if tau is None:
            raise ValueError("tau is required for the exp kernel")
        tau = float(V.positive("tau", tau))
    dv = d if dv is None else V.count("dv", dv, 1)
    rng = np.random.default_rng(seed)
    per = max(1, batch_elems // (n * max(d, dv)))
    out = np.empty(samples)
    done = 0
    while done < samples:
        B = min(per, samples - done)
        K = rng.standard_normal((B, n, d))
        Vv = rng.standard_normal((B, n, dv))
        if values == "sphere":
            Vv /= np.linalg.norm(Vv, axis=-1, keepdims=True)
        i = rng.integers(0, n, size=B)
        out[done:done + B] = _ratios(kernel, K, Vv, i, tau)
        done += B
    mean = float(out.mean())
    se = float(out.std(ddof=1) / np.sqrt(samples))
    return MCResult(mean, se, samples, out if keep else None)


def mc_curve(kernel: str, d: int, ns, *, tau=None, values="sphere", dv=None, samples=4000, seed=0):
    """Data for the figure "inverse SNR vs N/d" (Monte Carlo points): arrays
    ``(mean, stderr)`` over ``ns``."""
    res = [mc_inverse_snr(kernel, n, d, tau=tau, values=values, dv=dv, samples=samples, seed=seed + j)
           for j, n in enumerate(ns)]
    return np.array([r.mean for r in res]), np.array([r.stderr for r in res])


# -- Softmax read-out (am.snr_softmax) ----------------------------------------
@dataclass
class SoftmaxDecomposition:
    """Per-memory quantities at the query ``q = k_i``.

    ``ratio_unnorm``: ``‖r‖²/(c²‖v_i‖²)`` from the unnormalised exp memory;
    ``ratio_softmax``: the same ratio formed from the Softmax read-out, whose
    signal coefficient is the attention weight ``a_i`` and interference
    ``Σ_{j≠i} a_j v_j``; ``Z``: the query's normaliser ``Σ_j κ(k_j, q)``
    (``log Z`` to avoid overflow); ``err_softmax``: ``‖o_sm − v_i‖²/‖v_i‖²``;
    ``err_unnorm``: ``‖o/c − v_i‖²/‖v_i‖²``; ``o_sm_norm`` and ``max_v_norm``;
    the vectors ``o_sm``, ``r_over_c`` (``r/c``), ``v_i`` and the attention
    weight ``a_i`` on the queried pair.
    """

    ratio_unnorm: np.ndarray
    ratio_softmax: np.ndarray
    logZ: np.ndarray
    err_softmax: np.ndarray
    err_unnorm: np.ndarray
    o_sm_norm: np.ndarray
    max_v_norm: np.ndarray
    o_sm: np.ndarray
    r_over_c: np.ndarray
    v_i: np.ndarray
    a_i: np.ndarray


def softmax_decomposition(n: int, d: int, *, tau: float, dv: int | None = None, samples: int = 2000,
                          seed: int = 0) -> SoftmaxDecomposition:
    """Sample memories and read them at a stored key with and without the
    Softmax normaliser.  Softmax uses the max-shifted form (as an attention
    kernel computes it), the unnormalised read-out the raw exponentials, so the
    two ratios are computed along different paths."""
    n = V.count("n", n, 2)
    d = V.count("d", d, 1)
    tau = float(V.positive("tau", tau))
    dv = d if dv is None else V.count("dv", dv, 1)
    rng = np.random.default_rng(seed)
    K = rng.standard_normal((samples, n, d))
    Vv = rng.standard_normal((samples, n, dv))
    i = rng.integers(0, n, size=samples)
    rows = np.arange(samples)
    q = K[rows, i]
    s = np.einsum("bnd,bd->bn", K, q) / tau
    # unnormalised memory: o = Σ_j v_j e^{s_j}
    kap = np.exp(s)
    c = kap[rows, i]
    kap_off = kap.copy()
    kap_off[rows, i] = 0.0
    r = np.einsum("bn,bnv->bv", kap_off, Vv)
    vi = Vv[rows, i]
    vi2 = np.einsum("bv,bv->b", vi, vi)
    ratio_u = np.einsum("bv,bv->b", r, r) / (c ** 2 * vi2)
    # Softmax read-out: attention weights a_j = e^{s_j − max} / Σ e^{s − max}
    m = s.max(axis=1, keepdims=True)
    e = np.exp(s - m)
    a = e / e.sum(axis=1, keepdims=True)
    a_off = a.copy()
    a_off[rows, i] = 0.0
    r_sm = np.einsum("bn,bnv->bv", a_off, Vv)
    ratio_s = np.einsum("bv,bv->b", r_sm, r_sm) / (a[rows, i] ** 2 * vi2)
    o_sm = np.einsum("bn,bnv->bv", a, Vv)
    logZ = m[:, 0] + np.log(e.sum(axis=1))
    err_s = np.einsum("bv,bv->b", o_sm - vi, o_sm - vi) / vi2
    err_u = np.einsum("bv,bv->b", r / c[:, None], r / c[:, None]) / vi2
    return SoftmaxDecomposition(ratio_u, ratio_s, logZ, err_s, err_u,
                                np.linalg.norm(o_sm, axis=1), np.linalg.norm(Vv, axis=2).max(axis=1),
                                o_sm, r / c[:, None], vi, a[rows, i])
