"""Drives triage's A2A door with PyPI's a2a-sdk client (tests/e2e/a2a_client.rs runs it).

Usage: client.py BASE_URL API_KEY SCRATCH_DIR PUSH_URL. The Rust test scripts the fake LLM in the
order of the steps below. Prints one line per step passed; any failure raises (exit 1).
"""

import asyncio
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotFoundError, VersionNotSupportedError


def message(text, task_id=None, context_id=None):
    m = pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER)
    m.parts.append(pb.Part(text=text))
    if task_id:
        m.task_id = task_id
    if context_id:
        m.context_id = context_id
    return pb.SendMessageRequest(message=m)


def answer_of(task):
    return "".join(p.text for a in task.artifacts if a.artifact_id == "answer" for p in a.parts)


async def collect(client, request):
    return [event async for event in client.send_message(request)]


def step(name):
    print(f"ok: {name}", flush=True)


async def main(base, key, scratch, push_url):
    headers = {"X-API-Key": key}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        assert card.name == "triage", card
        assert card.capabilities.streaming
        assert card.supported_interfaces[0].protocol_binding == "JSONRPC"
        assert card.supported_interfaces[0].protocol_version == "1.0"
        assert card.capabilities.push_notifications
        step("card")

        # 1. Streamed (the card says it can): the task, updates, the answer, completed.
        events = await collect(client, message("Why is the pod crashing?"))
        assert events[0].HasField("task"), events[0]
        task_id = events[0].task.id
        last = events[-1]
        assert last.HasField("status_update"), last
        assert last.status_update.status.state == pb.TASK_STATE_COMPLETED, last
        texts = [
            p.text
            for e in events
            if e.HasField("artifact_update")
            for p in e.artifact_update.artifact.parts
        ]
        assert texts == ["It is OOMKilled."], texts
        step("streaming")

        # 2. GetTask and ListTasks.
        task = await client.get_task(pb.GetTaskRequest(id=task_id, history_length=2))
        assert task.status.state == pb.TASK_STATE_COMPLETED
        assert answer_of(task) == "It is OOMKilled.", task
        assert len(task.history) == 2 and task.history[-1].role == pb.ROLE_AGENT, task
        listed = await client.list_tasks(pb.ListTasksRequest(page_size=10))
        assert task_id in [t.id for t in listed.tasks], listed
        step("get and list")

        # 3. A follow-up in the same context, blocking (no streaming).
        blocking = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        events = await collect(blocking, message("How do I fix it?", context_id=task_id))
        assert len(events) == 1 and events[0].HasField("task"), events
        assert events[0].task.id == task_id
        assert events[0].task.status.state == pb.TASK_STATE_COMPLETED
        assert answer_of(events[0].task) == "Raise the memory limit.", events[0]
        step("blocking follow-up")

        # 4. A risky call: input-required, then approved by text.
        events = await collect(blocking, message(f"Create a marker in {scratch}"))
        risky = events[0].task
        assert risky.status.state == pb.TASK_STATE_INPUT_REQUIRED, risky
        assert "approve" in risky.status.message.parts[0].text
        events = await collect(client, message("approve", task_id=risky.id))
        assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED, events[-1]
        step("approval")

        # 5. Errors arrive as the SDK's own exceptions.
        try:
            await client.get_task(pb.GetTaskRequest(id=str(uuid.uuid4())))
            raise AssertionError("an unknown task was found")
        except TaskNotFoundError:
            pass
        step("unknown task")

        # 6. Push notifications: a config made, read back without its token, listed; a
        # follow-up on the task is pushed to it (the Rust test checks what arrived); deleted.
        made = await client.create_task_push_notification_config(
            pb.TaskPushNotificationConfig(
                task_id=task_id,
                id="sdk-hook",
                url=push_url,
                token="sdk-push-token",
                authentication=pb.AuthenticationInfo(scheme="Bearer", credentials="sdk-cred"),
            )
        )
        assert made.id == "sdk-hook" and made.task_id == task_id, made
        assert made.token == "" and made.authentication.credentials == "", made
        assert made.authentication.scheme == "Bearer", made
        got = await client.get_task_push_notification_config(
            pb.GetTaskPushNotificationConfigRequest(task_id=task_id, id="sdk-hook")
        )
        assert got.url == push_url, got
        listed = await client.list_task_push_notification_configs(
            pb.ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        assert [c.id for c in listed.configs] == ["sdk-hook"], listed
        events = await collect(blocking, message("Anything else?", context_id=task_id))
        assert events[0].task.status.state == pb.TASK_STATE_COMPLETED, events[0]
        step("push config")
        print(f"push-task: {task_id}", flush=True)

    # 6. A client that sends no A2A-Version (0.3's way) is told the version is not spoken.
    async with httpx.AsyncClient(headers=headers, timeout=30) as bare:
        factory = ClientFactory(ClientConfig(httpx_client=bare, streaming=False))
        client = factory.create(card)
        del bare.headers["A2A-Version"]
        try:
            await client.get_task(pb.GetTaskRequest(id=task_id))
            raise AssertionError("a request without A2A-Version was answered")
        except VersionNotSupportedError:
            pass
        step("version")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]))
