package vertex

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/kioku-ai/kioku/memorybank"
)

// REST. Vertex AI's REST API is served by a router of kioku's own rather
// than by the vanguard transcoder that serves kioku.v1's REST, because
// what its clients send goes beyond what the google.api.http bindings in
// Google's descriptors describe:
//
//   - operations are polled at paths in no binding: Google's Go REST
//     client GETs /ui/{operation}, the Vertex AI SDK GETs
//     /v1beta1/{operation};
//   - the Vertex AI SDK calls methods and sends fields that Google's Go
//     types do not have (memories:ingestEvents and :purge, {memory}:rollback
//     and /revisions; a memory's topics and metadata), which a transcoder
//     working from those types cannot see;
//   - errors are Google's JSON shape, {"error": {"code", "message",
//     "status", "details"}}, which Google's clients parse (details such as a
//     BadRequest's field violations only from that shape);
//   - the clients add $alt=json;enum-encoding=int, and older ADK Python
//     sends snake_case fields and timestamps as {"seconds", "nanos"}.
//
// The routes still come from the bindings: every method's google.api.http
// rule (and its additional bindings, express mode's reasoningEngines/{id}
// paths) is read from the registered descriptors at start. A request
// becomes the method's request in JSON (the body where the rule puts it,
// path variables, query parameters by JSON or proto name), and is served
// by an in-process Connect call of the method's procedure through the
// server's mux, so the keys, limits, logging, metrics and error mapping of
// every other call apply. The response's JSON is the REST response.

// route is one REST binding.
type route struct {
	method    string // HTTP method
	tmpl      template
	procedure string
	body      string // "*", a field path, or "" for none
	input     protoreflect.MessageDescriptor
	sdk       bool // an SdkService method: {name, body} in
}

// A template is a binding's path: segments, each a literal or a variable
// over one or more segments, and an optional ":verb".
type template struct {
	segs []tseg
	verb string
	text string
}

type tseg struct {
	lit   string   // a literal segment
	field string   // a variable: the field path it sets
	pat   []string // the variable's pattern: literals, "*" and "**"
}

// parseTemplate parses a binding path such as
// "/v1beta1/{name=projects/*/locations/*/reasoningEngines/*/sessions/*}:appendEvent".
func parseTemplate(path string) (template, error) {
	t := template{text: path}
	rest := strings.TrimPrefix(path, "/")
	if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.Contains(rest[i:], "}") && !strings.Contains(rest[i:], "/") {
		rest, t.verb = rest[:i], rest[i+1:]
	}
	for rest != "" {
		if rest[0] == '{' {
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return template{}, fmt.Errorf("unclosed variable in %q", path)
			}
			field, pat, ok := strings.Cut(rest[1:end], "=")
			if !ok {
				pat = "*"
			}
			t.segs = append(t.segs, tseg{field: field, pat: strings.Split(pat, "/")})
			rest = strings.TrimPrefix(rest[end+1:], "/")
			continue
		}
		seg, after, _ := strings.Cut(rest, "/")
		t.segs = append(t.segs, tseg{lit: seg})
		rest = after
	}
	return t, nil
}

// match matches path segments (unescaped) and a verb against the
// template, returning the variables' values.
func (t template) match(segs []string, verb string) (map[string]string, bool) {
	if verb != t.verb {
		return nil, false
	}
	vars := map[string]string{}
	i := 0
	for k, ts := range t.segs {
		if ts.field == "" {
			if i >= len(segs) || segs[i] != ts.lit {
				return nil, false
			}
			i++
			continue
		}
		start := i
		for j, p := range ts.pat {
			switch {
			case p == "**":
				if j != len(ts.pat)-1 || k != len(t.segs)-1 || i >= len(segs) {
					return nil, false
				}
				i = len(segs)
			case i >= len(segs) || segs[i] == "" || p != "*" && segs[i] != p:
				return nil, false
			default:
				i++
			}
		}
		vars[ts.field] = strings.Join(segs[start:i], "/")
	}
	if i != len(segs) {
		return nil, false
	}
	return vars, true
}

// routes returns the REST bindings of the services this package serves.
func (s *Surface) routes() ([]route, error) {
	var out []route
	for _, svc := range []string{SessionServiceV1beta1, MemoryBankService, SessionServiceV1} {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		if err != nil {
			return nil, err
		}
		methods := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			m := methods.Get(i)
			rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)
			if rule == nil {
				return nil, fmt.Errorf("%s has no google.api.http binding", m.FullName())
			}
			for _, r := range append([]*annotations.HttpRule{rule}, rule.GetAdditionalBindings()...) {
				method, path := httpRule(r)
				t, err := parseTemplate(path)
				if err != nil {
					return nil, err
				}
				out = append(out, route{method: method, tmpl: t, procedure: "/" + svc + "/" + string(m.Name()), body: r.GetBody(), input: m.Input()})
			}
		}
	}
	// The Vertex AI SDK's REST-only methods (sdk.go), in both forms.
	for _, b := range []struct{ method, path, proc, body string }{
		{"POST", "{name=%s}/memories:ingestEvents", sdkIngestEvents, "*"},
		{"POST", "{name=%s}/memories:purge", sdkPurgeMemories, "*"},
		{"POST", "{name=%s}/memories:retrieveProfiles", sdkRetrieveProfiles, "*"},
		{"POST", "{name=%s/memories/*}:rollback", sdkRollbackMemory, "*"},
		{"GET", "{name=%s/memories/*}/revisions", sdkListMemoryRevisions, ""},
		{"GET", "{name=%s/memories/*/revisions/*}", sdkGetMemoryRevision, ""},
	} {
		for _, engine := range []string{"projects/*/locations/*/reasoningEngines/*", "reasoningEngines/*"} {
			t, err := parseTemplate("/v1beta1/" + fmt.Sprintf(b.path, engine))
			if err != nil {
				return nil, err
			}
			out = append(out, route{method: b.method, tmpl: t, procedure: sdkProcedure(b.proc), body: b.body, input: sdkRequest, sdk: true})
		}
	}
	return out, nil
}

func httpRule(r *annotations.HttpRule) (method, path string) {
	switch p := r.GetPattern().(type) {
	case *annotations.HttpRule_Get:
		return "GET", p.Get
	case *annotations.HttpRule_Post:
		return "POST", p.Post
	case *annotations.HttpRule_Patch:
		return "PATCH", p.Patch
	case *annotations.HttpRule_Delete:
		return "DELETE", p.Delete
	case *annotations.HttpRule_Put:
		return "PUT", p.Put
	}
	return "", ""
}

// mountREST registers the REST paths: /v1beta1/, /v1/projects/ and
// /v1/reasoningEngines/ (kioku.v1's REST is /v1/apps/...), and /ui/.
func (s *Surface) mountREST(mux *http.ServeMux, guard func(http.Handler) http.Handler) {
	routes, err := s.routes()
	if err != nil {
		// The bindings are compiled into Google's descriptors: a failure
		// is a programming error every test shows.
		panic("vertex: REST bindings: " + err.Error())
	}
	h := googleErrors(guard(&restRouter{s: s, mux: mux, routes: routes}))
	for _, prefix := range []string{"/v1beta1/", "/v1/projects/", "/v1/reasoningEngines/", "/ui/"} {
		mux.Handle(prefix, h)
	}
}

// restRouter serves the REST paths.
type restRouter struct {
	s      *Surface
	mux    http.Handler
	routes []route
}

// maxRESTBody bounds a REST request's body; the in-process call is bounded
// by the server's own message limit too.
const maxRESTBody = 16 << 20

func (rr *restRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(context.WithValue(r.Context(), restStateKey{}, &restState{}))
	segs, verb, err := splitPath(r.URL.EscapedPath())
	if err != nil {
		writeError(w, connect.NewError(connect.CodeInvalidArgument, err))
		return
	}
	// Operations, polled by Google's Go REST client at /ui/{name} and by
	// the Vertex AI SDK at /{version}/{name}.
	if r.Method == http.MethodGet && verb == "" && len(segs) >= 4 && segs[len(segs)-2] == "operations" &&
		(segs[0] == "ui" || segs[0] == "v1beta1" || segs[0] == "v1") {
		body, _ := json.Marshal(map[string]string{"name": strings.Join(segs[1:], "/")})
		rr.forward(w, r, longrunningpb.Operations_GetOperation_FullMethodName, body)
		return
	}
	var allowed []string
	for _, rt := range rr.routes {
		vars, ok := rt.tmpl.match(segs, verb)
		if !ok {
			continue
		}
		if rt.method != r.Method {
			allowed = append(allowed, rt.method)
			continue
		}
		req, err := rr.request(r, rt, vars)
		if err != nil {
			writeError(w, err)
			return
		}
		rr.forward(w, r, rt.procedure, req)
		return
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeErrorStatus(w, http.StatusMethodNotAllowed, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("%s %s is not served; use %s", r.Method, r.URL.Path, strings.Join(allowed, " or "))))
		return
	}
	writeError(w, connect.NewError(connect.CodeNotFound, fmt.Errorf("no Vertex AI method is served at %s %s", r.Method, r.URL.Path)))
}

// splitPath splits an escaped URL path into unescaped segments and a
// trailing ":verb".
func splitPath(escaped string) ([]string, string, error) {
	raw := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	verb := ""
	if last := raw[len(raw)-1]; strings.Contains(last, ":") {
		i := strings.LastIndex(last, ":")
		raw[len(raw)-1], verb = last[:i], last[i+1:]
	}
	segs := make([]string, len(raw))
	for i, seg := range raw {
		u, err := url.PathUnescape(seg)
		if err != nil {
			return nil, "", fmt.Errorf("bad path segment %q: %v", seg, err)
		}
		segs[i] = u
	}
	return segs, verb, nil
}

// request builds a route's request message in JSON: the body where the
// rule puts it, then the path variables and the query parameters.
func (rr *restRouter) request(r *http.Request, rt route, vars map[string]string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxRESTBody+1))
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("reading the request body: %w", err))
	}
	if len(b) > maxRESTBody {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("the request body is over %d bytes", maxRESTBody))
	}
	var body any
	if len(bytes.TrimSpace(b)) > 0 {
		if rt.body == "" {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s %s takes no body", r.Method, r.URL.Path))
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&body); err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("the request body is not JSON: %w", err))
		}
	}
	obj := map[string]any{}
	if rt.sdk {
		bm, _ := body.(map[string]any)
		if bm == nil {
			bm = map[string]any{}
		}
		// The SDK methods take their query parameters as strings in the body.
		for k, v := range r.URL.Query() {
			if !ignoredParam(k) {
				bm[k] = v[len(v)-1]
			}
		}
		obj["name"], obj["body"] = vars["name"], bm
		return json.Marshal(obj)
	}
	switch rt.body {
	case "":
	case "*":
		if m, ok := body.(map[string]any); ok {
			obj = m
		} else if body != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("the request body must be a JSON object"))
		}
	default:
		if body != nil {
			setPath(obj, rt.body, body)
		}
	}
	for field, v := range vars {
		setPath(obj, field, v)
	}
	for k, vs := range r.URL.Query() {
		if ignoredParam(k) {
			continue
		}
		fd := fieldAt(rt.input, k)
		if fd == nil {
			continue // unknown parameters are ignored, as unknown fields are
		}
		var v any = vs[len(vs)-1]
		switch {
		case fd.IsList():
			var list []any
			for _, x := range vs {
				list = append(list, x)
			}
			v = list
		case fd.Kind() == protoreflect.BoolKind:
			v = vs[len(vs)-1] == "true"
		}
		setPath(obj, k, v)
	}
	normalize(rt.input, obj)
	if st := restStateFrom(r.Context()); st != nil {
		if err := readExtras(rt, obj, st); err != nil {
			return nil, err
		}
	}
	return json.Marshal(obj)
}

// ignoredParam reports whether a query parameter is a system parameter of
// Google's APIs (response format, field selection) rather than a field.
func ignoredParam(k string) bool {
	switch k {
	case "$alt", "alt", "prettyPrint", "$prettyPrint", "fields", "$fields", "key", "$callback", "callback":
		return true
	}
	return false
}

// setPath sets a dotted path of nested JSON objects.
func setPath(obj map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := obj[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			obj[p] = next
		}
		obj = next
	}
	obj[parts[len(parts)-1]] = v
}

// fieldAt returns the field a dotted path of JSON or proto names reaches
// in md, or nil.
func fieldAt(md protoreflect.MessageDescriptor, path string) protoreflect.FieldDescriptor {
	var fd protoreflect.FieldDescriptor
	for i, p := range strings.Split(path, ".") {
		if i > 0 {
			if fd == nil || fd.Message() == nil {
				return nil
			}
			md = fd.Message()
		}
		fd = md.Fields().ByJSONName(p)
		if fd == nil {
			fd = md.Fields().ByName(protoreflect.Name(p))
		}
		if fd == nil {
			return nil
		}
	}
	return fd
}

// normalize rewrites, within a request's JSON, what older clients send in
// forms protojson does not read: timestamps and durations as {"seconds",
// "nanos"} objects (ADK Python before the Vertex AI SDK sent them so).
func normalize(md protoreflect.MessageDescriptor, obj map[string]any) {
	for k, v := range obj {
		fd := md.Fields().ByJSONName(k)
		if fd == nil {
			fd = md.Fields().ByName(protoreflect.Name(k))
		}
		if fd == nil || fd.Message() == nil || fd.IsMap() {
			continue
		}
		switch fd.Message().FullName() {
		case "google.protobuf.Timestamp", "google.protobuf.Duration":
			if m, ok := v.(map[string]any); ok {
				obj[k] = wellKnownString(fd.Message().FullName(), m)
			}
		case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue", "google.protobuf.FieldMask":
		default:
			if fd.IsList() {
				if list, ok := v.([]any); ok {
					for _, x := range list {
						if m, ok := x.(map[string]any); ok {
							normalize(fd.Message(), m)
						}
					}
				}
			} else if m, ok := v.(map[string]any); ok {
				normalize(fd.Message(), m)
			}
		}
	}
}

// wellKnownString turns {"seconds", "nanos"} into a Timestamp's or a
// Duration's JSON string, through the message itself.
func wellKnownString(name protoreflect.FullName, m map[string]any) any {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		return m
	}
	msg := mt.New()
	for _, f := range []string{"seconds", "nanos"} {
		if v, ok := m[f]; ok {
			var n int64
			switch x := v.(type) {
			case json.Number:
				n, _ = x.Int64()
			case string:
				fmt.Sscan(x, &n)
			}
			fd := msg.Descriptor().Fields().ByName(protoreflect.Name(f))
			if fd.Kind() == protoreflect.Int32Kind {
				msg.Set(fd, protoreflect.ValueOfInt32(int32(n)))
			} else {
				msg.Set(fd, protoreflect.ValueOfInt64(n))
			}
		}
	}
	b, err := protojson.Marshal(msg.Interface())
	if err != nil {
		return m
	}
	var out any
	json.Unmarshal(b, &out)
	return out
}

// forward calls a procedure in-process with a JSON request and writes its
// answer as the REST response: its JSON, or the error in Google's shape.
func (rr *restRouter) forward(w http.ResponseWriter, r *http.Request, procedure string, body []byte) {
	st := restStateFrom(r.Context())
	in, err := http.NewRequestWithContext(r.Context(), http.MethodPost, procedure, bytes.NewReader(body))
	if err != nil {
		writeError(w, connect.NewError(connect.CodeInternal, err))
		return
	}
	in.Header.Set("Content-Type", "application/json")
	in.Header.Set("Connect-Protocol-Version", "1")
	if t := r.Header.Get("User-Agent"); t != "" {
		in.Header.Set("User-Agent", t)
	}
	rec := &recorder{header: http.Header{}}
	rr.mux.ServeHTTP(rec, in)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	if rec.code != http.StatusOK {
		writeError(w, connectError(rec.code, rec.body.Bytes()))
		return
	}
	out := purgeJSON(rec.body.Bytes())
	if len(st.out) > 0 {
		out = st.addExtras(out)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(out)
}

// purgeJSON gives a purge operation the JSON the Vertex AI SDK reads:
// Google's Go types have no PurgeMemoriesResponse and
// PurgeMemoriesOperationMetadata, so kioku's operation holds a Struct and a
// GenericOperationMetadata (operations.go), which this rewrites as
// {"@type": "...PurgeMemoriesResponse", "purgeCount": "n"} and
// {"@type": "...PurgeMemoriesOperationMetadata", "genericMetadata": ...}.
// Other answers pass unchanged.
func purgeJSON(body []byte) []byte {
	const structType = "type.googleapis.com/google.protobuf.Struct"
	if !bytes.Contains(body, []byte(structType)) {
		return body
	}
	var op map[string]any
	if json.Unmarshal(body, &op) != nil {
		return body
	}
	resp, _ := op["response"].(map[string]any)
	value, _ := resp["value"].(map[string]any)
	n, isPurge := value["purgeCount"].(float64)
	if resp["@type"] != structType || !isPurge {
		return body
	}
	op["response"] = map[string]any{"@type": "type.googleapis.com/google.cloud.aiplatform.v1beta1.PurgeMemoriesResponse", "purgeCount": fmt.Sprint(int64(n))}
	if md, ok := op["metadata"].(map[string]any); ok {
		delete(md, "@type")
		op["metadata"] = map[string]any{"@type": "type.googleapis.com/google.cloud.aiplatform.v1beta1.PurgeMemoriesOperationMetadata", "genericMetadata": md}
	}
	out, err := json.Marshal(op)
	if err != nil {
		return body
	}
	return out
}

// recorder is the in-process call's response.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

// connectError reads a Connect unary error response.
func connectError(status int, body []byte) *connect.Error {
	var wire struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"details"`
	}
	var code connect.Code
	if json.Unmarshal(body, &wire) != nil || code.UnmarshalText([]byte(wire.Code)) != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("HTTP %d: %s", status, bytes.TrimSpace(body)))
	}
	err := connect.NewWireError(code, fmt.Errorf("%s", wire.Message))
	for _, d := range wire.Details {
		b, derr := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if derr != nil {
			continue
		}
		mt, ferr := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(d.Type))
		if ferr != nil {
			continue
		}
		m := mt.New().Interface()
		if proto.Unmarshal(b, m) != nil {
			continue
		}
		if ed, eerr := connect.NewErrorDetail(m); eerr == nil {
			err.AddDetail(ed)
		}
	}
	return err
}

// httpStatus is the HTTP status of each code, as Google's APIs answer.
var httpStatus = map[connect.Code]int{
	connect.CodeCanceled:           499,
	connect.CodeUnknown:            http.StatusInternalServerError,
	connect.CodeInvalidArgument:    http.StatusBadRequest,
	connect.CodeDeadlineExceeded:   http.StatusGatewayTimeout,
	connect.CodeNotFound:           http.StatusNotFound,
	connect.CodeAlreadyExists:      http.StatusConflict,
	connect.CodePermissionDenied:   http.StatusForbidden,
	connect.CodeResourceExhausted:  http.StatusTooManyRequests,
	connect.CodeFailedPrecondition: http.StatusBadRequest,
	connect.CodeAborted:            http.StatusConflict,
	connect.CodeOutOfRange:         http.StatusBadRequest,
	connect.CodeUnimplemented:      http.StatusNotImplemented,
	connect.CodeInternal:           http.StatusInternalServerError,
	connect.CodeUnavailable:        http.StatusServiceUnavailable,
	connect.CodeDataLoss:           http.StatusInternalServerError,
	connect.CodeUnauthenticated:    http.StatusUnauthorized,
}

func writeError(w http.ResponseWriter, err error) {
	ce, ok := err.(*connect.Error)
	if !ok {
		ce = connect.NewError(connect.CodeInternal, err)
	}
	writeErrorStatus(w, httpStatus[ce.Code()], ce)
}

// writeErrorStatus writes an error in Google's JSON shape:
// {"error": {"code": HTTP status, "message", "status": "NOT_FOUND",
// "details": [{"@type": ..., ...}]}}.
func writeErrorStatus(w http.ResponseWriter, status int, ce *connect.Error) {
	if status == 0 {
		status = http.StatusInternalServerError
	}
	e := map[string]any{"code": status, "message": ce.Message(), "status": strings.ToUpper(ce.Code().String())}
	var details []json.RawMessage
	for _, d := range ce.Details() {
		a := &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type(), Value: d.Bytes()}
		if b, err := protojson.Marshal(a); err == nil {
			details = append(details, b)
		}
	}
	if len(details) > 0 {
		e["details"] = details
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}

// googleErrors rewrites errors written as a google.rpc.Status in JSON
// ({"code": 16, "message"}: the key check's refusals) into Google's shape;
// others pass as they are.
func googleErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ew := &errorWriter{ResponseWriter: w}
		next.ServeHTTP(ew, r)
		ew.finish()
	})
}

type errorWriter struct {
	http.ResponseWriter
	status int
	buf    *bytes.Buffer // set while an error is being held
}

func (e *errorWriter) WriteHeader(code int) {
	if e.status != 0 {
		return
	}
	e.status = code
	if code >= 400 {
		e.buf = &bytes.Buffer{}
		return
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *errorWriter) Write(b []byte) (int, error) {
	if e.status == 0 {
		e.WriteHeader(http.StatusOK)
	}
	if e.buf != nil {
		return e.buf.Write(b)
	}
	return e.ResponseWriter.Write(b)
}

func (e *errorWriter) finish() {
	if e.buf == nil {
		return
	}
	body := e.buf.Bytes()
	var google struct {
		Error json.RawMessage `json:"error"`
	}
	var status struct {
		Code    *int32 `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &google) == nil && google.Error == nil && json.Unmarshal(body, &status) == nil && status.Code != nil {
		ce := connect.NewWireError(connect.Code(*status.Code), fmt.Errorf("%s", status.Message))
		h := e.ResponseWriter.Header()
		h.Del("Content-Length")
		writeErrorStatus(e.ResponseWriter, e.status, ce)
		return
	}
	e.ResponseWriter.WriteHeader(e.status)
	e.ResponseWriter.Write(body)
}

// restState carries, through an in-process call, what REST requests and
// responses hold beyond Google's Go types: a memory's topics and metadata.
type restState struct {
	in memoryExtras
	// allowedTopics are GenerateMemories' allowedTopics.
	allowedTopics []string
	mu            sync.Mutex
	out           map[string]*memorybank.Memory // memory name -> memory answered
}

type restStateKey struct{}

func restStateFrom(ctx context.Context) *restState {
	st, _ := ctx.Value(restStateKey{}).(*restState)
	return st
}

// restExtras returns a REST request's memory extras; none for gRPC.
func restExtras(ctx context.Context) memoryExtras {
	if st := restStateFrom(ctx); st != nil {
		return st.in
	}
	return memoryExtras{}
}

// memoryOut converts a memory for a response and, for a REST call, notes
// it, so that its topics and metadata are added to the response's JSON.
func memoryOut(ctx context.Context, e engine, m *memorybank.Memory) *aiplatformpb.Memory {
	out := memoryToVertex(e, m)
	if st := restStateFrom(ctx); st != nil && (len(m.Topics) > 0 || len(m.Metadata) > 0) {
		st.mu.Lock()
		if st.out == nil {
			st.out = map[string]*memorybank.Memory{}
		}
		st.out[out.GetName()] = m
		st.mu.Unlock()
	}
	return out
}

// unsupportedJSON are JSON-only request fields the SDK may send that would
// change a result if kioku ignored them: such a request is refused.
var unsupportedJSON = map[string][]string{
	aiplatformpb.MemoryBankService_RetrieveMemories_FullMethodName: {"filter", "filterGroups", "memoryTypes"},
	aiplatformpb.MemoryBankService_GenerateMemories_FullMethodName: {"metadata", "metadataMergeStrategy"},
}

// readExtras takes a REST request's memory topics and metadata (which
// the in-process call's JSON decoding would drop) into the call's state,
// and refuses the JSON-only fields kioku does not serve.
func readExtras(rt route, obj map[string]any, st *restState) error {
	for _, f := range unsupportedJSON[rt.procedure] {
		if v, ok := obj[f]; ok && v != nil {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not supported by kioku (leave it out)", f))
		}
	}
	switch rt.procedure {
	case aiplatformpb.MemoryBankService_CreateMemory_FullMethodName, aiplatformpb.MemoryBankService_UpdateMemory_FullMethodName:
		m, _ := obj["memory"].(map[string]any)
		if t, ok := m["topics"]; ok {
			topics := topicsFromJSON(t)
			st.in.topics = &topics
		}
		if md, ok := m["metadata"]; ok {
			meta := metadataFromJSON(md)
			st.in.metadata = &meta
		}
	case aiplatformpb.MemoryBankService_GenerateMemories_FullMethodName:
		if t, ok := obj["allowedTopics"]; ok {
			st.allowedTopics = topicsFromJSON(t)
		}
	}
	return nil
}

// topicsFromJSON reads Vertex AI's memory topics, [{"managedMemoryTopic":
// "USER_PREFERENCES"} | {"customMemoryTopicLabel": "label"}], as kioku's
// topic labels.
func topicsFromJSON(v any) []string {
	list, _ := v.([]any)
	out := []string{}
	for _, x := range list {
		m, _ := x.(map[string]any)
		for _, k := range []string{"managedMemoryTopic", "managed_memory_topic", "customMemoryTopicLabel", "custom_memory_topic_label"} {
			if s, ok := m[k].(string); ok && s != "" {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// metadataFromJSON reads Vertex AI's memory metadata, {"key": {"stringValue"
// | "doubleValue" | "boolValue" | "timestampValue": v}}, as kioku's string
// metadata.
func metadataFromJSON(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := map[string]string{}
	for k, x := range m {
		val, _ := x.(map[string]any)
		for _, f := range []string{"stringValue", "doubleValue", "boolValue", "timestampValue", "string_value", "double_value", "bool_value", "timestamp_value"} {
			if y, ok := val[f]; ok {
				out[k] = fmt.Sprint(y)
				break
			}
		}
	}
	return out
}

// addExtras adds the noted memories' topics and metadata to every object
// of a response's JSON that names one of them.
func (st *restState) addExtras(body []byte) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return body
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if name, ok := x["name"].(string); ok {
				if m := st.out[name]; m != nil {
					if len(m.Topics) > 0 {
						var topics []any
						for _, t := range m.Topics {
							if _, managed := memorybank.ManagedTopics[t]; managed {
								topics = append(topics, map[string]any{"managedMemoryTopic": t})
							} else {
								topics = append(topics, map[string]any{"customMemoryTopicLabel": t})
							}
						}
						x["topics"] = topics
					}
					if len(m.Metadata) > 0 {
						md := map[string]any{}
						for k, s := range m.Metadata {
							md[k] = map[string]any{"stringValue": s}
						}
						x["metadata"] = md
					}
				}
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(v)
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return out
}
