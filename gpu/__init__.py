"""GPU layer: torch reference, Triton kernels, autograd ops and layers of the Bayesian Layer.

``from assocmem.gpu import fused_recurrent_bl, naive_bl, BayesianLayer`` (needs torch;
the Triton kernels need triton, compiled on CUDA or interpreted on CPU with
``TRITON_INTERPRET=1``).  Checked against the float64 numpy filter
``assocmem.numerics.bl_filter``.
"""
from .fused_recurrent import fused_recurrent_bl, fused_recurrent_bl_trace
from .naive import naive_bl

__all__ = ["fused_recurrent_bl", "fused_recurrent_bl_trace", "naive_bl", "BayesianLayer"]


def __getattr__(name):
    # the layer pulls in torch.nn; keep the op import light
    if name == "BayesianLayer":
        from .layer import BayesianLayer
        return BayesianLayer
    raise AttributeError(name)
