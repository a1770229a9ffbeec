// Package client is the Go client of kioku: every method of the four
// services (sessions, the memory bank, operations, memory files) with the generated request and response types (package
// github.com/kioku-ai/kioku/gen/kioku/v1, imported as kiokuv1),
// iterators over every List method, and operation waiting. The resource
// names it sends are built (and the ones it gets back parsed) with package
// github.com/kioku-ai/kioku/resource, the parser the server uses.
//
//	c := client.New("http://127.0.0.1:8080")
//	s, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("demo", "ann")})
//	for ev, err := range c.AllEvents(ctx, &kiokuv1.ListEventsRequest{Parent: s.GetName()}) { ... }
//
// Text, Delta, Scope, Similar, Every, Facts, FromSession and FromEvents
// build the messages a program needs most.
//
// The client speaks Connect (binary protobuf) by default; WithGRPC switches
// to gRPC, WithJSON to Connect's JSON. It retries calls that are safe to
// repeat when the server is unavailable, the call aborted or the
// connection breaks, with jittered backoff (RetryPolicy), and gives every
// appended event without an id a fresh one first, so that a retry never
// appends an event twice. Errors are *connect.Error values:
// connect.CodeOf(err) gives the status code (connect.CodeNotFound, ...).
package client

import (
	"context"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
)

// Client calls a kioku server. It is safe for concurrent use.
type Client struct {
	sessions   kiokuv1connect.SessionServiceClient
	memories   kiokuv1connect.MemoryBankServiceClient
	operations kiokuv1connect.OperationServiceClient
	files      kiokuv1connect.MemoryFileServiceClient
	auth       kiokuv1connect.AuthServiceClient
	blocks     kiokuv1connect.BlockServiceClient
}

// Option configures a Client.
type Option interface{ apply(*options) }

type options struct {
	httpClient connect.HTTPClient
	headers    http.Header
	connect    []connect.ClientOption
	grpc       bool
	retry      RetryPolicy
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithHTTPClient sets the HTTP client (default: one that speaks HTTP/1.1
// and, for gRPC, HTTP/2 without TLS).
func WithHTTPClient(c connect.HTTPClient) Option {
	return optionFunc(func(o *options) { o.httpClient = c })
}

// WithHeader adds a header to every request.
func WithHeader(key, value string) Option {
	return optionFunc(func(o *options) { o.headers.Add(key, value) })
}

// WithAuthToken sends "Authorization: Bearer token" with every request.
func WithAuthToken(token string) Option { return WithHeader("Authorization", "Bearer "+token) }

// WithGRPC makes the client speak gRPC (HTTP/2) instead of Connect.
func WithGRPC() Option {
	return optionFunc(func(o *options) {
		o.grpc = true
		o.connect = append(o.connect, connect.WithGRPC())
	})
}

// WithJSON makes the client send Connect JSON instead of binary protobuf.
func WithJSON() Option {
	return optionFunc(func(o *options) { o.connect = append(o.connect, connect.WithProtoJSON()) })
}

// WithConnectOptions passes options to the underlying Connect clients.
func WithConnectOptions(opts ...connect.ClientOption) Option {
	return optionFunc(func(o *options) { o.connect = append(o.connect, opts...) })
}

// New returns a client of the kioku server at baseURL (for example
// "http://127.0.0.1:8080").
func New(baseURL string, opts ...Option) *Client {
	o := &options{headers: http.Header{}, retry: DefaultRetryPolicy}
	for _, opt := range opts {
		opt.apply(o)
	}
	if o.httpClient == nil {
		protocols := new(http.Protocols)
		protocols.SetHTTP1(true)
		if o.grpc && strings.HasPrefix(baseURL, "http://") {
			protocols = new(http.Protocols)
			protocols.SetUnencryptedHTTP2(true)
		}
		protocols.SetHTTP2(true)
		o.httpClient = &http.Client{Transport: &http.Transport{Protocols: protocols, Proxy: http.ProxyFromEnvironment}}
	}
	// The headers go on once, outside the retries.
	copts := append(o.connect, connect.WithInterceptors(headerInterceptor(o.headers), retryInterceptor{o.retry.withDefaults()}))
	baseURL = strings.TrimRight(baseURL, "/")
	return &Client{
		sessions:   kiokuv1connect.NewSessionServiceClient(o.httpClient, baseURL, copts...),
		memories:   kiokuv1connect.NewMemoryBankServiceClient(o.httpClient, baseURL, copts...),
		operations: kiokuv1connect.NewOperationServiceClient(o.httpClient, baseURL, copts...),
		files:      kiokuv1connect.NewMemoryFileServiceClient(o.httpClient, baseURL, copts...),
		auth:       kiokuv1connect.NewAuthServiceClient(o.httpClient, baseURL, copts...),
		blocks:     kiokuv1connect.NewBlockServiceClient(o.httpClient, baseURL, copts...),
	}
}

// headerInterceptor adds headers to every request, unary or streaming.
type headerInterceptor http.Header

func (h headerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		for k, vs := range h {
			for _, v := range vs {
				req.Header().Add(k, v)
			}
		}
		return next(ctx, req)
	}
}

func (h headerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		for k, vs := range h {
			for _, v := range vs {
				conn.RequestHeader().Add(k, v)
			}
		}
		return conn
	}
}

func (h headerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// SessionService returns the generated SessionService client, for the
// rare call that needs connect's request and response wrappers.
func (c *Client) SessionService() kiokuv1connect.SessionServiceClient { return c.sessions }

// MemoryBankService returns the generated MemoryBankService client.
func (c *Client) MemoryBankService() kiokuv1connect.MemoryBankServiceClient { return c.memories }

// OperationService returns the generated OperationService client.
func (c *Client) OperationService() kiokuv1connect.OperationServiceClient { return c.operations }

// MemoryFileService returns the generated MemoryFileService client.
func (c *Client) MemoryFileService() kiokuv1connect.MemoryFileServiceClient { return c.files }

// BlockService returns the generated BlockService client.
func (c *Client) BlockService() kiokuv1connect.BlockServiceClient { return c.blocks }

// unary calls a generated method and unwraps its response.
func unary[Req, Res any](ctx context.Context, call func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), req *Req) (*Res, error) {
	res, err := call(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}
