"""BayesianLayer: shapes, parameterisation, kernel path equal to the torch path, gradients."""
import pytest

torch = pytest.importorskip("torch")

from assocmem.gpu import BayesianLayer  # noqa: E402

pytestmark = pytest.mark.gpu


def _pair(**kw):
    torch.manual_seed(0)
    a = BayesianLayer(**kw, impl="naive").double()
    b = BayesianLayer(**kw, impl="auto").double()
    b.load_state_dict(a.state_dict())
    return a, b


@pytest.mark.parametrize("decay,groups", [("diag", 1), ("scalar", 2), ("none", 1)])
def test_kernel_path_equals_torch_path(interpret, relerr, decay, groups):
    a, b = _pair(d_model=12, n_heads=2, head_dim=4, value_dim=4, groups=groups, decay=decay)
    x = torch.randn(2, 9, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    ya, yb = a(x), b(x)
    assert ya.shape == (2, 9, 12)
    assert relerr(ya, yb) < 1e-5
    ya.pow(2).sum().backward()
    yb.pow(2).sum().backward()
    for (n, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert pa.grad is not None and pb.grad is not None, n
        assert relerr(pa.grad, pb.grad) < 1e-4, n


def test_parameterisation_gives_valid_filter_inputs():
    torch.manual_seed(2)
    layer = BayesianLayer(d_model=8, n_heads=2, groups=2, decay="diag", impl="naive")
    x = torch.randn(1, 5, 8) * 50          # large inputs: softplus / logsigmoid saturate, stay valid
    y, (M, P) = layer(x, output_final_state=True)
    assert torch.isfinite(y).all()
    assert M.shape == (1, 2, 4, 4) and P.shape == (1, 2, 2, 4, 4)
    lam = torch.linalg.eigvalsh(P.double())
    assert float(lam.min().detach()) > -1e-5


def test_state_carries_across_calls():
    torch.manual_seed(3)
    layer = BayesianLayer(d_model=8, n_heads=2, decay="scalar", impl="naive").double()
    x = torch.randn(1, 10, 8, dtype=torch.float64)
    y_full = layer(x)
    y1, st = layer(x[:, :6], output_final_state=True)
    y2 = layer(x[:, 6:], initial_state=st)
    assert torch.allclose(torch.cat([y1, y2], 1), y_full, atol=1e-12)


def test_bad_configuration():
    with pytest.raises(ValueError, match="groups"):
        BayesianLayer(d_model=8, n_heads=2, groups=3)
    with pytest.raises(ValueError, match="decay"):
        BayesianLayer(d_model=8, decay="exp")
    with pytest.raises(ValueError, match="x"):
        BayesianLayer(d_model=8)(torch.randn(2, 3, 7))
