"""One blueprint per area of the spec; the app registers them in this order."""

from . import accounts, health, users

BLUEPRINTS = [health.blueprint, accounts.blueprint, users.blueprint]
