"""A claim result shows itself as HTML in Jupyter: status, layers, published against computed."""
from assocmem.registry import claims


def test_claim_result_html():
    r = claims("bl.fig3a_plateau")[0].run()
    h = r._repr_html_()
    assert 'id="claim-bl.fig3a_plateau"' in h and ">corrected</span>" in h and "layers: <b>numpy</b>" in h
    assert "<td>0.7230939475</td><td>0.6</td>" in h        # computed against the value read off the figure
    assert "(printed form)" in h and r.published.replace("'", "&#x27;") in h
