"""How a migration script is split into statements."""

from __future__ import annotations

from volthub.persistence.migrate import statements


def test_a_script_splits_on_semicolons_at_line_ends_but_not_inside_a_function_body() -> None:
    script = """-- a comment; with a semicolon
CREATE TABLE a (x INTEGER);
CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1;
    RETURN NEW; END
$$;
INSERT INTO a VALUES (1);
"""
    assert statements(script) == [
        "CREATE TABLE a (x INTEGER)",
        "CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n    PERFORM 1;\n    RETURN NEW; END\n$$",
        "INSERT INTO a VALUES (1)",
    ]
