"""The Redis broker's client: one server (``redis://`` or ``rediss://``) or a Redis Cluster.

With ``rediss://`` (or cluster nodes and a CA file) the connection is TLS, and the server's
certificate is verified against the system's trusted CAs, or against ``[cluster]
redis_ca_file`` when set (a private CA), with its host name checked.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from volthub.hub.redis_bus import RedisSettings


def tls_context(ca_file: str) -> ssl.SSLContext:
    """Verify the server: its certificate chains to `ca_file` (else the system's CAs) and
    names the host connected to."""
    context = ssl.create_default_context(cafile=ca_file or None)
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def make_client(settings: RedisSettings) -> Any:
    # Imported here: the client library costs a second of start-up, and only deployments
    # with this broker need it.
    import coredis
    from coredis.typing import Node

    if settings.cluster_nodes:
        nodes: list[Node] = []
        for node in settings.cluster_nodes:
            host, _, port = node.rpartition(":")
            nodes.append(Node(host=host, port=int(port)))
        if settings.ca_file:
            return coredis.RedisCluster(
                startup_nodes=nodes, decode_responses=False, ssl=True, ssl_context=tls_context(settings.ca_file)
            )
        return coredis.RedisCluster(startup_nodes=nodes, decode_responses=False)
    if settings.url.startswith("rediss://"):
        # Our own context: the library's default for rediss:// checks neither host nor chain.
        return coredis.Redis.from_url(settings.url, decode_responses=False, ssl_context=tls_context(settings.ca_file))
    return coredis.Redis.from_url(settings.url, decode_responses=False)
