"""The base of the host middlewares that make a system model call under a config section.

Title and summarization are the same kind of layer: each is built from its section of the
app config and the model the section's purpose resolves to, and each declares to the
assembly descriptor the section's fields that change what it does. Those fields are data
(``released``), so a new setting is released by naming it, and the two cannot differ in
how they are built or how they report.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel

from .state import HostState

__all__ = ["SystemModelMiddleware"]

SectionT = TypeVar("SectionT", bound=BaseModel)


class SystemModelMiddleware(AgentMiddleware[HostState, Any], Generic[SectionT]):
    """A middleware driven by one config section (``config``) and its system model (``model``)."""

    state_schema = HostState
    #: The section's fields reported as the middleware's policy parameters, in this order.
    released: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: SectionT, model: BaseChatModel) -> None:
        super().__init__()
        self.config = config
        self.model = model

    def release_policy_parameters(self) -> dict[str, object]:
        return {name: getattr(self.config, name) for name in self.released}
