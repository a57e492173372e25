"""Volts over REST: wallet, purchases (pending until the payment provider confirms), send,
history.

Purchase and send move money: both honour `Idempotency-Key` (http/idempotency.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from quart import Blueprint, request
from quart_schema import tag, validate_querystring, validate_request, validate_response

from volthub.http import access
from volthub.http.documented import error_responses
from volthub.http.idempotency import idempotent
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import PERSON_EXAMPLE, Body, Model, PageQuery, Query, example_of
from volthub.services.volts import Volts

blueprint = Blueprint("volts", __name__, url_prefix="/api/volts")

MAX_PURCHASE = 100_000
MAX_SEND = 1_000_000_000


class WalletOut(Model):
    example = {"balance": 100}

    balance: int


class CounterpartyOut(Model):
    userId: str
    username: str
    displayName: str


class TransactionOut(Model):
    id: str
    type: str = Field(description="purchase, send, starting_balance, platform_fee, subscription, gift_subscription")
    direction: str = Field(description="in or out of this wallet")
    amount: int = Field(description="signed: negative when Volts left the wallet")
    balance: int = Field(description="the wallet's balance right after")
    counterpartyId: str | None
    counterparty: CounterpartyOut | None = Field(description="the user counterpartyId names; null with it")
    reference: str | None
    provider: str | None = Field(description="payment provider of a purchase")
    sandbox: bool = Field(description="true for purchases the sandbox provider paid")
    createdAt: str


_TRANSACTION_EXAMPLE = {
    "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
    "type": "chat.message",
    "direction": "out",
    "amount": 100,
    "balance": 100,
    "counterpartyId": "0b7e2a4c-5d1f-4e8a-9c3b-c9276a020000",
    "counterparty": PERSON_EXAMPLE,
    "reference": "pay_4f9a1c",
    "provider": "sandbox",
    "sandbox": False,
    "createdAt": "2026-03-14T18:30:00Z",
}


class MoneyOut(Model):
    example = {"balance": 100, "transaction": _TRANSACTION_EXAMPLE}

    balance: int
    transaction: TransactionOut


class PurchaseOut(Model):
    example = {
        "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
        "amount": 100,
        "provider": "sandbox",
        "status": "active",
        "sandbox": False,
        "checkoutUrl": "https://volthub.example/checkoutUrl",
        "transactionId": "0b7e2a4c-5d1f-4e8a-9c3b-c2f431140000",
        "createdAt": "2026-03-14T18:30:00Z",
        "resolvedAt": "2026-03-14T18:30:00Z",
    }

    id: str
    amount: int
    provider: str = Field(description="the payment provider asked to charge it")
    status: str = Field(description="pending, then confirmed (Volts credited, once) or failed")
    sandbox: bool = Field(description="true when the sandbox provider (no money taken) confirmed it")
    checkoutUrl: str | None = Field(description="where the buyer completes a pending payment, if the provider has one")
    transactionId: str | None = Field(description="the wallet transaction of a confirmed purchase")
    createdAt: str
    resolvedAt: str | None


class PurchaseResultOut(Model):
    example = {"balance": 100, "transaction": _TRANSACTION_EXAMPLE, "purchase": example_of(PurchaseOut)}

    balance: int
    transaction: TransactionOut | None = Field(description="the credit; null until the purchase is confirmed")
    purchase: PurchaseOut


class TransactionPage(Model):
    example = {"items": [_TRANSACTION_EXAMPLE], "nextCursor": None}

    items: list[TransactionOut]
    nextCursor: str | None


class PurchaseBody(Body):
    example = {"amount": 100}

    amount: int = Field(ge=1, le=MAX_PURCHASE)


class VoltSendBody(Body):
    example = {"creatorId": "0b7e2a4c-5d1f-4e8a-9c3b-24b2ccf60000", "amount": 100, "message": "GG everyone!"}

    creatorId: str = Field(max_length=64)
    amount: int = Field(ge=1, le=MAX_SEND)
    message: str | None = Field(None, max_length=500)


class LeaderQuery(Query):
    limit: int = Field(10, ge=1, le=100)


class LeaderOut(Model):
    rank: int
    userId: str
    username: str
    displayName: str
    amount: int


class LeaderboardOut(Model):
    example = {
        "creatorId": "0b7e2a4c-5d1f-4e8a-9c3b-24b2ccf60000",
        "leaderboard": [
            {
                "rank": 1,
                "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000",
                "username": "ada_streams",
                "displayName": "Ada Streams",
                "amount": 100,
            }
        ],
    }

    creatorId: str
    leaderboard: list[LeaderOut]


def _volts() -> Volts:
    return runtime().services.volts


def _money(balance: int, transaction: dict[str, Any]) -> MoneyOut:
    return MoneyOut(balance=balance, transaction=TransactionOut(**transaction))


@blueprint.get("/wallet")
@access.token("payments:read")
@tag(["Volts"])
@validate_response(WalletOut)
async def get_wallet() -> WalletOut:
    """The caller's Volts balance (a new wallet holds `[volts] starting_balance`)."""
    return WalletOut(balance=await _volts().balance(access.principal().user_id))


@blueprint.get("/transactions")
@access.token("payments:read")
@tag(["Volts"])
@validate_querystring(PageQuery)
@validate_response(TransactionPage)
async def list_transactions(query_args: PageQuery) -> TransactionPage:
    """The caller's wallet movements, newest first; cursor list (limit ≤ 100)."""
    items, cursor = await _volts().transactions(access.principal().user_id, query_args.limit, query_args.cursor)
    return TransactionPage(items=[TransactionOut(**item) for item in items], nextCursor=cursor)


def _purchase_result(result: tuple[int, dict[str, Any] | None, dict[str, Any]]) -> PurchaseResultOut:
    balance, transaction, purchase = result
    return PurchaseResultOut(
        balance=balance,
        transaction=TransactionOut(**transaction) if transaction else None,
        purchase=PurchaseOut(**purchase),
    )


@blueprint.post("/purchase")
@idempotent
@access.token("payments:write")
@tag(["Volts"])
@error_responses(503)
@validate_request(PurchaseBody)
@validate_response(PurchaseResultOut, 200)
@validate_response(PurchaseResultOut, 202)
async def purchase(data: PurchaseBody) -> tuple[PurchaseResultOut, int]:
    """Buy Volts through the configured payment provider. The purchase is pending until the
    provider confirms it (at once: 200 with the credit; later, by its signed callback or a
    poll: 202, then `GET /api/volts/purchases/{id}`); Volts are credited on confirmation
    only, once. 503 `payments_not_configured` when the server has no provider. The `sandbox`
    provider confirms at once and takes no money (`sandbox: true`). Honours `Idempotency-Key`."""
    result = _purchase_result(await _volts().purchase(access.principal().user_id, data.amount))
    return result, 200 if result.purchase.status == "confirmed" else 202


@blueprint.get("/purchases/<purchase_id>")
@access.token("payments:read")
@tag(["Volts"])
@error_responses(404)
@validate_response(PurchaseResultOut)
async def get_purchase(purchase_id: str) -> PurchaseResultOut:
    """One of the caller's purchases; a pending one is polled at its provider first (and
    credited, once, if the provider now says it is paid)."""
    purchase_id = uuid_param(purchase_id, "purchaseId")
    return _purchase_result(await _volts().purchase_status(access.principal().user_id, purchase_id))


@blueprint.post("/purchases/callback/<provider>")
@access.public
@tag(["Volts"])
@error_responses(401)
@validate_response(PurchaseOut)
async def purchase_callback(provider: str) -> PurchaseOut:
    """The payment provider's signed callback: confirms (and credits, once) or fails the
    purchase it names. A replayed confirmation credits nothing more. 401
    `invalid_signature` when the signature does not verify."""
    body = await request.get_data(cache=False)
    assert isinstance(body, bytes)
    headers = {name.lower(): value for name, value in request.headers.items()}  # HTTP names have no case
    return PurchaseOut(**await _volts().confirm_callback(provider, body, headers))


@blueprint.post("/send")
@idempotent
@access.token("payments:write")
@tag(["Volts"])
@validate_request(VoltSendBody)
@validate_response(MoneyOut)
@error_responses(404)
async def send(data: VoltSendBody) -> MoneyOut:
    """Send Volts to a creator: emits `channel.volts` (webhooks also `channel.cheer`).
    400 `insufficient_funds` when the wallet holds too little; 404 when no channel has the
    id `creatorId`. Honours `Idempotency-Key`."""
    creator_id = uuid_param(data.creatorId, "creatorId")
    balance, transaction = await _volts().send(access.principal().user_id, creator_id, data.amount, data.message)
    return _money(balance, transaction)


@blueprint.get("/leaderboard/<creator_id>")
@access.public
@tag(["Volts"])
@validate_querystring(LeaderQuery)
@validate_response(LeaderboardOut)
async def leaderboard(creator_id: str, query_args: LeaderQuery) -> LeaderboardOut:
    """Who sent the creator the most Volts."""
    creator_id = uuid_param(creator_id, "creatorId")
    board = await _volts().leaderboard(creator_id, query_args.limit)
    return LeaderboardOut(creatorId=creator_id, leaderboard=[LeaderOut(**row) for row in board])
