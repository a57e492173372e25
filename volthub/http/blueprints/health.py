from __future__ import annotations

from quart import Blueprint
from quart_schema import tag, validate_response

from volthub.http import access
from volthub.http.runtime import runtime
from volthub.http.schemas import StatusOut

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
@access.public
@tag(["Operations"])
@validate_response(StatusOut)
async def healthz() -> StatusOut:
    """Readiness: 200 once the database is open and migrated."""
    _ = runtime().db  # raises until start-up has finished
    return StatusOut(status="ok")
