"""The methods :class:`~chainfence.Registry` and its asyncio twin had before 0.2, served until 0.3.

In 0.2 a registry keeps its lease operations and views; namespaces and worksets became handles
(``registry.namespace(prefix)``, ``registry.workset(name)``), sets a class of their own
(``LeaseSet.acquire``), history and the watchdog the audit's, and one way to judge a token stayed
(``check_current``). Each old name is a :class:`~chainfence._core.moved.Retired` entry here: the
replacement the warning names (CHANGELOG.md lists the same), and the old behaviour, run as the old
method ran it (the same steps, over the face's driver: blocking on a ``Registry``, awaited on an
``AsyncRegistry``). The registries' ``__getattr__`` serve them (:func:`chainfence._core.moved.retired`);
they are not attributes, so ``dir()`` and the reference do not show them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from .._core.effects import Steps
from .._core.faces import AsyncFace, _handed_over
from .._core.moved import Retired
from ..claims import Workset
from ..namespaces import Namespace, address_namespace, grant_item_steps, grant_steps, revoke_item_steps, revoke_steps
from . import names as _names
from . import validate as _validate

__all__ = ["ASYNC_REGISTRY", "REGISTRY"]


def _running(make: Callable[..., Steps[Any]]) -> Callable[[Any], Callable[..., Any]]:
    """The old method on a face: ``make(registry, *args, **kwargs)`` (the sync registry's steps) run over
    the face's driver, its result handed out as the face's (an ``AsyncLease`` on the asyncio face)."""

    def serve(face: Any) -> Callable[..., Any]:
        if isinstance(face, AsyncFace):

            async def awaited(*args: Any, **kwargs: Any) -> Any:
                try:
                    result = await face._drive(make(face._core, *args, **kwargs))
                except BaseException as error:
                    _handed_over(error, face._driver)
                    raise
                return face._twin(result)

            return awaited

        def blocking(*args: Any, **kwargs: Any) -> Any:
            return face._drive(make(face, *args, **kwargs))

        return blocking

    return serve


def _is_admitted_steps(registry: Any, resource: str, holder: str, *, block: str | int | None = None) -> Steps[bool]:
    """The old ``is_admitted(resource, holder)``: the allowlist of the resource's namespace; True for a
    name in no namespace."""
    prefix = _names.namespace_prefix(resource)
    if prefix is None:
        _validate.address(holder, "holder")
        return True
    return (yield from Namespace(registry, prefix)._is_admitted_steps(holder, block=block))


def _namespace_of(face: Any) -> Callable[..., str]:
    def namespace_of(address: str | None = None) -> str:
        return face.namespace().prefix if address is None else address_namespace(address)

    return namespace_of


#: Shared by both faces: each runs the same steps its old method ran.
_COMMON: dict[str, Retired] = {
    # -- namespaces: registry.namespace(prefix) ----------------------------------------------------------
    "namespace_of": Retired(
        "registry.namespace().prefix (the sender's), or chainfence.namespaces.address_namespace(address)",
        _namespace_of,
    ),
    "namespace_policy": Retired(
        "registry.namespace(prefix).policy()",
        _running(lambda r, prefix, *, block=None: Namespace(r, prefix)._policy_steps(block=block)),
    ),
    "is_admitted": Retired(
        "registry.namespace(prefix).is_admitted(holder) (prefix: the resource's text before its first '/')",
        _running(_is_admitted_steps),
    ),
    "transfer_namespace_admin": Retired(
        "registry.namespace(prefix).transfer_admin(new_admin)",
        _running(
            lambda r, prefix, new_admin, *, confirmations=None: Namespace(r, prefix)._transfer_admin_steps(
                new_admin, confirmations=confirmations
            )
        ),
    ),
    "accept_namespace_admin": Retired(
        "registry.namespace(prefix).accept_admin()",
        _running(
            lambda r, prefix, *, confirmations=None: Namespace(r, prefix)._accept_admin_steps(
                confirmations=confirmations
            )
        ),
    ),
    "set_policy": Retired(
        "registry.namespace(prefix).set_policy(...)",
        _running(
            lambda r, prefix, *, max_ttl=None, lock_delay=None, admission_required=None, confirmations=None: Namespace(
                r, prefix
            )._set_policy_steps(
                max_ttl=max_ttl,
                lock_delay=lock_delay,
                admission_required=admission_required,
                confirmations=confirmations,
            )
        ),
    ),
    "admit": Retired(
        "registry.namespace(prefix).admit(holders)",
        _running(
            lambda r, prefix, holders, *, admitted=True, confirmations=None: Namespace(r, prefix)._admit_steps(
                holders, admitted=admitted, confirmations=confirmations
            )
        ),
    ),
    "revoke": Retired(
        "registry.namespace(prefix).revoke(resource) (a work item: registry.workset(name).revoke(item))",
        _running(lambda r, resource, *, confirmations=None: revoke_steps(r, resource, confirmations)),
    ),
    "grant": Retired(
        "registry.namespace(prefix).grant(resource, holder, ttl) (a work item: registry.workset(name).grant(...))",
        _running(
            lambda r, resource, holder, ttl, *, confirmations=None: grant_steps(r, resource, holder, ttl, confirmations)
        ),
    ),
    # -- work items: registry.workset(name) --------------------------------------------------------------
    "claim": Retired(
        "registry.workset(workset).claim(items, ttl)",
        _running(
            lambda r, workset, items, ttl, *, confirmations=None: Workset(r, workset)._claim_steps(
                items, ttl, confirmations=confirmations
            )
        ),
    ),
    "item_lease": Retired(
        "registry.workset(workset).last_lease(item)",
        _running(lambda r, workset, item, *, block=None: Workset(r, workset)._last_lease_steps(item, block=block)),
    ),
    "renew_item": Retired(
        "registry.workset(workset).renew(item, token, ttl)",
        _running(
            lambda r, workset, item, token, ttl, *, progress=None, confirmations=None: Workset(r, workset)._renew_steps(
                item, token, ttl, progress=progress, confirmations=confirmations
            )
        ),
    ),
    "release_item": Retired(
        "registry.workset(workset).release(item, token)",
        _running(
            lambda r, workset, item, token, *, confirmations=None: Workset(r, workset)._release_steps(
                item, token, confirmations=confirmations
            )
        ),
    ),
    "complete_item": Retired(
        "registry.workset(workset).complete(item, token, result)",
        _running(
            lambda r, workset, item, token, result, *, confirmations=None: Workset(r, workset)._complete_steps(
                item, token, result, confirmations=confirmations
            )
        ),
    ),
    "revoke_item": Retired(
        "registry.workset(workset).revoke(item)",
        _running(lambda r, workset, item, *, confirmations=None: revoke_item_steps(r, workset, item, confirmations)),
    ),
    "grant_item": Retired(
        "registry.workset(workset).grant(item, holder, ttl)",
        _running(
            lambda r, workset, item, holder, ttl, *, confirmations=None: grant_item_steps(
                r, workset, item, holder, ttl, confirmations
            )
        ),
    ),
}


def _history(face: Any) -> Callable[..., Any]:
    """The old ``history``: the audit's (a layer above: imported when asked for)."""
    from ..audit._history import history

    def old_history(resource: str | None = None, **filters: Any) -> Any:
        return history(face, resource, **filters)

    return old_history


def _stuck(face: Any) -> Callable[..., Any]:
    """The old ``stuck``: the watchdog's (a layer above: imported when asked for)."""
    from ..audit.watchdog import stuck

    def old_stuck(**options: Any) -> Any:
        return stuck(face, **options)

    return old_stuck


def _lease(face: Any) -> Callable[..., Any]:
    """The old ``lease``: acquire, run the body, release; a lease is its own context manager."""
    if isinstance(face, AsyncFace):
        aface: Any = face

        @asynccontextmanager
        async def alease(resource: str, ttl: int, **options: Any) -> AsyncIterator[Any]:
            async with await aface.acquire(resource, ttl, **options) as lease:
                yield lease

        return alease

    @contextmanager
    def lease(resource: str, ttl: int, **options: Any) -> Iterator[Any]:
        with face.acquire(resource, ttl, **options) as held:
            yield held

    return lease


def _acquire_many(face: Any) -> Callable[..., Any]:
    """The old ``acquire_many``: a lease set (a recipe, a layer above: imported when asked for)."""
    from ..recipes.lease_set import AsyncLeaseSet, LeaseSet

    kind = AsyncLeaseSet if isinstance(face, AsyncFace) else LeaseSet

    def acquire_many(resources: Sequence[str], ttl: int, *, confirmations: int | None = None) -> Any:
        return kind.acquire(face, resources, ttl, confirmations=confirmations)

    return acquire_many


_COMMON.update(
    {
        # -- one route to history and to the watchdog: the audit's -------------------------------------
        "history": Retired("chainfence.audit.history(registry, ...)", _history),
        "stuck": Retired("chainfence.audit.watchdog.stuck(registry, ...)", _stuck),
        # -- one way into a with-block: a lease is its own context manager ---------------------------------
        "lease": Retired("registry.acquire(resource, ttl) as a context manager (a Lease releases on exit)", _lease),
        # -- one way to judge a token ------------------------------------------------------------------------
        "is_current": Retired(
            "registry.check_current(resource, token) (it raises the TokenNotCurrent subclass that says why)",
            _running(lambda r, resource, token, *, block=None: r._token_is_current_steps(resource, token, block=block)),
        ),
        "last_lease_by_id": Retired(
            "registry.last_lease(resource_id=resource_id)",
            _running(lambda r, resource_id, *, block=None: r._last_lease_steps(resource_id=resource_id, block=block)),
        ),
    }
)

#: ``Registry``'s retired names.
REGISTRY: dict[str, Retired] = {
    **_COMMON,
    "acquire_many": Retired("LeaseSet.acquire(registry, resources, ttl)", _acquire_many),
}

#: ``AsyncRegistry``'s retired names.
ASYNC_REGISTRY: dict[str, Retired] = {
    **_COMMON,
    "acquire_many": Retired("AsyncLeaseSet.acquire(registry, resources, ttl)", _acquire_many),
}
