-- Money ledgers: Volts and channel points, double entry.
-- Every movement is one ledger transaction = a debit row and a credit row in
-- ledger_entries, written in the database transaction that changes both balances.
-- A balance lives in ledger_accounts; the CHECK keeps every account but a mint (the
-- counterpart of money entering the platform) at zero or above, so even a bug in the
-- caller cannot overdraw. The debit itself is a guarded UPDATE (balance >= amount).
-- Portable SQL: runs on SQLite and PostgreSQL. Times are epoch milliseconds.

CREATE TABLE ledger_accounts (
    account TEXT PRIMARY KEY,
    currency TEXT NOT NULL,
    channel_id TEXT,
    holder_kind TEXT NOT NULL,
    holder TEXT NOT NULL,
    may_go_negative BOOLEAN NOT NULL DEFAULT FALSE,
    balance BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL,
    CHECK (may_go_negative OR balance >= 0)
);

CREATE INDEX ledger_accounts_by_balance ON ledger_accounts (currency, channel_id, holder_kind, balance);

CREATE TABLE ledger_entries (
    transaction_id TEXT NOT NULL,
    side TEXT NOT NULL CHECK (side IN ('debit', 'credit')),
    account TEXT NOT NULL REFERENCES ledger_accounts(account),
    counterparty TEXT NOT NULL,
    currency TEXT NOT NULL,
    amount BIGINT NOT NULL,
    balance_after BIGINT NOT NULL,
    kind TEXT NOT NULL,
    reference TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (transaction_id, side)
);

CREATE INDEX ledger_entries_by_account ON ledger_entries (account, created_at, transaction_id);
CREATE INDEX ledger_entries_by_reference ON ledger_entries (reference);
