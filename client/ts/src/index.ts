/**
 * @kioku-ai/client: the TypeScript client of kioku, the sessions and memory
 * bank service for LLM agents, with the memory file tool's backend. It runs in Node 20+ and in browsers (it uses
 * `fetch`), over the Connect protocol or gRPC-Web.
 *
 * ```ts
 * import { createKiokuClient, sessionName, toJson, SessionSchema } from "@kioku-ai/client";
 *
 * const kioku = createKiokuClient({ baseUrl: "http://127.0.0.1:8080" });
 * const session = await kioku.sessions.createSession({ parent: userName("demo", "ann") });
 * console.log(JSON.stringify(toJson(SessionSchema, session)));
 * ```
 *
 * Messages are protobuf-es v2 messages: int64 fields (event sequences,
 * counts) are `bigint`, which `JSON.stringify` refuses; `toJson` with the
 * message's schema gives plain JSON (int64 as strings, timestamps as RFC
 * 3339, enums by name), as the server's own JSON does.
 *
 * @module
 */

import { createRegistry, toJson as toJsonWithOptions, type DescMessage, type JsonObject, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { anyUnpack, MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";

import { AuthService } from "./gen/kioku/v1/auth_service_pb.js";
import { file_kioku_v1_block_service, BlockService } from "./gen/kioku/v1/block_service_pb.js";
import { file_kioku_v1_memory, GenerateMemoriesResponseSchema, PurgeMemoriesResponseSchema, type GenerateMemoriesResponse, type PurgeMemoriesResponse } from "./gen/kioku/v1/memory_pb.js";
import { file_kioku_v1_memory_bank_service, MemoryBankService } from "./gen/kioku/v1/memory_bank_service_pb.js";
import { file_kioku_v1_memory_file_service, MemoryFileService, type ExecuteResponse } from "./gen/kioku/v1/memory_file_service_pb.js";
import { file_kioku_v1_operation, type Operation } from "./gen/kioku/v1/operation_pb.js";
import { file_kioku_v1_operation_service, OperationService } from "./gen/kioku/v1/operation_service_pb.js";
import { file_kioku_v1_session } from "./gen/kioku/v1/session_pb.js";
import { file_kioku_v1_session_service, SessionService, type AppendEventRequest } from "./gen/kioku/v1/session_service_pb.js";

export * from "./gen/kioku/v1/block_service_pb.js";
export * from "./gen/kioku/v1/memory_pb.js";
export * from "./gen/kioku/v1/memory_bank_service_pb.js";
export * from "./gen/kioku/v1/memory_file_service_pb.js";
export * from "./gen/kioku/v1/operation_pb.js";
export * from "./gen/kioku/v1/operation_service_pb.js";
export * from "./gen/kioku/v1/session_pb.js";
export * from "./gen/kioku/v1/session_service_pb.js";
export { create, fromJson } from "@bufbuild/protobuf";
export { Code, ConnectError } from "@connectrpc/connect";

/**
 * Every kioku.v1 message type and the types they use, for `toJson`,
 * `fromJson` and unpacking `google.protobuf.Any` (an operation's metadata
 * and response).
 */
export const registry = createRegistry(
  file_kioku_v1_session,
  file_kioku_v1_session_service,
  file_kioku_v1_memory,
  file_kioku_v1_memory_bank_service,
  file_kioku_v1_operation,
  file_kioku_v1_operation_service,
  file_kioku_v1_memory_file_service,
  file_kioku_v1_block_service,
);

/** Options of {@link createKiokuClient}. */
export interface KiokuClientOptions {
  /** The server's root URL, such as `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** An API key (`kioku key` makes them), sent as `Authorization: Bearer KEY`. */
  apiKey?: string;
  /** The protocol: `"connect"` (the default) or `"grpc-web"`. */
  transport?: "connect" | "grpc-web";
  /** Send protobuf binary instead of JSON (Connect only; gRPC-Web is always binary). */
  binary?: boolean;
  /** A `fetch` to use instead of the global one. */
  fetch?: typeof globalThis.fetch;
  /** Interceptors run on every call, after the one that adds the API key. */
  interceptors?: Interceptor[];
  /**
   * How calls that failed for a transient reason are retried (see
   * {@link RetryOptions}); `false` turns retries off. Default: up to 5
   * attempts.
   */
  retry?: RetryOptions | false;
}

/**
 * How the client retries a call that failed for a transient reason: the
 * server was unavailable (`Code.Unavailable`, as while it restarts, or its
 * store cannot be reached or did not confirm a write), a concurrent change
 * or a store transaction closed under it won (`Code.Aborted`), or the
 * request never got an answer (a network error). Only calls safe to repeat
 * are retried: those the API marks as having no side effects (every Get,
 * List, Retrieve and Wait method) and `appendEvent`, which is idempotent by
 * event id: the client gives every event without an id a fresh one before
 * sending, so a retry that reaches a server which already stored the event
 * gets the stored event back, and nothing is appended twice. Other calls,
 * and streams, fail with the first error. A call's signal or timeout ends
 * the retries.
 */
export interface RetryOptions {
  /** How many times a call is made in all; 1 turns retries off. Default 5. */
  maxAttempts?: number;
  /**
   * The wait before the first retry, in milliseconds (default 100); each
   * further wait doubles, up to `maxBackoffMs` (default 2000). Each wait is
   * jittered to between half and all of its length.
   */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
}

/** Returns a fresh event id (a random UUID), as the client gives to every appended event that has none. */
export function newEventId(): string {
  // crypto.randomUUID needs a secure context in browsers; getRandomValues does not.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Whether a failed attempt may succeed when made again. */
function transient(e: unknown): boolean {
  if (e instanceof ConnectError) {
    return e.code === Code.Unavailable || e.code === Code.Aborted;
  }
  // fetch rejects with a TypeError when the request got no answer.
  return e instanceof TypeError;
}

/** The interceptor that gives events ids and retries safe unary calls. */
function retryInterceptor(options: RetryOptions): Interceptor {
  const maxAttempts = options.maxAttempts && options.maxAttempts > 0 ? options.maxAttempts : 5;
  const initial = options.initialBackoffMs && options.initialBackoffMs > 0 ? options.initialBackoffMs : 100;
  const max = options.maxBackoffMs && options.maxBackoffMs > 0 ? options.maxBackoffMs : 2000;
  return (next) => async (req) => {
    if (req.stream) {
      return next(req);
    }
    let safe = req.method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS;
    if (req.method === SessionService.method.appendEvent) {
      const event = (req.message as AppendEventRequest).event;
      if (event && event.id === "") {
        event.id = newEventId();
      }
      safe = event !== undefined && event.id !== "";
    }
    let backoff = initial;
    for (let attempt = 1; ; attempt++) {
      try {
        return await next(req);
      } catch (e) {
        if (!safe || !transient(e) || attempt >= maxAttempts || req.signal.aborted) {
          throw e;
        }
      }
      const wait = backoff / 2 + Math.random() * (backoff / 2);
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          req.signal.removeEventListener("abort", done);
          resolve();
        };
        const timer = setTimeout(done, wait);
        req.signal.addEventListener("abort", done);
      });
      backoff = Math.min(2 * backoff, max);
    }
  };
}

/** The services of kioku.v1, as Connect clients on one transport. */
export interface KiokuClient {
  sessions: Client<typeof SessionService>;
  memories: Client<typeof MemoryBankService>;
  operations: Client<typeof OperationService>;
  /** The memory file tool's backend (Anthropic's memory tool) and its files. */
  files: Client<typeof MemoryFileService>;
  /** Mints a user's token (`mintUserToken`, app keys only) for a page to send as its key. */
  auth: Client<typeof AuthService>;
  /** The core memory blocks: a user's and the app's shared ones. */
  blocks: Client<typeof BlockService>;
  /** The transport the services share. */
  transport: Transport;
}

/**
 * Returns clients of the kioku.v1 services. Every method takes the request
 * as a plain object (`{ parent: userName("demo", "ann") }`) and returns the
 * response message; errors are `ConnectError`s with the server's code.
 * Server-streaming `sessions.watchSession` returns an async iterable.
 * Calls safe to repeat are retried when they fail for a transient reason
 * (see {@link RetryOptions}).
 */
export function createKiokuClient(options: KiokuClientOptions): KiokuClient {
  const interceptors: Interceptor[] = [];
  const apiKey = options.apiKey;
  if (apiKey) {
    interceptors.push((next) => (req) => {
      req.header.set("Authorization", `Bearer ${apiKey}`);
      return next(req);
    });
  }
  interceptors.push(...(options.interceptors ?? []));
  // Innermost, so that every attempt passes the interceptors above.
  if (options.retry !== false) {
    interceptors.push(retryInterceptor(options.retry ?? {}));
  }
  // The registry lets JSON carry google.protobuf.Any (operations).
  const common = { baseUrl: options.baseUrl, interceptors, fetch: options.fetch, jsonOptions: { registry } };
  const transport =
    options.transport === "grpc-web"
      ? createGrpcWebTransport(common)
      : createConnectTransport({ ...common, useBinaryFormat: options.binary ?? false });
  return {
    sessions: createClient(SessionService, transport),
    memories: createClient(MemoryBankService, transport),
    operations: createClient(OperationService, transport),
    files: createClient(MemoryFileService, transport),
    auth: createClient(AuthService, transport),
    blocks: createClient(BlockService, transport),
    transport,
  };
}

/** `apps/{app}`. */
export function appName(app: string): string {
  return `apps/${app}`;
}

/** `apps/{app}/users/{user}`, the parent of a user's sessions. */
export function userName(app: string, user: string): string {
  return `apps/${app}/users/${user}`;
}

/** `apps/{app}/users/{user}/sessions/{session}`. */
export function sessionName(app: string, user: string, session: string): string {
  return `apps/${app}/users/${user}/sessions/${session}`;
}

/** `apps/{app}/users/{user}/memoryFiles/{file}`. */
export function memoryFileName(app: string, user: string, file: string): string {
  return `apps/${app}/users/${user}/memoryFiles/${file}`;
}

/**
 * The answer of the memory tool to one tool_use block of a model (a
 * Claude `memory_20250818` tool call): it runs the block's input in the
 * user's memory directory (`files.execute`) and returns the content and
 * is_error of the tool_result to send back.
 *
 * ```ts
 * const result = await runMemoryTool(kioku, userName("demo", "ann"), block.input);
 * messages.push({ role: "user", content: [{ type: "tool_result", tool_use_id: block.id, ...result }] });
 * ```
 */
export async function runMemoryTool(client: KiokuClient, user: string, input: JsonObject): Promise<{ content: string; is_error: boolean }> {
  const res: ExecuteResponse = await client.files.execute({ parent: user, input });
  return { content: res.output, is_error: res.isError };
}

/** `apps/{app}/memories/{memory}`. */
export function memoryName(app: string, memory: string): string {
  return `apps/${app}/memories/${memory}`;
}

/**
 * Returns a message as plain JSON (proto3 JSON, the server's own): int64 as
 * strings, timestamps as RFC 3339, enums by name, an operation's metadata
 * and response with their `@type`. The result is safe for `JSON.stringify`.
 */
export function toJson<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): JsonValue {
  return toJsonWithOptions(schema, message, { registry });
}

/** Options of {@link waitOperation}. */
export interface WaitOptions {
  /** How long to wait in all, in milliseconds. Default 60,000. */
  timeoutMs?: number;
  /** Aborts the wait. */
  signal?: AbortSignal;
}

/**
 * Waits until the operation is done, with the server's WaitOperation (one
 * call per minute at most, so no polling), and returns it. An operation
 * still running after `timeoutMs` is a `ConnectError` with code
 * `DeadlineExceeded`; a failed operation is returned, not thrown (see
 * {@link generateResult}).
 */
export async function waitOperation(client: KiokuClient, name: string, options: WaitOptions = {}): Promise<Operation> {
  const total = options.timeoutMs ?? 60_000;
  const deadline = Date.now() + total;
  for (;;) {
    const left = Math.max(0, deadline - Date.now());
    const ms = Math.min(left, 60_000);
    const op = await client.operations.waitOperation(
      { name, timeout: { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 } },
      // The call outlives the server's wait, which ends it.
      { signal: options.signal, timeoutMs: ms + 10_000 },
    );
    if (op.done) {
      return op;
    }
    if (Date.now() >= deadline) {
      throw new ConnectError(`operation ${name} is not done after ${total} ms`, Code.DeadlineExceeded);
    }
  }
}

/** The outcome of a finished operation: its response, or its error thrown. */
function finished<Desc extends DescMessage>(op: Operation, schema: Desc): MessageShape<Desc> {
  if (!op.done) {
    throw new ConnectError(`operation ${op.name} is not done`, Code.FailedPrecondition);
  }
  switch (op.result.case) {
    case "error":
      throw new ConnectError(op.result.value.message, op.result.value.code as Code);
    case "response": {
      const response = anyUnpack(op.result.value, schema);
      if (response === undefined) {
        throw new ConnectError(`operation ${op.name} answered ${op.result.value.typeUrl}, not ${schema.typeName}`, Code.Internal);
      }
      return response;
    }
    default:
      throw new ConnectError(`operation ${op.name} is done without a result`, Code.Internal);
  }
}

/**
 * The typed response of a finished GenerateMemories operation: each memory
 * created, updated or deleted with its action. A failed operation throws its
 * error as a `ConnectError` (with the operation's code).
 */
export function generateResult(op: Operation): GenerateMemoriesResponse {
  return finished(op, GenerateMemoriesResponseSchema);
}

/** The typed response of a finished PurgeMemories operation (the count). */
export function purgeResult(op: Operation): PurgeMemoriesResponse {
  return finished(op, PurgeMemoriesResponseSchema);
}
