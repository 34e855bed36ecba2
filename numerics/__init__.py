"""numpy float64 simulations written from the models (not from closed forms).

The BL filter family (:func:`bl_filter`), the dense filter parallel in time (:func:`bl_parallel`;
over segments, the two-level form, :func:`bl_segments`), the full ``Dm×Dm`` Kalman filter on ``vec S``
and the batch Gaussian posterior (:mod:`.kalman`), and the collision protocol (:mod:`.collision`).
"""
from .bl_filter import VARIANTS, FilterTrace, bl_filter
from .bl_parallel import ParallelTrace, bl_parallel
from .bl_segments import bl_segments
from .kalman import joint_gaussian_posterior, vec_kalman_filter

__all__ = ["VARIANTS", "FilterTrace", "bl_filter", "ParallelTrace", "bl_parallel", "bl_segments",
           "vec_kalman_filter", "joint_gaussian_posterior"]
