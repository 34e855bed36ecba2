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
# # The Bayesian Layer as a Triton kernel
#
# `fused_recurrent_bl` follows flash-linear-attention's conventions
# (`q, k: [B, T, H, D]`, `v: [B, T, H, m]`, per-token `ℓ², r²: [B, T, H]`). On a GPU
# it runs the compiled Triton kernels; on a CPU with `TRITON_INTERPRET=1` the *same*
# kernel source runs through Triton's interpreter (slow, tiny shapes only);
# otherwise it falls back to `naive_bl`, the readable torch recurrence.
# Everything is checked against the float64 numpy filter.

# %%
import os

import numpy as np
import torch

os.environ.setdefault("TRITON_INTERPRET", "0" if torch.cuda.is_available() else "1")

from assocmem.gpu import fused_recurrent_bl, naive_bl  # noqa: E402
from assocmem.gpu._dispatch import mode_for  # noqa: E402
from assocmem.numerics import bl_filter  # noqa: E402

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print("device:", device, "| kernel path:", mode_for(device))

# %%
g = torch.Generator().manual_seed(0)
B, T, H, D, m = 1, 12, 2, 8, 4
q = torch.randn(B, T, H, D, generator=g)
k = torch.nn.functional.normalize(torch.randn(B, T, H, D, generator=g), dim=-1)
v = torch.randn(B, T, H, m, generator=g)
l2 = 0.05 + 0.1 * torch.rand(B, T, H, generator=g)
r2 = 0.05 + 0.5 * torch.rand(B, T, H, generator=g)

o, (M, P) = fused_recurrent_bl(q.to(device), k.to(device), v.to(device), l2.to(device), r2.to(device),
                               p0=1.0, output_final_state=True)

# the float64 numpy filter, heads as a batch axis
to_np = lambda x: x.double().transpose(1, 2).numpy()  # noqa: E731
ref = bl_filter(to_np(k), to_np(v), to_np(q), l2=to_np(l2), r2=to_np(r2), p0=1.0)
err = np.linalg.norm(o.double().cpu().transpose(1, 2).numpy() - ref.y) / np.linalg.norm(ref.y)
print(f"relative RMS error, fp32 kernel vs float64 numpy: {err:.2e}")

# %% [markdown]
# Gradients flow through a reverse-time backward (recomputed states, no per-token
# `D×D` tensors kept). Compare with autograd through `naive_bl` in float64:

# %%
args = [x.double().requires_grad_(True) for x in (q, k, v, l2, r2)]
o64, _ = naive_bl(*args, p0=1.0)
o64.square().sum().backward()
args32 = [x.clone().to(device).requires_grad_(True) for x in (q, k, v, l2, r2)]
o32, _ = fused_recurrent_bl(*args32, p0=1.0)
o32.square().sum().backward()
for name, a64, a32 in zip(("q", "k", "v", "l2", "r2"), args, args32):
    rel = (a64.grad - a32.grad.double().cpu()).norm() / a64.grad.norm()
    print(f"d/d{name}: relative error {rel:.1e}")

# %% [markdown]
# The collision experiment of BL App. E.4 through the kernel is the `triton` layer of
# the claim `bl.collision_table`:

# %%
from assocmem.registry import claims  # noqa: E402

r = claims("bl.collision_table")[0].run()
print({k: v for k, v in r.computed.items() if k.startswith("triton")})
r
