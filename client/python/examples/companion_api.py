"""A small FastAPI backend of a companion chat, keeping its conversations and
memories in kioku: the endpoints a web front end calls.

    POST /users/{user}/conversations                     start one: {"id": ...}
    POST /users/{user}/conversations/{id}/messages       {"id": "m-1", "text": "..."}: the message and the reply
    GET  /users/{user}/conversations/{id}                the conversation's messages, oldest first
    GET  /users/{user}/memories?q=...&top_k=5            the user's memories nearest the query

A message's id comes from the front end (a UUID, say) and is kept on a retry:
kioku appends an event once per id, so a retried post stores nothing twice,
and the reply's id follows from it. The reply is canned; a real backend asks
its model here (and takes the user from its own login, not the path). kioku's
errors become HTTP statuses (not found 404, invalid 400, ...) in one handler.

Run it next to a `kioku serve`:

    KIOKU_TARGET=127.0.0.1:8080 PYTHONPATH=client/python/src:client/python/examples \\
        /usr/bin/python3 -m uvicorn --factory companion_api:create_app --port 8000

KIOKU_TARGET (default 127.0.0.1:8080), KIOKU_API_KEY (when kioku has
--auth-keys) and KIOKU_APP (default companion) configure it.
"""

import contextlib
import os

import grpc
from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

import kioku
from kioku.v1 import memory_bank_service_pb2 as mb, session_pb2, session_service_pb2 as ss

TIMEOUT = 10  # seconds for each call to kioku

# kioku's status codes as HTTP statuses; any other is 502 (kioku failed).
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


class Message(BaseModel):
    # 120 bytes leave room for the reply's id (".reply") in kioku's 128.
    id: str = Field(..., min_length=1, max_length=120)
    text: str


def canned_reply(text):
    return f"You said: {text}"


def message(event):
    return {"id": event.id, "author": event.author, "text": "".join(p.text for p in event.content.parts)}


def create_app(target=None, api_key=None, app=None):
    """The FastAPI app; arguments left out come from the environment."""
    target = target or os.environ.get("KIOKU_TARGET", "127.0.0.1:8080")
    api_key = api_key or os.environ.get("KIOKU_API_KEY") or None
    app = app or os.environ.get("KIOKU_APP", "companion")
    client = kioku.Client(target, api_key=api_key)

    @contextlib.asynccontextmanager
    async def lifespan(_):
        yield
        client.close()

    api = FastAPI(title="companion")
    api.router.lifespan_context = lifespan  # FastAPI(lifespan=...) from 0.93; Debian 12 has 0.92

    @api.exception_handler(grpc.RpcError)
    def kioku_error(request: Request, e: grpc.RpcError):
        return JSONResponse({"detail": e.details()}, status_code=HTTP_STATUS.get(e.code(), 502))

    def conversation(user, conversation_id):
        return kioku.session_name(app, user, conversation_id)

    @api.post("/users/{user}/conversations", status_code=201)
    def start_conversation(user: str):
        s = client.sessions.CreateSession(ss.CreateSessionRequest(parent=kioku.user_name(app, user)), timeout=TIMEOUT)
        return {"id": s.name.rsplit("/", 1)[1]}

    @api.post("/users/{user}/conversations/{conversation_id}/messages")
    def post_message(user: str, conversation_id: str, m: Message):
        name = conversation(user, conversation_id)
        said = session_pb2.Event(id=m.id, author="user", content=kioku.text("user", m.text))
        reply = session_pb2.Event(id=m.id + ".reply", author="companion", content=kioku.text("model", canned_reply(m.text)))
        stored = [client.sessions.AppendEvent(ss.AppendEventRequest(name=name, event=e), timeout=TIMEOUT).event for e in (said, reply)]
        return {"messages": [message(e) for e in stored]}

    @api.get("/users/{user}/conversations/{conversation_id}")
    def get_conversation(user: str, conversation_id: str):
        events = client.list_events(ss.ListEventsRequest(parent=conversation(user, conversation_id)), timeout=TIMEOUT)
        return {"id": conversation_id, "messages": [message(e) for e in events]}

    @api.get("/users/{user}/memories")
    def memories(user: str, q: str = Query(..., min_length=1), top_k: int = Query(5, ge=1, le=50)):
        found = client.memories.RetrieveMemories(
            mb.RetrieveMemoriesRequest(
                parent=kioku.app_name(app), scope={"user_id": user}, similarity_search=mb.SimilaritySearch(query=q, top_k=top_k)
            ),
            timeout=TIMEOUT,
        )
        return {"memories": [{"fact": r.memory.fact, "distance": r.distance} for r in found.retrieved_memories]}

    return api
