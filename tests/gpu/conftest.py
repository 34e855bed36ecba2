"""Shared fixtures of the GPU-layer tests: random BL inputs and the float64 numpy reference.

The kernels run on CPU through Triton's interpreter (``TRITON_INTERPRET=1``,
read by the dispatch at call time), so shapes are small.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _make(B, T, H, D, m, G=1, *, alpha=False, init=False, dtype=torch.float64, seed=0,
          l2_scale=0.1, r2_lo=0.05):
    gen = torch.Generator().manual_seed(seed)

    def rn(*s):
        return torch.randn(*s, generator=gen, dtype=torch.float64)

    def ru(*s):
        return torch.rand(*s, generator=gen, dtype=torch.float64)

    k = torch.nn.functional.normalize(rn(B, T, H, D), dim=-1)
    x = dict(q=rn(B, T, H, D), k=k, v=rn(B, T, H, m), l2=ru(B, T, H) * l2_scale,
             r2=(ru(B, T, H, G) if G > 1 else ru(B, T, H)) * 0.5 + r2_lo,
             alpha=(ru(B, T, H, D) * 0.5 + 0.5) if alpha else None, initial_state=None)
    if init:
        L = rn(B, H, G, D, D) * 0.3
        P0 = L @ L.transpose(-1, -2) + 0.1 * torch.eye(D, dtype=torch.float64)
        x["initial_state"] = (rn(B, H, D, m), P0 if G > 1 else P0[:, :, 0])
    cast = {kk: (vv.to(dtype) if torch.is_tensor(vv) else vv) for kk, vv in x.items() if kk != "initial_state"}
    if init:
        cast["initial_state"] = tuple(t.to(dtype) for t in x["initial_state"])
    else:
        cast["initial_state"] = None
    return cast


@pytest.fixture
def make_inputs():
    """``make_inputs(B, T, H, D, m, G=1, alpha=False, init=False, dtype=float64, seed=0)``."""
    return _make


def _numpy_reference(x, p0=1.0, write_mask=None):
    """Run ``numerics.bl_filter`` (float64) on fla-layout torch inputs (``write_mask [B, T, H]``)."""
    from assocmem.numerics.bl_filter import bl_filter

    def bh(t, tail=1):  # [B, T, H, ...] -> [B, H, T, ...]
        a = t.detach().double().numpy()
        return np.moveaxis(a, 2, 1)

    G = x["r2"].shape[-1] if x["r2"].ndim == 4 else 1
    kw = {}
    if x["alpha"] is not None:
        kw["alpha"] = bh(x["alpha"])
    if x["initial_state"] is not None:
        M0, P0 = (t.detach().double().numpy() for t in x["initial_state"])
        kw["M0"] = M0
        kw["p0"] = P0
    else:
        kw["p0"] = p0
    if write_mask is not None:
        kw["write_mask"] = np.swapaxes(write_mask.numpy(), 1, 2)
    r2 = x["r2"].detach().double().numpy()
    r2 = np.moveaxis(r2, 2, 1) if G > 1 else np.swapaxes(r2, 1, 2)
    tr = bl_filter(bh(x["k"]), bh(x["v"]), bh(x["q"]), l2=np.swapaxes(x["l2"].detach().double().numpy(), 1, 2),
                   r2=r2, groups=G, **kw)
    o = np.moveaxis(tr.y, 1, 2)            # [B, T, H, m]
    return o, tr.M, tr.P, tr


@pytest.fixture
def numpy_reference():
    return _numpy_reference


def rel_rms(ref, out):
    ref = torch.as_tensor(ref).detach().double()
    out = torch.as_tensor(out).detach().double()
    return float((ref - out).norm() / ref.norm().clamp_min(1e-300))


@pytest.fixture
def relerr():
    """``‖ref − out‖ / ‖ref‖`` (fla's test metric)."""
    return rel_rms


@pytest.fixture
def interpret(monkeypatch):
    """Route CPU tensors through the Triton interpreter, with NaN-poisoned outputs."""
    pytest.importorskip("triton")
    from assocmem.gpu import _launch

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(_launch, "POISON", True)
    return _launch


def _input_grads(fn, x, w, **kw):
    """Gradients of ``(o·w).sum() + ΣM + ΣP²`` through ``fn(**x, **kw)`` for every input and both initial
    states (the covariance's symmetrised: only its symmetric part is defined)."""
    leaves = {n: x[n].clone().requires_grad_(True) for n in ("q", "k", "v", "l2", "r2", "alpha")}
    st0 = tuple(t.clone().requires_grad_(True) for t in x["initial_state"])
    o, (M, P) = fn(**leaves, initial_state=st0, output_final_state=True, **kw)
    ((o * w).sum() + M.sum() + (P ** 2).sum()).backward()
    gP = st0[1].grad
    return [t.grad for t in leaves.values()] + [st0[0].grad, 0.5 * (gP + gP.transpose(-1, -2))]


@pytest.fixture
def input_grads():
    return _input_grads
