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
ss

# %% [markdown]
# The closed form at 50 digits (mpmath), and the golden-ratio value it takes at `r² = ℓ²`:

# %%
print("g_inf at r² = ℓ² = 0.05:", g_inf_mp("0.05", "0.05", dps=50))
ss.objects["g_inf_kappa"].subs("kappa", 1)

# %% [markdown]
# The paper prints the large-process-noise expansion `g∞ ≈ 1 − r²/(2ℓ²)`. The series
# of the exact fixed point in `κ = r²/ℓ²`:

# %%
ex = steady_state_expansion()
ex

# %%
fig, _ = make("bl_steady_state")
fig

# %% [markdown]
# ## Interactive: pick your own noise levels
# The sliders redraw the figure: the write gain of the float64 filter under
# repeated writes of one key against the closed-form floor `g∞`, and (right) the
# rotation of the A write direction towards `arcsin ρ` after `n` writes of B.
# Both panels call the package (`bl_filter`, `g_inf_value`, `rotation_angles`,
# `theta_n_value`). In JupyterLab the sliders are live; in a static rendering (the
# documentation site, `nbconvert`) the figure shows the defaults.

# %%
from assocmem.figures.explore import steady_state as steady_state_figure
from assocmem.interact import sliders

sliders(steady_state_figure, r2=(0.005, 1.0, 0.005, 0.05), l2=(0.0, 1.0, 0.005, 0.05),
        p0=(0.1, 10.0, 0.1, 1.0), rho=(0.0, 0.99, 0.01, 0.92), steps=(5, 200, 5, 40))

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
display(rot)
for n in (1, 10, 100, 1000, 10000):
    th = theta_n_mp("0.92", 3, "0.05", "0.05", n, dps=30)
    print(f"n={n:>6}: angle {float(th):.8f} rad, arcsin ρ − angle = {float(np.arcsin(0.92) - th):.3e}")

# %%
fig, _ = make("bl_rotation")
fig

# %%
fig, _ = make("bl_shrinkage")
fig
