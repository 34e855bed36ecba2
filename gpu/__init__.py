"""GPU layer: torch references, Triton kernels, autograd ops and layers of the Bayesian Layer.

One form per module, as flash-linear-attention lays out an op: :mod:`.naive` (the torch
references ``naive_bl`` and ``chunk_bl_torch``), :mod:`.fused_recurrent` (token by token) and
:mod:`.chunk` (chunk by chunk), each with its Triton kernels in a ``_*_kernels.py`` file;
:mod:`.config` holds their launch configurations, :mod:`._launch` what else the two kernel ops
share, :mod:`.bench` times them against fla.

``from assocmem.gpu import fused_recurrent_bl, naive_bl, BayesianLayer`` (needs torch;
the Triton kernels need triton, compiled on CUDA or interpreted on CPU with
``TRITON_INTERPRET=1``).  Checked against the float64 numpy filter
``assocmem.numerics.bl_filter``.  Names are imported on first access, so that
``assocmem.gpu.bench`` and the CLI load without torch.
"""
__all__ = ["fused_recurrent_bl", "fused_recurrent_bl_trace", "FusedConfig", "naive_bl", "chunk_bl_torch",
           "chunk_bl", "chunk_bl_trace", "ChunkConfig", "BayesianLayer"]

_WHERE = {"fused_recurrent_bl": ".fused_recurrent", "fused_recurrent_bl_trace": ".fused_recurrent",
          "FusedConfig": ".config", "naive_bl": ".naive", "chunk_bl_torch": ".naive",
          "chunk_bl": ".chunk", "chunk_bl_trace": ".chunk", "ChunkConfig": ".config",
          "BayesianLayer": ".layer"}


def __getattr__(name):
    if name in _WHERE:
        import importlib

        mod = importlib.import_module(_WHERE[name], __name__)
        return getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
