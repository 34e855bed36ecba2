r"""The BL recurrence rerun in mpmath at high precision (BL Prop. 1, Eqs. 9-13).

Written independently of the numpy filter, on plain lists of ``mpf`` so that
float64 round-off can be measured: the same recurrence

    P̄ = A P Aᵀ + ℓ² I;  u = P̄ k;  β = 1/(r² + kᵀu);
    M = A M + β u (v − (A M)ᵀ k)ᵀ;  P = P̄ − β u uᵀ

with the variants ``dense``, ``diag`` (keep diag(P)), ``reset`` (P̄ = λ I,
default λ = r²), ``iso`` (P̄ = c I), ``linear`` (M = A M + ω k vᵀ).
Dynamics are diagonal (``alpha``) or identity.  Inputs should be given as
strings, integers or ``mpf`` to keep the precision meaningful.
"""
from __future__ import annotations

from dataclasses import dataclass

import mpmath as mp

VARIANTS = ("dense", "diag", "reset", "iso", "linear")


@dataclass
class MpTrace:
    M: list            # D x m nested lists of mpf (final mean)
    P: list | None     # D x D (final covariance; None for linear)
    y: list            # per step: read-out M_tᵀ q_t (list of m mpf), [] if no queries
    gain: list         # per step: g_t


def _mpf(x):
    return x if isinstance(x, mp.mpf) else mp.mpf(x)


def bl_filter_mp(keys, values, queries=None, *, l2, r2, p0, alpha=None, variant="dense",
                 lam=None, iso_c=None, omega="0.5", dps: int = 60) -> MpTrace:
    """Run the filter at ``dps`` decimal digits.

    ``keys``/``queries``: T lists of D numbers; ``values``: T lists of m numbers;
    ``l2``, ``r2``, ``alpha`` (T lists of D) may be scalars or per-step lists.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)} (got {variant!r})")
    if variant == "iso" and iso_c is None:
        raise ValueError("iso_c is required for variant='iso'")
    with mp.workdps(dps):
        T = len(keys)
        D, m = len(keys[0]), len(values[0])
        per = lambda x: [_mpf(x[t]) for t in range(T)] if isinstance(x, (list, tuple)) else [_mpf(x)] * T  # noqa: E731
        l2s, r2s = per(l2), per(r2)
        lams = per(lam) if lam is not None else r2s
        cs = per(iso_c) if iso_c is not None else None
        ws = per(omega)
        M = [[mp.mpf(0)] * m for _ in range(D)]
        P = [[(_mpf(p0) if i == j else mp.mpf(0)) for j in range(D)] for i in range(D)]
        ys, gains = [], []
        for t in range(T):
            k = [_mpf(x) for x in keys[t]]
            v = [_mpf(x) for x in values[t]]
            if alpha is not None:
                a = [_mpf(x) for x in alpha[t]]
                M = [[a[i] * M[i][j] for j in range(m)] for i in range(D)]
                P = [[a[i] * P[i][j] * a[j] for j in range(D)] for i in range(D)]
            if variant == "linear":
                w = ws[t]
                M = [[M[i][j] + w * k[i] * v[j] for j in range(m)] for i in range(D)]
                gains.append(w)
            else:
                if variant in ("dense", "diag"):
                    Pb = [[P[i][j] + (l2s[t] if i == j else 0) for j in range(D)] for i in range(D)]
                else:
                    lev = lams[t] if variant == "reset" else cs[t]
                    Pb = [[(lev if i == j else mp.mpf(0)) for j in range(D)] for i in range(D)]
                u = [mp.fsum(Pb[i][j] * k[j] for j in range(D)) for i in range(D)]
                s = mp.fsum(k[i] * u[i] for i in range(D))
                beta = 1 / (r2s[t] + s)
                pred = [mp.fsum(M[i][j] * k[i] for i in range(D)) for j in range(m)]
                M = [[M[i][j] + beta * u[i] * (v[j] - pred[j]) for j in range(m)] for i in range(D)]
                P = [[Pb[i][j] - beta * u[i] * u[j] for j in range(D)] for i in range(D)]
                if variant == "diag":
                    P = [[(P[i][j] if i == j else mp.mpf(0)) for j in range(D)] for i in range(D)]
                gains.append(s * beta)
            if queries is not None:
                q = [_mpf(x) for x in queries[t]]
                ys.append([mp.fsum(M[i][j] * q[i] for i in range(D)) for j in range(m)])
        return MpTrace(M=M, P=None if variant == "linear" else P, y=ys, gain=gains)


def collision_mp(protocol, variants, dps: int = 60, reset_lambda=None, la_gain="0.5") -> dict:
    """The collision protocol (App. E.4) at ``dps`` digits: the published table's
    quantities per variant, as ``mpf``.  Keys use exact ``mpf`` square roots;
    ``protocol`` is an :class:`assocmem.protocol.CollisionProtocol`."""
    pr = protocol
    out = {}
    with mp.workdps(dps):
        rho = mp.mpf(str(pr.rho))
        K = [[mp.mpf(0)] * pr.D for _ in range(pr.m)]
        K[0][0] = mp.mpf(1)
        K[1][0], K[1][1] = rho, mp.sqrt(1 - rho ** 2)
        for i in range(2, pr.m):
            K[i][i] = mp.mpf(1)
        sched = pr.schedule()
        keys = [K[i] for i in sched]
        vals = [[mp.mpf(int(j == i)) for j in range(pr.m)] for i in sched]
        queries = [K[1]] * pr.T
        first_a = min(pr.first_a, pr.T)
        for v in variants:
            tr = bl_filter_mp(keys, vals, queries, l2=str(pr.l2), r2=str(pr.r2), p0=str(pr.p0),
                              variant=v, lam=reset_lambda, omega=la_gain, dps=dps)
            p = [1 / (1 + mp.exp(y[0] - y[1])) for y in tr.y]
            out[v] = {"p_ab_end_of_b": p[pr.end_of_b - 1], "p_ab_final": p[-1],
                      "margin_final": 2 * p[-1] - 1, "gain_first_a": tr.gain[first_a - 1],
                      "gain_long_run": tr.gain[-1]}
    return out
