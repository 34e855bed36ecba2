"""The bl.* claims owned by the theory issue run through the registry with the expected status."""
import pytest

from assocmem import registry

EXPECTED = {
    "bl.posterior": "confirmed", "bl.kronecker": "confirmed", "bl.gated_form": "confirmed",
    "bl.gain_bound": "confirmed", "bl.readout_cov": "confirmed", "bl.steady_state": "confirmed",
    "bl.steady_state_expansion": "corrected", "bl.cross_shrinkage": "confirmed", "bl.rotation": "confirmed",
    "bl.delta_reset": "confirmed", "bl.additive": "corrected", "bl.delta_plateau": "confirmed",
    "bl.capacity": "corrected", "bl.complex_dynamics": "confirmed", "bl.cost": "confirmed",
    "bl.table_recalc": "corrected", "bl.chunked": "confirmed",
}


@pytest.mark.parametrize("cid", sorted(EXPECTED))
def test_claim_status(cid):
    (claim,) = registry.claims(cid)
    res = claim.run()
    assert res.status == EXPECTED[cid], res.detail
    layers = set(res.layers)
    assert layers & {"sympy", "mpmath"} or cid == "bl.chunked", layers
    # a corrected claim shows its printed form failing
    if EXPECTED[cid] == "corrected":
        assert any(it["printed_form_refuted"] for it in res.items)


def test_rotation_reports_the_convergence_rate():
    (claim,) = registry.claims("bl.rotation")
    res = claim.run()
    conv = res.computed["convergence"]
    assert abs(conv[0]["exponent"] + 1) < 1e-3
    assert abs(conv[0]["c_measured"] / conv[0]["c_theory"] - 1) < 1e-4
