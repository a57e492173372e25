"""Chat send answers the same on the main port and on the Events API gateway: the same
status, body, error headers and rate-limit headers for the same request, one budget
across both, and the same request id, metrics and access line."""

from __future__ import annotations

import logging
import time
from typing import Any

import trio
from prometheus_client import REGISTRY
from trio.testing import wait_all_tasks_blocked

from tests.http.chat_env import ChatEnv, chat_app, gateway_request
from volthub.http.chat_send import ROUTE

PATH = "/api/integrations/oauth/chat/channels/{}/messages"
COMPARED_HEADERS = ("content-type", "www-authenticate", "retry-after", "allow")


async def both(env: ChatEnv, path: str, **request: Any) -> tuple[Any, Any]:
    """The same request to the main port (test client) and to the gateway (its socket)."""
    main = await env.client.post(path, **request)
    gateway = await gateway_request(env.rt.gateway.url, "POST", path, **request)
    return main, gateway


async def same(main: Any, gateway: Any) -> dict[str, Any]:
    main_body, gateway_body = await main.get_json(), await gateway.get_json()
    assert (main.status_code, gateway.status_code) == (main.status_code, main.status_code), (main_body, gateway_body)
    for body, response in ((main_body, main), (gateway_body, gateway)):
        if "error" in body:  # the request id is the response's own
            assert body["details"].pop("requestId") == response.headers["X-Request-Id"]
    if "messageId" in main_body:
        main_body.pop("messageId"), gateway_body.pop("messageId")
    assert main_body == gateway_body
    for name in COMPARED_HEADERS:
        assert main.headers.get(name) == gateway.headers.get(name), name
    assert gateway.headers["X-Request-Id"]
    return main_body


def json_of_length(body: bytes) -> dict[str, str]:
    """Headers of a JSON body; its length said outright (the test client does not add it)."""
    return {"Content-Type": "application/json", "Content-Length": str(len(body))}


async def test_every_refusal_and_the_success_are_the_same_on_both_listeners(sqlite_url):
    app = chat_app(sqlite_url)
    async with app.test_app():
        env = ChatEnv(app)
        streamer, viewer = await env.user(), await env.user()
        own = PATH.format(streamer.id)
        big = b'{"message": "' + b"x" * 20_000 + b'"}'
        cases: list[tuple[str, dict[str, Any], int]] = [
            (own, {"json": {"message": "hi"}}, 401),
            (own, {"json": {"message": "hi"}, "headers": {"Authorization": "Bearer nope"}}, 401),
            (own, {"json": {"message": "hi"}, "headers": {"Authorization": "Basic abc"}}, 401),
            (own, {"data": b"message=hi", "headers": {**streamer.headers, "Content-Type": "text/plain"}}, 415),
            (own, {"data": big, "headers": {**streamer.headers, **json_of_length(big)}}, 413),
            (own, {"data": b"{nope", "headers": {**streamer.headers, "Content-Type": "application/json"}}, 400),
            (
                own,
                {
                    "data": b'{"message": "a\\u0000"}',
                    "headers": {**streamer.headers, "Content-Type": "application/json"},
                },
                400,
            ),
            (own, {"data": b"", "headers": streamer.headers}, 400),
            (own, {"json": [1, 2], "headers": streamer.headers}, 400),
            (own, {"json": {"message": "  "}, "headers": streamer.headers}, 400),
            (own, {"json": {"message": "ok", "effect": "nope"}, "headers": streamer.headers}, 400),
            (PATH.format("not-a-uuid"), {"json": {"message": "hi"}, "headers": streamer.headers}, 400),
            (
                PATH.format("00000000-0000-4000-8000-000000000000"),
                {"json": {"message": "hi"}, "headers": viewer.headers},
                404,
            ),
            (own, {"json": {"message": "beep", "sendAsBot": True}, "headers": streamer.headers}, 403),
            (own, {"json": {"message": "hello"}, "headers": viewer.headers}, 200),
            (
                own,
                {"json": {"message": "hello", "effect": "glow", "effectColor": "#ABCDEF"}, "headers": streamer.headers},
                200,
            ),
        ]
        for path, request, status in cases:
            main, gateway = await both(env, path, **request)
            assert main.status_code == status, (path, request, await main.get_json())
            await same(main, gateway)
        sent = [event.data["message"] for event in env.named("chat.message")]
        assert sent == ["hello", "hello", "hello", "hello"]


async def test_one_chat_send_budget_across_both_listeners_with_the_same_headers(sqlite_url):
    app = chat_app(sqlite_url, ratelimit={"enabled": True, "chat_send_per_minute": 2})
    async with app.test_app():
        env = ChatEnv(app)
        streamer = await env.user()
        main, gateway = await both(env, PATH.format(streamer.id), json={"message": "one"}, headers=streamer.headers)
        assert (main.status_code, gateway.status_code) == (200, 200)
        assert main.headers["X-RateLimit-Limit"] == gateway.headers["X-RateLimit-Limit"] == "2"
        assert (main.headers["X-RateLimit-Remaining"], gateway.headers["X-RateLimit-Remaining"]) == ("1", "0")
        main, gateway = await both(env, PATH.format(streamer.id), json={"message": "two"}, headers=streamer.headers)
        body = await same(main, gateway)
        assert main.status_code == 429 and body["error"] == "rate_limit_exceeded"
        assert int(gateway.headers["Retry-After"]) >= 1 and gateway.headers["X-RateLimit-Remaining"] == "0"
        assert len(env.named("chat.message")) == 2


def requests_counted(status: str) -> float:
    labels = {"method": "POST", "route": ROUTE, "status": status}
    return REGISTRY.get_sample_value("volthub_http_requests_total", labels) or 0.0


async def test_a_gateway_send_is_counted_and_logged_under_the_route_with_its_request_id(sqlite_url, caplog):
    app = chat_app(sqlite_url)
    async with app.test_app():
        env = ChatEnv(app, "gateway")
        streamer = await env.user()
        ok, refused = requests_counted("200"), requests_counted("401")
        caplog.set_level(logging.INFO, logger="volthub.access")
        response = await env.client.post(
            PATH.format(streamer.id), json={"message": "hi"}, headers={**streamer.headers, "X-Request-Id": "bot-42"}
        )
        assert response.status_code == 200 and response.headers["X-Request-Id"] == "bot-42"
        assert (await env.client.post(PATH.format(streamer.id), json={"message": "hi"})).status_code == 401
        assert requests_counted("200") == ok + 1 and requests_counted("401") == refused + 1
        lines = [record.getMessage() for record in caplog.records if record.name == "volthub.access"]
        assert any(line.startswith(f"POST {ROUTE} 200 ") and "request_id=bot-42" in line for line in lines), lines


async def test_the_gateway_answers_other_methods_on_the_route_with_405(sqlite_url):
    app = chat_app(sqlite_url)
    async with app.test_app():
        rt = app.extensions["volthub"]
        response = await gateway_request(rt.gateway.url, "GET", PATH.format("00000000-0000-4000-8000-000000000000"))
        assert response.status_code == 405 and "POST" in response.headers["Allow"]
        assert (await response.get_json())["error"] == "method_not_allowed"
        missing = await gateway_request(rt.gateway.url, "POST", "/api/integrations/oauth/chat/settings", json={})
        assert missing.status_code == 404


async def test_the_gateway_answers_expect_100_continue_before_reading_the_body(sqlite_url):
    app = chat_app(sqlite_url)
    async with app.test_app():
        env = ChatEnv(app, "gateway")
        streamer = await env.user()
        body = b'{"message": "' + b"x" * 400 + b'"}'
        head = (
            f"POST {PATH.format(streamer.id)} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {streamer.token}\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
        ).encode()
        stream = await trio.open_tcp_stream("127.0.0.1", env.rt.gateway.address[1])
        async with stream:
            await stream.send_all(head)
            with trio.fail_after(5):
                interim = await stream.receive_some(4096)
            assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
            await stream.send_all(body)
            answer = b""
            with trio.fail_after(5):
                while b'"success":true' not in answer:
                    answer += await stream.receive_some(4096)
            assert answer.startswith(b"HTTP/1.1 200 ")


async def test_the_gateway_waits_for_a_late_body_and_answers_408_when_it_stops_coming(sqlite_url, mock_clock):
    async def pass_seconds(seconds: int) -> None:
        """Move the clock on a second at a time, letting the server's database threads
        finish between steps (a task waiting for a thread counts as blocked)."""
        for _ in range(seconds):
            await trio.to_thread.run_sync(time.sleep, 0.01)
            await wait_all_tasks_blocked()
            mock_clock.jump(1)
        await wait_all_tasks_blocked()

    app = chat_app(sqlite_url)
    async with app.test_app():
        env = ChatEnv(app, "gateway")
        streamer = await env.user()
        body = b'{"message": "late but welcome"}'
        head = (
            f"POST {PATH.format(streamer.id)} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {streamer.token}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        for rest_after, status in ((20, b"200"), (31, b"408")):
            stream = await trio.open_tcp_stream("127.0.0.1", env.rt.gateway.address[1])
            async with stream:
                await stream.send_all(head + body[:10])
                await pass_seconds(rest_after)
                if status == b"200":
                    await stream.send_all(body[10:])
                answer = b""
                while not answer.endswith(b"}"):
                    answer += await stream.receive_some(4096)
            assert answer.startswith(b"HTTP/1.1 " + status), answer
            if status == b"408":
                assert b'"request_timeout"' in answer
