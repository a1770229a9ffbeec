// A fake OpenAI model at the HTTP level: a loopback server answering the
// Responses API (POST /v1/responses) and Chat Completions (POST
// /v1/chat/completions) with the replies the test gives, and keeping every
// request body, so that the real SDKs run against it.
import { createServer } from "node:http";

/**
 * Starts the fake; reply(body, path) returns the text of the answer to a
 * request. Resolves with its base URL (`.../v1`), the requests received
 * ({path, body}) and close().
 */
export async function startFakeModel(reply) {
  const requests = [];
  const server = createServer((req, res) => {
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (chunk) => (raw += chunk));
    req.on("end", () => {
      const body = raw === "" ? {} : JSON.parse(raw);
      requests.push({ path: req.url, body });
      const text = reply(body, req.url);
      const n = requests.length;
      let answer;
      if (req.url === "/v1/responses") {
        answer = {
          id: `resp_${n}`,
          object: "response",
          created_at: 1767225600,
          status: "completed",
          model: body.model,
          output: [{ type: "message", id: `msg_${n}`, status: "completed", role: "assistant", content: [{ type: "output_text", text, annotations: [] }] }],
          usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
        };
      } else if (req.url === "/v1/chat/completions") {
        answer = {
          id: `chatcmpl_${n}`,
          object: "chat.completion",
          created: 1767225600,
          model: body.model,
          choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: text } }],
          usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
        };
      } else {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `no fake for ${req.method} ${req.url}` } }));
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    baseURL: `http://127.0.0.1:${server.address().port}/v1`,
    requests,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
