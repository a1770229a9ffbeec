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
package model
