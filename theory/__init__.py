"""sympy derivations and mpmath closed forms / high-precision recurrences.

This layer never imports :mod:`assocmem.numerics` or :mod:`assocmem.gpu`.
"""
