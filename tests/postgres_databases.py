"""Test databases on PostgreSQL, each in the state of a fresh copy of the session's migrated
template, recycled rather than created and dropped for every test.

CREATE DATABASE copies every file of the template (system catalogs included, ~1,000 files)
and DROP DATABASE deletes them: ~0.1 s of the server's CPU on a quiet machine, up to ~0.6 s
(mostly the kernel's file work) once a run has created and deleted many. A database a test
has finished with is instead taken back at the next test's start:

- it is renamed first (which needs it unused: whatever is still connected to it is ended),
  so a process left over from the earlier test, which knows the old name, can never reach it;
- its definitions (tables, columns, indexes, constraints, triggers, functions, sequences,
  types, schemas, settings) must still be the template's, or it is dropped and a new copy
  made;
- every table that differs from the template's (in size, or in the planner's figures of it or
  of its indexes) is emptied and vacuumed back to no pages at all, gets the rows the
  migrations wrote copied back, and has its indexes rebuilt; the planner's figures are set
  back to the template's and its statistics removed; every sequence is set back to where the
  template's is;
- every table and index must then have the template's size and figures, or the database is
  dropped and a new copy made.

What is left is what a copy of the template has, down to the order rows come back in and
the plans the planner picks.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

USER_SCHEMAS = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'"

# Everything about a database's definitions that a test could change, as one digest.
FINGERPRINT = f"""
SELECT md5(coalesce(string_agg(item, E'\\n' ORDER BY item), '')) FROM (
  SELECT 'schema ' || n.nspname || ' ' || coalesce(n.nspacl::text, '') AS item
    FROM pg_namespace n WHERE {USER_SCHEMAS}
  UNION ALL SELECT 'relation ' || c.oid::regclass::text || ' ' || c.relkind::text || ' ' || c.relpersistence::text
      || ' ' || coalesce(c.relacl::text, '') || ' ' || coalesce(c.reloptions::text, '')
      || ' ' || c.relrowsecurity || ' ' || c.relforcerowsecurity || ' ' || c.relreplident::text
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {USER_SCHEMAS}
  UNION ALL SELECT 'column ' || a.attrelid::regclass::text || ' ' || a.attnum || ' ' || a.attname
      || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull || ' ' || a.attidentity::text
      || ' ' || a.attgenerated::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE {USER_SCHEMAS} AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL SELECT 'constraint ' || c.conrelid::regclass::text || ' ' || c.conname || ' '
      || pg_get_constraintdef(c.oid) || ' ' || c.convalidated
    FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE {USER_SCHEMAS}
  UNION ALL SELECT 'index ' || pg_get_indexdef(i.indexrelid) || ' ' || i.indisvalid
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE {USER_SCHEMAS}
  UNION ALL SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text
    FROM pg_trigger t WHERE NOT t.tgisinternal
  UNION ALL SELECT 'function ' || p.oid::regprocedure::text || ' ' || md5(coalesce(p.prosrc, ''))
      || ' ' || coalesce(p.proconfig::text, '')
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE {USER_SCHEMAS}
  UNION ALL SELECT 'sequence ' || s.seqrelid::regclass::text || ' ' || s.seqtypid || ' ' || s.seqstart
      || ' ' || s.seqincrement || ' ' || s.seqmax || ' ' || s.seqmin || ' ' || s.seqcache || ' ' || s.seqcycle
    FROM pg_sequence s
  UNION ALL SELECT 'type ' || t.oid::regtype::text || ' ' || t.typtype::text
      || ' ' || coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
                          FROM pg_enum e WHERE e.enumtypid = t.oid), '')
    FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE {USER_SCHEMAS}
  UNION ALL SELECT 'rule ' || r.ev_class::regclass::text || ' ' || r.rulename || ' ' || md5(r.ev_action::text)
    FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE {USER_SCHEMAS}
  UNION ALL SELECT 'policy ' || p.polrelid::regclass::text || ' ' || p.polname FROM pg_policy p
  UNION ALL SELECT 'extension ' || x.extname || ' ' || x.extversion FROM pg_extension x
  UNION ALL SELECT 'settings ' || coalesce(s.setconfig::text, '') FROM pg_db_role_setting s
    WHERE s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
  UNION ALL SELECT 'large objects ' || count(*) FROM pg_largeobject_metadata
  UNION ALL SELECT 'prepared transactions ' || count(*) FROM pg_prepared_xacts WHERE database = current_database()
) items
"""
# Each table and index: its table, its size, and the planner's figures of it.
RELATIONS = f"""
SELECT c.oid::regclass::text, coalesce(i.indrelid, c.oid)::regclass::text, pg_relation_size(c.oid),
       c.relpages, c.reltuples, c.relallvisible
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_index i ON i.indexrelid = c.oid
WHERE {USER_SCHEMAS} AND c.relkind IN ('r', 'i') ORDER BY 1
"""
STATISTICS = f"""
SELECT count(*) FROM pg_statistic s JOIN pg_class c ON c.oid = s.starelid
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {USER_SCHEMAS}
"""
_DELETE_STATISTICS = f"""
DELETE FROM pg_statistic s USING pg_class c, pg_namespace n
WHERE c.oid = s.starelid AND n.oid = c.relnamespace AND {USER_SCHEMAS}
"""
SEQUENCES = f"""
SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE {USER_SCHEMAS} AND c.relkind = 'S' ORDER BY 1
"""


def with_database(server_url: str, name: str) -> str:
    """`server_url` (a PostgreSQL URL) naming database `name` instead, query kept."""
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


Figures = tuple[str, int, int, float, int]  # (table, size, relpages, reltuples, relallvisible)


@dataclass
class Template:
    """What a fresh copy of the template holds besides its definitions."""

    name: str
    fingerprint: str
    relations: dict[str, Figures]  # each table and index
    rows: dict[str, bytes]  # table -> its rows (COPY text), for the tables that have any
    digests: dict[str, str]  # table -> digest of those rows in the order they are stored
    sequences: dict[str, tuple[int, bool]]  # sequence -> (last_value, is_called)
    statistics: int  # rows of planner statistics (ANALYZE) on its tables


def _relations(connection: Any) -> dict[str, Figures]:
    return {name: tuple(figures) for name, *figures in connection.execute(RELATIONS).fetchall()}  # type: ignore[misc]


def describe_template(server_url: str, name: str) -> Template:
    import psycopg

    with psycopg.connect(with_database(server_url, name), autocommit=True) as connection:
        fingerprint = connection.execute(FINGERPRINT).fetchone()[0]  # type: ignore[index]
        relations = _relations(connection)
        rows: dict[str, bytes] = {}
        for relation, (table, size, *_) in relations.items():
            if relation == table and size and connection.execute(f"SELECT EXISTS (SELECT FROM {table})").fetchone()[0]:  # type: ignore[index]
                with connection.cursor().copy(f"COPY {table} TO STDOUT") as copy:
                    rows[table] = b"".join(bytes(chunk) for chunk in copy)
        sequences = {
            sequence: tuple(connection.execute(f"SELECT last_value, is_called FROM {sequence}").fetchone())  # type: ignore[arg-type]
            for (sequence,) in connection.execute(SEQUENCES).fetchall()
        }
        digests = {table: _digest(connection, table) for table in rows}
        statistics = connection.execute(STATISTICS).fetchone()[0]  # type: ignore[index]
    return Template(name, fingerprint, relations, rows, digests, sequences, statistics)  # type: ignore[arg-type]


def _digest(connection: Any, table: str) -> str:
    return connection.execute(f"SELECT md5(string_agg(t::text, E'\\n' ORDER BY ctid)) FROM {table} t").fetchone()[0]  # type: ignore[no-any-return]


class RecycledDatabases:
    """Databases of one process (an xdist worker) in the state of fresh copies of `template`."""

    def __init__(self, server_url: str, template: Template) -> None:
        self.server_url = server_url
        self.template = template
        self.finished: list[str] = []  # given back by their tests, to be reset before reuse

    def take(self) -> str:
        """The name of a database in the state of a fresh copy of the template."""
        while self.finished:
            name = self._recycled(self.finished.pop())
            if name is not None:
                return name
        name = f"t_{secrets.token_hex(6)}"
        self._admin(f"CREATE DATABASE {name} TEMPLATE {self.template.name} STRATEGY WAL_LOG")
        return name

    def give_back(self, name: str) -> None:
        """`name` is done with: what is still connected to it is ended now (holding none of the
        server's connections meanwhile), the reset waits for the next test."""
        self._admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        self.finished.append(name)

    def drop_all(self) -> None:
        while self.finished:
            self.drop(self.finished.pop())

    def drop(self, name: str) -> None:
        self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def _admin(self, statement: str, params: Any = None) -> list[Any]:
        import psycopg

        with psycopg.connect(self.server_url, autocommit=True) as connection:
            cursor = connection.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    def _recycled(self, old: str) -> str | None:
        """`old` under a new name, reset; None (and dropped) when it cannot be."""
        import psycopg

        new = f"t_{secrets.token_hex(6)}"
        with psycopg.connect(self.server_url, autocommit=True) as connection:
            for _ in range(5):
                connection.execute(  # each ended connection is waited for, up to 5 s
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = %s", (old,)
                ).fetchall()
                try:
                    connection.execute(f"ALTER DATABASE {old} RENAME TO {new}")
                    break
                except psycopg.errors.ObjectInUse:
                    continue  # a connection came in between: end it too
            else:
                connection.execute(f"DROP DATABASE IF EXISTS {old} WITH (FORCE)")
                return None
        try:
            if self._reset(new):
                return new
        except psycopg.Error:
            pass
        self.drop(new)
        return None

    def _reset(self, name: str) -> bool:
        """Put database `name` back in the template's state; False when it cannot be."""
        import psycopg

        template = self.template
        if template.statistics:  # not ours to put back: every test gets a new copy
            return False
        with psycopg.connect(with_database(self.server_url, name), autocommit=True) as connection:
            if connection.execute(FINGERPRINT).fetchone()[0] != template.fingerprint:  # type: ignore[index]
                return False
            relations = _relations(connection)
            if relations.keys() != template.relations.keys():
                return False
            changed = sorted(
                {figures[0] for relation, figures in relations.items() if figures != template.relations[relation]}
                | {table for table, digest in template.digests.items() if _digest(connection, table) != digest}
            )
            with connection.transaction():
                # The rows go and come back as they were: no foreign-key checks or triggers.
                connection.execute("SET LOCAL session_replication_role = replica")
                for table in changed:
                    connection.execute(f"DELETE FROM {table}")
            if changed:
                connection.execute(f"VACUUM {', '.join(changed)}")  # no pages left: as if never written
            with connection.transaction():
                connection.execute("SET LOCAL session_replication_role = replica")
                for table in changed:
                    if connection.execute(f"SELECT pg_relation_size('{table}'::regclass)").fetchone()[0]:  # type: ignore[index]
                        return False  # a row VACUUM could not remove yet
                    if table in template.rows:
                        with connection.cursor().copy(f"COPY {table} FROM STDIN") as copy:
                            copy.write(template.rows[table])
                for sequence, (last_value, is_called) in template.sequences.items():
                    connection.execute("SELECT setval(%s::regclass, %s, %s)", (sequence, last_value, is_called))
            for table in changed:
                connection.execute(f"REINDEX TABLE {table}")
            with connection.transaction():
                for relation, figures in template.relations.items():
                    if figures[0] in changed:
                        connection.execute(
                            "UPDATE pg_class SET relpages = %s, reltuples = %s, relallvisible = %s WHERE oid = %s::regclass",
                            (*figures[2:], relation),
                        )
                connection.execute(_DELETE_STATISTICS)
            return _relations(connection) == template.relations


def scratch_databases(databases: RecycledDatabases) -> Iterator[str]:
    """A database for one test (its URL), given back afterwards."""
    name = databases.take()
    try:
        yield with_database(databases.server_url, name)
    finally:
        databases.give_back(name)
