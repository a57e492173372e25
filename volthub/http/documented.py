"""Error statuses a route can answer, written into the OpenAPI document with the one
error body (`{error, message, details?}`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from quart_schema import document_response

from volthub.http.schemas import ErrorBody

F = TypeVar("F", bound=Callable[..., object])


def error_responses(*statuses: int) -> Callable[[F], F]:
    def apply(fn: F) -> F:
        for status in statuses:
            fn = document_response(ErrorBody, status)(fn)
        return fn

    return apply
