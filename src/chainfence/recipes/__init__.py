"""Recipes: coordination built on a :class:`~chainfence.registry.Registry`, which never imports them.

``election`` (:class:`~chainfence.recipes.election.Election`: one leader at a time, each term fenced by
its token) and the observer of its terms; ``lease_set`` (:class:`~chainfence.recipes.lease_set.LeaseSet`:
several resources taken in one transaction, all or nothing, and kept as one). Import from the module,
or ``from chainfence import Election, LeaseSet``.
"""
