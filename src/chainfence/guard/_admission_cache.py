"""A guard's answers to its admission policy (:mod:`chainfence.guard.admission`), cached in memory.

A local list is a set lookup. ``Admission.on_chain()`` asks the registry
(``registry.namespace(prefix).is_admitted``) and keeps the answer per (namespace, holder),
LRU-bounded; the follower drops a namespace's answers when it applies one of
that namespace's policy or admission events (:meth:`AdmissionCache.forget`).
The guard's fast paths ask :meth:`AdmissionCache.admits_known` (memory only);
a check that reached the chain asks :meth:`AdmissionCache.admit`, which reads
what it must and raises :class:`~chainfence.errors.NotAdmitted` (its ``admission`` says which list).
Nothing here records anything: a refusal leaves the mark where it was.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, NoReturn

from .._core import log as _log
from .._sdk import names as _names
from ..errors import NotAdmitted
from ._verdict import Verdict

if TYPE_CHECKING:
    from ..registry import Registry
    from .admission import Admission

logger = _log.get("chainfence.guard")  # the guard's one logger, whichever module logs

__all__ = ["AdmissionCache"]


class AdmissionCache:
    """Whom ``admission`` accepts, as far as this guard knows (thread-safe).

    ``max_answers`` bounds the on-chain answers kept, ``max_names`` the names whose namespace is known.
    """

    def __init__(self, registry: Registry, admission: Admission | None, *, max_answers: int, max_names: int):
        self._registry = registry
        self._admission = admission
        self._max_answers = max_answers
        self._max_names = max_names
        #: Admission.on_chain(): (namespace id, holder) -> the registry's answer (LRU-bounded).
        self._answers: OrderedDict[tuple[bytes, str], bool] = OrderedDict()
        self._lock = threading.Lock()
        self._epoch = 0  # bumped by every invalidation: an answer read across one is not cached
        #: The fast paths' copy: (resource name, holder) pairs admitted (cleared whole by any invalidation).
        self._pairs: set[tuple[str, str | None]] = set()
        self._namespaces: dict[str, tuple[str, bytes] | None] = {}

    def admits_known(self, resource: str, holder: str | None) -> bool:
        """Whether the admission accepts ``holder`` without asking anything (False: go and find out)."""
        admission = self._admission
        if admission is None:
            return True
        if admission.holders is not None:
            return holder in admission.holders
        return (resource, holder) in self._pairs

    def admit(self, verdict: Verdict) -> None:
        """Raise NotAdmitted unless the admission accepts the token's holder; records nothing.

        A verdict without a holder (a mark recorded without one) gets it from the chain first."""
        admission = self._admission
        if admission is None:
            return
        holder = verdict.holder
        if holder is None:  # a mark recorded without its holder: ask the chain
            info = self._registry.last_lease(verdict.resource)
            holder = info.holder if info is not None and info.token == verdict.token else None
            verdict.holder = holder
        if admission.holders is not None:
            if holder not in admission.holders:
                self._refuse(verdict, holder, "local", None)
            return
        namespace = self._namespace(verdict.resource)
        if namespace is None:  # no namespace: open to all, as on-chain
            self._note_admitted(verdict.resource, holder, self._epoch)
            return
        key = (namespace[1], holder or "")
        epoch = self._epoch
        if not verdict.fresh and self._answers.get(key) is True:
            self._note_admitted(verdict.resource, holder, epoch)
            return  # cached; dropped by the follower when the namespace's admissions change
        admitted = holder is not None and bool(self._registry.namespace(namespace[0]).is_admitted(holder))
        with self._lock:
            if epoch == self._epoch:  # else the follower dropped answers meanwhile: this one may be old
                self._answers[key] = admitted
                self._answers.move_to_end(key)
                if len(self._answers) > self._max_answers:
                    self._answers.popitem(last=False)
        if admitted:
            self._note_admitted(verdict.resource, holder, epoch)
        else:
            with self._lock:
                self._pairs.discard((verdict.resource, holder))
            self._refuse(verdict, holder, "on-chain", namespace)

    def forget(self, namespace_id: bytes) -> None:
        """Drop the cached on-chain answers of one namespace (its admissions or policy changed)."""
        with self._lock:
            self._epoch += 1
            self._pairs.clear()
            for key in [key for key in self._answers if key[0] == namespace_id]:
                del self._answers[key]

    def _namespace(self, resource: str) -> tuple[str, bytes] | None:
        """(namespace, its on-chain id keccak256(prefix bytes)), or None for a name without one."""
        if resource in self._namespaces:
            return self._namespaces[resource]
        prefix = _names.namespace_prefix(resource)
        known = None if prefix is None else (prefix, _names.namespace_id(prefix))
        if len(self._namespaces) < self._max_names:
            self._namespaces[resource] = known
        return known

    def _note_admitted(self, resource: str, holder: str | None, epoch: int) -> None:
        """Let the fast paths accept ``holder`` on ``resource`` unasked, unless answers were dropped since ``epoch``."""
        with self._lock:
            if epoch == self._epoch:
                if len(self._pairs) >= self._max_answers:
                    self._pairs.clear()
                self._pairs.add((resource, holder))

    def _refuse(
        self, verdict: Verdict, holder: str | None, admission: str, namespace: tuple[str, bytes] | None
    ) -> NoReturn:
        logger.info(
            "guard refused holder resource=%s token=%d holder=%s admission=%s",
            verdict.resource,
            verdict.token,
            holder,
            admission,
        )
        raise NotAdmitted(
            holder=holder or "an unknown holder",
            token=verdict.token,
            admission=admission,
            namespace=namespace[1] if namespace else None,
            namespace_name=namespace[0] if namespace else None,
            resource=verdict.resource,
            resource_id=verdict.resource_id,
        )
