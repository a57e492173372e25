"""Interactive control: polls, predictions, giveaways,
goals, timers and subathons.

Three doors, one behaviour: every write is a command to the channel's actor
(volthub/hub/components/{polls,predictions,giveaways,goals,timers}.py), which checks the
rules, stores the change, posts the chat card and emits the event in one transaction.
- `/api/integrations/oauth/...` for integrations (reads `channel:read`, writes
  `channel:interactive:write`, 60/min), on the token owner's channel;
- `/api/dashboard/...`, the same paths for the owner's own dashboard (first-party tokens);
- `/api/streams/:username/...`: public reads, owner writes, and the viewers'
  vote, join and bet.
The bodies are validated by the same models whichever door is used, and the components
check the same limits again (a command may come from elsewhere, e.g. a chat bot).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator
from quart import Blueprint, request
from quart_schema import RequestSchemaValidationError, tag, validate_request, validate_response

from volthub.http import access
from volthub.http.blueprints.chat import chat_hub, hub_for
from volthub.http.errors import ApiError
from volthub.http.params import uuid_param
from volthub.http.ratelimit import limited
from volthub.http.runtime import Runtime, runtime
from volthub.http.schemas import Body, ErrorBody, Model, PersonOut
from volthub.hub import interactive_store as reads
from volthub.hub.clock import to_ms
from volthub.hub.components import giveaways, goals, polls, predictions, timers
from volthub.hub.interactive_feed import InteractiveFeed
from volthub.hub.registry import ActorRegistry

READ_SCOPE = "channel:read"
WRITE_SCOPE = "channel:interactive:write"

# --- shapes ----------------------------------------------------------------------------------


class PollOptionOut(Model):
    id: str
    title: str
    votes: int


class PollOut(Model):
    id: str
    title: str
    status: Literal["open", "ended"]
    options: list[PollOptionOut]
    totalVotes: int
    startedAt: str
    endsAt: str
    endedAt: str | None
    durationSeconds: int


class PollEnvelope(Model):
    poll: PollOut | None


class PredictionOutcomeOut(Model):
    id: str
    title: str
    users: int
    points: int


class PredictionOut(Model):
    id: str
    title: str
    status: Literal["open", "locked", "resolved", "cancelled"]
    outcomes: list[PredictionOutcomeOut]
    totalPoints: int
    windowSeconds: int
    startedAt: str
    locksAt: str
    lockedAt: str | None
    endedAt: str | None
    winningOutcomeId: str | None


class PredictionEnvelope(Model):
    prediction: PredictionOut | None


class GiveawayOut(Model):
    id: str
    title: str
    status: Literal["open", "closed"]
    subscribersOnly: bool
    entries: int
    winners: list[PersonOut]
    startedAt: str
    endsAt: str | None
    endedAt: str | None


class GiveawayEnvelope(Model):
    giveaway: GiveawayOut | None


class GoalOut(Model):
    id: str
    type: Literal["followers", "subscriptions", "volts", "custom"]
    title: str
    current: int
    target: int
    completed: bool
    period: Literal["stream", "day", "week", "month", "none"]
    periodStartedAt: str
    periodEndsAt: str | None
    status: Literal["in_progress", "completed"]


class GoalEnvelope(Model):
    goal: GoalOut


class GoalsOut(Model):
    goals: list[GoalOut]


class SubathonOut(Model):
    secondsPerSub: float
    secondsPerGift: float
    secondsPerVolt: float


class TimerOut(Model):
    id: str
    title: str
    status: Literal["running", "paused", "ended"]
    durationSeconds: int
    remainingSeconds: int
    endsAt: str | None
    subathon: SubathonOut | None


class TimerEnvelope(Model):
    timer: TimerOut


class TimersOut(Model):
    timers: list[TimerOut]


class VoteOut(Model):
    success: bool
    pollId: str
    optionId: str


class JoinOut(Model):
    success: bool
    giveawayId: str


class BetOut(Model):
    success: bool
    predictionId: str
    outcomeId: str
    points: int = Field(description="the caller's whole bet on this prediction")
    balance: int = Field(description="the caller's channel points left")


class PollBody(Body):
    title: str = Field(min_length=1, max_length=polls.TITLE_MAX)
    options: list[str] = Field(min_length=polls.OPTIONS_MIN, max_length=polls.OPTIONS_MAX)
    durationSeconds: int = Field(ge=polls.DURATION_MIN, le=polls.DURATION_MAX)

    _title = field_validator("title")(classmethod(lambda cls, v: polls.check_title(v)))
    _options = field_validator("options")(classmethod(lambda cls, v: polls.check_options(v)))


class VoteBody(Body):
    optionId: str = Field(min_length=1, max_length=64)


class PredictionBody(Body):
    title: str = Field(min_length=1, max_length=predictions.TITLE_MAX)
    outcomes: list[str] = Field(min_length=predictions.OUTCOMES_MIN, max_length=predictions.OUTCOMES_MAX)
    windowSeconds: int = Field(ge=predictions.WINDOW_MIN, le=predictions.WINDOW_MAX)

    _title = field_validator("title")(classmethod(lambda cls, v: predictions.check_title(v)))
    _outcomes = field_validator("outcomes")(classmethod(lambda cls, v: predictions.check_outcomes(v)))


class ResolveBody(Body):
    winningOutcomeId: str = Field(min_length=1, max_length=64)


class BetBody(Body):
    outcomeId: str = Field(min_length=1, max_length=64)
    points: int = Field(ge=1, le=predictions.BET_MAX)


class GiveawayBody(Body):
    title: str = Field(min_length=1, max_length=giveaways.TITLE_MAX)
    durationSeconds: int | None = Field(
        None, ge=giveaways.DURATION_MIN, le=giveaways.DURATION_MAX, description="Closes by itself after this long."
    )
    subscribersOnly: bool = False

    _title = field_validator("title")(classmethod(lambda cls, v: giveaways.check_title(v)))


class DrawBody(Body):
    count: int = Field(1, ge=1, le=giveaways.DRAW_MAX)


class GoalBody(Body):
    type: Literal["followers", "subscriptions", "volts", "custom"]
    title: str = Field(min_length=1, max_length=goals.TITLE_MAX)
    target: int = Field(gt=0, le=goals.AMOUNT_MAX)
    period: Literal["stream", "day", "week", "month", "none"] = "none"

    _title = field_validator("title")(classmethod(lambda cls, v: goals.check_title(v)))


class AdjustBody(Body):
    delta: int = Field(ge=-goals.AMOUNT_MAX, le=goals.AMOUNT_MAX, description="Non-zero; the count never goes below 0.")

    _delta = field_validator("delta")(classmethod(lambda cls, v: goals.check_delta(v)))


class TargetBody(Body):
    target: int = Field(gt=0, le=goals.AMOUNT_MAX)


class SubathonIn(Body):
    secondsPerSub: float = Field(0, ge=0, le=timers.SUBATHON_RATE_MAX)
    secondsPerGift: float = Field(0, ge=0, le=timers.SUBATHON_RATE_MAX, description="Per gifted subscription.")
    secondsPerVolt: float = Field(0, ge=0, le=timers.SUBATHON_RATE_MAX)


class TimerBody(Body):
    title: str | None = Field(None, min_length=1, max_length=timers.TITLE_MAX)
    durationSeconds: int = Field(ge=timers.DURATION_MIN, le=timers.DURATION_MAX)
    subathon: SubathonIn | None = None

    @field_validator("title")
    @classmethod
    def _title(cls, value: str | None) -> str | None:
        return None if value is None else timers.check_title(value)

    def command(self) -> timers.StartTimer:
        subathon = None
        if self.subathon is not None:
            s = self.subathon
            subathon = timers.Subathon(float(s.secondsPerSub), float(s.secondsPerGift), float(s.secondsPerVolt))
        return timers.StartTimer(self.durationSeconds, self.title, subathon)


class AddTimeBody(Body):
    seconds: int = Field(ge=-timers.ADD_MAX, le=timers.ADD_MAX, description="Non-zero; negative takes time away.")

    _seconds = field_validator("seconds")(classmethod(lambda cls, v: timers.check_added(v)))


# --- the hub ---------------------------------------------------------------------------------


def _hub() -> ActorRegistry:
    return chat_hub()  # the one registry of the process


async def run_interactive_feed(rt: Runtime) -> None:
    """App service: goals and subathon timers follow the platform's events."""
    await InteractiveFeed(rt.bus, hub_for(rt)).run()


def _now_ms(rt: Runtime) -> int:
    return to_ms(rt.clock.now())


async def _call(channel_id: str, command: Any) -> Any:
    return await _hub().call(channel_id, command)


def _poll(poll: polls.Poll | None) -> PollEnvelope:
    return PollEnvelope(poll=None if poll is None else PollOut(**poll.as_api()))


def _prediction(prediction: predictions.Prediction | None) -> PredictionEnvelope:
    return PredictionEnvelope(prediction=None if prediction is None else PredictionOut(**prediction.as_api()))


def _giveaway(giveaway: giveaways.Giveaway | None) -> GiveawayEnvelope:
    return GiveawayEnvelope(giveaway=None if giveaway is None else GiveawayOut(**giveaway.as_api()))


def _timer(view: dict[str, Any]) -> TimerEnvelope:
    return TimerEnvelope(timer=TimerOut(**view))


async def _draw_count() -> int:
    """The draw body is optional (`{count}` defaults to 1)."""
    data = await request.get_json() if await request.get_data() else None  # broken JSON: 400
    try:
        return DrawBody.model_validate(data if data is not None else {}).count
    except ValidationError as exc:
        raise RequestSchemaValidationError(exc) from None


# --- the owner's operations, mounted twice: OAuth and the first-party dashboard ---------------

CONFLICTS = "409: `already_active` (another one is open) or `invalid_state` (details.status is the current one)."


def _owner_routes(blueprint: Blueprint, read: Callable[[Any], Any], write: Callable[[Any], Any], label: str) -> None:
    """Each operation on the caller's own channel. `read`/`write` declare the access."""

    def me() -> str:
        return access.principal().user_id

    def conflicts(fn: Any) -> Any:
        return validate_response(ErrorBody, 404)(validate_response(ErrorBody, 409)(fn))

    # -- polls --

    @blueprint.get("/polls/active")
    @read
    @tag([label])
    @validate_response(PollEnvelope, 200)
    async def active_poll() -> PollEnvelope:
        """The open poll of the caller's channel with its votes so far, or `{poll: null}`."""
        rt = runtime()
        return _poll(await rt.db.read(lambda tx: reads.read_active_poll(tx, me())))

    @blueprint.post("/polls")
    @write
    @limited("interactive")
    @tag([label])
    @validate_request(PollBody)
    @validate_response(PollEnvelope, 201)
    @conflicts
    async def start_poll(data: PollBody) -> tuple[PollEnvelope, int]:
        """Start a poll: `{title (1–100), options: [2–5 distinct strings of 1–50], durationSeconds
        (15–1800)}`. Emits `channel.poll.begin` and posts a `poll-begin` chat card. It ends by itself
        at `endsAt` (one `channel.poll.end`), or earlier through `POST polls/:id/end`. One open poll
        per channel: 409 `already_active`."""
        poll = await _call(me(), polls.StartPoll(data.title, tuple(data.options), data.durationSeconds))
        return _poll(poll), 201

    @blueprint.post("/polls/<poll_id>/end")
    @write
    @limited("interactive")
    @tag([label])
    @validate_response(PollEnvelope, 200)
    @conflicts
    async def end_poll(poll_id: str) -> PollEnvelope:
        """End the open poll now with its final votes (`channel.poll.end`, `poll-end` card).
        An ended poll: 409 `invalid_state` with `details.status: "ended"`; unknown: 404."""
        return _poll(await _call(me(), polls.EndPoll(uuid_param(poll_id, "pollId"))))

    # -- predictions --

    @blueprint.get("/predictions/active")
    @read
    @tag([label])
    @validate_response(PredictionEnvelope, 200)
    async def active_prediction() -> PredictionEnvelope:
        """The open or locked prediction with the points on each outcome, or `{prediction: null}`."""
        rt = runtime()
        return _prediction(await rt.db.read(lambda tx: reads.read_active_prediction(tx, me())))

    @blueprint.post("/predictions")
    @write
    @limited("interactive")
    @tag([label])
    @validate_request(PredictionBody)
    @validate_response(PredictionEnvelope, 201)
    @conflicts
    async def start_prediction(data: PredictionBody) -> tuple[PredictionEnvelope, int]:
        """Open a prediction: `{title (1–100), outcomes: [2–10 distinct strings of 1–50],
        windowSeconds (30–1800)}`. States: `open → locked → resolved`, `open | locked →
        cancelled`. Bets (channel points) are taken while open; at `locksAt` it locks by itself
        (`channel.prediction.lock`). One open or locked prediction per channel."""
        command = predictions.StartPrediction(data.title, tuple(data.outcomes), data.windowSeconds)
        return _prediction(await _call(me(), command)), 201

    @blueprint.post("/predictions/<prediction_id>/lock")
    @write
    @limited("interactive")
    @tag([label])
    @validate_response(PredictionEnvelope, 200)
    @conflicts
    async def lock_prediction(prediction_id: str) -> PredictionEnvelope:
        """Stop taking bets: open → locked (`channel.prediction.lock`). Other states: 409 `invalid_state`."""
        return _prediction(await _call(me(), predictions.LockPrediction(uuid_param(prediction_id, "predictionId"))))

    @blueprint.post("/predictions/<prediction_id>/resolve")
    @write
    @limited("interactive")
    @tag([label])
    @validate_request(ResolveBody)
    @validate_response(PredictionEnvelope, 200)
    @conflicts
    async def resolve_prediction(prediction_id: str, data: ResolveBody) -> PredictionEnvelope:
        """Resolve with `{winningOutcomeId}` from `locked`, or from `open` (which locks first:
        `channel.prediction.lock`, then `channel.prediction.end`). The escrow pays the winners pro
        rata — floor(bet × pool ÷ winning pool), the rounding remainder one point each to the
        largest winning bets (then the earlier bet) — so the escrow ends at exactly 0; with no
        bet on the winning outcome everyone is refunded. Unknown outcome: 400 `invalid_outcome`."""
        command = predictions.ResolvePrediction(uuid_param(prediction_id, "predictionId"), data.winningOutcomeId)
        return _prediction(await _call(me(), command))

    @blueprint.post("/predictions/<prediction_id>/cancel")
    @write
    @limited("interactive")
    @tag([label])
    @validate_response(PredictionEnvelope, 200)
    @conflicts
    async def cancel_prediction(prediction_id: str) -> PredictionEnvelope:
        """Cancel an open or locked prediction: every bet is refunded in full, atomically
        (`channel.prediction.end` with `status: "cancelled"`). Resolved or cancelled: 409."""
        return _prediction(await _call(me(), predictions.CancelPrediction(uuid_param(prediction_id, "predictionId"))))

    # -- giveaways --

    @blueprint.get("/giveaways/active")
    @read
    @tag([label])
    @validate_response(GiveawayEnvelope, 200)
    async def active_giveaway() -> GiveawayEnvelope:
        """The open giveaway with its entry count, or `{giveaway: null}`."""
        rt = runtime()
        return _giveaway(await rt.db.read(lambda tx: reads.read_active_giveaway(tx, me())))

    @blueprint.post("/giveaways")
    @write
    @limited("interactive")
    @tag([label])
    @validate_request(GiveawayBody)
    @validate_response(GiveawayEnvelope, 201)
    @conflicts
    async def start_giveaway(data: GiveawayBody) -> tuple[GiveawayEnvelope, int]:
        """Open a giveaway: `{title (1–100), durationSeconds? (10–86400), subscribersOnly?}`.
        States: `open → closed`. With a duration it closes by itself. Emits
        `channel.giveaway.begin` and posts a `giveaway-begin` card. One open giveaway per channel."""
        command = giveaways.StartGiveaway(data.title, data.durationSeconds, data.subscribersOnly)
        return _giveaway(await _call(me(), command)), 201

    @blueprint.post("/giveaways/<giveaway_id>/draw")
    @write
    @limited("interactive")
    @tag([label])
    @validate_response(GiveawayEnvelope, 200)
    @conflicts
    async def draw_giveaway(giveaway_id: str) -> GiveawayEnvelope:
        """Draw `{count? (1–50, default 1)}` winners uniformly among the entrants who have not
        won (nobody wins twice). On an open giveaway the draw closes it: one
        `channel.giveaway.end` with the winners. On a closed one it draws more winners (a
        re-roll) with a `giveaway-draw` card and no event. Nobody left: 409 `no_eligible_entries`."""
        count = await _draw_count()
        return _giveaway(await _call(me(), giveaways.Draw(uuid_param(giveaway_id, "giveawayId"), count)))

    @blueprint.post("/giveaways/<giveaway_id>/end")
    @write
    @limited("interactive")
    @tag([label])
    @validate_response(GiveawayEnvelope, 200)
    @conflicts
    async def end_giveaway(giveaway_id: str) -> GiveawayEnvelope:
        """Close an open giveaway without drawing (`channel.giveaway.end` with the winners so far).
        Closed: 409 `invalid_state`."""
        return _giveaway(await _call(me(), giveaways.EndGiveaway(uuid_param(giveaway_id, "giveawayId"))))

    # -- goals --

    @blueprint.get("/goals")
    @read
    @tag([label])
    @validate_response(GoalsOut, 200)
    async def list_goals() -> GoalsOut:
        """The channel's goals, oldest first."""
        rt = runtime()
        found = await rt.db.read(lambda tx: reads.read_goals(tx, me()))
        return GoalsOut(goals=[GoalOut(**goal.as_api()) for goal in found])

    @blueprint.post("/goals")
    @write
    @limited("interactive")
    @tag([label])
    @validate_request(GoalBody)
    @validate_response(GoalEnvelope, 201)
    @validate_response(ErrorBody, 409)
    async def create_goal(data: GoalBody) -> tuple[GoalEnvelope, int]:
        """Create a goal `{type: followers|subscriptions|volts|custom, title (1–100), target (> 0),
        period?: stream|day|week|month|none (default none)}`. Follows, subscriptions (1 per
        subscription, the quantity per gift) and Volts (the amount) move matching goals by
        themselves. `period` is when the count starts over: `stream` when the channel goes live,
        `day`/`week` (Monday)/`month` at 00:00 UTC, `none` never. `channel.goal.progress` on each
        change; `channel.goal.completed` the first time the target is reached in a period. At
        most 50 goals: 409 `too_many_goals`."""
        goal = await _call(me(), goals.CreateGoal(data.type, data.title, data.target, data.period))
        return GoalEnvelope(goal=GoalOut(**goal.as_api())), 201

    @blueprint.post("/goals/<goal_id>/adjust")
    @write
    @limited("interactive")
    @tag([label])
    @validate_request(AdjustBody)
    @validate_response(GoalEnvelope, 200)
    @validate_response(ErrorBody, 404)
    async def adjust_goal(goal_id: str, data: AdjustBody) -> GoalEnvelope:
        """Add `{delta}` (non-zero, may be negative; the count stops at 0)."""
        goal = await _call(me(), goals.AdjustGoal(uuid_param(goal_id, "goalId"), data.delta))
        return GoalEnvelope(goal=GoalOut(**goal.as_api()))

    @blueprint.post("/goals/<goal_id>/target")
    @write
    @limited("interactive")
    @tag([label])
    @validate_request(TargetBody)
    @validate_response(GoalEnvelope, 200)
    @validate_response(ErrorBody, 404)
    async def target_goal(goal_id: str, data: TargetBody) -> GoalEnvelope:
        """Change the target `{target (> 0)}`; reaching it this way completes the goal too."""
        goal = await _call(me(), goals.SetGoalTarget(uuid_param(goal_id, "goalId"), data.target))
        return GoalEnvelope(goal=GoalOut(**goal.as_api()))

    @blueprint.post("/goals/<goal_id>/reset")
    @write
    @limited("interactive")
    @tag([label])
    @validate_response(GoalEnvelope, 200)
    @validate_response(ErrorBody, 404)
    async def reset_goal(goal_id: str) -> GoalEnvelope:
        """Set the count to 0 and let the goal complete again in this period."""
        goal = await _call(me(), goals.ResetGoal(uuid_param(goal_id, "goalId")))
        return GoalEnvelope(goal=GoalOut(**goal.as_api()))

    # -- timers --

    @blueprint.get("/timers")
    @read
    @tag([label])
    @validate_response(TimersOut, 200)
    async def list_timers() -> TimersOut:
        """The channel's timers, newest first (at most 100), with their remaining time now."""
        rt = runtime()
        found = await rt.db.read(lambda tx: reads.read_timers(tx, me()))
        now = _now_ms(rt)
        return TimersOut(timers=[TimerOut(**timer.as_api(now)) for timer in found])

    @blueprint.post("/timers")
    @write
    @limited("interactive")
    @tag([label])
    @validate_request(TimerBody)
    @validate_response(TimerEnvelope, 201)
    @validate_response(ErrorBody, 409)
    async def start_timer(data: TimerBody) -> tuple[TimerEnvelope, int]:
        """Start a timer (running): `{title? (1–100), durationSeconds (1–604800), subathon?:
        {secondsPerSub, secondsPerGift, secondsPerVolt}}`. States and operations: pause
        running → paused; resume paused → running; end running|paused → ended; add-time
        running|paused; reset restores durationSeconds (running stays running, paused stays
        paused, ended runs again). A running timer reaching zero ends by itself. Each change
        emits one `channel.timer.update`, never per tick. A subathon timer gains its
        configured seconds per subscription, per gifted subscription and per Volt by itself.
        At most 20 running or paused timers: 409 `too_many_timers`."""
        return _timer(await _call(me(), data.command())), 201

    def timer_operation(operation: str) -> None:
        async def operate(timer_id: str) -> TimerEnvelope:
            return _timer(await _call(me(), timers.TimerOperation(uuid_param(timer_id, "timerId"), operation)))

        operate.__name__ = f"{operation}_timer"
        operate.__doc__ = (
            f"`{operation}` the timer (see `POST timers` for the states); "
            "a state that does not allow it: 409 `invalid_state` with `details.status`."
        )
        view = conflicts(validate_response(TimerEnvelope, 200)(operate))
        view = write(limited("interactive")(tag([label])(view)))
        blueprint.post(f"/timers/<timer_id>/{operation}")(view)

    for name in timers.OPERATIONS:
        timer_operation(name)

    @blueprint.post("/timers/<timer_id>/add-time")
    @write
    @limited("interactive")
    @tag([label])
    @validate_request(AddTimeBody)
    @validate_response(TimerEnvelope, 200)
    @conflicts
    async def add_time(timer_id: str, data: AddTimeBody) -> TimerEnvelope:
        """Add `{seconds}` (non-zero, ±604800) to a running or paused timer; taking it to zero or
        below ends it. Ended: 409 `invalid_state`."""
        return _timer(await _call(me(), timers.AddTime(uuid_param(timer_id, "timerId"), data.seconds)))


oauth_blueprint = Blueprint("interactive", __name__, url_prefix="/api/integrations/oauth")
_owner_routes(oauth_blueprint, access.token(READ_SCOPE), access.token(WRITE_SCOPE), "Interactive control")

dashboard_blueprint = Blueprint("dashboard_interactive", __name__, url_prefix="/api/dashboard")
_owner_routes(dashboard_blueprint, access.first_party, access.first_party, "Dashboard")


# --- by channel username ------------------------------------------------------------

streams_blueprint = Blueprint("stream_interactive", __name__, url_prefix="/api/streams/<username>")


async def _channel(username: str) -> str:
    user = await runtime().services.users.by_username(username)
    if user is None:
        raise ApiError(404, "not_found", "channel not found", {"username": username})
    return user.id


async def _owned(username: str) -> str:
    channel_id = await _channel(username)
    if channel_id != access.principal().user_id:
        raise ApiError(403, "channel_not_owned", "only the channel's owner may do this", {"username": username})
    return channel_id


@streams_blueprint.get("/polls/active")
@access.public
@tag(["Polls and giveaways"])
@validate_response(PollEnvelope, 200)
@validate_response(ErrorBody, 404)
async def stream_active_poll(username: str) -> PollEnvelope:
    """The channel's open poll with its votes so far, or `{poll: null}`."""
    channel_id = await _channel(username)
    return _poll(await runtime().db.read(lambda tx: reads.read_active_poll(tx, channel_id)))


@streams_blueprint.post("/polls")
@access.token(WRITE_SCOPE)
@limited("interactive")
@tag(["Polls and giveaways"])
@validate_request(PollBody)
@validate_response(PollEnvelope, 201)
@validate_response(ErrorBody, 409)
async def stream_start_poll(username: str, data: PollBody) -> tuple[PollEnvelope, int]:
    """Start a poll in your own channel (as `POST /api/integrations/oauth/polls`)."""
    channel_id = await _owned(username)
    return _poll(await _call(channel_id, polls.StartPoll(data.title, tuple(data.options), data.durationSeconds))), 201


@streams_blueprint.post("/polls/<poll_id>/vote")
@access.token()
@tag(["Polls and giveaways"])
@validate_request(VoteBody)
@validate_response(VoteOut, 200)
@validate_response(ErrorBody, 404)
@validate_response(ErrorBody, 409)
async def vote(username: str, poll_id: str, data: VoteBody) -> VoteOut:
    """Vote `{optionId}` in the channel's open poll, once per user (409 `already_voted`). An
    ended poll: 409 `invalid_state`; an option not of this poll: 400 `invalid_option`; banned
    or timed out: 403 `banned`. Votes emit no event."""
    channel_id = await _channel(username)
    pid = uuid_param(poll_id, "pollId")
    option = await _call(channel_id, polls.Vote(pid, access.principal().user_id, data.optionId))
    return VoteOut(success=True, pollId=pid, optionId=option)


@streams_blueprint.post("/polls/<poll_id>/end")
@access.token(WRITE_SCOPE)
@limited("interactive")
@tag(["Polls and giveaways"])
@validate_response(PollEnvelope, 200)
@validate_response(ErrorBody, 409)
async def stream_end_poll(username: str, poll_id: str) -> PollEnvelope:
    """End the open poll of your own channel now."""
    channel_id = await _owned(username)
    return _poll(await _call(channel_id, polls.EndPoll(uuid_param(poll_id, "pollId"))))


@streams_blueprint.get("/giveaways/active")
@access.public
@tag(["Polls and giveaways"])
@validate_response(GiveawayEnvelope, 200)
@validate_response(ErrorBody, 404)
async def stream_active_giveaway(username: str) -> GiveawayEnvelope:
    """The channel's open giveaway, or `{giveaway: null}`."""
    channel_id = await _channel(username)
    return _giveaway(await runtime().db.read(lambda tx: reads.read_active_giveaway(tx, channel_id)))


@streams_blueprint.post("/giveaways")
@access.token(WRITE_SCOPE)
@limited("interactive")
@tag(["Polls and giveaways"])
@validate_request(GiveawayBody)
@validate_response(GiveawayEnvelope, 201)
@validate_response(ErrorBody, 409)
async def stream_start_giveaway(username: str, data: GiveawayBody) -> tuple[GiveawayEnvelope, int]:
    """Open a giveaway in your own channel (as `POST /api/integrations/oauth/giveaways`)."""
    channel_id = await _owned(username)
    command = giveaways.StartGiveaway(data.title, data.durationSeconds, data.subscribersOnly)
    return _giveaway(await _call(channel_id, command)), 201


@streams_blueprint.post("/giveaways/<giveaway_id>/join")
@access.token("user:write")
@tag(["Polls and giveaways"])
@validate_response(JoinOut, 200)
@validate_response(ErrorBody, 404)
@validate_response(ErrorBody, 409)
async def join_giveaway(username: str, giveaway_id: str) -> JoinOut:
    """Enter the channel's open giveaway, once (409 `already_entered`). Subscribers-only
    giveaways take active subscribers only (403 `subscribers_only`); the broadcaster cannot
    enter (403 `cannot_enter_own`); banned or timed out: 403 `banned`; closed: 409
    `invalid_state`. Entries emit no event."""
    channel_id = await _channel(username)
    gid = uuid_param(giveaway_id, "giveawayId")
    await _call(channel_id, giveaways.Enter(gid, access.principal().user_id))
    return JoinOut(success=True, giveawayId=gid)


@streams_blueprint.post("/giveaways/<giveaway_id>/draw")
@access.token(WRITE_SCOPE)
@limited("interactive")
@tag(["Polls and giveaways"])
@validate_response(GiveawayEnvelope, 200)
@validate_response(ErrorBody, 409)
async def stream_draw_giveaway(username: str, giveaway_id: str) -> GiveawayEnvelope:
    """Draw winners in your own channel's giveaway (as the OAuth `giveaways/:id/draw`)."""
    channel_id = await _owned(username)
    count = await _draw_count()
    return _giveaway(await _call(channel_id, giveaways.Draw(uuid_param(giveaway_id, "giveawayId"), count)))


@streams_blueprint.post("/giveaways/<giveaway_id>/end")
@access.token(WRITE_SCOPE)
@limited("interactive")
@tag(["Polls and giveaways"])
@validate_response(GiveawayEnvelope, 200)
@validate_response(ErrorBody, 409)
async def stream_end_giveaway(username: str, giveaway_id: str) -> GiveawayEnvelope:
    """Close your own channel's open giveaway."""
    channel_id = await _owned(username)
    return _giveaway(await _call(channel_id, giveaways.EndGiveaway(uuid_param(giveaway_id, "giveawayId"))))


@streams_blueprint.get("/predictions/active")
@access.public
@tag(["Polls and giveaways"])
@validate_response(PredictionEnvelope, 200)
@validate_response(ErrorBody, 404)
async def stream_active_prediction(username: str) -> PredictionEnvelope:
    """The channel's open or locked prediction, or `{prediction: null}` (for viewers and overlays)."""
    channel_id = await _channel(username)
    return _prediction(await runtime().db.read(lambda tx: reads.read_active_prediction(tx, channel_id)))


@streams_blueprint.post("/predictions/<prediction_id>/bet")
@access.token("user:write")
@tag(["Polls and giveaways"])
@validate_request(BetBody)
@validate_response(BetOut, 200)
@validate_response(ErrorBody, 404)
@validate_response(ErrorBody, 409)
async def bet(username: str, prediction_id: str, data: BetBody) -> BetOut:
    """Bet `{outcomeId, points (≥ 1)}` of your channel points of this channel while the
    prediction is open. More points on the same outcome add up; another outcome: 409
    `already_bet`; too few points: 400 `insufficient_funds` (details.balance); locked or
    ended: 409 `invalid_state`. Bets emit no event."""
    channel_id = await _channel(username)
    command = predictions.PlaceBet(
        uuid_param(prediction_id, "predictionId"), access.principal().user_id, data.outcomeId, data.points
    )
    return BetOut(success=True, **await _call(channel_id, command))


@streams_blueprint.get("/goals")
@access.public
@tag(["Polls and giveaways"])
@validate_response(GoalsOut, 200)
@validate_response(ErrorBody, 404)
async def stream_goals(username: str) -> GoalsOut:
    """The channel's goals (for overlays)."""
    channel_id = await _channel(username)
    found = await runtime().db.read(lambda tx: reads.read_goals(tx, channel_id))
    return GoalsOut(goals=[GoalOut(**goal.as_api()) for goal in found])


@streams_blueprint.get("/timers")
@access.public
@tag(["Polls and giveaways"])
@validate_response(TimersOut, 200)
@validate_response(ErrorBody, 404)
async def stream_timers(username: str) -> TimersOut:
    """The channel's timers with their remaining time now (for overlays)."""
    rt = runtime()
    channel_id = await _channel(username)
    found = await rt.db.read(lambda tx: reads.read_timers(tx, channel_id))
    now = _now_ms(rt)
    return TimersOut(timers=[TimerOut(**timer.as_api(now)) for timer in found])


BLUEPRINTS = [oauth_blueprint, dashboard_blueprint, streams_blueprint]
