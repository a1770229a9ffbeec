package transport

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/kioku-ai/kioku/fault"
)

// Path-bound fields. vanguard sets a REST request's fields from its path,
// then from its query, so that GET /v1/apps/A/.../sessions/s1?name=apps/B/...
// would act on B's session: authorization checks the name acted on, so no
// caller crosses an app, but a proxy, a gateway rule or a log that trusts
// the URL would be misled. As the google.api.http rules say (a field bound
// in the path is not a query parameter), such a query parameter is refused:
// the REST handler keeps the query (withRESTQuery) for the
// pathParamsInterceptor, which knows the method vanguard chose and checks
// the query against the fields its bindings' path templates bind.

// restQueryKey is the context key of a REST request's query.
type restQueryKey struct{}

// withRESTQuery keeps a REST request's query in ctx for the
// pathParamsInterceptor.
func withRESTQuery(ctx context.Context, u *url.URL) context.Context {
	if u.RawQuery == "" {
		return ctx
	}
	return context.WithValue(ctx, restQueryKey{}, u.Query())
}

// pathParamsInterceptor refuses, with INVALID_ARGUMENT naming it, a query
// parameter of a REST call that sets a field its method's binding takes
// from the path.
type pathParamsInterceptor struct {
	bound map[string]*boundFields // by procedure
	log   *sampledLog
}

// boundFields are the fields a method's bindings take from the path.
type boundFields struct {
	input protoreflect.MessageDescriptor
	paths []string // dotted field names, as "session.name"
}

// newPathParamsInterceptor returns the interceptor for the methods of
// services, bound by their google.api.http rules and by the extra rules
// (whose selectors name methods of services).
func newPathParamsInterceptor(services []protoreflect.ServiceDescriptor, extra []*annotations.HttpRule, log *sampledLog) *pathParamsInterceptor {
	byMethod := map[protoreflect.FullName][]*annotations.HttpRule{}
	for _, r := range extra {
		byMethod[protoreflect.FullName(r.GetSelector())] = append(byMethod[protoreflect.FullName(r.GetSelector())], r)
	}
	p := &pathParamsInterceptor{bound: map[string]*boundFields{}, log: log}
	for _, s := range services {
		for i := range s.Methods().Len() {
			m := s.Methods().Get(i)
			rules := byMethod[m.FullName()]
			if r, ok := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule); ok && r != nil {
				rules = append(append(rules, r), r.GetAdditionalBindings()...)
			}
			b := &boundFields{input: m.Input()}
			for _, r := range rules {
				for _, f := range pathVariables(r) {
					if !slices.Contains(b.paths, f) {
						b.paths = append(b.paths, f)
					}
				}
			}
			if len(b.paths) > 0 {
				p.bound[fmt.Sprintf("/%s/%s", s.FullName(), m.Name())] = b
			}
		}
	}
	return p
}

// pathVariable matches a variable of a path template, {field.path} or
// {field.path=segments}, capturing the field path.
var pathVariable = regexp.MustCompile(`\{([^=}]+)`)

// pathVariables returns the field paths a binding's path template binds.
func pathVariables(r *annotations.HttpRule) []string {
	var path string
	switch p := r.GetPattern().(type) {
	case *annotations.HttpRule_Get:
		path = p.Get
	case *annotations.HttpRule_Put:
		path = p.Put
	case *annotations.HttpRule_Post:
		path = p.Post
	case *annotations.HttpRule_Delete:
		path = p.Delete
	case *annotations.HttpRule_Patch:
		path = p.Patch
	case *annotations.HttpRule_Custom:
		path = p.Custom.GetPath()
	}
	var out []string
	for _, m := range pathVariable.FindAllStringSubmatch(path, -1) {
		out = append(out, strings.TrimSpace(m[1]))
	}
	return out
}

// check returns the error for the first query parameter that sets a field
// the path binds (or a field within one, or one that holds it), or nil.
func (p *pathParamsInterceptor) check(ctx context.Context, procedure string) error {
	q, _ := ctx.Value(restQueryKey{}).(url.Values)
	b := p.bound[procedure]
	if q == nil || b == nil {
		return nil
	}
	for _, param := range slices.Sorted(maps.Keys(q)) {
		field, ok := fieldPath(b.input, param)
		if !ok {
			continue // not a field: the transcoder answers it
		}
		for _, bound := range b.paths {
			if field == bound || strings.HasPrefix(bound, field+".") || strings.HasPrefix(field, bound+".") {
				return toConnect(ctx, p.log, fault.InvalidField(param,
					"the query parameter %q sets the field %s, which this method takes from the URL's path: give it in the path only", param, bound))
			}
		}
	}
	return nil
}

// fieldPath resolves a query parameter's name as vanguard does, each
// dotted element a field's JSON or proto name, to the field path in proto
// names; ok is false when some element names no field.
func fieldPath(msg protoreflect.MessageDescriptor, param string) (string, bool) {
	var names []string
	for part := range strings.SplitSeq(param, ".") {
		if msg == nil {
			return "", false // a field within a scalar
		}
		f := msg.Fields().ByJSONName(part)
		if f == nil {
			f = msg.Fields().ByName(protoreflect.Name(part))
		}
		if f == nil {
			return "", false
		}
		names = append(names, string(f.Name()))
		msg = f.Message()
	}
	return strings.Join(names, "."), true
}

func (p *pathParamsInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := p.check(ctx, req.Spec().Procedure); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (p *pathParamsInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (p *pathParamsInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := p.check(ctx, conn.Spec().Procedure); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}
