"""Integrations: chainfence inside other frameworks and protocols; nothing of the SDK imports them.

``sql`` (fenced SQL transactions), ``asgi`` (the fencing middleware of an ASGI app), ``fenced_store``
(the FencedStore contract), ``mcp`` (the Model Context Protocol server: ``chainfence mcp``) and
``tooz`` (a tooz coordination driver, registered as ``chainfence+http``, ``chainfence+https`` and
``chainfence+embedded``). Import each from its module.
"""
