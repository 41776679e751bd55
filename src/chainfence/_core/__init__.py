"""The foundation: what every layer builds on, knowing nothing of leases or nodes.

``effects`` (an operation as steps, run by a sync and an asyncio driver), ``faces`` (the sync and the
asyncio face of a class, derived from one steps function), ``log`` (loggers that import logging once a record can be heard), ``limits``
(the contract's bounds), ``times`` (chain times for people) and ``moved`` (old import paths, kept
working for a minor version). Beside them at this layer sits :mod:`chainfence.errors`, the error tree
every layer raises: these modules import nothing of the package but it.
"""
