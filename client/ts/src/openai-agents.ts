/**
 * A `Session` of the OpenAI Agents SDK for JavaScript (`@openai/agents`)
 * backed by a kioku session: an agent's conversation history kept in
 * kioku, where it outlives the process, is searched (SearchEvents), and
 * feeds memory generation.
 *
 * ```ts
 * import { Agent, run } from "@openai/agents";
 * import { createKiokuClient, userName } from "@kioku-ai/client";
 * import { KiokuSession } from "@kioku-ai/client/openai-agents";
 *
 * const kioku = createKiokuClient({ baseUrl: "http://127.0.0.1:8080", apiKey: process.env.KIOKU_KEY });
 * const session = new KiokuSession({ client: kioku, user: userName("demo", "ann"), sessionId: "chat-1" });
 * await run(agent, "My name is Ann.", { session });
 * await run(agent, "What is my name?", { session }); // the model sees the first turn
 * ```
 *
 * Each item is one event of the session: the item itself, verbatim, in the
 * event's `extensions` (`{"openai_agents": {"item": ...}}`), and what kioku
 * can read of it in the event's content (a message's text, a function call
 * or its result), so that search and memory generation see the
 * conversation. Events are append-only, so `popItem` appends a tombstone
 * (`{"openai_agents": {"pop": EVENT_ID}}`, no content) that hides the last
 * visible item; it appends only if the session is still where it read it
 * (AppendEvent's expected_sequence), so two concurrent pops remove two
 * items. `clearSession` deletes the kioku session with its events (the
 * memories generated from it stay); the next `addItems` creates it again
 * under the same id. Events the adapter did not write (another client's)
 * are not items and are left out.
 *
 * `@openai/agents` is an optional peer dependency: only its types are
 * imported.
 *
 * @module
 */

import type { JsonObject, JsonValue, MessageInitShape } from "@bufbuild/protobuf";
import type { AgentInputItem, Session } from "@openai/agents";

import type { ContentSchema, EventSchema } from "./gen/kioku/v1/session_pb.js";
import { Code, ConnectError, newEventId, type KiokuClient } from "./index.js";

/** Options of {@link KiokuSession}. */
export interface KiokuSessionOptions {
  /** The kioku client. */
  client: KiokuClient;
  /** The session's user, `apps/{app}/users/{user}` (`userName`). */
  user: string;
  /**
   * The kioku session id (1 to 128 letters, digits, `-`, `_`, `.`): the
   * same id continues the same conversation. Default: a random UUID.
   */
  sessionId?: string;
  /** The author of the events of the agent's items. Default `agent`. */
  author?: string;
}

/** The key of the adapter's data in an event's extensions. */
const EXT = "openai_agents";

/** How many pops to try when other writers keep changing the session. */
const POP_ATTEMPTS = 5;

/**
 * An OpenAI Agents `Session` whose items are the events of one kioku
 * session (see the module's documentation for the encoding).
 */
export class KiokuSession implements Session {
  private readonly client: KiokuClient;
  private readonly user: string;
  private readonly id: string;
  private readonly author: string;
  private created: Promise<void> | undefined;

  constructor(options: KiokuSessionOptions) {
    this.client = options.client;
    this.user = options.user;
    this.id = options.sessionId ?? newEventId();
    this.author = options.author ?? "agent";
  }

  /** The session's resource name, `apps/{app}/users/{user}/sessions/{id}`. */
  get name(): string {
    return `${this.user}/sessions/${this.id}`;
  }

  /** Returns the kioku session id, creating the session if it does not exist. */
  async getSessionId(): Promise<string> {
    await this.ensure();
    return this.id;
  }

  /** Returns the items, oldest first: the latest `limit` when given. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (limit !== undefined && limit <= 0) {
      return [];
    }
    const { items } = await this.latest(limit);
    return items.map((v) => v.item).reverse();
  }

  /** Appends the items, each as one event. */
  async addItems(items: AgentInputItem[]): Promise<void> {
    if (items.length === 0) {
      return;
    }
    await this.ensure();
    for (const item of items) {
      await this.client.sessions.appendEvent({ name: this.name, event: this.itemEvent(item) });
    }
  }

  /** Hides the last item with a tombstone event and returns it; undefined when there is none. */
  async popItem(): Promise<AgentInputItem | undefined> {
    for (let attempt = 1; ; attempt++) {
      const { items, lastSequence } = await this.latest(1);
      if (items.length === 0) {
        return undefined;
      }
      try {
        await this.client.sessions.appendEvent({
          name: this.name,
          event: { author: this.author, extensions: { [EXT]: { pop: items[0].id } } },
          expectedSequence: lastSequence,
        });
        return items[0].item;
      } catch (e) {
        // Another writer appended since the read: read again.
        if (!(e instanceof ConnectError && e.code === Code.FailedPrecondition) || attempt >= POP_ATTEMPTS) {
          throw e;
        }
      }
    }
  }

  /** Deletes the kioku session and its events; the memories generated from it stay. */
  async clearSession(): Promise<void> {
    this.created = undefined;
    await this.client.sessions.deleteSession({ name: this.name, allowMissing: true });
  }

  /** Creates the session once, unless it exists. */
  private ensure(): Promise<void> {
    this.created ??= this.client.sessions.createSession({ parent: this.user, sessionId: this.id }).then(
      () => undefined,
      (e) => {
        if (e instanceof ConnectError && e.code === Code.AlreadyExists) {
          return;
        }
        this.created = undefined;
        throw e;
      },
    );
    return this.created;
  }

  /**
   * Reads the session newest first and returns its latest visible items
   * (up to limit when given, newest first) with their event ids, and the
   * session's last sequence (0 when it has no events or does not exist).
   */
  private async latest(limit?: number): Promise<{ items: { id: string; item: AgentInputItem }[]; lastSequence: bigint }> {
    const items: { id: string; item: AgentInputItem }[] = [];
    const popped = new Set<string>();
    let lastSequence = 0n;
    let pageToken = "";
    do {
      let page;
      try {
        page = await this.client.sessions.listEvents({ parent: this.name, orderBy: "sequence desc", pageSize: 1000, pageToken });
      } catch (e) {
        if (e instanceof ConnectError && e.code === Code.NotFound) {
          return { items, lastSequence };
        }
        throw e;
      }
      for (const event of page.events) {
        if (lastSequence === 0n) {
          lastSequence = event.sequence;
        }
        const ext = event.extensions?.[EXT];
        if (!isObject(ext)) {
          continue;
        }
        if (typeof ext.pop === "string") {
          popped.add(ext.pop);
        } else if (isObject(ext.item) && !popped.has(event.id)) {
          items.push({ id: event.id, item: ext.item as unknown as AgentInputItem });
          if (limit !== undefined && items.length >= limit) {
            return { items, lastSequence };
          }
        }
      }
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    return { items, lastSequence };
  }

  /** The event that stores an item. */
  private itemEvent(item: AgentInputItem): MessageInitShape<typeof EventSchema> {
    // Through JSON: a Struct holds JSON values only (no undefined).
    const json = JSON.parse(JSON.stringify(item)) as JsonObject;
    const user = json.role === "user";
    return {
      author: user ? "user" : this.author,
      content: itemContent(json),
      extensions: { [EXT]: { item: json } },
    };
  }
}

/** What kioku can read of an item: a message's text, a function call or its result. */
function itemContent(item: JsonObject): MessageInitShape<typeof ContentSchema> | undefined {
  const type = item.type ?? "message";
  if (type === "message") {
    const text = messageText(item.content);
    if (text === "") {
      return undefined;
    }
    return { role: item.role === "assistant" ? "model" : "user", parts: [{ text }] };
  }
  if (type === "function_call" && typeof item.name === "string") {
    return {
      role: "model",
      parts: [{ functionCall: { id: String(item.callId ?? ""), name: item.name, args: parseArgs(item.arguments) } }],
    };
  }
  if (type === "function_call_result" && typeof item.name === "string") {
    const output = item.output ?? null;
    return {
      role: "user",
      parts: [{ functionResponse: { id: String(item.callId ?? ""), name: item.name, response: { output } } }],
    };
  }
  return undefined;
}

/** The text of a message's content: a string, or its text parts joined. */
function messageText(content: JsonValue | undefined): string {
  if (typeof content === "string") {
    return content;
  }
  if (!Array.isArray(content)) {
    return "";
  }
  return content
    .map((p) => (isObject(p) && typeof p.text === "string" ? p.text : ""))
    .filter((t) => t !== "")
    .join("\n");
}

/** A function call's arguments as an object: parsed JSON, else the raw text under `arguments`. */
function parseArgs(args: JsonValue | undefined): JsonObject {
  if (typeof args === "string") {
    try {
      const v = JSON.parse(args) as JsonValue;
      if (isObject(v)) {
        return v;
      }
    } catch {
      // Not JSON: kept as text below.
    }
    return { arguments: args };
  }
  return {};
}

function isObject(v: JsonValue | undefined): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
