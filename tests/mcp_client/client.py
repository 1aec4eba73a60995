"""The official MCP Python SDK against triage's MCP server over streamable HTTP.

Run by tests/e2e/mcp_server.rs with MCP_URL (the server's /mcp) and MCP_API_KEY; the fake LLM
behind the server is scripted for: investigate (one bash call, then "SDK answer."), then one
conversation answered with "Conversation answer.". Exits non-zero on the first check that fails.
"""

import asyncio
import json
import os
import sys

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

URL = os.environ["MCP_URL"]
KEY = os.environ["MCP_API_KEY"]
TOOLS = {
    "investigate",
    "list_models",
    "start_conversation",
    "conversation_status",
    "conversation_events",
    "send_message",
    "approve",
    "deny",
}


def check(condition, what):
    if not condition:
        raise SystemExit(f"mcp client: FAILED: {what}")
    print(f"mcp client: ok: {what}")


def text(result):
    return result.content[0].text


async def refused_without_key():
    """No key: the server answers 401 before any MCP, and the SDK reports a failure."""
    try:
        async with create_mcp_http_client() as http:
            async with streamable_http_client(URL, http_client=http) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=10) as session:
                    await session.initialize()
    except BaseException as e:  # the SDK raises from a task group: an ExceptionGroup
        return repr(e)
    return None


async def main():
    refusal = await refused_without_key()
    check(refusal is not None, f"a client without the key is refused ({refusal})")

    headers = {"Authorization": f"Bearer {KEY}"}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(URL, http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60) as session:
                init = await session.initialize()
                check(init.server_info.name == "triage", f"initialize: {init.server_info}")
                check(bool(init.protocol_version), f"protocol {init.protocol_version}")
                check(init.capabilities.tools is not None, "the server offers tools")

                listed = await session.list_tools()
                names = {t.name for t in listed.tools}
                check(names == TOOLS, f"tools/list: {sorted(names)}")

                progress = []

                async def on_progress(value, total, message):
                    progress.append((value, message))

                answer = await session.call_tool(
                    "investigate",
                    {"question": "is the SDK welcome?"},
                    progress_callback=on_progress,
                )
                check(not answer.is_error, f"investigate succeeded: {answer}")
                check(text(answer) == "SDK answer.", f"investigate's answer: {text(answer)!r}")
                check(
                    [m for _, m in progress][:1] == ["running bash"]
                    and len(progress) >= 2
                    and progress[1][1].startswith("bash: done"),
                    f"progress while the tool ran: {progress}",
                )

                models = await session.call_tool("list_models", {})
                listed_models = json.loads(text(models))
                check(listed_models["models"] == ["fake"], f"list_models: {listed_models}")

                started = await session.call_tool(
                    "start_conversation", {"question": "and in the background?"}
                )
                check(not started.is_error, f"start_conversation: {started}")
                conversation = started.structured_content["conversation_id"]
                status = None
                for _ in range(200):
                    polled = await session.call_tool(
                        "conversation_status", {"conversation_id": conversation}
                    )
                    status = polled.structured_content
                    if status["status"] in ("finished", "error"):
                        break
                    await asyncio.sleep(0.05)
                check(status["status"] == "finished", f"the conversation finished: {status}")
                check(status.get("answer") == "Conversation answer.", f"its answer: {status}")
                events = await session.call_tool(
                    "conversation_events", {"conversation_id": conversation, "after": 0}
                )
                kinds = [e["kind"] for e in events.structured_content["events"]]
                check("ai_answer_end" in kinds, f"its events: {kinds}")

                bad = await session.call_tool("investigate", {"question": ""})
                check(bad.is_error and "empty" in text(bad), f"a bad argument: {text(bad)}")
    print("mcp client: all checks passed")


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
