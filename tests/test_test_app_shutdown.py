"""The in-process test app (Quart-Trio's) as the suite runs it: a lifespan shutdown that
fails is reported as itself (tests/conftest.py closes the test app's nursery whatever
happens)."""

from __future__ import annotations

import pytest
import trio
from quart_trio import QuartTrio


async def test_a_hanging_lifespan_shutdown_fails_the_test_with_its_own_error() -> None:
    app = QuartTrio("hanging")

    @app.after_serving
    async def hang() -> None:
        await trio.sleep_forever()

    test_app = app.test_app()
    test_app.shutdown_timeout = 0.2  # type: ignore[attr-defined]
    with pytest.raises(BaseExceptionGroup) as caught:  # from the app's nursery
        async with test_app:
            pass
    assert caught.group_contains(trio.TooSlowError)  # the shutdown's own error
