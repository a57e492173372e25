"""The request checks are one ordered list of named steps, run by both listeners that
serve chat send: the main port builds its hooks from the list, in its order, and the
gateway runs the list itself; a request that fails two checks gets the earlier step's
answer on both."""

from __future__ import annotations

from typing import Any

from tests.http.chat_env import ChatEnv, chat_app, gateway_request
from volthub.http import request_checks

PATH = "/api/integrations/oauth/chat/channels/{}/messages"
ORIGIN = "https://app.example"


def test_the_steps_are_named_in_their_one_order():
    assert [step.name for step in request_checks.STEPS] == [
        "cors_preflight",
        "client_ip_budget",
        "nul_in_url",
        "access",
        "body_size",
        "body_type",
        "route_budget",
        "routing",
        "json_body",
        "channel",
    ]


async def test_the_main_port_hooks_are_the_hook_steps_in_the_list_order_first_of_all(sqlite_url):
    app = chat_app(sqlite_url)
    hooks = [hook.__name__ for hook in app.before_request_funcs[None]]
    expected = [f"check_{step.name}" for step in request_checks.STEPS if step.main_port == request_checks.HOOK]
    assert hooks[: len(expected)] == expected
    assert len(expected) == 6


async def answers(env: ChatEnv, method: str, path: str, **request: Any) -> list[tuple[int, str | None]]:
    """The status and error code of the same request on the main port and on the gateway."""
    main = await env.client.open(path, method=method, **request)
    gateway = await gateway_request(env.rt.gateway.url, method, path, **request)
    found = []
    for response in (main, gateway):
        body = await response.get_data()
        error = (await response.get_json()).get("error") if body else None
        found.append((response.status_code, error))
    return found


async def spend_the_client_ip_budget(env: ChatEnv) -> None:
    """Until each listener refuses the client's address (the clock stands still)."""
    for _ in range(100):
        if (await env.client.get("/api/users/me")).status_code == 429:
            break
    for _ in range(100):
        if (await gateway_request(env.rt.gateway.url, "GET", PATH.format("x"))).status_code == 429:
            break


async def test_a_request_failing_two_checks_gets_the_earlier_steps_answer_on_both_listeners(sqlite_url, mock_clock):
    app = chat_app(
        sqlite_url,
        server={"cors_origins": [ORIGIN]},
        ratelimit={"enabled": True, "global_per_ip_per_minute": 100, "chat_send_per_minute": 2},
    )
    async with app.test_app():
        env = ChatEnv(app)
        streamer, viewer = await env.user(), await env.user()
        own = PATH.format(streamer.id)
        big = b'{"message": "' + b"x" * 20_000 + b'"}'
        json_type = {"Content-Type": "application/json"}
        text_type = {"Content-Type": "text/plain"}
        big_length = {"Content-Length": str(len(big))}  # the test client does not add it
        cases: list[tuple[str, str, str, dict[str, Any], tuple[int, str]]] = [
            ("nul_in_url before access", "POST", own + "?q=%00", {"json": {"message": "hi"}}, (400, "invalid_request")),
            ("nul_in_url before routing", "GET", own + "?q=%00", {}, (400, "invalid_request")),
            (
                "access before body_size",
                "POST",
                own,
                {"data": big, "headers": {**json_type, **big_length}},
                (401, "missing_token"),
            ),
            (
                "body_size before body_type",
                "POST",
                own,
                {"data": big, "headers": {**streamer.headers, **text_type, **big_length}},
                (413, "payload_too_large"),
            ),
            # Two requests, two of the viewer's chat-send budget of 2: both get to the body.
            (
                "json_body before channel",
                "POST",
                PATH.format("not-a-uuid"),
                {"data": b"{nope", "headers": {**viewer.headers, **json_type}},
                (400, "invalid_json"),
            ),
            (
                "route_budget before json_body",
                "POST",
                own,
                {"data": b"{nope", "headers": {**viewer.headers, **json_type}},
                (429, "rate_limit_exceeded"),
            ),
            (
                "body_type before route_budget",
                "POST",
                own,
                {"data": b"hi", "headers": {**viewer.headers, **text_type}},
                (415, "unsupported_media_type"),
            ),
        ]
        for name, method, path, request, expected in cases:
            assert await answers(env, method, path, **request) == [expected, expected], name

        await spend_the_client_ip_budget(env)
        refused = (429, "rate_limit_exceeded")
        nul = await answers(env, "POST", own + "?q=%00", json={"message": "hi"}, headers=streamer.headers)
        assert nul == [refused, refused], "client_ip_budget before nul_in_url"
        preflight = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST"}
        assert await answers(env, "OPTIONS", own, headers=preflight) == [(204, None)] * 2, "cors_preflight first"
