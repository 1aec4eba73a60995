"""Drives triage's OpenAI-compatible routes with the official `openai` SDK, for
tests/e2e/openai_sdk.rs, which scripts the fake LLM's answers in this order and checks what
this prints: one JSON object of what the SDK saw.

Usage: client.py BASE_URL API_KEY
"""

import json
import sys

import openai
import pydantic
from openai import OpenAI


class Health(pydantic.BaseModel):
    healthy: bool
    reason: str


def main() -> None:
    base, key = sys.argv[1], sys.argv[2]
    client = OpenAI(base_url=base, api_key=key, max_retries=0, timeout=30)
    seen = {}

    models = client.models.list()
    seen["models"] = [m.id for m in models.data]

    sync = client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "are the pods ok?"}]
    )
    seen["sync"] = {
        "content": sync.choices[0].message.content,
        "finish_reason": sync.choices[0].finish_reason,
        "total_tokens": sync.usage.total_tokens,
    }

    content, reasoning, usage = [], [], None
    stream = client.chat.completions.create(
        model="fake",
        messages=[{"role": "user", "content": "run echo"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.total_tokens
        for choice in chunk.choices:
            if choice.delta.content:
                content.append(choice.delta.content)
            extra = choice.delta.model_extra or {}
            if extra.get("reasoning_content"):
                reasoning.append(extra["reasoning_content"])
    seen["stream"] = {
        "content": "".join(content),
        "pieces": len(content),
        "reasoning": "".join(reasoning),
        "total_tokens": usage,
    }

    parsed = client.chat.completions.parse(
        model="fake",
        messages=[{"role": "user", "content": "healthy?"}],
        response_format=Health,
    )
    health = parsed.choices[0].message.parsed
    seen["parsed"] = health.model_dump() if health else None

    response = client.responses.create(
        model="fake", instructions="Be brief.", input="what changed?"
    )
    seen["responses"] = {"output_text": response.output_text, "status": response.status}

    kinds, text = [], []
    for event in client.responses.create(model="fake", input="and now?", stream=True):
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            text.append(event.delta)
        if event.type == "response.completed":
            seen["responses_stream_usage"] = event.response.usage.total_tokens
    seen["responses_stream"] = {"types": kinds, "text": "".join(text)}

    try:
        client.chat.completions.create(
            model="no-such-model", messages=[{"role": "user", "content": "q"}]
        )
        seen["unknown_model"] = "no error"
    except openai.NotFoundError as e:
        seen["unknown_model"] = {"type": type(e).__name__, "code": e.code, "status": e.status_code}

    try:
        OpenAI(base_url=base, api_key="forged", max_retries=0).models.list()
        seen["bad_key"] = "no error"
    except openai.AuthenticationError as e:
        seen["bad_key"] = {"type": type(e).__name__, "code": e.code}

    try:
        client.responses.create(model="fake", input="q", previous_response_id="resp_1")
        seen["stateful"] = "no error"
    except openai.BadRequestError as e:
        seen["stateful"] = {"type": type(e).__name__, "param": e.param}

    print(json.dumps(seen))


if __name__ == "__main__":
    main()
