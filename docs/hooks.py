"""mkdocs hook: the API reference page, rendered from the OpenAPI document the code builds.

mkdocs.yml names this file under `hooks:`; the page exists only in the built site
(reference/api.md is never written into docs/). No network, no running server.
"""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

from volthub.tools.api_reference import openapi_document, render

PAGE = "reference/api.md"


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, PAGE, content=render(openapi_document())))
    return files
