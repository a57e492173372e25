"""The rate-limit budgets (one GCRA each), made by the composition root and spent by
`http/ratelimit.py` where the broker keeps the counts."""

from __future__ import annotations

from volthub.config import RateLimitSettings
from volthub.protocol.ratelimit import Gcra, Rate

# category -> (settings field, window in seconds)
BUDGETS: dict[str, tuple[str, int]] = {
    "chat_send": ("chat_send_per_minute", 60),
    "moderation": ("moderation_per_minute", 60),
    "token": ("token_per_minute", 60),
    "app_create": ("app_create_per_hour", 3600),
    "subscriptions": ("subscriptions_per_minute", 60),
    "roles_write": ("roles_write_per_minute", 60),
    "interactive": ("interactive_per_minute", 60),
}


class RateLimits:
    """One GCRA per budget: the global per-IP one and one per category."""

    def __init__(self, settings: RateLimitSettings) -> None:
        self.settings = settings
        self.per_ip = Gcra(Rate.per(settings.global_per_ip_per_minute, 60))
        self.budgets = {
            category: Gcra(Rate.per(getattr(settings, field), window)) for category, (field, window) in BUDGETS.items()
        }
