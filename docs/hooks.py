"""mkdocs hook: the API reference page, rendered from the OpenAPI document the code builds,
and the events reference, rendered from the AsyncAPI document.

mkdocs.yml names this file under `hooks:`; the pages exist only in the built site
(reference/api.md and reference/events.md are never written into docs/). No network, no
running server.
"""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

from volthub.tools import events_reference
from volthub.tools.api_reference import openapi_document, render

PAGE = "reference/api.md"
EVENTS_PAGE = "reference/events.md"


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, PAGE, content=render(openapi_document())))
    events = events_reference.render(events_reference.asyncapi_document())
    files.append(File.generated(config, EVENTS_PAGE, content=events))
    return files
