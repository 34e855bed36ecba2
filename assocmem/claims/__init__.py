"""The claim checks, one module per family of claim IDs.

``catalogue`` declares every ID (source, published statement);
``assocmem.registry.CHECKS`` maps each ID to its one check, ``module:function``
here: ``bl.*`` in ``bl_<family>`` (``bl_filter``, ``bl_steady_state``,
``bl_geometry``, ``bl_families``, ``bl_collision``, ``bl_capacity``,
``bl_chunked``, ``bl_dynamics``, ``bl_tables``, each beside the theory and
numerics modules it compares), ``am.*`` in ``am``, ``task.*`` in ``tasks``.
A check runs every layer of its claim and may call helpers (``_common``).
"""
