"""A PostgreSQL group's writes in lockstep: one round trip per step for the whole group.

A group of keyed writes (one per channel, in one transaction) used to cost a round trip per
statement of every write, one after another: a send is four statements, so a group of
sixteen sends was sixty-four round trips, each a wait for the server and a hand-over of the
interpreter lock between the group's thread and the event loop. Here each write runs in a
greenlet of its own, and its `Tx.execute` hands the statement to the runner instead of
sending it: the runner sends every write's next statement together (psycopg's pipeline
mode: one flush, one wait), then gives each write its result and collects the next ones. A
group of sends is then four round trips, whatever its size.

The writes of a group are interleaved statement by statement in the one transaction. At
each step the statements of one text go together, in the writes' key order (every keyed
write's first statement is its channel's lock), so the channels' locks are still taken in
one order. A write sees the statements the others ran before its own at each step (as
concurrent transactions would see each other's commits, or less), which is what keyed
writes are written for: each keeps to its own channel's rows, or to statements that are
atomic on their own (a guarded UPDATE).

What lockstep does not give, the group gets one write after another instead: a write that
asks for a savepoint (whose rollback would undo the others' statements after it), and a
statement that fails in a pipeline (where the statements after it are aborted too, and which
write it belonged to is told reliably only by running them one at a time). The runner
raises `RunOneAfterAnother` then, having rolled nothing back: the caller does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import greenlet
import outcome
import psycopg

from volthub.persistence.database import Params, Row, Savepoint, Tx
from volthub.persistence.group_commit import QueuedCall

_ROWS = psycopg.pq.ExecStatus.TUPLES_OK  # a result that has rows (even none of them)


class RunOneAfterAnother(Exception):
    """The group cannot run in lockstep: roll back and run its writes one after another."""


class _Statement:
    """One write's next statement, waiting for its step."""

    __slots__ = ("sql", "params", "many")

    def __init__(self, sql: str, params: Any, many: bool) -> None:
        self.sql = sql
        self.params = params
        self.many = many


class LockstepTx(Tx):
    """The `Tx` a write gets in lockstep: each statement goes to the runner (the greenlet
    that started the write), which resumes the write with its rows."""

    dialect = "postgresql"

    def __init__(self, runner: greenlet.greenlet, to_pyformat: Callable[[str], str]) -> None:
        self._runner = runner
        self._to_pyformat = to_pyformat

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        text = self._to_pyformat(sql) if params else sql  # without parameters: sent as is
        rows: list[Row] = self._runner.switch(_Statement(text, tuple(params), many=False))
        return rows

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None:
        self._runner.switch(_Statement(self._to_pyformat(sql), [tuple(row) for row in rows], many=True))

    def savepoint(self) -> Savepoint:
        raise RunOneAfterAnother("a savepoint in a grouped write")


class _Running:
    """A write under way: its greenlet and the statement it waits on."""

    __slots__ = ("job", "glet", "waiting")

    def __init__(self, job: QueuedCall[Any], glet: greenlet.greenlet) -> None:
        self.job = job
        self.glet = glet
        self.waiting: _Statement | None = None


def run_in_lockstep(
    connection: psycopg.Connection[Row], group: list[QueuedCall[Any]], to_pyformat: Callable[[str], str]
) -> QueuedCall[Any] | None:
    """Run the (key-sorted) group's writes in lockstep in the transaction `connection` is
    in. Returns None when every write ran (each has its result), or the first write that
    raised (its error kept; what the group ran must be rolled back, and the others run
    again). Raises `RunOneAfterAnother` as the module says."""
    runner = greenlet.getcurrent()
    running: list[_Running] = []
    try:
        for job in group:
            state = _Running(job, greenlet.greenlet(job.fn))
            running.append(state)
            if _resume(state, LockstepTx(runner, to_pyformat)):
                return job
        while True:
            waiting = [state for state in running if state.waiting is not None]
            if not waiting:
                return None
            results = _step(connection, [state.waiting for state in waiting])  # type: ignore[misc]
            for state, rows in zip(waiting, results, strict=True):
                if _resume(state, rows):
                    return state.job
    finally:
        for state in running:  # a write left half-way (the group is abandoned): unwind it here
            if not state.glet.dead:
                state.glet.throw(greenlet.GreenletExit)


def _resume(state: _Running, value: Any) -> bool:
    """Run the write on to its next statement or its end; True when it raised (its error
    is its result then). A write that asks for what lockstep cannot give stops the group."""
    try:
        next_step = state.glet.switch(value)
    except RunOneAfterAnother:
        raise
    except BaseException as exc:
        state.waiting = None
        state.job.result = outcome.Error(exc)
        return True
    if state.glet.dead:
        state.waiting = None
        state.job.result = outcome.Value(next_step)
    else:
        state.waiting = next_step
    return False


def _step(connection: psycopg.Connection[Row], statements: list[_Statement]) -> list[list[Row]]:
    """Every waiting write's next statement in one round trip; their rows, in order. The
    writes' statements of one text (each write's channel lock, say) go as one `executemany`,
    in the writes' key order: psycopg then prepares and adapts the text once, not once per
    write."""
    alike: dict[str, list[int]] = {}  # statements with parameters, by text
    others: list[int] = []  # batches, and statements without parameters
    for index, statement in enumerate(statements):
        if statement.params and not statement.many:
            alike.setdefault(statement.sql, []).append(index)
        else:
            others.append(index)
    rows: list[list[Row]] = [[] for _ in statements]
    sent: list[tuple[psycopg.Cursor[Row], list[int]]] = []
    try:
        if len(statements) == 1:  # nothing to pipeline
            cursor = connection.cursor()
            sent.append((cursor, [0]))
            _send(cursor, statements[0])
            return [rows_of(cursor)]
        failure: psycopg.Error | None = None
        with connection.pipeline() as pipeline:
            try:
                for sql, indexes in alike.items():
                    cursor = connection.cursor()
                    sent.append((cursor, indexes))
                    if len(indexes) == 1:
                        cursor.execute(sql, statements[indexes[0]].params)
                    else:
                        cursor.executemany(sql, [statements[index].params for index in indexes], returning=True)
                for index in others:
                    cursor = connection.cursor()
                    sent.append((cursor, [index]))
                    _send(cursor, statements[index])
                pipeline.sync()
                for cursor, indexes in sent:
                    for nth, index in enumerate(indexes):
                        if nth:
                            cursor.nextset()
                        rows[index] = rows_of(cursor)
            except psycopg.Error as exc:
                # Raised once the pipeline is left: raised inside it, the pipeline's exit
                # would log the aborted rest of it as a warning besides.
                failure = exc
        if failure is not None:
            raise failure
        return rows
    except psycopg.Error as exc:
        # Which write the statement was is told by running them one at a time; a lost
        # connection fails that rollback, and every caller hears it.
        raise RunOneAfterAnother(f"a statement failed in a pipeline: {exc.sqlstate}") from None
    finally:
        for cursor, _ in sent:
            cursor.close()


def _send(cursor: psycopg.Cursor[Row], statement: _Statement) -> None:
    if statement.many:
        cursor.executemany(statement.sql, statement.params)
    elif statement.params:
        cursor.execute(statement.sql, statement.params)
    else:
        cursor.execute(statement.sql)


def rows_of(cursor: psycopg.Cursor[Row]) -> list[Row]:
    """The rows of the cursor's result; none for a statement without a result set. Told by
    the result's status, not `cursor.description`, which builds a Column per field on every
    call (6 us for ten fields, a fifth of a short statement's CPU)."""
    result = cursor.pgresult
    return cursor.fetchall() if result is not None and result.status == _ROWS else []
