"""GPU layer: torch reference, Triton kernels, autograd ops and layers of the Bayesian Layer.

``from assocmem.gpu import fused_recurrent_bl, naive_bl, BayesianLayer`` (needs torch;
the Triton kernels need triton, compiled on CUDA or interpreted on CPU with
``TRITON_INTERPRET=1``).  Checked against the float64 numpy filter
``assocmem.numerics.bl_filter``.  Names are imported on first access, so that
``assocmem.gpu.bench`` and the CLI load without torch.
"""
__all__ = ["fused_recurrent_bl", "fused_recurrent_bl_trace", "naive_bl", "chunk_bl", "BayesianLayer"]

_WHERE = {"fused_recurrent_bl": ".fused_recurrent", "fused_recurrent_bl_trace": ".fused_recurrent",
          "naive_bl": ".naive", "chunk_bl": ".chunk", "BayesianLayer": ".layer"}


def __getattr__(name):
    if name in _WHERE:
        import importlib

        mod = importlib.import_module(_WHERE[name], __name__)
        return getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
