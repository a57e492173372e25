"""The Redis broker's client and the names of its keys: one server (``redis://`` or
``rediss://``) or a Redis Cluster.

With ``rediss://`` (or cluster nodes and a CA file) the connection is TLS, and the server's
certificate is verified against the system's trusted CAs, or against ``[cluster]
redis_ca_file`` when set (a private CA), with its host name checked.
"""

from __future__ import annotations

import ssl
from typing import Any, Protocol

PREFIX = "volthub:"
BROADCAST = PREFIX + "{broadcast}:ev"


def channel_subject(channel_id: str) -> str:
    return f"{PREFIX}{{{channel_id}}}:ev"


def stream_key(channel_id: str) -> str:
    return f"{PREFIX}{{{channel_id}}}:log"  # the same slot as its subject (hash tag)


def presence_key(channel_id: str) -> str:
    return f"{PREFIX}{{{channel_id}}}:presence"


def user_subject(user_id: str) -> str:
    return f"{PREFIX}{{u:{user_id}}}:user"


def budget_key(key: str) -> str:
    return f"{PREFIX}rl:{{{key}}}"


def recovery_key(key: str) -> str:
    return f"{PREFIX}recovery:{key}"


class RedisConnection(Protocol):
    """What the broker's Redis stores need of it: its session's client, while connected."""

    connected: bool

    def client(self) -> Any:
        """The connected client; raises while the broker is unreachable."""


def tls_context(ca_file: str) -> ssl.SSLContext:
    """Verify the server: its certificate chains to `ca_file` (else the system's CAs) and
    names the host connected to."""
    context = ssl.create_default_context(cafile=ca_file or None)
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def make_client(url: str, cluster_nodes: tuple[str, ...], ca_file: str) -> Any:
    """A client of the server at `url`, or of the cluster that `cluster_nodes` belong to."""
    # Imported here: the client library costs a second of start-up, and only deployments
    # with this broker need it.
    import coredis
    from coredis.typing import Node

    if cluster_nodes:
        nodes: list[Node] = []
        for node in cluster_nodes:
            host, _, port = node.rpartition(":")
            nodes.append(Node(host=host, port=int(port)))
        if ca_file:
            return coredis.RedisCluster(
                startup_nodes=nodes, decode_responses=False, ssl=True, ssl_context=tls_context(ca_file)
            )
        return coredis.RedisCluster(startup_nodes=nodes, decode_responses=False)
    if url.startswith("rediss://"):
        # Our own context: the library's default for rediss:// checks neither host nor chain.
        return coredis.Redis.from_url(url, decode_responses=False, ssl_context=tls_context(ca_file))
    return coredis.Redis.from_url(url, decode_responses=False)
