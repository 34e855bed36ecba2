"""assocmem: verify the mathematics of associative-memory sequence layers.

Layers (independent; they meet only in the claim checks of the registry):

* :mod:`assocmem.theory`   -- sympy derivations and mpmath closed forms;
* :mod:`assocmem.numerics` -- numpy float64 simulations written from the models;
* :mod:`assocmem.gpu`      -- torch reference and Triton kernels;
* :mod:`assocmem.figures`  -- one function per figure.
"""
__version__ = "0.1.0"
