"""A real media server: nginx with the RTMP module on loopback, its `on_publish` and
`on_publish_done` pointed at volthub; ffmpeg publishes a generated test pattern with the
channel's stream key. An SSE client sees stream.online then stream.offline; a wrong key is
refused by volthub and nginx drops the publisher.

Needs Debian's `nginx`, `libnginx-mod-rtmp` and `ffmpeg` (`.ci/run` installs them). nginx
runs unprivileged with its own prefix, pid and logs under tmp_path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio
from httpx_sse import aconnect_sse

from tests.conftest import LiveServer, register_live, served
from tests.http.streams.support import HOOK_SECRET, Events, ingest_settings, stream_key
from volthub.loadtest.servers import free_port

RTMP_MODULE = Path("/usr/lib/nginx/modules/ngx_rtmp_module.so")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
FFMPEG = shutil.which("ffmpeg")
pytestmark = pytest.mark.skipif(
    not (RTMP_MODULE.exists() and Path(NGINX).exists() and FFMPEG) and not os.environ.get("CI"),
    reason="needs nginx, libnginx-mod-rtmp and ffmpeg (apt-get install nginx libnginx-mod-rtmp ffmpeg)",
)

CONFIG = """
daemon off;
master_process off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log info;
load_module {module};
events {{ worker_connections 64; }}
rtmp {{
    server {{
        listen 127.0.0.1:{port};
        application live {{
            live on;
            on_publish {volthub}/api/ingest/nginx/publish?secret={secret};
            on_publish_done {volthub}/api/ingest/nginx/unpublish?secret={secret};
        }}
    }}
}}
"""


@pytest.fixture
async def server(sqlite_url: str, nursery: trio.Nursery) -> AsyncIterator[LiveServer]:
    async with served(nursery, ingest_settings(sqlite_url)) as server:
        yield server


@pytest.fixture
async def rtmp_port(server: LiveServer, tmp_path: Path) -> AsyncIterator[int]:
    """nginx-rtmp on a free loopback port; its log is printed if the test fails."""
    port = free_port()
    (tmp_path / "nginx.conf").write_text(
        CONFIG.format(prefix=tmp_path, module=RTMP_MODULE, port=port, volthub=server.url, secret=HOOK_SECRET)
    )
    command = [NGINX, "-p", str(tmp_path), "-e", str(tmp_path / "error.log"), "-c", str(tmp_path / "nginx.conf")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        with trio.fail_after(10):
            while not await _listening(port):
                assert process.poll() is None, (tmp_path / "error.log").read_text()
                await trio.sleep(0.05)  # real time: an external process is starting
        yield port
    finally:
        process.terminate()
        process.wait(10)
        print((tmp_path / "error.log").read_text(errors="replace")[-3000:])


async def _listening(port: int) -> bool:
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return False
    await stream.aclose()
    return True


async def publish(port: int, key: str, seconds: int = 3) -> subprocess.CompletedProcess[bytes]:
    assert FFMPEG is not None
    command = [FFMPEG, "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi", "-i"]
    command += [f"testsrc=size=160x120:rate=10:duration={seconds}", "-an", "-c:v", "flv", "-f", "flv"]
    command += [f"rtmp://127.0.0.1:{port}/live/{key}"]
    with trio.fail_after(seconds + 20):
        return await trio.run_process(command, check=False, capture_stdout=True, capture_stderr=True)


async def test_ffmpeg_through_nginx_rtmp_goes_live_and_offline(server: LiveServer, rtmp_port: int) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        owner = await register_live(server.url)
        key = await stream_key(http, owner.headers)
        headers = {**owner.headers, "Accept": "text/event-stream"}
        async with aconnect_sse(http, "GET", "/api/events/stream", headers=headers) as source:
            events = Events(source)
            await events.next("connected")
            async with trio.open_nursery() as nursery:
                done = trio.Event()

                async def run() -> None:
                    result = await publish(rtmp_port, key)
                    assert result.returncode == 0, result.stderr.decode(errors="replace")
                    done.set()

                nursery.start_soon(run)
                _, online = await events.next("stream.online")
                assert online["data"]["userId"] == owner.id
                live = (await http.get("/api/streams/live")).json()["items"]
                assert [item["channelId"] for item in live] == [owner.id]
            assert done.is_set()
            _, offline = await events.next("stream.offline")
            assert offline["data"]["streamId"] == online["data"]["streamId"]
        assert (await http.get("/api/streams/live")).json()["items"] == []
        vods = (await http.get(f"/api/streams/user/{owner.username}/vods")).json()["items"]
        assert len(vods) == 1 and vods[0]["streamId"] == online["data"]["streamId"]


async def test_a_wrong_key_is_refused_and_nginx_drops_the_publisher(server: LiveServer, rtmp_port: int) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        owner = await register_live(server.url)
        key = await stream_key(http, owner.headers)
        result = await publish(rtmp_port, key + "-wrong", seconds=5)
        assert result.returncode != 0  # nginx closed the connection on volthub's 403
        assert (await http.get("/api/streams/live")).json()["items"] == []
        channel = (await http.get(f"/api/streams/user/{owner.username}")).json()
        assert channel["live"] is False
