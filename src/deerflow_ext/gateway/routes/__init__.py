"""The host's HTTP routes (DESIGN.md section 7), one module per resource."""

from .assistants import router as assistants_router
from .crons import router as crons_router
from .extensions_config import router as extensions_config_router
from .health import router as health_router
from .operator import router as operator_router
from .plugins import router as plugins_router
from .runs import router as runs_router
from .stateless import router as stateless_router
from .store import router as store_router
from .threads import router as threads_router
from .webhooks import router as webhooks_router

__all__ = [
    "HOST_ROUTERS",
    "assistants_router",
    "crons_router",
    "extensions_config_router",
    "health_router",
    "operator_router",
    "plugins_router",
    "runs_router",
    "stateless_router",
    "store_router",
    "threads_router",
    "webhooks_router",
]

HOST_ROUTERS = (
    # Hottest first. FastAPI matches a request against each included router in turn, every
    # route of it, and the one that matches twice: before runs and threads, health's and
    # assistants' routes cost 2.3% of a served trivial run's instructions. The
    # routers' paths are disjoint (a test holds them so), so the order decides only how soon.
    runs_router,
    threads_router,
    health_router,
    assistants_router,
    store_router,
    stateless_router,
    extensions_config_router,
    operator_router,
    crons_router,
    webhooks_router,
    # Last: nothing hot is under /api/plugins. The door leaves its bodies to the route.
    plugins_router,
)
