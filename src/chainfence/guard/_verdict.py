"""What one check of a :class:`~chainfence.Guard` found, before anything is recorded."""

from __future__ import annotations

__all__ = ["Verdict"]


class Verdict:
    """A token judged for a resource: the mark it was judged against and its holder (a plain slotted
    class: one per check). Admission may still refuse it; only then is it recorded."""

    __slots__ = ("block", "fresh", "holder", "mark", "resource", "resource_id", "token")

    def __init__(
        self,
        resource: str,
        resource_id: bytes,
        token: int,
        mark: int,
        holder: str | None,
        fresh: bool = False,
        block: int | None = None,
    ):
        self.resource = resource
        self.resource_id = resource_id
        self.token = token
        self.mark = mark
        self.holder = holder  # the holder of ``token``, from the chain or the store
        self.fresh = fresh  # the chain was asked about the token in this check
        self.block = block  # the proven mode: the trusted header's block the token was proven live at

    @property
    def raises(self) -> bool:
        """Whether recording it raises the mark (a new epoch)."""
        return self.token > self.mark
