"""The Vertex AI SDK's REST requests (vertexai._genai, as ADK Python sends
them through it), reproduced with Python's standard library, against kioku.

The SDK is not installed here (no PyPI): these are its requests as it
sends them (camelCase JSON, RFC 3339 times with microseconds and +00:00,
the fields the service does not have, $alt, the bearer token of its
Application Default Credentials), its operation polling at
{base}/v1beta1/{operation} and express mode's short paths with
x-goog-api-key. The harness (../tests/python-sdk.test.mjs) starts kioku
and sets KIOKU_URL, and KIOKU_KEYED_URL and KIOKU_KEY for a kioku that
requires API keys.
"""

import json
import os
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

PROJECT, LOCATION, ENGINE_ID = "my-project", "us-central1", "1491331942182813696"
ENGINE = f"projects/{PROJECT}/locations/{LOCATION}/reasoningEngines/{ENGINE_ID}"


class Client:
    """What the SDK's API client does over HTTP: JSON in and out, the ADC
    token as a bearer token (any string for a kioku without keys) or, in
    express mode, an API key in x-goog-api-key."""

    def __init__(self, base, token="adc-token", api_key=None):
        self.base, self.token, self.api_key = base, token, api_key

    def call(self, method, path, body=None, query=None):
        url = f"{self.base}/v1beta1/{path}"
        q = dict(query or {})
        q["$alt"] = "json;enum-encoding=int"
        url += "?" + urllib.parse.urlencode(q)
        headers = {"Content-Type": "application/json", "User-Agent": "vertex-genai-modules/1.165.0 google-genai-sdk/1.50.0"}
        if self.api_key:
            headers["x-goog-api-key"] = self.api_key
        else:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                return res.status, json.loads(res.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")

    def ok(self, method, path, body=None, query=None):
        status, out = self.call(method, path, body, query)
        if status != 200:
            raise AssertionError(f"{method} {path}: {status} {out}")
        return out

    def wait(self, op):
        """Polls an operation as the SDK does: GET {base}/v1beta1/{name}."""
        deadline = time.time() + 20
        while not op.get("done"):
            if time.time() > deadline:
                raise AssertionError(f"operation {op['name']} not done after 20 s")
            time.sleep(0.05)
            op = self.ok("GET", op["name"])
        if "error" in op:
            raise AssertionError(f"operation failed: {op['error']}")
        return op


def rfc3339(t):
    """A time as the SDK writes it: microseconds and +00:00."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%06d+00:00" % int((t % 1) * 1e6)


class SessionsAsADKPython(unittest.TestCase):
    def setUp(self):
        self.c = Client(os.environ["KIOKU_URL"])

    def test_session_lifecycle(self):
        c = self.c
        op = c.ok("POST", f"{ENGINE}/sessions", {"userId": "ann", "sessionState": {"mood": "calm"}}, {"sessionId": "py-1"})
        op = c.wait(op)
        # ADK Python always GETs the session the operation names.
        s = c.ok("GET", op["response"]["name"])
        self.assertEqual(s["name"], f"{ENGINE}/sessions/py-1")
        self.assertIn("updateTime", s)
        self.assertEqual(s["sessionState"], {"mood": "calm"})
        status, out = c.call("GET", f"{ENGINE}/sessions/absent")
        self.assertEqual((status, out["error"]["status"]), (404, "NOT_FOUND"))

        t0 = 1767225600.25
        for i, (author, text) in enumerate([("user", "I live in Lyon."), ("model", "Noted.")]):
            c.ok("POST", f"{s['name']}:appendEvent", {
                "author": author, "invocationId": "inv-1", "timestamp": rfc3339(t0 + i),
                "content": {"role": author, "parts": [{"text": text}]},
                "actions": {"skipSummarization": False, "stateDelta": {"turn": i}, "artifactDelta": {}, "transferAgent": None,
                            "escalate": None, "requestedAuthConfigs": {}, "rewindBeforeInvocationId": None},
                "eventMetadata": {"customMetadata": {"_compaction": None} if i else {}, "turnComplete": True},
                "errorCode": None,
            })
        events = c.ok("GET", f"{s['name']}/events", query={"filter": f'timestamp>="{rfc3339(t0 + 0.5)}"'})
        self.assertEqual([e["author"] for e in events["sessionEvents"]], ["model"])
        listed = c.ok("GET", f"{ENGINE}/sessions", query={"filter": 'user_id="ann"'})
        self.assertEqual([x["name"] for x in listed["sessions"]], [s["name"]])
        self.assertEqual(listed["sessions"][0]["sessionState"], {"mood": "calm", "turn": 1})

        c.wait(c.ok("DELETE", s["name"]))
        self.assertEqual(c.call("GET", s["name"])[0], 404)


class MemoriesAsTheSDK(unittest.TestCase):
    def setUp(self):
        self.c = Client(os.environ["KIOKU_URL"])

    def test_memory_lifecycle(self):
        c = self.c
        scope = {"app_name": ENGINE_ID, "user_id": "ben"}
        op = c.wait(c.ok("POST", f"{ENGINE}/memories", {
            "fact": "Ben prefers green tea.", "scope": scope,
            "topics": [{"managedMemoryTopic": "USER_PREFERENCES"}], "metadata": {"source": {"stringValue": "chat"}},
        }, {"memoryId": "tea"}))
        tea = op["response"]
        self.assertEqual(tea["topics"], [{"managedMemoryTopic": "USER_PREFERENCES"}])

        # add_memory with consolidation: direct memories in batches of 5.
        facts = [f"Ben fact {i}." for i in range(7)]
        for i in range(0, len(facts), 5):
            op = c.wait(c.ok("POST", f"{ENGINE}/memories:generate", {
                "directMemoriesSource": {"directMemories": [{"fact": f} for f in facts[i:i + 5]]}, "scope": scope,
            }))
            self.assertEqual(len(op["response"]["generatedMemories"]), len(facts[i:i + 5]))

        # add_session_to_memory: memories:ingestEvents, fire and forget,
        # then the operation polled.
        op = c.ok("POST", f"{ENGINE}/memories:ingestEvents", {
            "streamId": "s-1", "scope": scope, "forceFlush": True,
            "metadata": {"source": {"stringValue": "chat"}, "turns": {"doubleValue": 3}}, "metadataMergeStrategy": "MERGE",
            "directContentsSource": {"events": [{"eventId": "e1", "eventTime": rfc3339(time.time()),
                                                  "content": {"role": "user", "parts": [{"text": "I sail on weekends."}]}}]},
        })
        op = c.wait(op)
        self.assertEqual(op["response"]["generatedMemories"][0]["memory"]["fact"], "The user said: I sail on weekends.")
        # The metadata keeps its types; a retrieval filter selects on it.
        self.assertEqual(op["response"]["generatedMemories"][0]["memory"]["metadata"], {"source": {"stringValue": "chat"}, "turns": {"doubleValue": 3}})
        got = c.ok("POST", f"{ENGINE}/memories:retrieve", {"scope": scope, "simpleRetrievalParams": {"pageSize": 100}, "filter": 'metadata.turns >= 3 OR fact = "Ben fact 0."'})
        self.assertEqual(sorted(r["memory"]["fact"] for r in got["retrievedMemories"]), ["Ben fact 0.", "The user said: I sail on weekends."])

        got = c.ok("POST", f"{ENGINE}/memories:retrieve", {"scope": scope, "similaritySearchParams": {"searchQuery": "sailing weekends", "topK": 1}})
        self.assertEqual(got["retrievedMemories"][0]["memory"]["fact"], "The user said: I sail on weekends.")
        listed = c.ok("GET", f"{ENGINE}/memories", query={"filter": "scope=" + json.dumps(json.dumps(scope)), "pageSize": 100})
        self.assertEqual(len(listed["memories"]), 9)

        c.wait(c.ok("PATCH", tea["name"], {"fact": "Ben prefers black tea."}, {"updateMask": "fact"}))
        revisions = c.ok("GET", f"{tea['name']}/revisions")["memoryRevisions"]
        self.assertEqual([r["fact"] for r in revisions], ["Ben prefers black tea.", "Ben prefers green tea."])
        self.assertEqual(c.ok("GET", revisions[1]["name"])["fact"], "Ben prefers green tea.")
        c.wait(c.ok("POST", f"{tea['name']}:rollback", {"targetRevisionId": revisions[1]["name"].rsplit("/", 1)[1]}))
        self.assertEqual(c.ok("GET", tea["name"])["fact"], "Ben prefers green tea.")

        # Memories are purged by their exact scope, as listed.
        ben = f'scope.app_name="{ENGINE_ID}" AND scope.user_id="ben"'
        op = c.wait(c.ok("POST", f"{ENGINE}/memories:purge", {"filter": ben, "force": True}))
        self.assertEqual(op["response"], {"@type": "type.googleapis.com/google.cloud.aiplatform.v1beta1.PurgeMemoriesResponse", "purgeCount": "9"})
        self.assertNotIn("memories", c.ok("GET", f"{ENGINE}/memories", query={"filter": ben}))


class ExpressModeWithAPIKeys(unittest.TestCase):
    """Express mode: short paths, the API key in x-goog-api-key; with a
    kioku that requires keys, the key is a kioku API key."""

    def test_express_mode(self):
        c = Client(os.environ["KIOKU_KEYED_URL"], api_key=os.environ["KIOKU_KEY"])
        op = c.wait(c.ok("POST", f"reasoningEngines/{ENGINE_ID}/sessions", {"userId": "ann"}, {"sessionId": "express-1"}))
        self.assertEqual(op["response"]["name"], f"reasoningEngines/{ENGINE_ID}/sessions/express-1")
        self.assertEqual(c.ok("GET", f"reasoningEngines/{ENGINE_ID}/sessions/express-1")["userId"], "ann")
        status, out = Client(os.environ["KIOKU_KEYED_URL"], api_key="kioku_wrong").call("GET", f"reasoningEngines/{ENGINE_ID}/sessions/express-1")
        self.assertEqual((status, out["error"]["status"]), (401, "UNAUTHENTICATED"))


if __name__ == "__main__":
    unittest.main()
