"""The one error builder: every error response is `{error, message, details?}` (DESIGN §6)."""

from __future__ import annotations

from typing import Any

from quart import Quart, Response, jsonify
from quart_schema import RequestSchemaValidationError
from werkzeug.exceptions import HTTPException

from volthub.persistence import InvalidData

# Codes for Quart's own HTTP errors, so 404/405/413 look like ours.
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limit_exceeded",
}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.details is not None:
            body["details"] = self.details
        body.update(self.extra)
        return body


def bad_request(message: str, **details: Any) -> ApiError:
    return ApiError(400, "validation_error", message, details or None)


def not_found(what: str, **details: Any) -> ApiError:
    return ApiError(404, "not_found", f"{what} not found", details or None)


def error_response(error: ApiError) -> Response:
    response = jsonify(error.body())
    response.status_code = error.status
    response.headers.update(error.headers)
    return response


def _validation_details(exc: RequestSchemaValidationError) -> tuple[str, dict[str, Any]]:
    inner = exc.validation_error
    errors = getattr(inner, "errors", None)
    if not callable(errors):
        return "request is not valid", {}
    fields = []
    for item in errors(include_url=False, include_input=False, include_context=False):
        location = ".".join(str(part) for part in item["loc"]) or "body"
        fields.append({"field": location, "message": item["msg"], "type": item["type"]})
    first = fields[0] if fields else None
    message = f"{first['field']}: {first['message']}" if first else "request is not valid"
    return message, {"fields": fields}


def install_error_handlers(app: Quart) -> None:
    @app.errorhandler(ApiError)
    async def _api_error(error: ApiError) -> Response:
        return error_response(error)

    @app.errorhandler(RequestSchemaValidationError)
    async def _schema_error(error: RequestSchemaValidationError) -> Response:
        message, details = _validation_details(error)
        return error_response(ApiError(400, "validation_error", message, details))

    @app.errorhandler(HTTPException)
    async def _http_error(error: HTTPException) -> Response:
        status = error.code or 500
        code = _HTTP_CODES.get(status, "http_error")
        message = error.description or error.name
        response = error_response(ApiError(status, code, message))
        if status == 405 and error.get_headers():
            for name, value in error.get_headers():
                if name.lower() == "allow":
                    response.headers["Allow"] = value
        return response

    @app.errorhandler(InvalidData)
    async def _invalid_data(error: InvalidData) -> Response:
        return error_response(ApiError(400, "invalid_value", "a value was refused by the database"))

    @app.errorhandler(Exception)
    async def _unexpected(error: Exception) -> Response:
        app.logger.exception("unhandled error", exc_info=error)
        return error_response(ApiError(500, "internal_error", "internal server error"))
