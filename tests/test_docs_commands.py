"""The docs run as written: every `sh` block of README.md and of each page under docs/, in
order, against a server of the page's own.

The shell examples of a page are meant to be pasted, in order, into one bash terminal while
`make serve` (or `make demo`) runs in another. This test does the same, page by page:

- It works in a scratch stand-in for the repository root (every top-level entry of the
  checkout linked in, `.venv` pointing at the running interpreter's environment, a fresh
  `var/`), so `.venv/bin/volthub …`, `docs/examples/…` and `var/…` resolve as they do for a
  reader, and the server's `var/volthub.db` is a throw-away SQLite file.
- Each block runs in its own `bash` under `set -euo pipefail`. The shell variables and
  functions it defines are saved and loaded into the next block, as one terminal would keep
  them. The only substitutions are environment variables the docs read with a default:
  `BASE` (a free loopback port instead of 8080), `GATEWAY` (the Events API's own listener,
  instead of 8081), `RECEIVER_PORT`, `RTMP_PORT` and `PROXY_PORT`.
- `<!-- docs-test: skip (why) -->` before a block: not run (it blocks, downloads, or
  takes minutes). `<!-- docs-test: server (why) -->`: the block starts the server with
  `make serve` or `make demo`; the test runs it with `make` standing in for "(re)start the
  test's server with the `VOLTHUB_…` settings given to it" (`make demo` adds
  `--config config/demo.toml` and makes the demo certificates first, as the Makefile does).
- `<!-- docs-test: needs nginx-rtmp ffmpeg -->` anywhere in a page: its blocks need those
  programs; without them the page is skipped with that reason (and fails under CI).
- Programs a block leaves in the background are stopped at the end (each block is its own
  process group), whether the page's own `kill` ran or not.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from volthub.loadtest.servers import free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE_OPEN = re.compile(r"^```(\w*)\s*$")
DIRECTIVE = re.compile(r"^<!--\s*docs-test:\s*(\w+)\b\s*(?:\((.*)\))?\s*-->\s*$")
NEEDS = re.compile(r"^<!--\s*docs-test:\s*needs\s+([^(]*?)\s*-->\s*$", re.MULTILINE)
SHELL_LANGUAGES = {"sh", "bash", "shell", "console", "zsh"}
BLOCK_TIMEOUT = 60.0
SERVER_START_TIMEOUT = 90.0  # generous: a loaded CI machine starts several pages at once
MAX_SKIPPED = 12  # skipping is the exception: docs whose examples do not run are the bug
# What a page may declare it needs (`<!-- docs-test: needs ... -->`), and how to tell it is here.
PROGRAMS: dict[str, Callable[[], bool]] = {
    "nginx-rtmp": lambda: (
        Path("/usr/lib/nginx/modules/ngx_rtmp_module.so").exists()
        and bool(shutil.which("nginx") or Path("/usr/sbin/nginx").exists())
    ),
    "ffmpeg": lambda: shutil.which("ffmpeg") is not None,
    "nginx": lambda: bool(shutil.which("nginx") or Path("/usr/sbin/nginx").exists()),
    "redis": lambda: shutil.which("redis-server") is not None,
    "chromium": lambda: Path("/usr/bin/chromium").exists(),
}
PARALLEL_PAGES = 4  # pages run at once (each with its own server and ports)
INSTALL = "apt-get install nginx libnginx-mod-rtmp ffmpeg redis-server chromium"

# Runs one block inside the session: load what earlier blocks defined, run the block under
# strict mode, then save every variable and function it added (not the environment's).
WRAPPER = """\
__docs_known=" $(compgen -v | tr '\\n' ' ') "
if [ -f {state} ]; then source {state}; fi
set -euo pipefail
{prelude}
{block}
__docs_status=$?
set +euo pipefail
{{
  for __docs_name in $(compgen -v); do
    case "$__docs_known" in *" $__docs_name "*) continue ;; esac
    case "$__docs_name" in __docs_*) continue ;; esac
    declare -p "$__docs_name"
  done
  declare -f
}} > {state}.next && mv {state}.next {state}
exit $__docs_status
"""

# In a server block, `make serve` / `make demo` hands the test the settings it would start
# the server with (and `make demo` makes the demo certificates first, as the Makefile does).
MAKE_SHIM = """\
make() {{
  case "$*" in
    serve) ;;
    demo) docs/examples/demo_certs.sh var/demo ;;
    *) echo "docs-test: a server block may only run 'make serve' or 'make demo', not 'make $*'" >&2; return 2 ;;
  esac
  env -0 > {settings}
  echo "$*" > {settings}.target
}}
"""


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    directive: str | None  # "skip", "server" or None (run)
    reason: str = ""  # the directive's "(why)"


def page_blocks(markdown: str) -> list[Block]:
    """Every fenced block with its language and the docs-test directive right before it."""
    blocks: list[Block] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE_OPEN.match(lines[index])
        if opening is None:
            index += 1
            continue
        start = index
        index += 1
        while index < len(lines) and not lines[index].startswith("```"):
            index += 1
        previous = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        directive = DIRECTIVE.match(previous)
        body = "\n".join(lines[start + 1 : index])
        found = (directive.group(1), directive.group(2) or "") if directive else (None, "")
        blocks.append(Block(start + 1, opening.group(1), body, *found))
        index += 1
    return blocks


def shell_blocks(page: Path) -> list[Block]:
    return [block for block in page_blocks(page.read_text(encoding="utf-8")) if block.language == "sh"]


def page_needs(page: Path) -> list[str]:
    return [name for found in NEEDS.findall(page.read_text(encoding="utf-8")) for name in found.split()]


def name_of(page: Path) -> str:
    return str(page.relative_to(REPO))


RUNNABLE_PAGES = [page for page in PAGES if any(block.directive != "skip" for block in shell_blocks(page))]


def test_shell_blocks_of_every_page_follow_one_convention() -> None:
    problems: list[str] = []
    skipped: list[str] = []
    for page in PAGES:
        blocks = page_blocks(page.read_text(encoding="utf-8"))
        where = name_of(page)
        problems += [f"{where}:{b.line}: fence it as ```sh" for b in blocks if b.language in SHELL_LANGUAGES - {"sh"}]
        problems += [
            f"{where}:{b.line}: unknown directive {b.directive!r} (skip, server)"
            for b in blocks
            if b.directive not in (None, "skip", "server")
        ]
        problems += [
            f"{where}: needs {name!r}? known: {sorted(PROGRAMS)}" for name in page_needs(page) if name not in PROGRAMS
        ]
        sh = [b for b in blocks if b.language == "sh"]
        run = [b for b in sh if b.directive != "skip"]
        if any(b.directive == "server" for b in run) and run[0].directive != "server":
            problems.append(f"{where}:{run[0].line}: a page that uses a server starts it in its first shell block")
        problems += [
            f"{where}:{b.line}: say why: <!-- docs-test: skip (why) -->"
            for b in sh
            if b.directive == "skip" and not b.reason
        ]
        skipped += [f"{where}:{b.line} ({b.reason})" for b in sh if b.directive == "skip"]
    assert not problems, "\n".join(problems)
    print("shell blocks not run, and why:", *skipped, sep="\n  ")  # pytest -rP shows the list
    assert len(skipped) <= MAX_SKIPPED, f"too many shell blocks skipped by the test: {skipped}"


class Server:
    """`volthub serve` in the scratch root, as `make serve` runs it, on a free loopback port."""

    def __init__(self, root: Path, env: dict[str, str], port: int) -> None:
        self.root, self.env, self.port = root, env, port
        self.process: subprocess.Popen[bytes] | None = None
        self.log = root / "server.log"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, settings: dict[str, str], config: str | None = None) -> None:
        argv = [str(self.root / ".venv" / "bin" / "volthub"), "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        if config is not None:
            argv += ["--config", config]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                argv, cwd=self.root, env={**self.env, **settings}, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the server exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        pytest.fail(f"the server did not become ready in {SERVER_START_TIMEOUT} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log_tail(self, lines: int = 40) -> str:
        if not self.log.exists():
            return "(no server log)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


class Session:
    """The reader's second terminal: blocks run one after another, sharing their variables."""

    def __init__(self, root: Path, env: dict[str, str], server: Server) -> None:
        self.root, self.env, self.server = root, env, server
        self.state = root / ".docs-test-state.sh"
        self.process_groups: list[int] = []
        self.started = False

    def run(self, block: Block, prelude: str = "") -> tuple[int, str]:
        script = self.root / f".docs-test-block-{block.line}.sh"
        script.write_text(WRAPPER.format(state=self.state, prelude=prelude, block=block.text))
        output = self.root / f".docs-test-block-{block.line}.out"
        with output.open("wb") as sink:
            # Output goes to a file, not a pipe: a program the block leaves running in the
            # background keeps its copy of the descriptor, and a pipe would never close.
            process = subprocess.Popen(
                ["bash", str(script)],
                cwd=self.root,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.process_groups.append(process.pid)
            try:
                status = process.wait(timeout=BLOCK_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                status = -1
        return status, output.read_text(errors="replace")

    def run_server_block(self, block: Block) -> tuple[int, str]:
        settings_file = self.root / ".docs-test-settings"
        target_file = self.root / ".docs-test-settings.target"
        settings_file.unlink(missing_ok=True)
        target_file.unlink(missing_ok=True)
        status, output = self.run(block, prelude=MAKE_SHIM.format(settings=settings_file))
        if status != 0:
            return status, output
        if not settings_file.exists():
            return 1, output + "\n(docs-test: the server block never ran 'make serve' or 'make demo')"
        given = dict(item.split("=", 1) for item in settings_file.read_text().split("\0") if "=" in item)
        settings = {k: v for k, v in given.items() if k.startswith("VOLTHUB_") and self.env.get(k) != v}
        demo = target_file.read_text().strip() == "demo"
        self.server.stop()
        self.server.start(settings, config="config/demo.toml" if demo else None)
        started = f"make {'demo' if demo else 'serve'} with {settings or 'nothing more'}"
        return 0, output + f"\n(docs-test: server (re)started as {started})"

    def close(self) -> None:
        for group in self.process_groups:
            # Gone already when the block and everything it started have exited.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGTERM)


def scratch_root(tmp_path: Path) -> Path:
    """A stand-in for the repository root: the checkout linked in, its own var/, our venv."""
    venv = Path(sys.prefix)
    if not (venv / "bin" / "volthub").exists():
        pytest.fail(f"the docs use .venv/bin/volthub; this interpreter's environment {venv} has none")
    root = tmp_path / "repo"
    root.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in {".git", ".venv", "var"}:
            (root / entry.name).symlink_to(entry)
    (root / ".venv").symlink_to(venv)
    return root


def required_tools() -> None:
    missing = [tool for tool in ("bash", "curl", "openssl", "python3") if shutil.which(tool) is None]
    if missing:
        message = f"the docs' examples need {', '.join(missing)} (Debian: apt-get install curl openssl)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def missing_programs(page: Path) -> list[str]:
    return [name for name in page_needs(page) if not PROGRAMS[name]()]


def required_programs(page: Path) -> None:
    missing = missing_programs(page)
    if missing:
        message = f"{name_of(page)} needs {', '.join(missing)} (Debian: {INSTALL})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@contextlib.contextmanager
def session_for(tmp_path: Path) -> Iterator[Session]:
    root = scratch_root(tmp_path)
    # The reader's environment, less any volthub settings of the machine running the tests.
    env = {k: v for k, v in os.environ.items() if not (k.startswith("VOLTHUB_") and "__" in k)}
    gateway = free_port()
    # The gateway gets a free port too (make demo and the default config would use 8081).
    env["VOLTHUB_EVENTS__GATEWAY_PORT"] = str(gateway)
    rtmp = free_port()
    # ...and the RTMP address stream/setup hands out names the test's nginx port.
    env["VOLTHUB_INGEST__RTMP_URL"] = f"rtmp://127.0.0.1:{rtmp}/live"
    # Cheap password hashing: sign-ins are many and the docs do not test argon2's cost.
    env.update(VOLTHUB_AUTH__ARGON2_TIME_COST="1", VOLTHUB_AUTH__ARGON2_MEMORY_KIB="1024")
    server = Server(root, env, free_port())
    env.update(
        BASE=server.base,
        GATEWAY=f"http://127.0.0.1:{gateway}",
        RECEIVER_PORT=str(free_port()),
        RTMP_PORT=str(rtmp),
        PROXY_PORT=str(free_port()),  # the reverse-proxy page's nginx
    )
    running = Session(root, env, server)
    try:
        yield running
    finally:
        running.close()
        server.stop()


def test_the_session_keeps_shell_state_and_reports_failures(tmp_path: Path) -> None:
    """The runner itself: what one block defines the next sees, and failures are not lost."""
    running = Session(tmp_path, {"PATH": os.environ["PATH"]}, server=None)  # type: ignore[arg-type]
    try:
        first = Block(1, "sh", 'GREETING="hello world"\ncount_words() { echo $#; }\nexport SHARED=yes', None)
        assert running.run(first) == (0, "")
        second = Block(2, "sh", "count_words $GREETING\nbash -c 'echo \"$SHARED\"'", None)
        assert running.run(second) == (0, "2\nyes\n")
        # Under `set -e` a failing `a && b` list does not stop bash: its status must still count.
        assert running.run(Block(3, "sh", 'test "$GREETING" = other && echo same', None))[0] != 0
        assert running.run(Block(4, "sh", "false | cat\necho unreachable", None)) == (1, "")
        assert running.run(Block(5, "sh", "echo $UNSET_VARIABLE", None))[0] != 0
        background = Block(6, "sh", "sleep 600 > /dev/null 2>&1 &\necho $! > sleeper.pid", None)
        assert running.run(background)[0] == 0
    finally:
        running.close()
    sleeper = int((tmp_path / "sleeper.pid").read_text())
    for _ in range(100):  # SIGTERM was sent to its group; wait until it is gone
        try:
            os.kill(sleeper, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("close() left a block's background program running")


def run_page_in(page: Path, directory: Path) -> list[str]:
    with session_for(directory) as session:
        return run_page(page, session)


@pytest.fixture(scope="module")
def page_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Path, Any]]:
    """Every selected page's run, PARALLEL_PAGES at a time: each has its own server, ports and
    scratch root, and most of a page's time is spent waiting (servers starting, ffmpeg's real
    time, events arriving), so they overlap well."""
    required_tools()
    selected = [
        item.callspec.params["page"]
        for item in request.session.items
        if hasattr(item, "callspec") and "page" in item.callspec.params
    ]
    runnable = [page for page in selected if not missing_programs(page)]
    with ThreadPoolExecutor(PARALLEL_PAGES) as pool:
        yield {page: pool.submit(run_page_in, page, tmp_path_factory.mktemp("docs")) for page in runnable}


# page_runs starts every selected page at once: under pytest-xdist the module must run in one
# worker (`make test` deals out whole modules, --dist loadfile), or each would run them all.
@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=name_of)
def test_every_shell_block_of_the_page_runs_in_order(page: Path, page_runs: dict[Path, Any]) -> None:
    required_programs(page)
    print("\n".join(page_runs[page].result()))  # a failed block raises here, with its report


def run_page(page: Path, session: Session) -> list[str]:
    ran: list[int] = []
    log: list[str] = []
    for block in shell_blocks(page):
        if block.directive == "skip":
            log.append(f"--- {name_of(page)}:{block.line} skipped: {block.reason} ---")
            continue
        started = time.monotonic()
        if block.directive == "server":
            status, output = session.run_server_block(block)
        else:
            status, output = session.run(block)
        took = time.monotonic() - started
        if status != 0:
            pytest.fail(
                f"{name_of(page)} block at line {block.line} failed (exit {status}):\n"
                f"```sh\n{block.text}\n```\n--- its output ---\n{output}\n"
                f"--- blocks that passed before it: lines {ran} ---\n"
                f"--- server log (last lines) ---\n{session.server.log_tail()}",
                pytrace=False,
            )
        log.append(f"--- {name_of(page)}:{block.line} ({took:.1f} s) ---\n{output}")
        ran.append(block.line)
    assert ran, f"{name_of(page)} has no runnable shell block"
    return log
