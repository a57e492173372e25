"""Channel points for tests: minted straight into a viewer's account, as watching would."""

from __future__ import annotations

from typing import Any

from volthub.persistence import ledger
from volthub.services.channel_points import points_account


async def mint_points(db: Any, channel_id: str, user_id: str, amount: int, kind: str = "test_grant") -> None:
    """`amount` points of `channel_id` for `user_id`, out of the ledger's mint."""
    await db.write(
        lambda tx: ledger.transfer(
            tx,
            currency="points",
            source=ledger.system_account("points", ledger.MINT, channel_id),
            destination=points_account(channel_id, user_id),
            amount=amount,
            kind=kind,
        )
    )


async def points_balance(client: Any, channel_id: str, viewer: Any) -> int:
    """The viewer's balance in `channel_id`, as the API reports it to them."""
    response = await client.get(f"/api/channel-points/{channel_id}/balance", headers=viewer.headers)
    assert response.status_code == 200
    return int((await response.get_json())["balance"])
