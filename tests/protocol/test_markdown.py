"""Journal Markdown: images only from this server's uploaded media, after the dot
segments of their path are resolved as a browser would."""

from __future__ import annotations

import pytest

from volthub.protocol import markdown

MEDIA = "/api/media/0b7e7a84-63c3-4f8c-9a34-6b0f7ad3f6a1"


@pytest.mark.parametrize(
    "src",
    [
        "/api/media/../../api/users/me",
        "/api/media/../users/me",
        "/api/media/%2e%2e/%2E%2E/api/users/me",
        "/api/media/.%2e/oauth/authorize",
        "/api/media/..%2f..%2fapi/users/me",
        "/api/media\\..\\..\\api\\users\\me",
        "/api/media/x/../../notifications",
        "//evil.example/api/media/x",
        "https://evil.example/api/media/x",
        "/api/media/",
        "/api/mediaX/y",
    ],
)
def test_an_image_outside_the_media_path_is_dropped(src: str) -> None:
    html = markdown.render(f"![y]({src})")
    assert "src=" not in html, html


def test_an_uploaded_image_is_kept_with_its_path_resolved() -> None:
    assert f'src="{MEDIA}"' in markdown.render(f"![y]({MEDIA})")
    assert f'src="{MEDIA}"' in markdown.render(f"![y](/api/media/./{MEDIA.rsplit('/', 1)[1]})")
    assert f'src="{MEDIA}"' in markdown.render(f"![y](/api/media/x/../{MEDIA.rsplit('/', 1)[1]})")
