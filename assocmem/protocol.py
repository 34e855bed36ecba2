"""The deterministic collision protocol of BL App. E.4, as data.

The schedule and the parameter validation live here, in the hub, so that every
layer (numpy float64, mpmath, the Triton kernel) realises the *same* protocol
in its own arithmetic.  Nothing here computes a result.

Identities ``0 .. m-1`` (0 is A, 1 is B) have keys ``k_A = e_1``,
``k_B = ρ e_1 + √(1-ρ²) e_2`` and ``k_i = e_{i+1}`` for ``i ≥ 2``, and one-hot
values ``v_i = e_i`` (in R^m).  The protocol writes all identities in order for
``rounds`` rounds, then B ``n_b`` times, then A ``n_a`` times.  After every step
the memory is read at ``k_B``; pairwise retrieval is
``p^{AB} = e^{y_B} / (e^{y_A} + e^{y_B})`` and the margin ``Δ = 2 p^{AB} − 1``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from assocmem import validate as V

VARIANT_NAMES = {
    "dense": "BL (dense covariance)",
    "diag": "BL, diagonal covariance",
    "reset": "covariance reset / Delta rule",
    "iso": "fixed isotropic prior",
    "linear": "linear attention (additive)",
}


@dataclass(frozen=True)
class CollisionProtocol:
    rho: float = 0.92
    p0: float = 3.0
    r2: float = 0.05
    l2: float = 0.05
    n_b: int = 40
    n_a: int = 60
    rounds: int = 2
    D: int = 16
    m: int = 6

    def __post_init__(self):
        V.in_closed("rho", self.rho, -1.0, 1.0)
        V.nonnegative("p0", self.p0)
        V.positive("r2", self.r2)
        V.nonnegative("l2", self.l2)
        for name in ("n_b", "n_a", "rounds"):
            V.count(name, getattr(self, name), 0)
        V.count("m", self.m, 2)
        D = V.count("D", self.D, 2)
        if D < self.m:
            raise ValueError(f"D must be >= m so that the m identities fit (got D={D}, m={self.m})")

    @property
    def T(self) -> int:
        return self.rounds * self.m + self.n_b + self.n_a

    def schedule(self) -> list[int]:
        """Identity written at steps 1..T (0 = A, 1 = B)."""
        return list(range(self.m)) * self.rounds + [1] * self.n_b + [0] * self.n_a

    def phases(self) -> dict:
        """1-based inclusive step ranges of the three phases."""
        r = self.rounds * self.m
        return {"rounds": (1, r), "B": (r + 1, r + self.n_b), "A": (r + self.n_b + 1, self.T)}

    @property
    def end_of_b(self) -> int:
        """Last step of the B phase (52 in the paper)."""
        return self.rounds * self.m + self.n_b

    @property
    def first_a(self) -> int:
        """First step of the A phase (53 in the paper)."""
        return self.end_of_b + 1

    def as_dict(self) -> dict:
        return asdict(self)


PAPER = CollisionProtocol()

# Published numbers of App. E.3-E.4 (pp.20-22).  These are *inputs* that the
# toolkit compares its own computations against; nothing returns them.
PUBLISHED = {
    "p_ab_end_of_b": {"dense": 0.73106, "reset": 0.73106},
    "p_ab_final": {"dense": 0.72309, "reset": 0.35138, "linear": 0.00054},
    "margin_final": {"dense": 0.44619, "reset": -0.29723, "linear": -0.99892},
    "gain_first_a": {"dense": 0.90708},
    "gain_long_run": {"dense": 0.61803, "reset": 0.5, "linear": 0.5},
}
PUBLISHED_DECIMALS = 5
# Read by eye off the main-text Fig. 3(a) (BL curve at step 112): an input for bl.fig3a_plateau.
FIG3A_READ_OFF = 0.60
