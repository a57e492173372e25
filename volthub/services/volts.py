"""Volts: the platform currency viewers buy and send.

Every movement is a ledger transfer (persistence/ledger.py) in the same transaction as the
event and notification it causes. Purchases are paid through a `PaymentProvider`
(services/payments.py): pending until the provider confirms, credited once on confirmation.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from volthub.config import VoltsSettings
from volthub.hub.clock import Clock, iso8601, to_ms
from volthub.hub.publisher import Emitter, EventPublisher
from volthub.persistence import Database, Tx, ledger
from volthub.persistence import purchases as purchases_repo
from volthub.persistence import users as users_repo
from volthub.persistence.ledger import InsufficientFunds
from volthub.persistence.pagination import decode_position, encode_cursor
from volthub.protocol import catalogue
from volthub.services.channels import ChannelNotFound, channel_by_id
from volthub.services.notifications import notify
from volthub.services.payments import (
    CONFIRMED,
    FAILED,
    PENDING,
    PROVIDERS,
    BadCallback,
    PaymentDeclined,
    PaymentProvider,
    PaymentsNotConfigured,
)

__all__ = ["InsufficientFunds", "PaymentDeclined", "PaymentsNotConfigured", "PurchaseNotFound", "SelfTransfer", "Volts"]

MINT = ledger.system_account("volts", "mint")
FEES = ledger.system_account("volts", "platform-fees")


class SelfTransfer(Exception):
    """A user tried to send Volts (or buy a subscription) to their own channel."""


class PurchaseNotFound(Exception):
    """No purchase of the caller's has that id."""


def wallet(user_id: str) -> str:
    return ledger.user_account("volts", user_id)


def open_wallet(tx: Tx, user_id: str, starting_balance: int, now_ms: int) -> None:
    """Give a wallet seen for the first time its starting balance (once: the account row)."""
    account = wallet(user_id)
    if starting_balance <= 0 or tx.one("SELECT 1 FROM ledger_accounts WHERE account = ?", (account,)):
        return
    ledger.transfer(
        tx,
        currency="volts",
        source=MINT,
        destination=account,
        amount=starting_balance,
        kind="starting_balance",
        now_ms=now_ms,
    )


def purchase_shape(purchase: purchases_repo.Purchase) -> dict[str, Any]:
    return {
        "id": purchase.id,
        "amount": purchase.amount,
        "provider": purchase.provider,
        "status": purchase.status,
        "sandbox": purchase.provider == "sandbox",
        "checkoutUrl": purchase.checkout_url,
        "transactionId": purchase.transaction_id,
        "createdAt": iso8601(purchase.created_at),
        "resolvedAt": iso8601(purchase.resolved_at) if purchase.resolved_at is not None else None,
    }


def transaction_shape(entry: ledger.Entry, people: dict[str, users_repo.User] | None = None) -> dict[str, Any]:
    """A wallet transaction as the API shows it, from the wallet's side."""
    counterparty = ledger.parse_account(entry.counterparty)
    other = counterparty.holder if counterparty.holder_kind == "user" else None
    provider = entry.reference.split("_", 1)[0] if entry.kind == "purchase" and entry.reference else None
    shape: dict[str, Any] = {
        "id": entry.transaction_id,
        "type": entry.kind,
        "direction": "in" if entry.amount > 0 else "out",
        "amount": entry.amount,
        "balance": entry.balance_after,
        "counterpartyId": other,
        "reference": entry.reference,
        "provider": provider,
        "sandbox": provider == "sandbox",
        "createdAt": iso8601(entry.created_at),
    }
    person = (people or {}).get(other) if other is not None else None
    shape["counterparty"] = (
        None
        if person is None
        else {"userId": person.id, "username": person.username, "displayName": person.display_name}
    )
    return shape


def _people(tx: Tx, entries: list[ledger.Entry]) -> dict[str, users_repo.User]:
    """The users on the other side of `entries`, by id."""
    ids = {ledger.parse_account(e.counterparty).holder for e in entries}
    return {uid: user for uid in ids if (user := users_repo.get_by_id(tx, uid)) is not None}


class Volts:
    def __init__(
        self,
        database: Database,
        publisher: EventPublisher,
        clock: Clock,
        settings: VoltsSettings,
        provider: PaymentProvider | None = None,
    ) -> None:
        self._db = database
        self._publisher = publisher
        self._clock = clock
        self._settings = settings
        if provider is None and settings.payment_provider:
            if settings.payment_provider not in PROVIDERS:
                raise ValueError(f"[volts] payment_provider: no provider named {settings.payment_provider!r}")
            provider = PROVIDERS[settings.payment_provider]()
        self._provider = provider

    @property
    def starting_balance(self) -> int:
        return self._settings.starting_balance

    async def balance(self, user_id: str) -> int:
        def read(tx: Tx) -> int:
            exists = tx.one("SELECT 1 FROM ledger_accounts WHERE account = ?", (wallet(user_id),))
            return ledger.balance(tx, wallet(user_id)) if exists else self._settings.starting_balance

        return await self._db.read(read)

    async def purchase(self, user_id: str, amount: int) -> tuple[int, dict[str, Any] | None, dict[str, Any]]:
        """Record a pending purchase, ask the provider to charge it, and credit it if the
        provider confirms at once: (balance, transaction or None, purchase)."""
        provider = self._provider
        if provider is None:
            raise PaymentsNotConfigured()
        purchase_id = str(uuid.uuid4())
        now = self.now_ms()
        await self._db.write(lambda tx: purchases_repo.create(tx, purchase_id, user_id, amount, provider.name, now))
        try:
            charge = await provider.begin(purchase_id, user_id, amount)
        except PaymentDeclined:
            now = self.now_ms()
            await self._db.write(lambda tx: purchases_repo.resolve(tx, purchase_id, FAILED, now))
            raise
        await self._db.write(
            lambda tx: purchases_repo.set_reference(tx, purchase_id, charge.reference, charge.checkout_url)
        )
        return await self._settle(purchase_id, charge.status)

    async def purchase_status(
        self, user_id: str, purchase_id: str
    ) -> tuple[int, dict[str, Any] | None, dict[str, Any]]:
        """The caller's purchase; a pending one is polled at its provider first (and
        credited if the provider now says it is paid)."""
        found = await self._db.read(lambda tx: purchases_repo.get(tx, purchase_id))
        if found is None or found.user_id != user_id:
            raise PurchaseNotFound(purchase_id)
        status = found.status
        if status == PENDING and found.reference and self._provider and self._provider.name == found.provider:
            status = await self._provider.poll(found.reference)
        return await self._settle(purchase_id, status)

    async def confirm_callback(self, provider_name: str, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        """A provider's signed callback: confirm (or fail) the purchase it names, once."""
        provider = self._provider
        if provider is None or provider.name != provider_name:
            raise BadCallback("no such payment provider is configured")
        reference, status = provider.verify_callback(body, headers)
        found = await self._db.read(lambda tx: purchases_repo.by_reference(tx, provider_name, reference))
        if found is None:
            raise BadCallback("the callback names no purchase")
        return (await self._settle(found.id, status))[2]

    async def _settle(self, purchase_id: str, status: str) -> tuple[int, dict[str, Any] | None, dict[str, Any]]:
        """Apply the provider's `status` to a purchase: a pending one is confirmed and
        credited (or failed) in one transaction, guarded so it happens once."""

        def change(tx: Tx, emitter: Emitter) -> tuple[int, dict[str, Any] | None, dict[str, Any]]:
            found = purchases_repo.get(tx, purchase_id)
            assert found is not None
            user_id = found.user_id
            if status in (CONFIRMED, FAILED) and purchases_repo.resolve(tx, purchase_id, status, emitter.now_ms):
                if status == CONFIRMED:
                    open_wallet(tx, user_id, self._settings.starting_balance, emitter.now_ms)
                    transaction_id = ledger.transfer(
                        tx,
                        currency="volts",
                        source=MINT,
                        destination=wallet(user_id),
                        amount=found.amount,
                        kind="purchase",
                        reference=f"{found.provider}_{found.id}",
                        now_ms=emitter.now_ms,
                    )
                    purchases_repo.set_transaction(tx, purchase_id, transaction_id)
                found = purchases_repo.get(tx, purchase_id)
                assert found is not None
            exists = tx.one("SELECT 1 FROM ledger_accounts WHERE account = ?", (wallet(user_id),))
            balance = ledger.balance(tx, wallet(user_id)) if exists else self._settings.starting_balance
            transaction = self._mine(tx, found.transaction_id, user_id)[1] if found.transaction_id else None
            return balance, transaction, purchase_shape(found)

        return await self._publisher.write(change)

    async def send(
        self, sender_id: str, creator_id: str, amount: int, message: str | None
    ) -> tuple[int, dict[str, Any]]:
        """Move `amount` from the sender's wallet to the creator's (less the platform fee)."""
        if sender_id == creator_id:
            raise SelfTransfer()

        def change(tx: Tx, emitter: Emitter) -> tuple[int, dict[str, Any]]:
            creator = channel_by_id(tx, creator_id)
            sender = users_repo.get_by_id(tx, sender_id)
            if sender is None:
                raise ChannelNotFound(sender_id)
            now = emitter.now_ms
            open_wallet(tx, sender_id, self._settings.starting_balance, now)
            open_wallet(tx, creator_id, self._settings.starting_balance, now)
            fee = amount * self._settings.platform_fee_percent // 100
            reference = str(uuid.uuid4())
            transaction_id = (
                ledger.transfer(
                    tx,
                    currency="volts",
                    source=wallet(sender_id),
                    destination=wallet(creator_id),
                    amount=amount - fee,
                    kind="send",
                    reference=reference,
                    now_ms=now,
                )
                if amount > fee
                else None
            )
            if fee:
                fee_id = ledger.transfer(
                    tx,
                    currency="volts",
                    source=wallet(sender_id),
                    destination=FEES,
                    amount=fee,
                    kind="platform_fee",
                    reference=reference,
                    now_ms=now,
                )
                transaction_id = transaction_id or fee_id
            assert transaction_id is not None
            at = iso8601(now)
            who = catalogue.Person.of(sender)
            emitter.emit(
                creator_id,
                "channel.volts",
                catalogue.channel_volts(sender=who, amount=amount, message=message, sent_at=at),
            )
            notify(
                tx,
                creator_id,
                "volts.received",
                "Volts received",
                f"{sender.display_name} sent you {amount} Volts",
                {**who.fields(), "amount": amount, "message": message, "creatorId": creator.id},
                now,
            )
            return self._mine(tx, transaction_id, sender_id)

        return await self._publisher.write(change)

    def _mine(self, tx: Tx, transaction_id: str, user_id: str) -> tuple[int, dict[str, Any]]:
        entries = [e for e in ledger.entries_of_transaction(tx, transaction_id) if e.account == wallet(user_id)]
        return ledger.balance(tx, wallet(user_id)), transaction_shape(entries[0], _people(tx, entries[:1]))

    async def transactions(
        self, user_id: str, limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        before = decode_position(cursor) if cursor else None

        def read(tx: Tx) -> tuple[list[ledger.Entry], dict[str, users_repo.User]]:
            entries = ledger.entries_of(tx, wallet(user_id), before=before, limit=limit + 1)
            return entries, _people(tx, entries)

        entries, people = await self._db.read(read)
        more = len(entries) > limit
        entries = entries[:limit]
        next_cursor = encode_cursor(entries[-1].created_at, entries[-1].transaction_id) if more else None
        return [transaction_shape(e, people) for e in entries], next_cursor

    async def leaderboard(self, creator_id: str, limit: int) -> list[dict[str, Any]]:
        """Who sent the creator the most Volts, all time."""

        def read(tx: Tx) -> list[dict[str, Any]]:
            channel_by_id(tx, creator_id)
            rows = tx.execute(
                "SELECT counterparty, SUM(amount) AS total FROM ledger_entries"
                " WHERE account = ? AND side = 'credit' AND kind = 'send'"
                " GROUP BY counterparty ORDER BY total DESC, counterparty LIMIT ?",
                (wallet(creator_id), limit),
            )
            board = []
            for rank, row in enumerate(rows, start=1):
                user = users_repo.get_by_id(tx, ledger.parse_account(row["counterparty"]).holder)
                if user is None:
                    continue
                board.append(
                    {
                        "rank": rank,
                        "userId": user.id,
                        "username": user.username,
                        "displayName": user.display_name,
                        "amount": int(row["total"]),
                    }
                )
            return board

        return await self._db.read(read)

    def now_ms(self) -> int:
        return to_ms(self._clock.now())
