/**
 * A LangGraph.js store (`BaseStore` of `@langchain/langgraph-checkpoint`)
 * backed by kioku's memory bank: a graph's long-term memory kept as kioku
 * memories, which kioku's retrieval ranks and its agents read. Memory
 * generation in the same scope may consolidate them (update or delete a
 * memory the store wrote; the value stays the JSON the store last wrote).
 *
 * ```ts
 * import { StateGraph } from "@langchain/langgraph";
 * import { createKiokuClient } from "@kioku-ai/client";
 * import { KiokuStore } from "@kioku-ai/client/langgraph";
 *
 * const store = new KiokuStore({ client: createKiokuClient({ baseUrl }), app: "demo", fields: ["text"] });
 * const graph = new StateGraph(State).addNode(...).compile({ store });
 * // in a node: await config.store.put(["user_id", "ann"], "tea", { text: "Ann drinks green tea." });
 * //            await config.store.search(["user_id", "ann"], { query: "what does Ann drink?" });
 * ```
 *
 * A namespace is a memory scope written as key/value pairs: `["user_id",
 * "ann"]` is the scope `{"user_id": "ann"}` (the scope kioku's agents and
 * memory generation use, so a graph reads the memories kioku made from
 * the user's sessions too), `["user_id", "ann", "topic", "food"]` the
 * scope `{"user_id": "ann", "topic": "food"}`. A namespace of odd length
 * is refused. Scopes have no order, so namespaces whose pairs differ only
 * in order are one namespace; listNamespaces returns the pairs with `user_id`
 * first, the others sorted by key. kioku matches scopes exactly: a search reads one whole namespace,
 * never the longer namespaces under it as a prefix.
 *
 * An item is one memory of the app, with id the SHA-256 (hex) of the
 * namespace and key, so a key is unique within its namespace: its fact is
 * the text of the value's indexed fields (`fields`, LangGraph's path
 * syntax; `["$"]`, the default, is the whole value as JSON), which is what
 * a query is matched against; its description the value as JSON (4 KiB at
 * most); its metadata `langgraph_key` the key (so at most 1 KiB). A memory the store did not
 * write reads as the item `{fact}` keyed by its memory id. A search with
 * a query is kioku's similarity search (RetrieveMemories; `score` is 1
 * minus its distance), without one the scope's memories newest first; a
 * `filter` applies to the values (`$eq`, `$ne`, `$gt`, `$gte`, `$lt`,
 * `$lte`, `$in`, `$nin`). `put` updates the memory or creates it (a
 * revision each time; a deleted one is restored first); `delete` deletes
 * it, its revisions kept.
 *
 * Under a user's API key every namespace must hold that user's
 * `user_id`, and listNamespaces, which lists the whole app, needs an app
 * key.
 *
 * `@langchain/langgraph-checkpoint` (which `@langchain/langgraph` depends
 * on) is an optional peer dependency of the client.
 *
 * @module
 */

import { timestampDate } from "@bufbuild/protobuf/wkt";
import {
  BaseStore,
  getTextAtPath,
  InvalidNamespaceError,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";

import type { Memory } from "./gen/kioku/v1/memory_pb.js";
import { Code, ConnectError, MemoryAction, type KiokuClient } from "./index.js";

/** Options of {@link KiokuStore}. */
export interface KiokuStoreOptions {
  /** The kioku client. */
  client: KiokuClient;
  /** The app whose memory bank holds the items. */
  app: string;
  /**
   * The fields of a value whose text becomes the memory's fact, in
   * LangGraph's path syntax (`"text"`, `"meta.title"`, `"notes[*]"`);
   * `"$"` is the whole value as JSON. Default `["$"]`. A put's own `index`
   * list replaces it for that item; `index: false` keeps these fields, as
   * a memory always has a fact.
   */
  fields?: string[];
}

/** The metadata key holding an item's key. */
const KEY = "langgraph_key";

/** The most memories one similarity search returns (SimilaritySearch.top_k). */
const MAX_TOP_K = 100;

/** A LangGraph.js store whose items are kioku memories (see the module's documentation). */
export class KiokuStore extends BaseStore {
  private readonly client: KiokuClient;
  private readonly app: string;
  private readonly fields: string[];

  constructor(options: KiokuStoreOptions) {
    super();
    this.client = options.client;
    this.app = options.app;
    this.fields = options.fields ?? ["$"];
  }

  /** Runs the operations in order and returns their results. */
  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    for (const op of operations) {
      if ("value" in op) {
        results.push(await this.putOp(op));
      } else if ("key" in op) {
        results.push(await this.getOp(op));
      } else if ("namespacePrefix" in op) {
        results.push(await this.searchOp(op));
      } else {
        results.push(await this.listOp(op));
      }
    }
    return results as OperationResults<Op>;
  }

  private async getOp(op: GetOperation): Promise<Item | null> {
    const { name } = await this.locate(op.namespace, op.key);
    try {
      return item(await this.client.memories.getMemory({ name }), op.namespace);
    } catch (e) {
      if (e instanceof ConnectError && e.code === Code.NotFound) {
        return null;
      }
      throw e;
    }
  }

  private async putOp(op: PutOperation): Promise<void> {
    const { name, id, scope } = await this.locate(op.namespace, op.key);
    if (op.value === null) {
      try {
        await this.client.memories.deleteMemory({ name });
      } catch (e) {
        if (!(e instanceof ConnectError && e.code === Code.NotFound)) {
          throw e;
        }
      }
      return;
    }
    const fields = { fact: factOf(op.value, op.index || this.fields), description: JSON.stringify(op.value), metadata: { [KEY]: op.key } };
    const update = () => this.client.memories.updateMemory({ memory: { name, ...fields }, updateMask: { paths: ["fact", "description", "metadata"] } });
    try {
      await update();
      return;
    } catch (e) {
      if (!(e instanceof ConnectError && e.code === Code.NotFound)) {
        throw e;
      }
    }
    try {
      await this.client.memories.createMemory({ parent: `apps/${this.app}`, memoryId: id, memory: { scope, ...fields } });
    } catch (e) {
      if (!(e instanceof ConnectError && e.code === Code.AlreadyExists)) {
        throw e;
      }
      // The id is a deleted memory's: restore it, then write the value.
      await this.restore(name);
      await update();
    }
  }

  /** Rolls a deleted memory back to its last revision before the deletion. */
  private async restore(name: string): Promise<void> {
    const revs = await this.client.memories.listMemoryRevisions({ parent: name, pageSize: 10 });
    const target = revs.memoryRevisions.find((r) => r.action !== MemoryAction.DELETED);
    if (target === undefined) {
      throw new ConnectError(`memory ${name} exists, deleted, with no revision to restore`, Code.FailedPrecondition);
    }
    await this.client.memories.rollbackMemory({ name, targetRevisionId: target.name.split("/").pop() ?? "" });
  }

  private async searchOp(op: SearchOperation): Promise<SearchItem[]> {
    const scope = scopeOf(op.namespacePrefix);
    const offset = op.offset ?? 0;
    const limit = op.limit ?? 10;
    const keep = (m: Memory) => op.filter === undefined || matches(item(m, op.namespacePrefix).value, op.filter);
    const found: SearchItem[] = [];
    if (op.query) {
      const topK = Math.min(MAX_TOP_K, op.filter === undefined ? offset + limit : MAX_TOP_K);
      const res = await this.client.memories.retrieveMemories({
        parent: `apps/${this.app}`,
        scope,
        method: { case: "similaritySearch", value: { query: op.query, topK } },
      });
      for (const r of res.retrievedMemories) {
        if (r.memory && keep(r.memory)) {
          found.push({ ...item(r.memory, op.namespacePrefix), score: 1 - r.distance });
        }
      }
      return found.slice(offset, offset + limit);
    }
    let pageToken = "";
    do {
      const res = await this.client.memories.retrieveMemories({
        parent: `apps/${this.app}`,
        scope,
        method: { case: "simpleRetrieval", value: { pageSize: 1000, pageToken } },
      });
      for (const r of res.retrievedMemories) {
        if (r.memory && keep(r.memory)) {
          found.push(item(r.memory, op.namespacePrefix));
        }
      }
      pageToken = res.nextPageToken;
    } while (pageToken !== "" && found.length < offset + limit);
    return found.slice(offset, offset + limit);
  }

  private async listOp(op: ListNamespacesOperation): Promise<string[][]> {
    const seen = new Map<string, string[]>();
    let pageToken = "";
    do {
      const res = await this.client.memories.listMemories({ parent: `apps/${this.app}`, pageSize: 1000, pageToken });
      for (const m of res.memories) {
        let ns = namespaceOf(m.scope);
        if (!(op.matchConditions ?? []).every((c) => nsMatches(c, ns))) {
          continue;
        }
        if (op.maxDepth !== undefined) {
          ns = ns.slice(0, op.maxDepth);
        }
        seen.set(JSON.stringify(ns), ns);
      }
      pageToken = res.nextPageToken;
    } while (pageToken !== "");
    const all = [...seen.values()].sort((a, b) => a.join("\0").localeCompare(b.join("\0")));
    return all.slice(op.offset, op.offset + op.limit);
  }

  /** The memory of an item: its name, id and scope. */
  private async locate(namespace: string[], key: string): Promise<{ name: string; id: string; scope: Record<string, string> }> {
    const scope = scopeOf(namespace);
    const bytes = new TextEncoder().encode(JSON.stringify([namespaceOf(scope), key]));
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    const id = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
    return { name: `apps/${this.app}/memories/${id}`, id, scope };
  }
}

/** The scope of a namespace of key/value pairs. */
function scopeOf(namespace: string[]): Record<string, string> {
  if (namespace.length === 0 || namespace.length % 2 !== 0) {
    throw new InvalidNamespaceError(
      `namespace [${namespace.join(", ")}] has ${namespace.length} labels; kioku reads a namespace as key/value pairs of a memory scope, such as ["user_id", "ann"]`,
    );
  }
  const scope: Record<string, string> = {};
  for (let i = 0; i < namespace.length; i += 2) {
    if (namespace[i] in scope) {
      throw new InvalidNamespaceError(`namespace [${namespace.join(", ")}] names scope key "${namespace[i]}" twice`);
    }
    scope[namespace[i]] = namespace[i + 1];
  }
  return scope;
}

/** The namespace of a scope: its pairs, `user_id` first and the others sorted by key. */
function namespaceOf(scope: Record<string, string>): string[] {
  return Object.keys(scope)
    .sort((a, b) => (a === "user_id" ? -1 : b === "user_id" ? 1 : a < b ? -1 : a > b ? 1 : 0))
    .flatMap((k) => [k, scope[k]]);
}

/** The text of a value's fields, as a memory's fact. */
function factOf(value: Record<string, unknown>, fields: string[]): string {
  const texts = fields.flatMap((f) => (f === "$" ? [JSON.stringify(value)] : getTextAtPath(value, f)));
  const fact = texts.join("\n");
  // A memory needs a fact: a value without text in its fields is matched as JSON.
  return fact === "" ? JSON.stringify(value) : fact;
}

/** The item a memory holds, in the namespace it was read from. */
function item(m: Memory, namespace: string[]): Item {
  const key = m.metadata[KEY];
  let value: Record<string, unknown> = { fact: m.fact };
  if (key !== undefined) {
    try {
      value = JSON.parse(m.description) as Record<string, unknown>;
    } catch {
      // Not the store's JSON: the fact stands for the value.
    }
  }
  return {
    namespace,
    key: key ?? m.name.split("/").pop() ?? "",
    value,
    createdAt: m.createTime ? timestampDate(m.createTime) : new Date(0),
    updatedAt: m.updateTime ? timestampDate(m.updateTime) : new Date(0),
  };
}

/** Whether a value passes a search's filter (LangGraph's operators). */
function matches(value: Record<string, unknown>, filter: Record<string, unknown>): boolean {
  return Object.entries(filter).every(([field, want]) => {
    const have = value[field];
    if (typeof want !== "object" || want === null || Array.isArray(want)) {
      return have === want;
    }
    return Object.entries(want).every(([op, v]) => {
      switch (op) {
        case "$eq":
          return have === v;
        case "$ne":
          return have !== v;
        case "$gt":
          return Number(have) > Number(v);
        case "$gte":
          return Number(have) >= Number(v);
        case "$lt":
          return Number(have) < Number(v);
        case "$lte":
          return Number(have) <= Number(v);
        case "$in":
          return Array.isArray(v) && v.includes(have);
        case "$nin":
          return !Array.isArray(v) || !v.includes(have);
        default:
          return false;
      }
    });
  });
}

/** Whether a namespace meets a listNamespaces condition (`*` matches any label). */
function nsMatches(c: MatchCondition, ns: string[]): boolean {
  if (c.path.length > ns.length) {
    return false;
  }
  const start = c.matchType === "prefix" ? 0 : ns.length - c.path.length;
  return c.path.every((label, i) => label === "*" || label === ns[start + i]);
}
