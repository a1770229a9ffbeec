// Package adkmemory holds a test, and nothing else: ADK-Go's Vertex AI
// memory and session services (google.golang.org/adk/v2/memory/vertexai
// and session/vertexai), unchanged and with their default endpoint,
// against kioku. The memory service takes no client options: it always
// dials {location}-aiplatform.googleapis.com:443 over TLS with Application
// Default Credentials. So the test gives it, all on loopback and in its own
// process, what pointing it at a kioku needs anywhere:
//
//   - the endpoint's name reaching kioku: here an HTTPS proxy
//     (HTTPS_PROXY, which gRPC honours) that tunnels the CONNECT for
//     us-central1-aiplatform.googleapis.com:443 (and, for the session
//     service given no options, aiplatform.googleapis.com:443) to kioku;
//     elsewhere a hosts entry or DNS record, or such a proxy;
//   - kioku serving TLS (--tls-cert, --tls-key) with a certificate for that
//     name that the client trusts: here from a CA of the test's named by
//     SSL_CERT_FILE;
//   - Application Default Credentials: here a fake GCE metadata server
//     (GCE_METADATA_HOST) handing out a token, which kioku without
//     --auth-keys ignores (with keys, hand out a kioku API key).
package adkmemory
