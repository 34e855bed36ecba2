"""chunk_bl (the chunked innovations / LDLᵀ form, torch) against the token-by-token filter.

Verifies PERF.md's lead for the chunked covariance pass and the triangular
mean form: equal in float64 to 1e-12 across chunk boundaries, odd lengths,
weak, strong, zero and negative decays, grouped noise and initial states;
gradients equal to the recurrence's; fp32 as accurate as the recurrence in fp32.
"""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

torch = pytest.importorskip("torch")

from assocmem.gpu import naive_bl  # noqa: E402
# the torch form (the chunked kernels are tested in test_gpu_chunk_triton.py)
from assocmem.gpu.chunk import chunk_bl_torch as chunk_bl  # noqa: E402

pytestmark = pytest.mark.gpu


def _close(a, b, tol):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().max()) <= tol * max(1.0, float(b.abs().max()))


@pytest.mark.parametrize("T,C", [(1, 16), (16, 16), (17, 16), (63, 32), (100, 64), (130, 64)])
@pytest.mark.parametrize("decay", ["none", "weak", "strong", "signed", "with_zeros"])
def test_chunked_equals_recurrence_float64(make_inputs, T, C, decay):
    x = make_inputs(2, T, 2, 6, 4, 2, alpha=decay != "none", init=True, seed=T + C)
    if decay == "strong":
        x["alpha"] = x["alpha"] * 0.4                  # 0.2 … 0.4: γ over 64 tokens ~ 1e-40
    elif decay == "signed":
        x["alpha"] = x["alpha"] * torch.sign(torch.randn(x["alpha"].shape, generator=torch.Generator().manual_seed(1),
                                                         dtype=torch.float64))
    elif decay == "with_zeros":
        x["alpha"][:, T // 2] = 0.0
    o, (M, P) = chunk_bl(**x, chunk_size=C, output_final_state=True)
    o_r, (M_r, P_r) = naive_bl(**x, output_final_state=True)
    assert _close(o, o_r, 1e-12) and _close(M, M_r, 1e-12) and _close(P, P_r, 1e-12)
    assert P.shape == P_r.shape


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])   # make_inputs is stateless
@given(seed=st.integers(0, 2**31 - 1), T=st.integers(1, 40), C=st.sampled_from([16, 32, 64]),
       D=st.integers(1, 5), G=st.sampled_from([1, 2]))
def test_chunked_equals_recurrence_property(make_inputs, seed, T, C, D, G):
    x = make_inputs(1, T, 1, D, 2 * G, G, alpha=True, init=bool(seed % 2), seed=seed)
    o, st_ = chunk_bl(**x, chunk_size=C, output_final_state=True)
    o_r, st_r = naive_bl(**x, output_final_state=True)
    assert _close(o, o_r, 1e-11) and _close(st_[1], st_r[1], 1e-11)


def test_chunked_gradients_equal_recurrence_gradients(make_inputs, input_grads):
    x = make_inputs(1, 37, 2, 4, 4, 2, alpha=True, init=True, seed=40)
    w = torch.randn(1, 37, 2, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    grads = [input_grads(naive_bl, x, w), input_grads(chunk_bl, x, w, chunk_size=16)]
    for a, b in zip(*grads):
        assert _close(b, a, 1e-9)


def test_chunked_float32_is_as_accurate_as_the_recurrence(make_inputs):
    x = make_inputs(1, 200, 2, 16, 8, alpha=True, seed=41)
    ref, _ = naive_bl(**x)
    x32 = {n: (t.float() if torch.is_tensor(t) else t) for n, t in x.items()}
    e_rec = float((naive_bl(**x32)[0].double() - ref).norm() / ref.norm())
    e_chk = float((chunk_bl(**x32, chunk_size=64)[0].double() - ref).norm() / ref.norm())
    assert e_chk < 1e-5 and e_chk < 5 * e_rec


def test_chunk_size_is_validated(make_inputs):
    x = make_inputs(1, 5, 1, 4, 4, seed=42)
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_bl(**x, chunk_size=48)
    x["r2"] = -x["r2"]
    with pytest.raises(ValueError, match="r2"):
        chunk_bl(**x)
