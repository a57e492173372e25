"""OAuth 2.0 for third-party apps, one module per part:

- `authorize`: `GET|POST /api/developer/oauth/authorize` (preview, then the user's decision);
  the checks are shared with the HTML consent page (blueprints/consent.py).
- `token_endpoint`: `POST /api/developer/oauth/token` and `/revoke` (RFC 6749, RFC 7009).
- `metadata`: `GET /api/developer/oauth/scopes` and `/.well-known/oauth-authorization-server`
  (RFC 8414).
- `connections`: a user's connected apps under `/api/users/me/connections`.

Every route is on the one blueprint `oauth` (`common.blueprint`), registered in this order.
"""

from volthub.http.blueprints.oauth import authorize, connections, metadata, token_endpoint
from volthub.http.blueprints.oauth.common import blueprint
from volthub.http.blueprints.oauth.token_endpoint import token

__all__ = ["authorize", "blueprint", "connections", "metadata", "token", "token_endpoint"]
