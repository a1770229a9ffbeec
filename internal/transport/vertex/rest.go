package vertex

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"google.golang.org/genproto/googleapis/api/annotations"

	"github.com/kioku-ai/kioku/internal/transport"
	"github.com/kioku-ai/kioku/internal/transport/httperr"
	"github.com/kioku-ai/kioku/resource"
)

// REST. Vertex AI's REST API is served as kioku.v1's is: the server's
// vanguard transcoder of the google.api.http bindings, here those of
// Google's descriptors (SessionService v1beta1 and v1, MemoryBankService,
// with express mode's reasoningEngines/{id} paths among their additional
// bindings) and of kioku.vertex.v1beta1.SdkService (the Vertex AI SDK's
// REST-only methods, sdk.go). What Google's clients send or expect beyond
// the bindings goes through vanguard's extension points:
//
//   - the codec (codec.go): {"seconds", "nanos"} times, snake_case update
//     masks, the SDK's JSON-only fields (extras), unpopulated fields left
//     out, errors in Google's envelope;
//   - rules (operationRules): operations are polled at paths no binding
//     has: Google's Go REST client GETs /ui/{operation}, the Vertex AI SDK
//     GETs /v1beta1/{operation};
//   - the transcoder talks to the handlers in binary protobuf, so that the
//     extras a message carries reach them;
//   - the purge operations' Any types, which Google's Go types lack,
//     resolve to messages of their shape (types);
//
// and, where vanguard has no extension point, a thin wrapper (wrap):
//
//   - Google's system query parameters ($alt=json;enum-encoding=int,
//     $fields, prettyPrint, key...) are taken out of the query (enums are
//     written as names, which every client reads);
//   - an updateMask query parameter in snake_case becomes lowerCamelCase,
//     as Google's front end reads both (vanguard reads it with protojson,
//     which takes only the latter);
//   - the body of a GET or DELETE that is empty JSON ({}, which the JS API
//     clients send) is dropped: these bindings take no body;
//   - errors written before the codec is known (vanguard's 405 and 415,
//     the key check's refusals) are rewritten in Google's envelope, and
//     vanguard's UNKNOWN for a request it cannot read is INVALID_ARGUMENT
//     (httperr.Rewrite, as for kioku.v1).

// restPaths are the REST paths of this API (kioku.v1's are /v1/apps/...).
var restPaths = []string{"/v1beta1/", "/v1/projects/", "/v1/reasoningEngines/", "/ui/"}

// REST implements transport.Surface.
func (s *Surface) REST() transport.REST {
	return transport.REST{
		Paths:   restPaths,
		Rules:   operationRules(),
		Options: []vanguard.TranscoderOption{vanguard.WithCodec(newCodec)},
		ServiceOptions: []vanguard.ServiceOption{
			vanguard.WithTargetCodecs(vanguard.CodecProto),
			vanguard.WithTypeResolver(types{}),
		},
		NotFound: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httperr.WriteGoogle(w, connect.NewError(connect.CodeNotFound, fmt.Errorf("no Vertex AI method is served at %s %s", r.Method, r.URL.Path)))
		}),
		Wrap: wrap,
	}
}

// operationRules are the bindings of GetOperation at the paths the clients
// poll: /ui/, /v1beta1/ and /v1/ followed by an operation's name.
func operationRules() []*annotations.HttpRule {
	var rules []*annotations.HttpRule
	patterns := []resource.Pattern{locationOperation}
	for _, k := range []kind{sessionOpKind, memoryOpKind, engineOpKind} {
		patterns = append(patterns, k.full, k.short)
	}
	for _, prefix := range []string{"/ui/", "/v1beta1/", "/v1/"} {
		for _, p := range patterns {
			rules = append(rules, &annotations.HttpRule{
				Selector: "google.longrunning.Operations.GetOperation",
				Pattern:  &annotations.HttpRule_Get{Get: prefix + "{name=" + wildcards(p) + "}"},
			})
		}
	}
	return rules
}

var variable = regexp.MustCompile(`\{[^}]*\}`)

// wildcards returns a name pattern as a binding's: each variable a "*".
func wildcards(p resource.Pattern) string { return variable.ReplaceAllString(p.String(), "*") }

// systemParams are the query parameters of Google's APIs that are not
// fields of a request (response format, field selection, API key,
// callbacks, quota attribution).
var systemParams = map[string]bool{
	"$alt": true, "alt": true, "$fields": true, "fields": true, "$prettyPrint": true, "prettyPrint": true,
	"key": true, "$callback": true, "callback": true, "$quotaUser": true, "quotaUser": true,
	"$.xgafv": true, "access_token": true, "oauth_token": true, "upload_protocol": true, "uploadType": true,
}

// maxEmptyBody is how much of a GET's or DELETE's body is read to see
// whether it is empty JSON.
const maxEmptyBody = 64

// wrap is the thin wrapper around the REST transcoder (see the top of
// this file).
func wrap(next http.Handler) http.Handler {
	errors := httperr.Rewrite(next, true)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			q := r.URL.Query()
			for k, v := range q {
				switch {
				case systemParams[k]:
					delete(q, k)
				case k == "updateMask" || k == "update_mask":
					for i := range v {
						v[i] = camelPaths(v[i])
					}
				}
			}
			r.URL.RawQuery = q.Encode()
		}
		if (r.Method == http.MethodGet || r.Method == http.MethodDelete) && r.Body != nil && r.Body != http.NoBody {
			head := make([]byte, maxEmptyBody)
			n, err := io.ReadFull(r.Body, head)
			if (err == io.EOF || err == io.ErrUnexpectedEOF) && emptyJSON(head[:n]) {
				r.Body, r.ContentLength = http.NoBody, 0
			} else {
				r.Body = struct {
					io.Reader
					io.Closer
				}{io.MultiReader(bytes.NewReader(head[:n]), r.Body), r.Body}
			}
		}
		errors.ServeHTTP(w, r)
	})
}

// emptyJSON reports whether b is nothing or an empty JSON object.
func emptyJSON(b []byte) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return true
	}
	if b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	return len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}
