"""What the harness's tools share in their tests: a bad option ends them before anything starts."""

from __future__ import annotations

from collections.abc import Callable

import pytest


def assert_usage_error(
    main: Callable[[list[str]], int], argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`main(argv)` exits 2 (argparse's usage error) and says `message` on stderr."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
