"""`volthub loadtest`: load-test the realtime hub, alone or side by side with references.

volthub loadtest --spawn --clients 2000 --channels 20 --rate 5 --duration 30 --check 'delivery.ratio>=0.999'
volthub loadtest --url http://127.0.0.1:8080 --tokens tokens.txt --scenario reconnect-storm --junit checks.xml
volthub loadtest --spawn --target volthub,python-socketio,node --server-cpus 0 --plot bench.png

Exit status: 0 every check held, 1 a check failed (or a run could not be measured), 2 a
usage error or a target that cannot be reached.
"""

from __future__ import annotations

import argparse
import logging
import resource
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

import trio

from volthub.cli import command, failed
from volthub.collector import GENERATOR_GEN0_THRESHOLD, tune_garbage_collector
from volthub.loadtest import checks, hold, report
from volthub.loadtest.options import configure, run_config, validate
from volthub.loadtest.runner import Run
from volthub.loadtest.scenario import RunConfig, Scenario
from volthub.loadtest.servers import SpawnedServer, make_workdir, plan_server, remove_accounts
from volthub.loadtest.targets import VOLTHUB_TARGETS, RemoteTargetRefused, TargetUnreachable, make_target


@command("loadtest", configure)
def loadtest(args: argparse.Namespace) -> int:
    """Load-test the realtime hub (Socket.IO, SSE), check the figures, compare with reference servers."""
    try:
        problem = validate(args)
    except (ValueError, OSError) as exc:  # a scenario, check or tokens file that does not parse
        problem = str(exc)
    if problem:
        return failed(problem, status=2)
    _raise_file_limit()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per chat send otherwise
    # The generator's own reads must not wait for full collections: with the default
    # thresholds they took a third of its CPU and doubled the latencies it measured.
    tune_garbage_collector(GENERATOR_GEN0_THRESHOLD)
    try:
        return trio.run(_main, args)
    except BaseException as exc:  # one line per failure, never a traceback of task groups
        leaves = list(_leaves(exc))
        if any(isinstance(leaf, (KeyboardInterrupt, SystemExit)) for leaf in leaves):
            raise
        unexpected = [leaf for leaf in leaves if not isinstance(leaf, _EXPECTED)]
        if unexpected:
            raise
        more = f" (and {len(leaves) - 1} more)" if len(leaves) > 1 else ""
        print(f"error: {leaves[0] or type(leaves[0]).__name__}{more}", file=sys.stderr)
        usage = (TargetUnreachable, RemoteTargetRefused, ValueError)
        return 2 if any(isinstance(leaf, usage) for leaf in leaves) else 1


# What a run may fail with, reported in a line: the rest is a bug and keeps its traceback.
_EXPECTED = (TargetUnreachable, RemoteTargetRefused, ValueError, RuntimeError, OSError, trio.TooSlowError)


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups; the exception itself otherwise."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _raise_file_limit() -> None:
    """Every client is a socket; spawned servers inherit the raised limit too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 20, hard))


async def _main(args: argparse.Namespace) -> int:
    """The runs (and holds) and their checks, cancelled cleanly by SIGINT or SIGTERM: spawned
    servers are in their own session (a terminal's Ctrl-C must not reach them first), so the
    harness stops them. A target that could not be measured is raised after the others were
    reported."""
    failures: list[str] = []
    held: bool | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cancel_on_signal, nursery.cancel_scope)
        held = await _runs(args, failures)
        nursery.cancel_scope.cancel()
    if held is None:
        raise RuntimeError("interrupted")
    if failures:
        raise RuntimeError("; ".join(failures))
    return 0 if held else 1


async def _cancel_on_signal(scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            print(f"\n{signal.Signals(signum).name}: stopping", file=sys.stderr)
            scope.cancel()
            return


async def _runs(args: argparse.Namespace, failures: list[str]) -> bool:
    """Each target's run, then (with --hold) each volthub target's hold, then the checks;
    `failures` gets what could not be measured. True when every check held."""
    workdir = make_workdir(args.workdir) if args.spawn else None
    results: list[dict[str, Any]] = []
    holds: list[dict[str, Any]] = []
    for name in args.target if args.plan.peak_clients else []:
        config = run_config(args, name)
        profile = args.profile
        if profile is not None and len(args.target) > 1:
            profile = profile.with_name(f"{profile.name}.{name}")
        # A hard bound on the whole run, whatever the server does.
        with trio.fail_after(config.seconds + 180):
            if args.spawn:
                assert workdir is not None
                try:
                    result = await _spawned_run(args, config, workdir, profile)
                except RuntimeError as exc:  # one server that does not start must not cost the others
                    failures.append(f"{name}: {exc}")
                    print(f"\n== {name} ==\nerror: {exc}", file=sys.stderr)
                    continue
            else:
                run = _run(args, config, args.url, args.ws_url, args.server_pid, profile)
                result = await run.execute()
                if run.provisioned:
                    result["notes"].append(
                        f"left {len(run.provisioned)} accounts lt_{run.state.run_tag}_* on the server (--keep)"
                    )
        results.append(result)
        print(f"\n== {name} ==\n{report.table([result])}")
        if len(result.get("stages", {})) > 1:
            print(f"\n== {name}: by stage ==\n{report.stages_table(result)}")
        if result.get("profile"):
            print(_profile_text(result["profile"]))
        sys.stdout.flush()
    if args.hold:
        for name in (name for name in args.target if name in VOLTHUB_TARGETS):
            if args.spawn:
                assert workdir is not None
                found = await _spawned_hold(args, name, workdir, failures)
            else:
                found = await _remote_hold(args, name, failures)
            if found is not None:
                holds.append(found)
                print(f"\n== {name}: hold ==\n{report.hold_text(found)}")
    return _summarise(args, results, workdir, holds)


def _hold_config(args: argparse.Namespace) -> hold.HoldConfig:
    return hold.HoldConfig(
        sockets=args.hold,
        seconds=args.hold_seconds,
        broadcast_every=args.hold_broadcast_every,
        processes=args.hold_processes,
        addresses=args.hold_addresses,
        connect_concurrency=args.connect_concurrency,
        connect_timeout=args.connect_timeout,
        ramp_timeout=args.ramp_timeout,
        restart_timeout=args.hold_restart_timeout,
        sio_path=args.sio_path,
        server_workers=args.server_workers if args.spawn else 1,
    )


def _hold_bound(args: argparse.Namespace) -> float:
    """A hard bound on one hold, whatever the server does."""
    restart: float = args.hold_restart_timeout + 60 if args.hold_restart else 0.0
    return float(args.ramp_timeout + args.hold_seconds + restart + 240)


async def _spawned_hold(
    args: argparse.Namespace, name: str, workdir: Path, failures: list[str]
) -> dict[str, Any] | None:
    plan = plan_server(
        name,
        workdir,
        database=args.database,
        cpus=args.server_cpus,
        extra_env=dict(args.server_env),
        workers=args.server_workers,
    )
    server = SpawnedServer(plan)
    try:
        await server.start()
    except RuntimeError as exc:
        failures.append(f"{name} (hold): {exc}")
        print(f"\n== {name}: hold ==\nerror: {exc}", file=sys.stderr)
        return None

    async def restart() -> hold.Restarted:
        # Its whole restart may take this long: a server still closing its sockets after the
        # stop's usual grace would be killed (the parent only: its workers would keep the port).
        await server.stop(grace=args.hold_restart_timeout)
        gone = time.monotonic()
        await server.start(timeout=args.hold_restart_timeout)
        return hold.Restarted(server.pid, gone)

    found: dict[str, Any] | None = None
    try:
        with trio.fail_after(_hold_bound(args)):
            found = await hold.hold(
                name,
                plan.url,
                plan.socket_url,
                server.pid,
                _hold_config(args),
                restart=restart if args.hold_restart else None,
                progress=None if args.quiet else sys.stderr,
            )
        found["command"] = plan.argv
    except (RuntimeError, trio.TooSlowError, OSError) as exc:
        failures.append(f"{name} (hold): {exc or type(exc).__name__}")
        print(f"\n== {name}: hold ==\nerror: {exc or type(exc).__name__}", file=sys.stderr)
        return None
    finally:
        await server.stop()
        if not args.keep:
            await remove_accounts(plan, args.database, found["accounts"] if found else None)
    return found


async def _remote_hold(args: argparse.Namespace, name: str, failures: list[str]) -> dict[str, Any] | None:
    """A hold against a running server (--url, --ws-url for the gateway, --server-pid for its
    figures from /proc and for --hold-restart)."""
    pid: int | None = args.server_pid

    async def restart() -> hold.Restarted:
        assert pid is not None
        return await hold.restart_by_signal(pid, args.url, args.hold_restart_timeout)

    try:
        with trio.fail_after(_hold_bound(args)):
            return await hold.hold(
                name,
                args.url,
                args.ws_url or args.url,
                pid,
                _hold_config(args),
                channel=args.channel_list[0] if args.channel_list else None,
                restart=restart if args.hold_restart else None,
                progress=None if args.quiet else sys.stderr,
            )
    except (RuntimeError, trio.TooSlowError, OSError) as exc:
        failures.append(f"{name} (hold): {exc or type(exc).__name__}")
        print(f"\n== {name}: hold ==\nerror: {exc or type(exc).__name__}", file=sys.stderr)
        return None


def _run(
    args: argparse.Namespace,
    config: RunConfig,
    url: str,
    socket_url: str | None,
    server_pid: int | None,
    profile: Path | None,
) -> Run:
    """`config`'s run against the server at `url` (its Socket.IO clients at `socket_url`, when
    elsewhere), reading the CPU and RSS of process `server_pid`."""
    return Run(
        config,
        make_target(config.target, url, socket_url),
        server_pid,
        progress=None if args.quiet else sys.stderr,
        profile=profile,
        profile_phase=args.profile_phase,
        channels=args.channel_list,
    )


async def _spawned_run(
    args: argparse.Namespace, config: RunConfig, workdir: Path, profile: Path | None
) -> dict[str, Any]:
    database = args.database if config.target in VOLTHUB_TARGETS else None
    plan = plan_server(
        config.target,
        workdir,
        database=database,
        cpus=args.server_cpus,
        extra_env=dict(args.server_env),
    )
    server = SpawnedServer(plan)
    if not args.quiet:
        print(f"starting {config.target}: {shlex.join(plan.argv)}", file=sys.stderr)
    await server.start()
    run: Run | None = None
    try:
        run = _run(args, config, plan.url, plan.socket_url, server.pid, profile)
        result = await run.execute()
    finally:
        await server.stop()
        if not args.keep and config.target in VOLTHUB_TARGETS:
            await remove_accounts(plan, database, [c.id for c in run.provisioned] if run else None)
    result["command"] = plan.argv
    result["notes"].extend(server.notes)
    result["provisioned"]["removed"] = not args.keep
    return result


def _summarise(
    args: argparse.Namespace, results: list[dict[str, Any]], workdir: Path | None, holds: list[dict[str, Any]]
) -> bool:
    """Print the comparison and the checks; write --json, --junit, --plot. True when every
    check held."""
    if len(results) > 1:
        print(f"\n== side by side ==\n{report.table(results)}")
        lines = report.ratios(results)
        if lines:
            print("\n== ratios (lower is better for volthub) ==\n" + "\n".join(lines))
    summaries = _summaries(results, holds)
    outcomes = []
    for summary in summaries:
        for check in _checks_for(args, summary):
            outcome = checks.evaluate(check, summary)
            outcome["target"] = summary["target"]
            summary.setdefault("checks", []).append(outcome)
            outcomes.append(outcome)
    held = checks.passed(outcomes)
    print(f"\n== checks ({_load(args)}): {checks.verdict(outcomes)} ==\n{checks.table(outcomes)}")
    if args.json:
        payload = {
            "argv": sys.argv,
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "scenario": {"name": args.plan.name, "description": args.plan.description},
            "passed": held,
            "checks": outcomes,
            "runs": summaries,
            "ratios": report.ratios(results),
        }
        report.write_json(args.json, payload)
        print(f"\nwrote {args.json}")
    if args.junit:
        checks.write_junit(args.junit, outcomes)
        print(f"wrote {args.junit}")
    if args.plot and results:
        title = (
            f"{args.plan.name}: {args.plan.peak_clients} clients, {args.plan.channels} channels, "
            f"{max(stage.rate for stage in args.plan.stages):g} msg/s, {args.plan.seconds:g} s"
        )
        report.plot(args.plot, results, title)
        print(f"wrote {args.plot}")
    if workdir is not None:
        print(f"server logs in {workdir}")
    return held


def _summaries(results: list[dict[str, Any]], holds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One summary per target: its run's figures, its figures over each reference server's
    under `vs` (volthub targets), and its hold under `hold`."""
    by_target: dict[str, dict[str, Any]] = {result["target"]: result for result in results}
    for subject, references in report.compared(results).items():
        by_target[subject]["vs"] = references
    for found in holds:
        by_target.setdefault(found["target"], {"target": found["target"]})["hold"] = found
    return list(by_target.values())


HOLD_CHECKS = (
    checks.Check("hold.disconnects", "==", 0, "no socket lost during the hold"),
    checks.Check("hold.connect_failures", "==", 0, "every held socket connects"),
    checks.Check("hold.broadcasts.missed", "==", 0, "every broadcast reaches every held socket"),
    checks.Check("hold.broadcasts.duplicates", "==", 0, "no broadcast reaches a socket twice"),
    checks.Check("hold.broadcasts.failed", "==", 0, "every broadcast is accepted"),
    checks.Check("hold.generator_failures", "==", 0, "no generator process failed"),
)
RESTART_CHECKS = (checks.Check("hold.restart.not_back", "==", 0, "every socket is back after the restart"),)


def _checks_for(args: argparse.Namespace, summary: dict[str, Any]) -> list[checks.Check]:
    """hold.* checks go to a target that held sockets, the others to a target that ran; the
    defaults (the scenario's, else DEFAULT_CHECKS, and HOLD_CHECKS) when no --check is given."""
    given = [check for check in args.checks if check.applies_to(summary["target"])]
    defaults = list(HOLD_CHECKS) + (list(RESTART_CHECKS) if args.hold_restart else [])
    holding = [check for check in given if check.key.startswith("hold.")] if args.check else defaults
    running = [check for check in given if not check.key.startswith("hold.")]
    return (running if "delivery" in summary else []) + (holding if "hold" in summary else [])


def _load(args: argparse.Namespace) -> str:
    parts = []
    plan: Scenario = args.plan
    if plan.peak_clients:
        channels = f"{plan.channels} channel{'' if plan.channels == 1 else 's'}"
        top = max(stage.rate for stage in plan.stages)
        parts.append(f"{plan.name}: {plan.peak_clients:,} clients, {channels}, {top:g} msg/s, {plan.seconds:g} s")
    if args.hold:
        parts.append(f"hold {args.hold:,} sockets for {args.hold_seconds:g} s")
    return "; ".join(parts)


def _profile_text(profile: dict[str, Any]) -> str:
    lines = [f"top functions by own time (% of {profile.get('samples', 0)} samples, all threads):"]
    lines += [f"  {share:5.1f}%  {frame}" for frame, share in profile.get("self", [])]
    lines.append("top functions including callees:")
    lines += [f"  {share:5.1f}%  {frame}" for frame, share in profile.get("inclusive", [])]
    return "\n".join(lines)
