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
# # The Bayesian Layer recurrence and its Kronecker closure (BL Prop. 1, App. B–C)
#
# The design model: `S_t = A_t S_{t-1} + W_t` with `vec W_t ~ N(0, ℓ² I)`, and the
# pseudo-observation `v_t = S_tᵀ k_t + e_t`, `e_t ~ N(0, r² I_m)`. On `vec S` this is a
# linear-Gaussian state-space model of size `Dm`; the paper's claim is that its exact
# posterior collapses to a `D×m` mean and one shared `D×D` covariance:
#
# `P̄ = A P Aᵀ + ℓ² I; u = P̄ k; β = 1/(r² + kᵀu); M = A M + β u (v − (AM)ᵀk)ᵀ; P = P̄ − β u uᵀ`.
#
# Each derivation below is a `Derivation` object from `assocmem.theory`: its
# `identities` are sympy expressions that must simplify to exactly zero. A cell
# that ends in one shows it as mathematics: the statement, the assumptions, the
# closed forms it built, and each identity with ✓ once it has simplified to 0.

# %%
import numpy as np
import sympy as sp

from assocmem.theory.bl_posterior import (gated_form, kronecker_failure, posterior_explicit,
                                          posterior_general)

gen = posterior_general()
gen

# %% [markdown]
# `verify()` is the proof itself: it simplifies every identity again and
# returns one truth value per step.

# %%
assert all(gen.verify().values())
gen.verify()

# %% [markdown]
# Fully symbolic at a small size: every entry of the `Dm×Dm` Kalman update on
# `vec S` against the five-step recurrence (`D = 2`, `m = 2`).

# %%
small = posterior_explicit(D=2, m=2)
small

# %% [markdown]
# ## When the Kronecker form breaks
# With a different observation-noise variance per value column, the posterior
# covariance of `vec S` is no longer `I_m ⊗ P`: each column group needs its own
# covariance (the grouped noise of App. D).

# %%
fail = kronecker_failure(D=2, m=2)
fail

# %% [markdown]
# ## Numerically, from the model
# The numpy filter against a Kalman filter on `vec S` and against plain
# conditioning of the joint Gaussian (no recursion at all), at a random setting:

# %%
from assocmem.numerics import bl_filter, joint_gaussian_posterior, vec_kalman_filter

rng = np.random.default_rng(0)
T, D, m = 6, 3, 2
keys, values = rng.normal(size=(T, D)), rng.normal(size=(T, m))
A = rng.normal(size=(T, D, D)) / np.sqrt(D)
l2, r2 = rng.uniform(0, 0.3, T), rng.uniform(0.1, 1, T)
tr = bl_filter(keys, values, l2=l2, r2=r2, p0=1.0, A=A)
means, covs = vec_kalman_filter(keys, values, l2=l2, r2=r2, P0=1.0, A=A)
mj, cj = joint_gaussian_posterior(keys, values, l2=l2, r2=r2, P0=1.0, A=A)
print("vs vec-S Kalman:", np.abs(tr.M - means[-1]).max(), np.abs(np.kron(np.eye(m), tr.P) - covs[-1]).max())
print("vs joint conditioning:", np.abs(tr.M - mj).max(), np.abs(np.kron(np.eye(m), tr.P) - cj).max())

# %% [markdown]
# ## The gated form
# `M_t = F_t A_t M_{t-1} + β_t u_t v_tᵀ` with `F_t = I − β_t u_t k_tᵀ`: not an
# elementwise gate.

# %%
gf = gated_form()
gf
