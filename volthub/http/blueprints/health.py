from __future__ import annotations

from quart import Blueprint
from quart_schema import tag, validate_response

from volthub.http import access, ratelimit
from volthub.http.errors import ApiError
from volthub.http.runtime import runtime
from volthub.http.schemas import StatusOut

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
@access.public
@tag(["Operations"])
@validate_response(StatusOut)
async def healthz() -> StatusOut:
    """Readiness: 200 while the database answers; 503 `database_unavailable` (or
    `storage_unavailable`) while it does not, within `[database] acquire_timeout`; 503
    `broker_unavailable` while the event broker between processes is unreachable or this
    process's subscriptions on it are lost (the message says which)."""
    rt = runtime()
    await rt.db.read(lambda tx: tx.scalar("SELECT 1"))
    problem = rt.bus.problem
    if problem is not None:
        raise ApiError(503, "broker_unavailable", problem)
    return StatusOut(status="ok")


@blueprint.get("/livez")
@access.public
@ratelimit.counted_in_process
@tag(["Operations"])
@validate_response(StatusOut)
async def livez() -> StatusOut:
    """Liveness: 200 while the process serves requests, whatever the database does."""
    return StatusOut(status="ok")
