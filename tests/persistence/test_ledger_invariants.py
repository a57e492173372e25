"""Money invariants of persistence/ledger.py, checked by a hypothesis state machine.

Random mints, transfers between users, escrow in and out (the shape of prediction bets)
and overdraft attempts; after every step: the sum of the ledger equals the sum of the
balances (both zero per currency), each balance equals its entries, no account but a mint
is negative, and every balance equals the model's.
"""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from volthub.persistence import Database, Tx, ledger
from volthub.persistence.ledger import InsufficientFunds

USERS = 4
amounts = st.integers(min_value=1, max_value=500)
people = st.integers(min_value=0, max_value=USERS - 1)


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self, db: Database) -> None:
        super().__init__()
        self.db = db
        # Fresh ids per run: the database is shared by all runs of one test.
        self.channel = str(uuid.uuid4())
        self.volts = [ledger.user_account("volts", str(uuid.uuid4())) for _ in range(USERS)]
        self.points = [ledger.user_account("points", str(uuid.uuid4()), self.channel) for _ in range(USERS)]
        self.escrow = ledger.system_account("points", f"prediction:{uuid.uuid4()}", self.channel)
        # The Volts mint is platform-wide, shared by earlier runs: start from its balance.
        volts_mint = ledger.system_account("volts", "mint")
        self.model: dict[str, int] = {volts_mint: db.run_sync(lambda tx: ledger.balance(tx, volts_mint))}

    def _move(self, currency: str, source: str, destination: str, amount: int) -> bool:
        def run(tx: Tx) -> bool:
            try:
                ledger.transfer(tx, currency=currency, source=source, destination=destination, amount=amount, kind="t")
            except InsufficientFunds:
                return False  # committed anyway: a refused transfer must have written nothing
            return True

        moved = self.db.run_sync(run)
        held = self.model.get(source, 0)
        may_overdraw = ledger.parse_account(source).may_go_negative
        assert moved == (may_overdraw or held >= amount)
        if moved:
            self.model[source] = held - amount
            self.model[destination] = self.model.get(destination, 0) + amount
        return moved

    @rule(who=people, amount=amounts)
    def buy_volts(self, who: int, amount: int) -> None:
        self._move("volts", ledger.system_account("volts", "mint"), self.volts[who], amount)

    @rule(who=people, amount=amounts)
    def earn_points(self, who: int, amount: int) -> None:
        self._move("points", ledger.system_account("points", "mint", self.channel), self.points[who], amount)

    @rule(giver=people, taker=people, amount=amounts)
    def send_volts(self, giver: int, taker: int, amount: int) -> None:
        if giver != taker:
            self._move("volts", self.volts[giver], self.volts[taker], amount)

    @rule(who=people, amount=amounts)
    def bet(self, who: int, amount: int) -> None:
        self._move("points", self.points[who], self.escrow, amount)

    @rule(who=people, amount=amounts)
    def pay_out(self, who: int, amount: int) -> None:
        self._move("points", self.escrow, self.points[who], amount)

    @invariant()
    def sum_of_ledger_equals_sum_of_balances(self) -> None:
        totals = self.db.run_sync(ledger.totals, write=False)
        for entries, balances in totals.values():
            assert entries == balances == 0

    @invariant()
    def every_balance_is_its_entries_and_the_model(self) -> None:
        def check(tx: Tx) -> None:
            assert ledger.mismatched_accounts(tx) == []
            negative = tx.execute("SELECT account FROM ledger_accounts WHERE balance < 0 AND holder <> 'mint'")
            assert negative == []
            for account, expected in self.model.items():
                assert ledger.balance(tx, account) == expected

        self.db.run_sync(check, write=False)


async def test_money_invariants_hold(db: Database) -> None:
    # Synchronous steps (run_sync) inside the trio test: the machine drives one connection.
    run_state_machine_as_test(
        lambda: LedgerMachine(db),
        settings=settings(
            max_examples=25,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
