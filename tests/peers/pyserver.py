"""Test peer: an MCP server built on PyPI `mcp==2.3.0` (installed by install.sh
into .peers/venv). It serves both protocol eras: the legacy `initialize`
handshake (2024-11-05 .. 2025-11-25) and the stateless 2026-07-28 era
(`server/discover`, per-request `_meta`, `input_required` results).

Usage:
    .peers/venv/bin/python tests/peers/pyserver.py stdio
    .peers/venv/bin/python tests/peers/pyserver.py http <port> [stateless] [json] [headers] [headers]
        (binds 127.0.0.1, endpoint path /mcp)

Environment:
    PYSERVER_ERA=modern   serve only 2026-07-28: `initialize` is refused with
                          -32022 (data.supported == ["2026-07-28"]) on every
                          transport; a modern-only server.
    PYSERVER_ERA=legacy   serve only the initialize handshake: `server/discover`
                          and any request carrying the 2026-07-28 `_meta`
                          envelope get -32601 Method not found, like older SDKs.
    unset (or empty)      both eras (the default).
    PYSERVER_ECHO_DESCRIPTION=TEXT  `echo`'s description (what a changed tool looks
                          like to a client that saw the default one).

Tasks and MCP Apps: `long_task` runs as a task in both eras (the 2026-07-28
`io.modelcontextprotocol/tasks` extension, and the 2025-11-25 experimental
core tasks); `show_chart` / `chart_data` and `ui://charts/view.html` are an
MCP Apps (`io.modelcontextprotocol/ui`) tool pair and view.

See tests/peers/README.md for the observed wire shapes of every tool.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from typing import Annotated, Any

import anyio
import anyio.abc
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PROTOCOL_VERSION_META_KEY,
    UNSUPPORTED_PROTOCOL_VERSION,
    CallToolRequestParams,
    ClientCapabilities,
    Completion,
    CompletionArgument,
    CompletionContext,
    ElicitationCapability,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmptyResult,
    FormElicitationCapability,
    ListResourcesResult,
    MissingRequiredClientCapabilityErrorData,
    PaginatedRequestParams,
    PromptReference,
    RequestParams,
    ResourceTemplateReference,
    ServerTasksCapability,
    ServerTasksRequestsCapability,
    SetLevelRequestParams,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    TasksCallCapability,
    TasksCancelCapability,
    TasksListCapability,
    TasksToolsCapability,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field, ValidationError
from typing_extensions import TypedDict

from mcp.server import CacheHint, MCPServer, NotificationOptions, ServerRequestContext
from mcp.server.apps import Apps, ResourceCsp, ResourcePermissions
from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    Extension,
    MethodBinding,
    Resolve,
    require_client_extension,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resources import BinaryResource, TextResource
from mcp.server.runner import _serve_modern_stream, serve_loop
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, event_matches, event_to_notification

# ctx.log()/ctx.warning() are marked deprecated as of 2026-07-28 (SEP-2577); we
# still want to exercise notifications/message, so silence the warning.
warnings.filterwarnings("ignore", message=".*logging capability is deprecated.*")

# ------------------------------------------------------------------ tasks (both eras)
# `long_task` can run as a task in both protocol eras. mcp 2.3.0 ships the task
# *types* (mcp_types: Task, CreateTaskResult, ToolExecution, the 2025-11-25
# `tasks` capability, ...) and the extension framework (SEP-2133: `Extension`,
# `MethodBinding`, `intercept_tool_call`), but no task runtime, so this is one:
#
# * 2026-07-28, the `io.modelcontextprotocol/tasks` extension (SEP-2663): a
#   `tools/call` whose envelope declares the extension gets a flat
#   `CreateTaskResult` (`resultType: "task"`); `tasks/get` returns a
#   DetailedTask (`result` / `error` / `inputRequests` inline); input arrives
#   with `tasks/update`; `tasks/cancel` acks; `subscriptions/listen` with
#   `notifications.taskIds` streams `notifications/tasks`.
# * 2025-11-25, the experimental core tasks: `tools/call` with `params.task`
#   gets `{task: Task}`; `tasks/get`, `tasks/list`, `tasks/cancel` return Task
#   shapes; `tasks/result` blocks until the task ends and returns the tool
#   result (or its JSON-RPC error), sending the task's `elicitation/create`
#   (with `_meta["io.modelcontextprotocol/related-task"]`) on its own stream
#   meanwhile; `notifications/tasks/status` goes to the creating connection.
#
# Tasks live in a module-level store, so any later connection (a new HTTP
# session, or a stateless POST) can poll a task another one created; each task
# is visible only to the era that created it. Their work runs in a task group
# owned by the server lifespan, which is entered once per process (stdio, and
# the streamable-HTTP session manager), not per connection or request.

TASKS_EXTENSION_ID = "io.modelcontextprotocol/tasks"
RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
LEGACY_TASKS_VERSION = "2025-11-25"  # the only handshake version with tasks
TASK_TTL_MS = 10 * 60 * 1000  # the longest a task is kept; also the default
TASK_POLL_INTERVAL_MS = 250
TASK_STEP_SECONDS = 0.1  # long_task sleeps in steps this long, so cancellation is prompt
_TERMINAL = frozenset({"completed", "failed", "cancelled"})
_NAME_QUESTION = "What is your name?"
_NAME_INPUT_KEY = "name"  # the inputRequests key; a task asks once, so it is unique over the task's life


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _TaskFailed(Exception):
    """Ends a task `failed` with this JSON-RPC error (not an isError result)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.error = {"code": code, "message": message}


class _InputRequest:
    """One outstanding server-to-client request of a task (here: the name elicitation)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        self.schema = render_elicitation_schema(NameForm)
        self.answer: ElicitResult | None = None
        self.answered = anyio.Event()
        self.in_flight = False  # 2025-11-25: a tasks/result is sending it right now

    def wire(self) -> dict[str, Any]:
        """The 2026-07-28 `inputRequests` entry: `{method, params}` (same rendering as MRTR)."""
        schema = {k: v for k, v in self.schema.items() if k != "title"}  # as the SDK's MRTR inputRequests
        request = ElicitRequest(params=ElicitRequestFormParams(message=self.message, requested_schema=schema))
        return request.model_dump(by_alias=True, mode="json", exclude_none=True)

    def give(self, answer: ElicitResult) -> None:
        if not self.answered.is_set():
            self.answer = answer
            self.answered.set()


class _Task:
    def __init__(self, era: str, ttl_ms: int, origin: ServerSession | None) -> None:
        self.id = str(uuid.uuid4())  # unguessable: there is no auth context to bind tasks to
        self.era = era  # "modern" (2026-07-28 extension) or "legacy" (2025-11-25)
        self.status = "working"
        self.status_message = "started"
        self.created_at = self.last_updated_at = _now_iso()
        self.expires = time.monotonic() + ttl_ms / 1000
        self.ttl_ms = ttl_ms
        self.result: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.pending: _InputRequest | None = None
        self.scope: anyio.CancelScope | None = None
        self._changed = anyio.Event()
        self.listeners: set[Callable[[dict[str, Any]], None]] = set()  # 2026 listen streams
        # 2025-11-25: notifications/tasks/status go to the creating connection,
        # in order, through this queue (drained by a sender in the lifespan group).
        self._origin = origin
        self._status_send: anyio.abc.ObjectSendStream[dict[str, Any]] | None = None

    @property
    def terminal(self) -> bool:
        return self.status in _TERMINAL

    def changed(self) -> anyio.Event:
        """An event set at the next change; take it before awaiting (no await in between)."""
        return self._changed

    def update(self, status: str | None = None, message: str | None = None) -> None:
        if self.terminal:
            return  # terminal states are final
        status_changed = status is not None and status != self.status
        if status is not None:
            self.status = status
        if message is not None:
            self.status_message = message
        self.last_updated_at = _now_iso()
        self._changed.set()
        self._changed = anyio.Event()
        if not status_changed:
            return  # a new status message only: no notification
        if self.listeners:
            detailed = self.modern_wire()
            for listener in list(self.listeners):
                listener(detailed)
        if self._status_send is not None:
            try:
                self._status_send.send_nowait(self.legacy_wire())
            except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            if self.terminal:
                self._status_send.close()

    def finish(self, status: str, message: str, *, result: dict[str, Any] | None = None,
               error: dict[str, Any] | None = None) -> None:
        if self.terminal:
            return
        self.result, self.error, self.pending = result, error, None
        self.update(status, message)
        if self.scope is not None:
            self.scope.cancel()

    # -- wire shapes

    def modern_wire(self, *, detailed: bool = True) -> dict[str, Any]:
        """2026-07-28 `Task` (`CreateTaskResult` body), or `DetailedTask` for tasks/get and notifications/tasks."""
        wire: dict[str, Any] = {
            "taskId": self.id,
            "status": self.status,
            "statusMessage": self.status_message,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": TASK_POLL_INTERVAL_MS,
        }
        if detailed:
            if self.status == "input_required" and self.pending is not None:
                wire["inputRequests"] = {self.pending.key: self.pending.wire()}
            elif self.status == "completed":
                wire["result"] = self.result
            elif self.status == "failed":
                wire["error"] = self.error
        return wire

    def legacy_wire(self) -> dict[str, Any]:
        """2025-11-25 `Task`."""
        return {
            "taskId": self.id,
            "status": self.status,
            "statusMessage": self.status_message,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttl": self.ttl_ms,
            "pollInterval": TASK_POLL_INTERVAL_MS,
        }

    # -- the worker's side

    async def ask_name(self) -> ElicitResult:
        """Park the task in input_required until the client answers (tasks/update or tasks/result)."""
        request = _InputRequest(_NAME_INPUT_KEY, _NAME_QUESTION)
        self.pending = request
        self.update("input_required", f"waiting for input: {_NAME_QUESTION}")
        await request.answered.wait()
        self.pending = None
        self.update("working", "got the answer")
        assert request.answer is not None
        return request.answer

    def discard(self) -> None:
        """Expired: stop the work and the status sender (listen streams just hear no more)."""
        if self.scope is not None:
            self.scope.cancel()
        if self._status_send is not None:
            self._status_send.close()

    def start_status_notifications(self, task_group: anyio.abc.TaskGroup) -> None:
        if self._origin is None:
            return
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](256)
        self._status_send = send
        task_group.start_soon(_send_status_notifications, self._origin, receive)


async def _send_status_notifications(session: ServerSession, receive: Any) -> None:
    """2025-11-25 `notifications/tasks/status`, on the creating connection's standalone channel."""
    async with receive:
        async for task_wire in receive:
            try:
                await session.send_notification(_WireNotification(method="notifications/tasks/status", params=task_wire))
            except Exception:
                pass  # optional notification: the connection may be gone, or have no standalone stream


class _WireNotification(BaseModel):
    """An untyped notification for `ServerSession.send_notification` (which just dumps the model)."""

    method: str
    params: dict[str, Any]


class _TaskStore:
    def __init__(self) -> None:
        self._tasks: dict[str, _Task] = {}
        self.task_group: anyio.abc.TaskGroup | None = None  # set by the server lifespan

    def _sweep(self) -> None:
        now = time.monotonic()
        for task_id, task in list(self._tasks.items()):
            if task.expires <= now:
                del self._tasks[task_id]
                task.discard()

    def get(self, task_id: str, era: str) -> _Task:
        self._sweep()
        task = self._tasks.get(task_id)
        if task is None or task.era != era:
            raise MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")
        return task

    def list(self, era: str) -> list[_Task]:
        self._sweep()
        return [t for t in self._tasks.values() if t.era == era]

    def start(self, era: str, args: LongTaskArgs, *, ttl_ms: int = TASK_TTL_MS,
              origin: ServerSession | None = None) -> _Task:
        if self.task_group is None:
            raise MCPError(code=INTERNAL_ERROR, message="the task runner is not running")
        self._sweep()
        task = _Task(era, ttl_ms, origin)
        self._tasks[task.id] = task
        task.start_status_notifications(self.task_group)
        self.task_group.start_soon(_run_long_task, task, args)
        return task


TASKS = _TaskStore()


@asynccontextmanager
async def _task_runner(_server: Any) -> AsyncIterator[dict[str, Any]]:
    """Server lifespan: the process-wide task group task work runs in."""
    async with anyio.create_task_group() as tg:
        TASKS.task_group = tg
        try:
            yield {}
        finally:
            TASKS.task_group = None
            tg.cancel_scope.cancel()


class LongTaskArgs(BaseModel):
    seconds: float = 2
    ask: bool = False
    fail: bool = False


def _answer_suffix(answer: ElicitResult) -> str:
    if answer.action == "accept":
        try:
            form = NameForm.model_validate(answer.content or {})
        except ValidationError:
            raise _TaskFailed(INVALID_PARAMS, "the elicitation answer does not match the requested schema") from None
        return f" for {form.name}"
    return " (name declined)" if answer.action == "decline" else " (name cancelled)"


async def _long_work(
    args: LongTaskArgs,
    status: Callable[[float, str], Awaitable[None]],
    ask: Callable[[], Awaitable[ElicitResult]],
) -> str:
    """The work itself, shared by the task and the plain (synchronous) call:
    sleep `seconds` in short steps, report a status every half second, ask for
    the name half-way when `ask`, fail at the end when `fail`."""
    seconds = max(0.0, args.seconds)
    steps = max(1, math.ceil(seconds / TASK_STEP_SECONDS))
    step = seconds / steps
    suffix = ""
    reported = -1.0
    for i in range(steps):
        if args.ask and i == steps // 2:
            suffix = _answer_suffix(await ask())
        elapsed = math.floor(i * step * 2) / 2
        if elapsed != reported:
            reported = elapsed
            await status(elapsed, f"working: {elapsed:g}s of {seconds:g}s")
        await anyio.sleep(step)
    if args.fail:
        raise _TaskFailed(INTERNAL_ERROR, "long_task failed as asked (fail=true)")
    return f"done after {seconds:g}s{suffix}"


async def _run_long_task(task: _Task, args: LongTaskArgs) -> None:
    with anyio.CancelScope() as scope:
        task.scope = scope
        if task.terminal:  # cancelled before it started
            return

        async def status(_elapsed: float, message: str) -> None:
            task.update(message=message)

        try:
            text = await _long_work(args, status, task.ask_name)
        except _TaskFailed as failure:
            task.finish("failed", f"failed: {failure.error['message']}", error=failure.error)
        except Exception as exc:  # a bug: still end the task, as a JSON-RPC internal error
            task.finish("failed", f"failed: {exc!r}", error={"code": INTERNAL_ERROR, "message": repr(exc)})
        else:
            task.finish("completed", "done", result={"content": [{"type": "text", "text": text}], "isError": False})


def _require_form_elicitation(ctx: ServerRequestContext) -> None:
    """`long_task ask=true` needs form elicitation, like ask_name (same -32021 error)."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is not None and (elicitation.form is not None or elicitation.url is None):
        return
    data = MissingRequiredClientCapabilityErrorData(
        required_capabilities=ClientCapabilities(elicitation=ElicitationCapability(form=FormElicitationCapability()))
    )
    raise MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message="Client did not declare the form elicitation capability required by long_task ask=true",
        data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
    )


def _declares_tasks_extension(ctx: ServerRequestContext) -> bool:
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS_EXTENSION_ID in capabilities.extensions)


class _LegacyTaskCreated(Exception):
    """Carries a 2025-11-25 `CreateTaskResult` past the tools/call result sieve (see `_legacy_tasks_wire`)."""

    def __init__(self, wire: dict[str, Any]) -> None:
        super().__init__("task created")
        self.wire = wire


class _TaskIdParams(RequestParams):
    task_id: str


class _UpdateTaskParams(_TaskIdParams):
    input_responses: dict[str, Any]


def _is_modern(ctx: ServerRequestContext) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


async def _tasks_get(ctx: ServerRequestContext, params: _TaskIdParams) -> dict[str, Any]:
    if _is_modern(ctx):
        require_client_extension(ctx, TASKS_EXTENSION_ID)
        return TASKS.get(params.task_id, "modern").modern_wire()
    return TASKS.get(params.task_id, "legacy").legacy_wire()


async def _tasks_update(ctx: ServerRequestContext, params: _UpdateTaskParams) -> dict[str, Any]:
    require_client_extension(ctx, TASKS_EXTENSION_ID)
    task = TASKS.get(params.task_id, "modern")
    pending = task.pending
    for key, response in params.input_responses.items():
        if pending is None or key != pending.key or pending.answered.is_set():
            continue  # not outstanding: ignored, as the extension says
        try:
            answer = ElicitResult.model_validate(response, by_name=False)
        except ValidationError:
            raise MCPError(code=INVALID_PARAMS, message=f"inputResponses[{key!r}] is not an elicitation result") from None
        pending.give(answer)
    return {}


async def _tasks_cancel(ctx: ServerRequestContext, params: _TaskIdParams) -> dict[str, Any]:
    if _is_modern(ctx):
        require_client_extension(ctx, TASKS_EXTENSION_ID)
        TASKS.get(params.task_id, "modern").finish("cancelled", "cancelled by the client")
        return {}  # an acknowledgement; a finished task stays as it was
    task = TASKS.get(params.task_id, "legacy")
    if task.terminal:
        raise MCPError(code=INVALID_PARAMS, message=f"Cannot cancel task: already in terminal status {task.status!r}")
    task.finish("cancelled", "cancelled by the client")
    return task.legacy_wire()


async def _tasks_list(ctx: ServerRequestContext, params: PaginatedRequestParams) -> dict[str, Any]:
    if params.cursor is not None:
        raise MCPError(code=INVALID_PARAMS, message=f"Invalid cursor: {params.cursor!r}")
    return {"tasks": [task.legacy_wire() for task in TASKS.list("legacy")]}


async def _tasks_result(ctx: ServerRequestContext, params: _TaskIdParams) -> dict[str, Any]:
    """2025-11-25 tasks/result: block until the task ends; meanwhile send its
    elicitation on this request's stream (and hand the answer to the work)."""
    task = TASKS.get(params.task_id, "legacy")
    while not task.terminal:
        pending = task.pending
        if pending is not None and not pending.in_flight and not pending.answered.is_set():
            await _relay_elicitation(ctx, task, pending)
            continue
        await task.changed().wait()
    related = {RELATED_TASK_META_KEY: {"taskId": task.id}}
    if task.status == "completed":
        assert task.result is not None
        return {**task.result, "_meta": related}
    if task.status == "failed":
        assert task.error is not None
        raise MCPError(code=task.error["code"], message=task.error["message"], data=task.error.get("data"))
    raise MCPError(code=INVALID_REQUEST, message="Task was cancelled; it has no result", data=related)


async def _relay_elicitation(ctx: ServerRequestContext, task: _Task, pending: _InputRequest) -> None:
    request = ElicitRequest(
        params=ElicitRequestFormParams(
            message=pending.message,
            requested_schema=pending.schema,
            _meta={RELATED_TASK_META_KEY: {"taskId": task.id}},
        )
    )
    answer: ElicitResult | None = None
    failure: Exception | None = None  # raised as is, not inside an ExceptionGroup
    pending.in_flight = True
    try:
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                nonlocal answer, failure
                try:
                    answer = await ctx.session.send_request(
                        request, ElicitResult, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
                    )
                except Exception as exc:  # e.g. NoBackChannelError, or the client's JSON-RPC error
                    failure = exc
                tg.cancel_scope.cancel()

            async def stop_when_task_ends() -> None:
                while not task.terminal:
                    await task.changed().wait()
                tg.cancel_scope.cancel()

            tg.start_soon(ask)
            tg.start_soon(stop_when_task_ends)
    finally:
        pending.in_flight = False
    if failure is not None:
        raise failure
    if answer is not None:
        pending.give(answer)


class TasksExtension(Extension):
    """Serves the task methods of both eras and turns `long_task` calls into tasks.

    The extension framework advertises `io.modelcontextprotocol/tasks` in the
    2026 `server/discover` capabilities (the 2025-11-25 initialize sieve drops
    `extensions`; `_legacy_tasks_wire` adds the core `tasks` capability there).
    """

    identifier = TASKS_EXTENSION_ID

    def methods(self) -> list[MethodBinding]:
        both = frozenset({LEGACY_TASKS_VERSION, *MODERN_PROTOCOL_VERSIONS})
        return [
            MethodBinding("tasks/get", _TaskIdParams, _tasks_get, both),
            MethodBinding("tasks/cancel", _TaskIdParams, _tasks_cancel, both),
            MethodBinding("tasks/update", _UpdateTaskParams, _tasks_update, frozenset(MODERN_PROTOCOL_VERSIONS)),
            MethodBinding("tasks/result", _TaskIdParams, _tasks_result, frozenset({LEGACY_TASKS_VERSION})),
            MethodBinding("tasks/list", PaginatedRequestParams, _tasks_list, frozenset({LEGACY_TASKS_VERSION})),
        ]

    async def intercept_tool_call(self, params: CallToolRequestParams, ctx: ServerRequestContext, call_next: Any) -> Any:
        if _is_modern(ctx):
            if params.name != "long_task" or not _declares_tasks_extension(ctx):
                return await call_next(ctx)  # not a task: the plain tool call
        elif ctx.protocol_version != LEGACY_TASKS_VERSION or params.task is None:
            return await call_next(ctx)  # older versions have no tasks: `task` is ignored
        elif params.name != "long_task":
            # 2025-11-25: a task-augmented call of a tool whose taskSupport is (absent =) forbidden.
            raise MCPError(code=METHOD_NOT_FOUND, message=f"Tool {params.name!r} does not support task-augmented execution")
        try:
            args = LongTaskArgs.model_validate(params.arguments or {})
        except ValidationError:
            return await call_next(ctx)  # the plain call reports bad arguments (an isError result)
        if args.ask:
            _require_form_elicitation(ctx)
        if _is_modern(ctx):
            task = TASKS.start("modern", args)
            return {"resultType": "task", **task.modern_wire(detailed=False)}
        ttl = params.task.ttl if params.task.ttl is not None and params.task.ttl > 0 else TASK_TTL_MS
        task = TASKS.start("legacy", args, ttl_ms=min(ttl, TASK_TTL_MS), origin=ctx.session)
        raise _LegacyTaskCreated({"task": task.legacy_wire()})


_LEGACY_TASKS_CAPABILITY = ServerTasksCapability(
    list=TasksListCapability(),
    cancel=TasksCancelCapability(),
    requests=ServerTasksRequestsCapability(tools=TasksToolsCapability(call=TasksCallCapability())),
).model_dump(by_alias=True, mode="json", exclude_none=True)

APP_TOOLS = ("show_chart", "chart_data")


async def _legacy_tasks_wire(ctx: ServerRequestContext, call_next: Any) -> Any:
    """Wire touches the SDK leaves to the server, at 2025-11-25 only:
    the `tasks` server capability on `initialize`, `execution.taskSupport` on
    long_task in tools/list, and the CreateTaskResult of a task-augmented
    tools/call (the SDK sieves every tools/call result into a CallToolResult,
    which would reject `{task}`; a middleware's own return is not sieved).
    Also (both eras) lists the MCP Apps tools last, after the older tools."""
    try:
        result = await call_next(ctx)
    except _LegacyTaskCreated as created:
        return created.wire
    if ctx.method == "initialize" and isinstance(result, dict) and result.get("protocolVersion") == LEGACY_TASKS_VERSION:
        result["capabilities"]["tasks"] = dict(_LEGACY_TASKS_CAPABILITY)
    elif ctx.method == "tools/list" and isinstance(result, dict) and isinstance(result.get("tools"), list):
        result["tools"].sort(key=lambda tool: tool.get("name") in APP_TOOLS)  # stable
        if ctx.protocol_version == LEGACY_TASKS_VERSION:
            for tool in result["tools"]:
                if tool.get("name") == "long_task":
                    tool["execution"] = {"taskSupport": "optional"}
    return result


# ------------------------------------------------------------------ MCP Apps
# The SDK's own `Apps` extension (mcp.server.apps, `io.modelcontextprotocol/ui`):
# `@apps.tool` stamps `_meta.ui.resourceUri` / `_meta.ui.visibility`, and
# `add_html_resource` serves the `ui://` page as `text/html;profile=mcp-app`
# with `_meta.ui` {csp, permissions, prefersBorder}. The flat
# `_meta["ui/resourceUri"]` is the ext-apps spec's deprecated key (its
# `registerAppTool` writes both, hosts must read both); the SDK does not write
# it, so it is passed as extra meta.

CHART_URI = "ui://charts/view.html"
CHART_HTML = """<!doctype html>
<html>
<head><meta charset="utf-8"><title>Chart</title></head>
<body>
<h1 id="title">Chart</h1>
<svg id="chart" width="240" height="100" role="img" aria-label="bar chart">
  <rect x="10" y="10" width="60" height="90" fill="#4a7"/>
  <rect x="90" y="70" width="60" height="30" fill="#4a7"/>
  <rect x="170" y="40" width="60" height="60" fill="#4a7"/>
</svg>
<p>pyserver test view for MCP Apps (static; the host renders it in a sandboxed iframe).</p>
</body>
</html>
"""

apps = Apps()


@apps.tool(
    resource_uri=CHART_URI,
    visibility=["model", "app"],
    meta={"ui/resourceUri": CHART_URI},
    description="Show a chart titled `title` (an MCP Apps tool: its UI is ui://charts/view.html).",
    structured_output=False,
)
def show_chart(title: str) -> str:
    return f"chart {title!r} (view: {CHART_URI})"


class ChartData(TypedDict):
    labels: list[str]
    values: list[int]


@apps.tool(
    resource_uri=CHART_URI,
    visibility=["app"],
    meta={"ui/resourceUri": CHART_URI},
    description="The chart's data (app-only: visibility ['app'], for the view, not the model).",
)
def chart_data() -> ChartData:
    return ChartData(labels=["a", "b", "c"], values=[3, 1, 2])


apps.add_html_resource(
    CHART_URI,
    CHART_HTML,
    name="chart-view",
    description="The chart view (MCP Apps)",
    csp=ResourceCsp(connect_domains=[], resource_domains=[]),
    permissions=ResourcePermissions(clipboard_write={}),
    prefers_border=True,
)

# The subscriptions/listen bus, passed to MCPServer so the task-aware listen
# handler (below) can serve the standard kinds on the same stream.
_subscription_bus = InMemorySubscriptionBus()


class _SignOnlyStateCodec:
    """A `requestState` codec that signs but does not encrypt (PYSERVER_SIGN_ONLY_STATE=1):
    the state, earlier answers included, is readable by the client — as a server with a
    sign-only codec would send it. For the tests of what a client keeps of it."""

    _key = os.urandom(32)

    def seal(self, payload: bytes) -> str:
        import hmac

        body = payload.decode()
        return "s1." + body + "." + hmac.new(self._key, payload, hashlib.sha256).hexdigest()

    def unseal(self, token: str) -> bytes:
        import hmac

        from mcp.server.request_state import InvalidRequestState

        if not token.startswith("s1.") or "." not in token[3:]:
            raise InvalidRequestState("malformed")
        body, tag = token[3:].rsplit(".", 1)
        want = hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(tag, want):
            raise InvalidRequestState("bad tag")
        return body.encode()


def _state_security():
    if os.environ.get("PYSERVER_SIGN_ONLY_STATE") != "1":
        return None
    from mcp.server.request_state import RequestStateSecurity

    return RequestStateSecurity(codec=_SignOnlyStateCodec())


server = MCPServer(
    name="pyserver",
    request_state_security=_state_security(),
    version="1.0.0",
    instructions="Test peer for the Rust MCP client.",
    log_level="WARNING",
    # 2026-07-28 era only: fills `ttlMs`/`cacheScope` on tools/list results
    # (the handshake-era sieve strips both keys, so legacy results carry neither).
    cache_hints={"tools/list": CacheHint(ttl_ms=60_000)},
    # Tasks and MCP Apps (see above): the two extensions, the middleware that
    # adds the 2025-11-25 task wire, the lifespan that runs task work, and the
    # listen bus the task-aware subscriptions/listen handler shares.
    extensions=[apps, TasksExtension()],
    middleware=[_legacy_tasks_wire],
    lifespan=_task_runner,
    subscriptions=_subscription_bus,
)

# The legacy `initialize` result advertises `tools.listChanged: true` because
# add_tool (below) sends notifications/tools/list_changed. MCPServer builds its
# InitializationOptions with a default NotificationOptions() (all False) on
# every transport (stdio here; the HTTP session manager asks the low-level
# server the same way), so default the argument on this one instance. The
# 2026-07-28 era ignores NotificationOptions: there listChanged is derived from
# `subscriptions/listen` being served (it is).
_lowlevel_init_options = server._lowlevel_server.create_initialization_options


def _init_options_with_tools_changed(notification_options=None, *args, **kwargs):
    return _lowlevel_init_options(notification_options or NotificationOptions(tools_changed=True), *args, **kwargs)


server._lowlevel_server.create_initialization_options = _init_options_with_tools_changed  # type: ignore[method-assign]


# --------------------------------------------------------------------------- tools


@server.tool(description=os.environ.get("PYSERVER_ECHO_DESCRIPTION") or "Echo the message back.", structured_output=False)
def echo(message: str) -> str:
    return f"Echo: {message}"


class AddResult(TypedDict):
    sum: float


@server.tool(description="Add two numbers; structured result {sum}.")
def add(a: float, b: float) -> AddResult:
    return AddResult(sum=a + b)


@server.tool(description="Always fails with a tool error (isError: true).", structured_output=False)
def fail() -> str:
    raise ToolError("this tool always fails")


@server.tool(
    description="Sleep `seconds`, reporting progress `steps` times, then return 'done'.", structured_output=False
)
async def slow(seconds: float, steps: int, ctx: Context) -> str:
    steps = max(int(steps), 1)
    for i in range(1, steps + 1):
        await anyio.sleep(seconds / steps)
        await ctx.report_progress(i, steps, f"step {i}/{steps}")
    return "done"


class NameForm(BaseModel):
    name: str = Field(description="Your name")


def ask_for_name() -> Elicit[NameForm]:
    # Resolver: the framework turns this into an `elicitation/create` request
    # (legacy era) or an `input_required` result (2026-07-28 era).
    return Elicit("What is your name?", NameForm)


@server.tool(description="Ask the user's name via form elicitation and greet them.", structured_output=False)
def ask_name(answer: Annotated[ElicitationResult[NameForm], Resolve(ask_for_name)]) -> str:
    if isinstance(answer, AcceptedElicitation):
        return f"Hello, {answer.data.name}"
    if answer.action == "decline":
        return "declined"
    return "cancelled"


class VaultForm(BaseModel):
    token: str = Field(description="A vault token")


class LoginForm(BaseModel):
    user: str = Field(description="User name")
    # A secret field: `writeOnly` (the spec's string formats have no "password").
    password: str = Field(description="Password", json_schema_extra={"writeOnly": True})


def _ask_vault() -> Elicit[VaultForm]:
    return Elicit("Vault token for sign_in", VaultForm)


def _ask_login() -> Elicit[LoginForm]:
    return Elicit("Sign in", LoginForm)


def _fingerprint(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()[:12]


@server.tool(
    description=(
        "Ask for a vault token and a login (user, writeOnly password) at once; "
        "answer with the user and sha256 fingerprints of the secrets (never the secrets)."
    ),
    structured_output=False,
)
def sign_in(
    vault: Annotated[ElicitationResult[VaultForm], Resolve(_ask_vault)],
    login: Annotated[ElicitationResult[LoginForm], Resolve(_ask_login)],
) -> str:
    if not isinstance(vault, AcceptedElicitation) or not isinstance(login, AcceptedElicitation):
        return "not signed in"
    return (
        f"signed in as {login.data.user}; password {_fingerprint(login.data.password)}; "
        f"token {_fingerprint(vault.data.token)}"
    )


def _ask_login_after(vault: Annotated[ElicitationResult[VaultForm], Resolve(_ask_vault)]) -> Elicit[LoginForm]:
    # Depends on the vault answer: asked in a second round, after it.
    return Elicit("Sign in", LoginForm)


@server.tool(
    description=(
        "Like sign_in, in two rounds: the vault token first, then the login "
        "(the server's requestState carries the first answer into the second round)."
    ),
    structured_output=False,
)
def sign_in_steps(
    vault: Annotated[ElicitationResult[VaultForm], Resolve(_ask_vault)],
    login: Annotated[ElicitationResult[LoginForm], Resolve(_ask_login_after)],
) -> str:
    return sign_in(vault, login)


@server.tool(description="A short beep: an audio content block (audio/wav) and a caption.", structured_output=False)
def beep() -> list[Any]:
    import base64

    from mcp_types import AudioContent, TextContent

    wav = b"RIFF" + (36).to_bytes(4, "little") + b"WAVEfmt " + bytes(16) + b"data" + bytes(4)
    return [
        TextContent(type="text", text="a beep"),
        AudioContent(type="audio", data=base64.b64encode(wav).decode(), mimeType="audio/wav"),
    ]


@server.tool(description="Kill the server process immediately (simulates a crash).", structured_output=False)
def crash() -> str:
    sys.stdout.flush()
    os._exit(1)


_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
_min_log_level = {"level": "debug"}  # legacy era: set by logging/setLevel


@server.tool(description="Send a warning-level log notification, then return 'logged'.", structured_output=False)
async def log(message: str, ctx: Context) -> str:
    # Legacy era: filtered by the level last set with logging/setLevel (below).
    # 2026-07-28 era: the SDK itself only delivers it when the request's _meta
    # carries "io.modelcontextprotocol/logLevel" at "warning" or lower.
    if _LEVELS.index("warning") >= _LEVELS.index(_min_log_level["level"]):
        await ctx.log("warning", message, logger_name="pyserver")
    return "logged"


async def _set_level(ctx: ServerRequestContext, params: SetLevelRequestParams) -> EmptyResult:
    _min_log_level["level"] = params.level
    return EmptyResult()


# MCPServer registers no logging/setLevel handler; adding one makes the legacy
# `initialize` result advertise `capabilities.logging`.
server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, _set_level)


def extra_tool() -> str:
    return "extra"


async def toggle_tool(ctx: Context) -> str:
    """Only with PYSERVER_TOGGLE=1 (the soak run): adds `extra_tool` when it is absent,
    removes it when present, and announces the change every time, so many clients
    calling it make a storm of list changes."""
    if server._tool_manager.get_tool("extra_tool") is None:
        server.add_tool(extra_tool, description="Added at runtime by toggle_tool.", structured_output=False)
        done = "added extra_tool"
    else:
        server.remove_tool("extra_tool")
        done = "removed extra_tool"
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return done


@server.tool(
    description="Register the tool `extra_tool` (returns 'extra') and announce notifications/tools/list_changed.",
    structured_output=False,
)
async def add_tool(ctx: Context) -> str:
    if server._tool_manager.get_tool("extra_tool") is not None:
        return "extra_tool already registered"
    server.add_tool(extra_tool, description="Added at runtime by add_tool.", structured_output=False)
    # Legacy era: a plain notification on the connection's standalone channel
    # (the stdio pipe). At 2026-07-28 the SDK drops that copy (change
    # notifications may only ride subscriptions/listen streams) and the bus
    # publish below is what reaches listeners. Each call is a no-op in the
    # other era, so both are always made.
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return "added extra_tool"


@server.tool(description="Sleep (practically) forever; for timeout and cancellation tests.", structured_output=False)
async def sleep_forever() -> str:
    await anyio.sleep(10**9)
    return "woke up"


def _maybe_ask_name(ask: bool) -> Elicit[NameForm] | None:
    # Resolver for the plain (not task) call: asks up front, like ask_name.
    return Elicit(_NAME_QUESTION, NameForm) if ask else None


@server.tool(
    description=(
        "Work for `seconds` (status every 0.5 s); with `ask` ask for a name half-way, with `fail` end failed. "
        "Runs as a task (2025-11-25 `params.task`, or the 2026-07-28 io.modelcontextprotocol/tasks extension); "
        "called plainly it asks first and fails with isError."
    ),
    structured_output=False,
)
async def long_task(
    ctx: Context,
    answer: Annotated[ElicitationResult[NameForm], Resolve(_maybe_ask_name)],
    seconds: float = 2,
    ask: bool = False,
    fail: bool = False,
) -> str:
    # Only the plain call gets here; a task runs `_long_work` from `_run_long_task`.
    async def status(elapsed: float, message: str) -> None:
        await ctx.report_progress(elapsed, max(0.0, seconds), message)

    async def asked() -> ElicitResult:
        if isinstance(answer, AcceptedElicitation):
            return ElicitResult(action="accept", content=answer.data.model_dump())
        return ElicitResult(action=answer.action)

    try:
        return await _long_work(LongTaskArgs(seconds=seconds, ask=ask, fail=fail), status, asked)
    except _TaskFailed as failure:
        raise ToolError(failure.error["message"]) from None


# ----------------------------------------------------------------- prompts/resources


@server.prompt(description="Greet someone by name.")
def greet(name: str) -> str:
    return f"Please greet {name} warmly."


@server.resource("py://readme", name="readme", description="Readme text", mime_type="text/plain")
def readme() -> str:
    return "pyserver readme: a test peer for the Rust MCP client."


@server.resource("py://items/{id}", name="item", description="An item by id", mime_type="text/plain")
def item(id: str) -> str:
    return f"item {id}"


server.add_resource(
    BinaryResource(
        uri="py://blob",
        name="blob",
        description="The bytes 0..=255",
        mime_type="application/octet-stream",
        data=bytes(range(256)),
    )
)

GENERATED_RESOURCES = 25
for _n in range(GENERATED_RESOURCES):
    server.add_resource(
        TextResource(uri=f"py://gen/{_n}", name=f"gen{_n}", mime_type="text/plain", text=f"generated {_n}")
    )

# resources/list pagination: pages of 10 over [readme, blob, gen/0..24]. The
# cursors are deliberately odd: page 1 -> nextCursor "" (an empty string IS a
# cursor; only its absence ends the list), page 2 (cursor "") -> nextCursor
# "p3", page 3 (cursor "p3") -> no nextCursor. MCPServer's own resources/list
# handler does not paginate, so replace it on the low-level server.
PAGE_SIZE = 10


def _page_cursor(page: int) -> str | None:
    """The cursor that requests 0-based page `page`: none, then "", then "p3", "p4", ..."""
    return None if page == 0 else "" if page == 1 else f"p{page + 1}"


async def _list_resources_paged(ctx: ServerRequestContext, params: PaginatedRequestParams) -> ListResourcesResult:
    resources = await server.list_resources()
    # The MCP Apps resource is registered first (extensions apply at construction); list it last.
    resources.sort(key=lambda r: str(r.uri).startswith("ui://"))
    pages = max(1, -(-len(resources) // PAGE_SIZE))
    cursors = [_page_cursor(i) for i in range(pages)]
    if params.cursor not in cursors:
        raise MCPError(code=INVALID_PARAMS, message=f"Invalid cursor: {params.cursor!r}")
    page = cursors.index(params.cursor)
    start = page * PAGE_SIZE
    next_cursor = _page_cursor(page + 1) if page + 1 < pages else None
    return ListResourcesResult(resources=resources[start : start + PAGE_SIZE], next_cursor=next_cursor)


server._lowlevel_server.add_request_handler("resources/list", PaginatedRequestParams, _list_resources_paged)


# completion/complete: the greet prompt's `name` argument. Registering a handler
# makes both eras advertise `capabilities.completions`.
GREET_NAMES = ["Ann", "Alice", "Bob", "Carol"]


@server.completion()
async def _complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion | None:
    if isinstance(ref, PromptReference) and ref.name == "greet" and argument.name == "name":
        prefix = argument.value.lower()
        values = [n for n in GREET_NAMES if n.lower().startswith(prefix)]
        return Completion(values=values, total=len(values), has_more=False)
    return None  # -> {"completion":{"values":[]}}


# ------------------------------------------------- subscriptions/listen + taskIds
# The SDK's ListenHandler serves the core kinds and drops unknown filter keys
# (its ack is rebuilt from the core fields). A listen request whose filter has
# `taskIds` (2026 tasks extension) is served here instead: the ack echoes the
# honored (known, 2026-era) task ids, each such task's current DetailedTask is
# sent at once, and every later status change is sent as `notifications/tasks`;
# the core kinds it asked for ride the same stream from the same bus. Without
# `taskIds` the request goes to the SDK's handler unchanged.

_sdk_listen = ListenHandler(_subscription_bus)


async def _listen(ctx: ServerRequestContext, params: SubscriptionsListenRequestParams) -> Any:
    task_ids = (params.notifications.model_extra or {}).get("taskIds")
    if task_ids is None:
        return await _sdk_listen(ctx, params)
    require_client_extension(ctx, TASKS_EXTENSION_ID)
    if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
        raise MCPError(code=INVALID_PARAMS, message="notifications.taskIds must be a list of strings")
    subscription_id = ctx.request_id
    if subscription_id is None:
        raise MCPError(code=INVALID_REQUEST, message="subscriptions/listen requires a request id")
    tasks: list[_Task] = []
    for task_id in dict.fromkeys(task_ids):
        try:
            tasks.append(TASKS.get(task_id, "modern"))
        except MCPError:
            pass  # unknown or expired: not honored, so not echoed
    requested = params.notifications
    honored = SubscriptionFilter(
        tools_list_changed=True if requested.tools_list_changed else None,
        prompts_list_changed=True if requested.prompts_list_changed else None,
        resources_list_changed=True if requested.resources_list_changed else None,
        resource_subscriptions=list(requested.resource_subscriptions) if requested.resource_subscriptions else None,
    )
    if tasks:
        honored = honored.model_copy(update={"taskIds": [t.id for t in tasks]})
    uris = frozenset(honored.resource_subscriptions or ())
    meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}

    send, receive = anyio.create_memory_object_stream[Any](1024)

    def deliver(item: Any) -> None:
        try:
            send.send_nowait(item)
        except (anyio.WouldBlock, anyio.ClosedResourceError):
            send.close()  # a client that stopped reading: end the stream, as the SDK does

    def deliver_event(event: Any) -> None:
        if event_matches(honored, uris, event):
            deliver(event)

    unsubscribe = _subscription_bus.subscribe(deliver_event)
    for task in tasks:
        task.listeners.add(deliver)
    try:
        await ctx.session.send_notification(
            SubscriptionsAcknowledgedNotification(
                params=SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
            ),
            related_request_id=subscription_id,
        )
        for task in tasks:
            await ctx.session.send_notification(
                _WireNotification(method="notifications/tasks", params={**task.modern_wire(), "_meta": meta}),
                related_request_id=subscription_id,
            )
        async for item in receive:
            if isinstance(item, dict):  # a DetailedTask
                notification: Any = _WireNotification(method="notifications/tasks", params={**item, "_meta": meta})
            else:
                notification = event_to_notification(item, meta)
            await ctx.session.send_notification(notification, related_request_id=subscription_id)
    finally:
        unsubscribe()
        for task in tasks:
            task.listeners.discard(deliver)
        send.close()
        receive.close()
    return SubscriptionsListenResult(_meta=meta)


server._lowlevel_server.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, _listen)


# ------------------------------------------------------------ era restriction
# PYSERVER_ERA=modern|legacy turns pyserver into a single-era server. Two hooks:
#
# 1. A ServerMiddleware (`_EraGate`). mcp 2.3.0 runs `Server.middleware` around
#    every inbound request on every transport (stdio loops, the streamable-HTTP
#    legacy loops, stateful and stateless, and the modern single-exchange POST)
#    before validation, method lookup and the handshake; raising before
#    `call_next` vetoes the request, `initialize` included.
# 2. On stdio only, the connection driver. `Server.run` drives
#    `serve_dual_era_loop`, where the first request locks the connection's era
#    before any middleware runs: an enveloped `server/discover` would lock it
#    modern, and the client's fallback `initialize` would then be refused by the
#    SDK itself. So legacy drives the SDK's handshake-only `serve_loop` (what the
#    HTTP session manager uses), and modern drives the SDK's modern stream loop
#    (what a modern-opened stdio connection runs; it refuses `initialize` with
#    -32022 itself). `_serve_modern_stream` is private; mcp is pinned exactly.

ERA = os.environ.get("PYSERVER_ERA", "")
if ERA not in ("", "modern", "legacy"):
    print(f"PYSERVER_ERA must be 'modern' or 'legacy' (or unset), not {ERA!r}", file=sys.stderr)
    sys.exit(2)


def _has_envelope(params: object) -> bool:
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


class _EraGate:
    async def __call__(self, ctx: ServerRequestContext, call_next):  # type: ignore[no-untyped-def]
        if ctx.request_id is None:  # notifications pass untouched
            return await call_next(ctx)
        modern_connection = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if ERA == "modern" and not modern_connection:
            if ctx.method == "initialize":
                requested = (ctx.params or {}).get("protocolVersion")
                data: dict[str, object] = {"supported": list(MODERN_PROTOCOL_VERSIONS)}
                if isinstance(requested, str):
                    data["requested"] = requested
                raise MCPError(
                    code=UNSUPPORTED_PROTOCOL_VERSION,
                    message="this server serves only the 2026-07-28 protocol; the initialize handshake is not accepted",
                    data=data,
                )
            # Any other handshake-era request (e.g. legacy stateless HTTP, which
            # needs no initialize): the modern ladder's envelope rejection.
            verdict = classify_inbound_request({"method": ctx.method, "params": ctx.params})
            if isinstance(verdict, InboundLadderRejection):
                raise MCPError(code=verdict.code, message=verdict.message, data=verdict.data)
            raise MCPError(code=INVALID_REQUEST, message="2026-07-28 requests must carry the MCP-Protocol-Version header")
        if ERA == "legacy" and (modern_connection or ctx.method == "server/discover" or _has_envelope(ctx.params)):
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
        return await call_next(ctx)


if ERA:
    server.middleware.append(_EraGate())


async def _run_stdio_single_era() -> None:
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream), lowlevel.lifespan(lowlevel) as state:
        if ERA == "legacy":
            await serve_loop(
                lowlevel, read_stream, write_stream, lifespan_state=state,
                init_options=lowlevel.create_initialization_options(),
            )
        else:
            try:
                await _serve_modern_stream(lowlevel, read_stream, write_stream, lifespan_state=state, raise_exceptions=False)
            finally:
                await write_stream.aclose()


def request_headers(ctx: Context) -> str:
    """What a client sent over HTTP, for tests of headers and tokens."""
    import json

    request = ctx.request_context.request
    if request is None:
        return "{}"
    seen: dict[str, str] = {}
    for k, v in request.headers.items():
        k = k.lower()
        if k.startswith("x-") or k == "authorization":
            # A header sent twice shows both values.
            seen[k] = f"{seen[k]}, {v}" if k in seen else v
    return json.dumps(seen, sort_keys=True)


# --------------------------------------------------------------------------- main


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] not in ("stdio", "http"):
        print("usage: pyserver.py stdio | http <port> [stateless] [json] [headers]", file=sys.stderr)
        sys.exit(2)
    if argv[1] == "stdio":
        if ERA:
            anyio.run(_run_stdio_single_era)
        else:
            server.run("stdio")
        return
    if len(argv) < 3:
        print("usage: pyserver.py http <port> [stateless] [json] [headers]", file=sys.stderr)
        sys.exit(2)
    port = int(argv[2])
    flags = set(argv[3:])
    unknown = flags - {"stateless", "json", "headers"}
    if unknown:
        print(f"unknown flags: {sorted(unknown)}", file=sys.stderr)
        sys.exit(2)
    if os.environ.get("PYSERVER_BAD_TOOL_NAME") == "1":
        # A name outside the spec's rule (a space, a right-to-left override): the SDK
        # warns and serves it; a client must not offer it to a model.
        server.add_tool(extra_tool, name="read\u202efile now", description="A tool named outside the rule.")
    if os.environ.get("PYSERVER_TOGGLE") == "1":
        server.tool(
            description="Add `extra_tool` if absent, remove it if present, and announce the change.",
            structured_output=False,
        )(toggle_tool)
    if "headers" in flags:
        # Only with the flag, so the default tool list (and .mcp/pyserver.json) stays.
        server.tool(
            description="The HTTP request's `X-*` and `Authorization` headers, as JSON.",
            structured_output=False,
        )(request_headers)
    server.run(
        "streamable-http",
        host="127.0.0.1",
        port=port,
        streamable_http_path="/mcp",
        stateless_http="stateless" in flags,
        json_response="json" in flags,
    )


if __name__ == "__main__":
    main(sys.argv)
