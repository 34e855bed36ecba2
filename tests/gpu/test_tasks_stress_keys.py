"""Rounding-exact keys of the swap stress test (gpu/tasks/data.py: rounding_exact_keys),
checked through the model's own u-recursion against the float64 numpy reference."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from assocmem.gpu.tasks import data as Dt
from assocmem.gpu.tasks.models import deltaformer_u, kappa1_matrix
from assocmem.numerics import am_swap as W

pytestmark = pytest.mark.gpu


def _expected(n, d):
    B = -(-n // d)
    return math.cos(math.pi / (2 * B)) / math.sqrt(d // 2) if B > 1 else 0.0


@pytest.mark.parametrize("n", [2, 100, 128, 129, 256, 300, 384, 512, 640])
def test_keys_structure(n):
    r = Dt.rounding_exact_keys(n, 128, dtype=torch.float64)
    assert r.keys.shape == (n, 128) and r.keys.dtype == torch.float64 and r.beta == 100.0
    assert torch.equal(r.keys, Dt.ROUND2_KEY_SCALE * r.unit_keys)
    assert torch.allclose(r.unit_keys.norm(dim=1), torch.ones(n, dtype=torch.float64), atol=1e-14)
    assert r.max_overlap == pytest.approx(_expected(n, 128), abs=1e-14) and r.max_overlap < 0.125
    assert r.bound == pytest.approx(_expected(n, 128), abs=1e-14)
    # the numpy layer measures the same coherence; and it is above the Welch bound
    mu = W.coherence(r.unit_keys.numpy())
    assert mu == pytest.approx(r.max_overlap, abs=1e-14) and mu >= W.welch_bound(n, 128)


@settings(max_examples=15)
@given(st.integers(2, 512), st.integers(0, 2 ** 31 - 1))
def test_keys_below_one_eighth_for_every_n_up_to_512(n, seed):
    r = Dt.rounding_exact_keys(n, 128, seed=seed, dtype=torch.float64)
    assert r.max_overlap < 0.125
    G = (r.unit_keys @ r.unit_keys.T).abs()
    G.fill_diagonal_(0.0)
    assert float(G.max()) == pytest.approx(r.max_overlap, abs=0)


def test_seeded():
    a, b = Dt.rounding_exact_keys(512, seed=7), Dt.rounding_exact_keys(512, seed=7)
    c = Dt.rounding_exact_keys(512, seed=8)
    assert torch.equal(a.keys, b.keys) and not torch.equal(a.keys, c.keys)
    assert a.keys.dtype == torch.float32
    ga = torch.sort((a.unit_keys.double() @ a.unit_keys.double().T).abs().flatten()).values
    gc = torch.sort((c.unit_keys.double() @ c.unit_keys.double().T).abs().flatten()).values
    assert torch.allclose(ga, gc, atol=1e-6)


@pytest.mark.parametrize("n, d", [(10, 96), (100, 64), (40, 32), (300, 256), (5, 2)])
def test_rejects_sizes_without_the_construction(n, d):
    with pytest.raises(ValueError):
        Dt.rounding_exact_keys(n, d)


def _stream(keys, b, n, values):
    init = b.pos_b < 0
    ka = keys[b.pos_a]
    kb = torch.where(init[..., None], torch.zeros_like(ka), keys[b.pos_b.clamp_min(0)])
    k = (ka - kb)[:, None]
    v = torch.where(init[..., None], values[b.elem.clamp_min(0)], torch.zeros((), dtype=keys.dtype))[:, None]
    return k, v


def _ideal_gram(b, n):
    """Orthonormal-key Gram of the token keys: C Cᵀ with C the token coefficients."""
    B, T = b.pos_a.shape
    C = torch.zeros(B, T, n)
    C.scatter_(2, b.pos_a[..., None], 1.0)
    sw = b.pos_b >= 0
    C[sw] -= torch.nn.functional.one_hot(b.pos_b[sw], n).float()
    return C @ C.transpose(1, 2), C


def _ideal_u(sigma, pairs, n):
    """Theorem 1's idealised system: u = e_σ(p) at init, e_π(j) − e_π(i) at a swap (i, j)."""
    perm = list(sigma)
    U = np.zeros((n + len(pairs), n))
    U[np.arange(n), sigma] = 1.0
    for t, (i, j) in enumerate(pairs):
        U[n + t, perm[j]] += 1.0
        U[n + t, perm[i]] -= 1.0
        perm[i], perm[j] = perm[j], perm[i]
    return U


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_model_recursion_is_the_exact_kernel(dtype):
    """models.deltaformer_u with κ1 = round2, β = 100 and the scaled keys (n = 512, d = 128):
    β·κ1 is exactly the ideal integer Gram, the u's are the idealised system's, and the
    kernel and linear reads at k_0 give the label on every swap."""
    n = 512
    r = Dt.rounding_exact_keys(n, 128, seed=3, dtype=dtype)
    b = Dt.swap_stress_batch(2, n=n, generator=torch.Generator().manual_seed(1))
    k, v = _stream(r.keys, b, n, torch.eye(n, dtype=dtype))
    A = kappa1_matrix(k, "round2")[:, 0] * r.beta
    G, _ = _ideal_gram(b, n)
    assert torch.equal(A, torch.tril(G, -1).to(dtype))
    u = deltaformer_u(v, k, torch.full(k.shape[:3], r.beta, dtype=dtype), "round2")[:, 0]
    for i in range(2):
        pairs = torch.stack([b.pos_a[i, n:], b.pos_b[i, n:]], 1).tolist()
        assert np.array_equal(u[i].double().numpy(), _ideal_u(b.elem[i, :n].tolist(), pairs, n))
    s = k[:, 0] @ r.keys[0]                                       # similarity to position 0 (scale c²)
    for w in (r.beta * torch.round(s * 100) / 100, s / Dt.ROUND2_KEY_SCALE ** 2):
        o = torch.cumsum(w[..., None] * u, dim=1)[:, n:]
        assert torch.equal(o.argmax(-1), b.labels[:, n:])


def test_model_recursion_matches_the_numpy_layer():
    """The same u's from numerics.am_swap.simulate_stress (float64, exact kernel on the unit keys)."""
    n = 256
    r = Dt.rounding_exact_keys(n, 128, seed=5)
    b = Dt.swap_stress_batch(1, n=n, generator=torch.Generator().manual_seed(4))
    k, v = _stream(r.keys, b, n, torch.eye(n))
    u = deltaformer_u(v, k, torch.full(k.shape[:3], r.beta), "round2")[0, 0]
    pairs = torch.stack([b.pos_a[0, n:], b.pos_b[0, n:]], 1).numpy()
    ref = W.simulate_stress(r.unit_keys.double().numpy(), b.elem[0, :n].numpy(), pairs, "exact", 1.0,
                            reads=("kernel",))
    assert ref.wrong_kernel_values == 0 and ref.accuracy["kernel"] == 1.0
    assert np.array_equal(u.double().numpy(), ref.U)


def test_model_linear_read_decodes_with_near_orthogonal_values():
    """Values E (the model's random unit vectors, d = 128) decoded by Eᵀ after a linear read at k_0."""
    n = 512
    r = Dt.rounding_exact_keys(n, 128, seed=3)
    E = Dt.near_orthogonal_keys(n, 128, seed=8765).float()
    b = Dt.swap_stress_batch(4, n=n, generator=torch.Generator().manual_seed(2))
    k, v = _stream(r.keys, b, n, E)
    u = deltaformer_u(v, k, torch.full(k.shape[:3], r.beta), "round2")[:, 0]
    s = (k[:, 0] @ r.keys[0]) / Dt.ROUND2_KEY_SCALE ** 2
    o = torch.cumsum(s[..., None] * u, dim=1)[:, n:]
    acc = ((o @ E.T).argmax(-1) == b.labels[:, n:]).float().mean().item()
    assert acc > 0.99


def test_unit_random_keys_are_not_exact():
    """The model's present keys (random unit vectors, β = 1): round2 passes the overlaps through."""
    n = 256
    K = Dt.near_orthogonal_keys(n, 128, seed=4321)
    b = Dt.swap_stress_batch(1, n=n, generator=torch.Generator().manual_seed(1))
    k, _ = _stream(K, b, n, torch.eye(n, dtype=torch.float64))
    A = kappa1_matrix(k, "round2")[:, 0]
    G, _ = _ideal_gram(b, n)
    wrong = int((A != torch.tril(G, -1).double()).sum())
    assert wrong > 0.5 * n * (n - 1) / 2                          # most init/init overlaps are not rounded to 0
