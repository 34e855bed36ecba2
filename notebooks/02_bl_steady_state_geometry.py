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
# # Steady state and write geometry (BL App. E.2, Prop. 3, Cor. 4)
#
# Same-key repetition with `A = I`, a unit key and constant noise turns the
# variance along the key into the map `x ↦ r² x/(r² + x) + ℓ²`. Its fixed point
# sets a positive floor for the write gain.

# %%
import numpy as np
import sympy as sp

from assocmem.figures import make
from assocmem.theory.bl_steady_state import g_inf_mp, steady_state, steady_state_expansion

ss = steady_state()
print(ss.statement)
ss.objects

# %%
print({name: ok for name, ok in ss.verify().items()})
print("g_inf at r² = ℓ² = 0.05:", g_inf_mp("0.05", "0.05", dps=50))

# %% [markdown]
# The paper prints the large-process-noise expansion `g∞ ≈ 1 − r²/(2ℓ²)`. The series
# of the exact fixed point in `κ = r²/ℓ²`:

# %%
ex = steady_state_expansion()
print(ex.statement)
ex.objects

# %%
fig, _ = make("bl_steady_state")
fig

# %% [markdown]
# ## Interactive: pick your own noise levels
# (Change the numbers and rerun; with `ipywidgets` installed, wrap this in
# `interact`.)

# %%
r2, l2 = 0.02, 0.3
from assocmem.numerics import bl_filter

keys = np.tile([[1.0, 0.0]], (400, 1))
sim = bl_filter(keys, np.zeros((400, 1)), l2=l2, r2=r2, p0=1.0).gain[-1]
print(f"closed form {float(g_inf_mp(str(r2), str(l2))):.12f}   400-step filter {sim:.12f}")

# %% [markdown]
# ## Rotation of the write direction and cross-direction shrinkage
# After B has been reinforced, a write of A moves mostly along the part of `k_A`
# orthogonal to `k_B`; the angle between `u = P̄ k_A` and `k_A` tends to `arcsin ρ`.

# %%
from assocmem.theory.bl_geometry import rotation, theta_n_mp

rot = rotation()
print(rot.statement)
for n in (1, 10, 100, 1000, 10000):
    th = theta_n_mp("0.92", 3, "0.05", "0.05", n, dps=30)
    print(f"n={n:>6}: angle {float(th):.8f} rad, arcsin ρ − angle = {float(np.arcsin(0.92) - th):.3e}")

# %%
fig, _ = make("bl_rotation")
fig

# %%
fig, _ = make("bl_shrinkage")
fig
