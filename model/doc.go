// Package model is kioku's access to language models: text generation with
// structured output, and embeddings. It has these providers behind two small
// interfaces:
//
//   - Gemini, through google.golang.org/genai, with a Gemini API key or on
//     Vertex AI (project, location and Application Default Credentials);
//   - any OpenAI-compatible server (Ollama, vLLM, llama.cpp, OpenAI itself)
//     over its chat/completions and embeddings endpoints;
//   - Offline, a built-in deterministic embedder that needs no network;
//   - OfflineExtractor, the built-in generation provider and the default:
//     rules (package internal/facts) that answer the memory bank's
//     extraction and consolidation calls, and nothing else, with no model.
//
// The memory bank (extraction, consolidation, retrieval) and the agent
// runtime both use it. A Meter wraps a Generator and an Embedder to count
// their calls, tokens and texts for the server's metrics, and to trace each
// call (OpenTelemetry spans, no-ops unless internal/telemetry installs a
// provider).
//
// # Limits and retries
//
// Every provider's HTTP client runs under CallLimits: a connect timeout, a
// timeout for each try's reply to begin, one for the whole call (retries
// and the reading of the reply included, so that a reply that trickles is
// cut too), and a byte limit on generation replies, past which a reply is
// refused unread. A passed limit is Unavailable, naming its flag, so the
// memory bank's operations are retried later. Requests that fail for a
// reason that may pass (429, 408, 5xx, a failed connection, a reply that
// did not begin in time) are retried by the RetryPolicy (retry.go): full
// jitter, and a Retry-After honoured up to the policy's cap; a longer one
// is handed to the caller on the error (fault.RetryDelayOf). A reply that
// arrives but is not what the call asked for is the caller's to judge:
// BadReply makes its error.
//
// # Why the OpenAI-compatible client is kioku's own
//
// The official SDK, github.com/openai/openai-go, works against compatible
// servers (Ollama, vLLM) through its base URL option, and already sits in
// kioku's module graph (ADK requires v3.49.0), but it is not linked: using
// it for the two endpoints kioku calls (chat/completions, with tools and
// a json_schema response format, and embeddings) made the kioku binary
// 10.7 MB larger at that version (69.6 to 80.2 MB; 47.9 to 54.9 MB
// stripped) and 29 MB larger at v3.100.0, since its client carries every
// service of OpenAI's API. It would not shorten kioku's code much either:
// the translation between genai's types and chat completions (chat.go) is
// kioku's whichever client sends them, and the SDK's own retries would
// have to be turned off for the RetryPolicy that every provider shares
// (retry.go, honouring Retry-After). What kioku writes by hand is the
// request and response structs of those two endpoints and one post
// function (openai.go). The tests fake the server at the HTTP level
// (model/modeltest), so the wire format is checked either way.
package model
