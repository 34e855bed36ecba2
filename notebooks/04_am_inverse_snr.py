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
# # Inverse SNR of a kernel memory: leading order vs exact (AM §2.1)
#
# `N` key–value pairs with i.i.d. standard Gaussian keys in `d` dimensions are
# stored in `o(q) = Σ_j v_j κ(k_j, q)`. Reading at a stored key gives the signal
# `c v_i` and the interference `r`. The paper's leading orders replace `‖k_i‖²` by
# `d`; `assocmem.theory.am_snr` derives the exact expectation in sympy.

# %%
import numpy as np
import sympy as sp

from assocmem.figures import make
from assocmem.numerics.am_snr import mc_inverse_snr
from assocmem.theory.am_snr import derive, inverse_snr_exact, inverse_snr_leading

for kernel in ("linear", "relu", "exp"):
    display(derive(kernel))

# %% [markdown]
# The exact value, the leading order and a Monte Carlo that samples keys and
# values and forms `r` and `c` literally (independent of the derivation):

# %%
for kernel, tau in (("linear", None), ("relu", None), ("exp", 6.0)):
    N, d = 64, 32
    mc = mc_inverse_snr(kernel, N, d, tau=tau, samples=4000, seed=1)
    print(f"{kernel:>6} N={N} d={d}: leading {float(inverse_snr_leading(kernel, N, d, tau)):.5g}, "
          f"exact {float(inverse_snr_exact(kernel, N, d, tau)):.5g}, MC {mc.mean:.5g} ± {mc.stderr:.2g}")

# %%
fig, _ = make("am_snr")
fig

# %% [markdown]
# ## The exponential kernel at τ = √d
# The ratio exact / leading does not approach 1 as `d` grows: the fluctuation of
# `‖k_i‖²` around `d` is `O(√d)`, and the exponential does not average it out.

# %%
fig, _ = make("am_snr_exp_ratio")
fig

# %% [markdown]
# ## Interactive: your own key dimension and temperature
# The sliders redraw the figure above at key dimension `d` and temperature `τ`:
# leading order and exact value from `assocmem.theory.am_snr`, Monte Carlo from
# `assocmem.numerics.am_snr` (a few seconds per redraw). Static renderings show
# the defaults.

# %%
from assocmem.figures.explore import inverse_snr
from assocmem.interact import sliders

sliders(inverse_snr, d=(3, 128, 1, 32), tau=(1.0, 16.0, 0.5, 4.0), samples=(200, 4000, 200, 1000))

# %%
kernel, N, d, tau = "exp", 256, 64, 8.0
print("leading", float(inverse_snr_leading(kernel, N, d, tau)), " exact", float(inverse_snr_exact(kernel, N, d, tau)))
