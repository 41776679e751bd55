"""The lease SDK's private modules: what its public modules at the package's top level share.

``contract`` (the registry's calls and reads, under :class:`~chainfence.registry.Registry`), ``names``
and ``validate`` (what callers give, checked before anything is sent), ``lease_state`` (the lease's
fields and verdicts), ``waiting`` (``acquire(wait=)``), ``interrupted`` (a send cut short),
``rollback`` and ``block_times``. One layer with the top level: they import each other both ways, never
a family above (``recipes/``, ``guard/``, ``audit/``, ``integrations/``, ``cli/``).
"""
