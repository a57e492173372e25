"""One blueprint per area of the spec; the app registers them in this order."""

from volthub.http.blueprints import accounts, health, notifications, users, webhooks

BLUEPRINTS = [health.blueprint, accounts.blueprint, users.blueprint]
BLUEPRINTS += [webhooks.blueprint, notifications.blueprint]
from volthub.http.blueprints import chat, public_chat  # noqa: E402

BLUEPRINTS += [chat.blueprint, public_chat.blueprint]
from volthub.http.blueprints import channel_points, events, sandbox  # noqa: E402  (Events API)

BLUEPRINTS += [events.blueprint, sandbox.blueprint, channel_points.blueprint]
from volthub.http.blueprints import asyncapi  # noqa: E402  (the events' AsyncAPI document)

BLUEPRINTS += [asyncapi.blueprint]
from volthub.http.blueprints import consent, developer_apps, oauth  # noqa: E402  (OAuth)

BLUEPRINTS += [developer_apps.blueprint, oauth.blueprint, consent.blueprint]
from volthub.http.blueprints import ingest, stream_control, streams  # noqa: E402  (streams)

BLUEPRINTS += [streams.blueprint, streams.clips_blueprint, streams.categories_blueprint]
BLUEPRINTS += [stream_control.blueprint, ingest.blueprint]
from volthub.http.blueprints import bots, catalogue, emotes, media  # noqa: E402  (bots, catalogue)

BLUEPRINTS += [bots.blueprint, media.blueprint, emotes.blueprint]
BLUEPRINTS += [catalogue.badges_blueprint, catalogue.teams_blueprint]
from volthub.http.blueprints import extvideo, journals  # noqa: E402

BLUEPRINTS += [journals.blueprint, extvideo.blueprint]
from volthub.http.blueprints import bot_select  # noqa: E402

BLUEPRINTS += [bot_select.blueprint]
from volthub.http.blueprints import interactive  # noqa: E402  (interactive control)

BLUEPRINTS += interactive.BLUEPRINTS
from volthub.http.blueprints import channel_roles, subscriptions, volts  # noqa: E402  (subscriptions, roles, Volts)

BLUEPRINTS += [volts.blueprint, subscriptions.blueprint, channel_roles.blueprint]
from volthub.http.blueprints import developer, devpages  # noqa: E402  (index, API reference, dashboard)

BLUEPRINTS += [devpages.blueprint, developer.blueprint]
