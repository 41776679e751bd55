"""Recipes: coordination built on a :class:`~chainfence.registry.Registry`, which never imports them.

``election`` (:class:`~chainfence.recipes.election.Election`: one leader at a time, each term fenced by
its token) and the observer of its terms. Import from the module, or ``from chainfence import Election``.
"""
