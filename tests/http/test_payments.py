"""Purchases through a payment provider, on SQLite and PostgreSQL: refused with no provider
configured; pending until the provider confirms (a signed callback or a poll); credited on
confirmation only, once; a replayed confirmation credits nothing more."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from tests.conftest import RegisteredUser, make_settings, register, running_app
from volthub.services import payments
from volthub.services.payments import BadCallback, Charge

SECRET = b"provider signing secret"


class SignedCallbackProvider:
    """A provider whose payments stay pending until it calls back (HMAC-signed body) or a
    poll finds them paid: the shape of a real card or checkout provider."""

    name = "signedtest"
    paid: set[str] = set()

    async def begin(self, purchase_id: str, user_id: str, amount: int) -> Charge:
        return Charge(f"ch_{purchase_id}", payments.PENDING, checkout_url=f"https://pay.example/{purchase_id}")

    async def poll(self, reference: str) -> str:
        return payments.CONFIRMED if reference in self.paid else payments.PENDING

    def verify_callback(self, body: bytes, headers: Mapping[str, str]) -> tuple[str, str]:
        expected = hmac.new(SECRET, body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, headers.get("x-signature-hmac", "")):
            raise BadCallback("bad signature")
        document = json.loads(body)
        return document["reference"], document["status"]


def signed(document: dict[str, Any], secret: bytes = SECRET) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(document).encode()
    return body, {
        "Content-Type": "application/json",
        # Mixed case as a provider might write it (Quart would offer it as "X-Signature-Hmac").
        "X-Signature-HMAC": hmac.new(secret, body, hashlib.sha256).hexdigest(),
    }


async def make_app(database_url: str, provider: str) -> AsyncIterator[Any]:
    async with running_app(make_settings(database_url, volts={"payment_provider": provider})) as (application, _):
        yield application


@pytest.fixture
async def unconfigured(database_url: str) -> AsyncIterator[Any]:
    async for application in make_app(database_url, ""):
        yield application


@pytest.fixture
def pending_app(backend_app: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from volthub.services.volts import Volts

    SignedCallbackProvider.paid = set()
    services = backend_app.extensions["volthub"].services
    old = services.volts
    monkeypatch.setattr(
        services, "volts", Volts(old._db, old._publisher, old._clock, old._settings, provider=SignedCallbackProvider())
    )
    return backend_app


async def balance_of(client: Any, user: RegisteredUser) -> int:
    return int((await (await client.get("/api/volts/wallet", headers=user.headers)).get_json())["balance"])


async def purchase_rows(app: Any) -> int:
    return int(await app.extensions["volthub"].db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM volt_purchases")))


async def test_with_no_provider_configured_a_purchase_is_refused_503_and_credits_nothing(unconfigured: Any) -> None:
    client = unconfigured.test_client()
    viewer = await register(client)
    response = await client.post("/api/volts/purchase", json={"amount": 100}, headers=viewer.headers)
    assert response.status_code == 503
    assert (await response.get_json())["error"] == "payments_not_configured"
    assert await balance_of(client, viewer) == 0
    assert await purchase_rows(unconfigured) == 0


def test_the_default_configuration_has_no_payment_provider() -> None:
    from volthub.config import load_settings

    assert load_settings(None, environ={}).volts.payment_provider == ""
    with pytest.raises(Exception, match="payment_provider"):
        load_settings(None, environ={}, overrides={"volts": {"payment_provider": "free-money"}})


async def test_the_sandbox_chosen_explicitly_confirms_at_once(app: Any) -> None:
    client = app.test_client()
    viewer = await register(client)
    response = await client.post("/api/volts/purchase", json={"amount": 70}, headers=viewer.headers)
    assert response.status_code == 200
    body = await response.get_json()
    assert body["purchase"]["status"] == "confirmed" and body["purchase"]["sandbox"] is True
    assert body["purchase"]["transactionId"] == body["transaction"]["id"] and body["balance"] == 70


@pytest.fixture
async def app(database_url: str) -> AsyncIterator[Any]:
    async for application in make_app(database_url, "sandbox"):
        yield application


async def test_a_pending_purchase_credits_only_on_a_signed_callback_and_only_once(pending_app: Any) -> None:
    client = pending_app.test_client()
    viewer = await register(client)
    response = await client.post("/api/volts/purchase", json={"amount": 300}, headers=viewer.headers)
    assert response.status_code == 202, await response.get_data(as_text=True)
    body = await response.get_json()
    purchase = body["purchase"]
    assert (purchase["status"], body["transaction"], body["balance"]) == ("pending", None, 0)
    assert purchase["checkoutUrl"] == f"https://pay.example/{purchase['id']}"
    assert await balance_of(client, viewer) == 0
    callback = "/api/volts/purchases/callback/signedtest"
    confirmation = {"reference": f"ch_{purchase['id']}", "status": "confirmed"}

    forged_body, forged_headers = signed(confirmation, secret=b"not the secret")
    forged = await client.post(callback, data=forged_body, headers=forged_headers)
    assert forged.status_code == 401 and (await forged.get_json())["error"] == "invalid_signature"
    assert await balance_of(client, viewer) == 0

    body_bytes, headers = signed(confirmation)
    for _ in range(3):  # the provider retries: a replay credits nothing more
        answered = await client.post(callback, data=body_bytes, headers=headers)
        assert answered.status_code == 200, await answered.get_data(as_text=True)
        assert (await answered.get_json())["status"] == "confirmed"
    assert await balance_of(client, viewer) == 300
    history = (await (await client.get("/api/volts/transactions", headers=viewer.headers)).get_json())["items"]
    assert [(t["type"], t["amount"], t["provider"], t["sandbox"]) for t in history] == [
        ("purchase", 300, "signedtest", False)
    ]
    status = await (await client.get(f"/api/volts/purchases/{purchase['id']}", headers=viewer.headers)).get_json()
    assert status["purchase"]["status"] == "confirmed" and status["transaction"]["amount"] == 300

    unknown_body, unknown_headers = signed({"reference": "ch_nothing", "status": "confirmed"})
    assert (await client.post(callback, data=unknown_body, headers=unknown_headers)).status_code == 401
    assert (
        await client.post("/api/volts/purchases/callback/sandbox", data=body_bytes, headers=headers)
    ).status_code == 401


async def test_a_pending_purchase_is_credited_once_when_a_poll_finds_it_paid(pending_app: Any) -> None:
    client = pending_app.test_client()
    viewer, other = await register(client), await register(client)
    purchase = (
        await (await client.post("/api/volts/purchase", json={"amount": 40}, headers=viewer.headers)).get_json()
    )["purchase"]
    path = f"/api/volts/purchases/{purchase['id']}"
    still = await (await client.get(path, headers=viewer.headers)).get_json()
    assert still["purchase"]["status"] == "pending" and await balance_of(client, viewer) == 0
    assert (await client.get(path, headers=other.headers)).status_code == 404  # someone else's
    assert (await client.get(f"/api/volts/purchases/{uuid.uuid4()}", headers=viewer.headers)).status_code == 404
    SignedCallbackProvider.paid.add(f"ch_{purchase['id']}")
    for _ in range(2):
        polled = await (await client.get(path, headers=viewer.headers)).get_json()
        assert polled["purchase"]["status"] == "confirmed" and polled["balance"] == 40
    assert await balance_of(client, viewer) == 40
    body, headers = signed({"reference": f"ch_{purchase['id']}", "status": "confirmed"})
    assert (
        await client.post("/api/volts/purchases/callback/signedtest", data=body, headers=headers)
    ).status_code == 200
    assert await balance_of(client, viewer) == 40  # a late callback after the poll: nothing more


async def test_a_failed_payment_credits_nothing_and_cannot_be_confirmed_later(pending_app: Any) -> None:
    client = pending_app.test_client()
    viewer = await register(client)
    purchase = (
        await (await client.post("/api/volts/purchase", json={"amount": 40}, headers=viewer.headers)).get_json()
    )["purchase"]
    callback = "/api/volts/purchases/callback/signedtest"
    for status in ("failed", "confirmed"):
        body, headers = signed({"reference": f"ch_{purchase['id']}", "status": status})
        answered = await (await client.post(callback, data=body, headers=headers)).get_json()
        assert answered["status"] == "failed"
    assert await balance_of(client, viewer) == 0
