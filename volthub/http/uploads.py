"""Reading an image upload: the raw request body with an image Content-Type.

One way for every upload route (emotes, journal images): `PUT`/`POST` the image bytes as
the body, `Content-Type: image/png` (or jpeg, gif, webp). The service checks the bytes
themselves (volthub.services.media.check_image), so a wrong or lying type is refused.
"""

from __future__ import annotations

from quart import request

from volthub.protocol import images
from volthub.services.media import Image, check_image

ACCEPTED = images.ACCEPTED


async def read_image(max_bytes: int, max_side: int) -> Image:
    declared = request.headers.get("Content-Type")
    data = await request.get_data(cache=False, as_text=False)
    return check_image(bytes(data) if isinstance(data, bytes) else data.encode(), declared, max_bytes, max_side)
