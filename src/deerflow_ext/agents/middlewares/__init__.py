"""The host middleware stack.

``HOST_STACK_ORDER`` is the documented order (outermost first). Contributed middlewares are
placed by ``extensions/composition/stack.py`` relative to these classes, and ``extensions/composition/ordering.py``
checks the final stack against this tuple on first use.
"""

from __future__ import annotations

from .clarification import ClarificationMiddleware
from .errors import LLMErrorHandlingMiddleware, ToolErrorHandlingMiddleware
from .memory import MemoryMiddleware
from .sandbox import SandboxLeaseMiddleware
from .state import HostState
from .subagent_limit import SubagentLimitMiddleware
from .summarization import SummarizationMiddleware
from .thread_data import ThreadDataMiddleware
from .title import TitleMiddleware
from .token_usage import TokenBudgetMiddleware, TokenUsageMiddleware

__all__ = [
    "HOST_STACK_ORDER",
    "ClarificationMiddleware",
    "HostState",
    "LLMErrorHandlingMiddleware",
    "MemoryMiddleware",
    "SandboxLeaseMiddleware",
    "SubagentLimitMiddleware",
    "SummarizationMiddleware",
    "ThreadDataMiddleware",
    "TitleMiddleware",
    "TokenBudgetMiddleware",
    "TokenUsageMiddleware",
    "ToolErrorHandlingMiddleware",
]

HOST_STACK_ORDER: tuple[type, ...] = (
    ThreadDataMiddleware,
    SandboxLeaseMiddleware,
    LLMErrorHandlingMiddleware,
    ToolErrorHandlingMiddleware,
    SummarizationMiddleware,
    TitleMiddleware,
    MemoryMiddleware,
    TokenUsageMiddleware,
    TokenBudgetMiddleware,
    SubagentLimitMiddleware,
    ClarificationMiddleware,
)
