# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # DeltaFormer and the state-swap theorem (AM §2.2.1, App. D.3, App. E)
#
# DeltaFormer writes `u_t = v_t − Σ_{i<t} κ1(k_i, k_t) u_i` and reads
# `o_t = Σ_{i≤t} κ2(k_i, q_t) u_i`. With one kernel for reading and writing this is
# the delta rule in feature space. The three forms below — sequential recursion,
# one triangular solve, and a blockwise solve — must agree.

# %%
import numpy as np

from assocmem.figures import make
from assocmem.numerics.am_deltaformer import (deltaformer_blockwise, deltaformer_sequential,
                                              deltaformer_triangular)

rng = np.random.default_rng(0)
T, d, dv = 48, 8, 4
K = rng.standard_normal((T, d)) / np.sqrt(d)
V = rng.standard_normal((T, dv))
seq = deltaformer_sequential(K, V, beta=0.5, kappa1="exp", kappa2="exp")
tri = deltaformer_triangular(K, V, beta=0.5, kappa1="exp", kappa2="exp")
blk = deltaformer_blockwise(K, V, chunk=16, beta=0.5, kappa1="exp", kappa2="exp")
print("triangular vs sequential:", np.abs(np.asarray(tri[0]) - np.asarray(seq[0])).max())
print("blockwise  vs sequential:", np.abs(np.asarray(blk[0]) - np.asarray(seq[0])).max())
print("counted work (chunk 16):", blk[2].total, "multiply-adds in", blk[2].sequential_steps, "sequential steps")

# %% [markdown]
# The work of the blockwise solve, summed over chunks in sympy (`T = mC`), and its
# difference from the closed form `(d + d_v) T (T + C) + T C (C − 1)/2`:

# %%
import sympy as sp

from assocmem.theory.am_deltaformer import blockwise_work_closed_form

(m_, C_, d_, dv_), total, difference = blockwise_work_closed_form()
display(sp.Eq(sp.Symbol("W"), sp.factor(total)))
sp.Eq(sp.Symbol("W") - ((d_ + dv_) * m_ * C_ * (m_ * C_ + C_) + m_ * C_ * C_ * (C_ - 1) / 2), difference)

# %%
fig, _ = make("am_deltaformer_chunk")
fig

# %% [markdown]
# ## The swap theorem
# Unit keys with pairwise `|k_iᵀk_j| ≤ ε < 1/8`; a write with key `k_a − k_b` and
# value 0 swaps the read-outs at `k_a` and `k_b`, for any number of swaps, when the
# kernel maps the `4ε`-neighbourhoods of −1, 0, 1, 2 exactly onto those integers.
# The induction step on an orthonormal system, in sympy:

# %%
from assocmem.theory.am_swap import exactness_condition, induction_step

# For a symbolic memory S (m×n) and every pair a < b, the residual
# S + (0 − S k) kᵀ − S P_ab with k = e_a − e_b (P_ab the transposition) must be the
# zero matrix; the last entry is the base case (writing values at e_1..e_n).
residuals = induction_step(n=4, m=2)
print(f"{len(residuals)} residuals, all exactly zero:", all(r.is_zero_matrix for r in residuals))
display(residuals[0])
# rounding is exact on the 4ε-neighbourhoods iff
sp.Contains(sp.Symbol("varepsilon", positive=True), exactness_condition())

# %% [markdown]
# A long random swap sequence with certified near-orthogonal keys in `d = O(log n)`:

# %%
from assocmem.numerics.am_swap import run_swap_experiment

for kernel in ("exact", "round2", "linear"):
    keys, run = run_swap_experiment(n=32, swaps=500, kernel=kernel, seed=1)
    print(f"{kernel:>6}: d={keys.d}, max|k_i.k_j|={keys.max_abs_inner:.3f}, "
          f"wrong read-outs {run.mismatches} of {run.swaps * run.n}")

# %%
fig, _ = make("am_swap")
fig
