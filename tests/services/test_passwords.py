"""Password hashing: what an unknown user's login is verified against."""

from __future__ import annotations

import argon2
import pytest

from volthub.services.passwords import Passwords, unmatchable_hash


@pytest.mark.parametrize("time_cost, memory_kib", [(1, 1024), (3, 8192)])
def test_the_unknown_users_hash_has_the_parameters_of_a_real_one(time_cost: int, memory_kib: int) -> None:
    # Same parameters: verifying against it costs what verifying against a real hash does.
    hasher = argon2.PasswordHasher(time_cost=time_cost, memory_cost=memory_kib, parallelism=1)
    made = unmatchable_hash(hasher)
    assert argon2.extract_parameters(made) == argon2.extract_parameters(hasher.hash("a password"))
    assert not hasher.check_needs_rehash(made)
    with pytest.raises(argon2.exceptions.VerifyMismatchError):  # hashed and compared, not refused as malformed
        hasher.verify(made, "a password")
    assert made != unmatchable_hash(hasher)  # a salt of its own each time


async def test_no_password_matches_the_unknown_users_hash() -> None:
    passwords = Passwords(time_cost=1, memory_kib=1024)
    for password in ("", "volthub-timing-equaliser", "a password"):
        assert await passwords.verify(None, password) is False
    real = await passwords.hash("a password")
    assert await passwords.verify(real, "a password") is True
    assert await passwords.verify(real, "another") is False
