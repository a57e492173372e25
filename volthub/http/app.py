"""The Quart-Trio app factory.

    hypercorn --worker-class trio "volthub.http.app:create_app()"

`create_app` makes the Quart app: its hooks, blueprints, the Engine.IO mount and the ASGI
layers around it, none of which needs the database, and the app's `Server`
(`http/server.py`), which holds its lifespan: at start-up it enters the composition root
(`http/composition.py`), which builds everything long-lived into one complete `Runtime`,
and opens the gateway; at shutdown it stops both listeners, the background services and the
database in one order.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from pydantic_core import to_jsonable_python
from quart import Quart, request
from quart.json.provider import DefaultJSONProvider
from quart_schema import QuartSchema, hide
from quart_trio import QuartTrio
from quart_trio.wrappers.request import TrioRequest

from volthub import logs, metrics, version
from volthub.config import Settings, load_settings
from volthub.http import access, cors, hypercorn_fixes, observe, request_checks, request_rules, serving
from volthub.http.blueprints import BLUEPRINTS
from volthub.http.errors import ApiError, install_error_handlers
from volthub.http.events import listeners as events_api
from volthub.http.openapi import VolthubOpenAPIProvider
from volthub.http.runtime import SETTINGS_KEY
from volthub.http.server import SERVER_KEY, Server
from volthub.hub.clock import Clock, SystemClock

log = logging.getLogger(__name__)


class OrjsonProvider(DefaultJSONProvider):
    """orjson: fast, and strict (rejects NaN, Infinity and invalid UTF-8)."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return orjson.dumps(obj, default=to_jsonable_python, option=orjson.OPT_NON_STR_KEYS).decode()

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return orjson.loads(s)


class ApiRequest(TrioRequest):
    async def get_json(self, force: bool = False, silent: bool = False, cache: bool = True) -> Any:
        """Parse the raw bytes with orjson: invalid UTF-8 or JSON is a 400, never a 500."""
        if not (force or self.is_json):
            return None
        raw = await self.get_data(cache=cache, as_text=False)
        try:
            return request_rules.parse_json(raw if isinstance(raw, bytes) else raw.encode())
        except ApiError as error:
            if silent and error.code == "invalid_json":
                return None
            raise


def create_app(
    settings: Settings | None = None, *, clock: Clock | None = None, config_file: str | None = None
) -> Quart:
    settings = settings or load_settings(config_file)
    logs.configure(settings.logging.format, settings.logging.level)
    metrics.set_enabled(settings.metrics.enabled)
    app = QuartTrio("volthub", static_folder=None)
    app.request_class = ApiRequest
    app.config["MAX_CONTENT_LENGTH"] = settings.server.max_body_bytes
    app.config["BODY_TIMEOUT"] = settings.server.body_timeout
    QuartSchema(
        app,
        openapi_path="/api/openapi.json",
        swagger_ui_path=None,
        redoc_ui_path=None,
        scalar_ui_path=None,
        info={"title": "volthub developer API", "version": version()},
        security_schemes={"bearer": {"type": "http", "scheme": "bearer", "bearer_format": "JWT"}},
        openapi_provider_class=VolthubOpenAPIProvider,
    )
    app.json = OrjsonProvider(app)
    app.extensions[SETTINGS_KEY] = settings

    install_error_handlers(app)
    app.url_value_preprocessor(_note_route)  # runs before every before_request hook
    request_checks.install(app, settings.server, settings.ratelimit.enabled)  # the checks' hooks, in order
    access.install(app)  # WebSocket routes: refused without an access declaration
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)
    _declare_openapi_route(app)
    events_api.mount(app)  # Engine.IO paths (/ws/events, /socket.io) served ahead of Quart
    app.asgi_app = cors.middleware(app.asgi_app, app.url_map, cors.api_policy(settings))  # type: ignore[method-assign, assignment, arg-type]
    hypercorn_fixes.install(settings)
    serving.adapt(app, settings)  # connection caps, early body reads
    # Outermost: request ids, access lines and HTTP metrics for everything, Engine.IO included.
    app.asgi_app = observe.middleware(app.asgi_app, settings.logging.access_log)  # type: ignore[method-assign, assignment, arg-type]

    server = Server(app, settings, clock or SystemClock())
    hypercorn_fixes.stop_first_under_the_hypercorn_command(server.stop_trigger)
    app.extensions[SERVER_KEY] = server
    return app


def _declare_openapi_route(app: Quart) -> None:
    """quart-schema registers a bound method; wrap it so it can carry a declaration."""
    serve_document: Callable[[], Awaitable[Any]] = app.view_functions["openapi"]  # type: ignore[assignment]

    async def openapi_document() -> Any:
        return await serve_document()

    app.view_functions["openapi"] = hide(access.public(openapi_document))


def _note_route(endpoint: str | None, values: dict[str, Any] | None) -> None:
    """The matched route's template labels the request's metrics and access line."""
    if request.url_rule is not None:
        request.scope[observe.ROUTE_KEY] = request.url_rule.rule  # type: ignore[typeddict-unknown-key]
