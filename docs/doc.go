// Package docs is kioku's documentation shelf: the Markdown pages behind
// the README (concepts, clients, Vertex AI, operations, privacy,
// Firestore, benchmarks, architecture, the companion demo), their
// screenshots, and the tests that keep the pages, the README and
// CONTRIBUTING.md true.
//
// The package has no code of its own; its tests read the pages:
//
//   - every relative link resolves to a file of the repository, and every
//     #fragment to a heading of the page it names (links_test.go);
//   - every ```go block either is the body of an Example function of
//     client, client/adk, agent or server (which go test runs, with its
//     output), or is a whole program that builds and, run against a real
//     kioku, prints the output its // Output: comment shows (go_test.go);
//   - every ```console block is a transcript: its $ commands run in bash
//     against a real kioku serve built from this tree, and each must print
//     what the block shows after it (console_test.go);
//   - every kioku-bench command shown still parses its flags
//     (bench_test.go).
//
// The TypeScript and Python programs of docs/clients.md are run by their
// clients' own test suites (client/ts/test/docs.test.mjs,
// client/python/tests/test_docs.py).
package docs
