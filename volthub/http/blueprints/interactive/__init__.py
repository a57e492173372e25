"""Interactive control: polls, predictions, giveaways,
goals, timers and subathons.

Three doors, one behaviour: every write is a command to the channel's actor
(volthub/hub/components/{polls,predictions,giveaways,goals,timers}.py), which checks the
rules, stores the change, posts the chat card and emits the event in one transaction.
- `/api/integrations/oauth/...` for integrations (reads `channel:read`, writes
  `channel:interactive:write`, 60/min), on the token owner's channel;
- `/api/dashboard/...`, the same paths for the owner's own dashboard (first-party tokens);
- `/api/streams/:username/...`: public reads, owner writes, and the viewers'
  vote, join and bet.
The bodies are validated by the same models whichever door is used, and the components
check the same limits again (a command may come from elsewhere, e.g. a chat bot).
"""

from __future__ import annotations

from volthub.http import access
from volthub.http.blueprints.interactive import giveaways, goals, polls, predictions, timers
from volthub.http.blueprints.interactive.common import (
    READ_SCOPE,
    WRITE_SCOPE,
    Door,
    dashboard_blueprint,
    oauth_blueprint,
    streams_blueprint,
)

for door in (
    Door(oauth_blueprint, access.token(READ_SCOPE), access.token(WRITE_SCOPE), "Interactive control"),
    Door(dashboard_blueprint, access.first_party, access.first_party, "Dashboard"),
):
    for area in (polls, predictions, giveaways, goals, timers):
        area.owner_routes(door)

BLUEPRINTS = [oauth_blueprint, dashboard_blueprint, streams_blueprint]
