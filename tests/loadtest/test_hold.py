"""The hold's plan: what the server's open-file limit allows, and how many generator processes."""

from __future__ import annotations

from volthub.loadtest import hold

LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            20000                20000                files
Max locked memory         8388608              8388608              bytes
"""


def test_open_files_limit_from_proc() -> None:
    assert hold.open_files_limit(LIMITS) == 20000
    assert hold.open_files_limit(LIMITS.replace("20000                20000", "unlimited unlimited")) is None
    assert hold.open_files_limit("") is None


def test_the_hold_is_capped_by_the_servers_fd_limit_and_says_why() -> None:
    plan = hold.plan_hold(20_000, 0, server_fd_limit=20_000, server_fds_open=40, own_limit=20_000)
    assert plan.sockets == 20_000 - hold.SERVER_RESERVE
    assert plan.requested == 20_000 and plan.server_fd_limit == 20_000
    assert plan.note and "20,000" in plan.note and f"{plan.sockets:,}" in plan.note
    assert plan.processes == 1, "the generator's limit fits them"
    spread = hold.plan_hold(20_000, 0, server_fd_limit=20_000, server_fds_open=40, own_limit=9_000)
    assert spread.processes == 3, "8,900 sockets per generator process at most"


def test_a_hold_that_fits_is_not_capped() -> None:
    plan = hold.plan_hold(5_000, 0, server_fd_limit=20_000, server_fds_open=40, own_limit=20_000)
    assert (plan.sockets, plan.processes, plan.note) == (5_000, 1, None)
    assert hold.plan_hold(5_000, 4, None, 0, 20_000).processes == 4, "asked for more processes: given"
    assert hold.plan_hold(5_000, 1, None, 0, 1_100).processes == 5, "1,000 sockets per process at most"


def test_split_spreads_the_sockets_evenly() -> None:
    assert hold.split(10, 3) == [4, 3, 3]
    assert hold.split(2, 4) == [1, 1, 0, 0]
    assert sum(hold.split(19_860, 2)) == 19_860
