"""Payment providers: who is paid when a viewer buys Volts.

A purchase is written `pending` before its provider is asked (`begin`); Volts are credited
only when the provider confirms it, once: at once in `begin`'s answer (the sandbox), by a
signed callback (`verify_callback`, from `POST /api/volts/purchases/callback/<provider>`),
or when a poll finds it paid (`poll`, on `GET /api/volts/purchases/<id>`). A real provider
implements these three against its API: a charge or checkout session per purchase, its
signing secret to check callbacks, its status query. `sandbox` is the only one built in: it
confirms at once without taking any money, and must be chosen explicitly
(`[volts] payment_provider = "sandbox"`); with no provider configured purchases are refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "BadCallback",
    "Charge",
    "PaymentDeclined",
    "PaymentProvider",
    "PaymentsNotConfigured",
    "PROVIDERS",
    "SandboxProvider",
]

PENDING, CONFIRMED, FAILED = "pending", "confirmed", "failed"


class PaymentDeclined(Exception):
    """The payment provider refused the charge; no Volts were credited."""


class PaymentsNotConfigured(Exception):
    """No payment provider is configured: purchases are refused."""


class BadCallback(Exception):
    """A provider callback whose signature does not verify (or that names no purchase)."""


@dataclass(frozen=True)
class Charge:
    reference: str  # the provider's id of the charge
    status: str  # pending, confirmed or failed
    checkout_url: str | None = None  # where the buyer completes a pending payment


class PaymentProvider(Protocol):
    name: str

    async def begin(self, purchase_id: str, user_id: str, amount: int) -> Charge:
        """Start charging for `amount` Volts, or raise PaymentDeclined."""

    async def poll(self, reference: str) -> str:
        """The charge's status now: pending, confirmed or failed."""

    def verify_callback(self, body: bytes, headers: Mapping[str, str]) -> tuple[str, str]:
        """The (reference, status) a signed callback reports; BadCallback when its
        signature does not verify. `headers` are keyed by lower-case name."""


class SandboxProvider:
    """Confirms every purchase at once and takes no money; its transactions say `sandbox`."""

    name = "sandbox"

    async def begin(self, purchase_id: str, user_id: str, amount: int) -> Charge:
        return Charge(f"sandbox_{uuid.uuid4().hex}", CONFIRMED)

    async def poll(self, reference: str) -> str:
        return CONFIRMED

    def verify_callback(self, body: bytes, headers: Mapping[str, str]) -> tuple[str, str]:
        raise BadCallback("the sandbox sends no callbacks")


# The providers `[volts] payment_provider` may name.
PROVIDERS: dict[str, Callable[[], PaymentProvider]] = {"sandbox": SandboxProvider}
