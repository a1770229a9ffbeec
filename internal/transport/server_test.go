package transport_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/internal/transport"
	"github.com/kioku-ai/kioku/sessions"
)

// startServer serves cfg over HTTP/1.1 and h2c on a loopback port.
func startServer(t *testing.T, cfg transport.Config) *httptest.Server {
	t.Helper()
	s := transport.New(cfg)
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Config = s.HTTPServer()
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// h2cClient returns an HTTP client that speaks HTTP/2 without TLS.
func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}}
}

func grpcConn(t *testing.T, ts *httptest.Server) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(strings.TrimPrefix(ts.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestHealthOverConnectJSONAndGRPC(t *testing.T) {
	ts := startServer(t, transport.Config{})
	// The curl of docs/clients.md: Connect JSON over HTTP/1.1.
	resp, err := http.Post(ts.URL+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "SERVING_STATUS_SERVING") {
		t.Fatalf("health over Connect JSON = %d %s", resp.StatusCode, body)
	}
	// gRPC over h2c, per service.
	hc := healthpb.NewHealthClient(grpcConn(t, ts))
	for _, svc := range []string{"", kiokuv1connect.SessionServiceName, kiokuv1connect.MemoryBankServiceName, kiokuv1connect.OperationServiceName} {
		got, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || got.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("gRPC health of %q = %v, %v", svc, got, err)
		}
	}
}

func TestReflectionListsServices(t *testing.T) {
	ts := startServer(t, transport.Config{})
	conn := grpcConn(t, ts)
	want := []string{
		"grpc.health.v1.Health",
		"grpc.reflection.v1.ServerReflection",
		"grpc.reflection.v1alpha.ServerReflection",
		kiokuv1connect.AuthServiceName,
		kiokuv1connect.BlockServiceName,
		kiokuv1connect.MemoryBankServiceName,
		kiokuv1connect.MemoryFileServiceName,
		kiokuv1connect.OperationServiceName,
		kiokuv1connect.SessionServiceName,
	}

	v1, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := v1.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	r1, err := v1.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range r1.GetListServicesResponse().GetService() {
		got = append(got, s.GetName())
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("reflection v1 services = %v, want %v", got, want)
	}
	// The descriptor of a kioku service resolves, so grpcurl can call it.
	if err := v1.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: kiokuv1connect.SessionServiceName}}); err != nil {
		t.Fatal(err)
	}
	if r, err := v1.Recv(); err != nil || len(r.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Fatalf("file containing SessionService: %v, %v", r, err)
	}

	v1a, err := reflectionv1alpha.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := v1a.Send(&reflectionv1alpha.ServerReflectionRequest{MessageRequest: &reflectionv1alpha.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	r1a, err := v1a.Recv()
	if err != nil || len(r1a.GetListServicesResponse().GetService()) != len(want) {
		t.Fatalf("reflection v1alpha = %v, %v", r1a, err)
	}
}

func TestUnconfiguredServiceIsUnimplemented(t *testing.T) {
	ts := startServer(t, transport.Config{})
	const wantMsg = "kioku.v1.MemoryBankService.ListMemories is not implemented"

	for name, opts := range map[string][]connect.ClientOption{
		"connect-json": {connect.WithProtoJSON()},
		"connect":      nil,
		"grpc":         {connect.WithGRPC()},
		"grpc-web":     {connect.WithGRPCWeb()},
	} {
		c := kiokuv1connect.NewMemoryBankServiceClient(h2cClient(), ts.URL, opts...)
		_, err := c.ListMemories(t.Context(), connect.NewRequest(&kiokuv1.ListMemoriesRequest{Parent: "apps/a"}))
		if connect.CodeOf(err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), wantMsg) {
			t.Errorf("%s: ListMemories error = %v, want UNIMPLEMENTED %q", name, err, wantMsg)
		}
	}

	// The same through grpc-go.
	conn := grpcConn(t, ts)
	err := conn.Invoke(t.Context(), kiokuv1connect.MemoryBankServiceListMemoriesProcedure, &kiokuv1.ListMemoriesRequest{Parent: "apps/a"}, &kiokuv1.ListMemoriesResponse{})
	if st, _ := status.FromError(err); st.Code() != codes.Unimplemented || st.Message() != wantMsg {
		t.Fatalf("grpc-go ListMemories = %v, want Unimplemented %q", err, wantMsg)
	}
}

// sessionServer serves a SessionService on a fresh SQLite store.
func sessionServer(t *testing.T) *httptest.Server {
	t.Helper()
	return sessionServerWith(t, transport.Config{})
}

// sessionServerWith is sessionServer with the settings of cfg.
func sessionServerWith(t *testing.T, cfg transport.Config) *httptest.Server {
	t.Helper()
	store := sqlitetest.Sessions(t, sqlitetest.Open(t))
	cfg.Sessions = transport.NewSessionHandler(sessions.NewService(store, sessions.Config{}), nil)
	return startServer(t, cfg)
}
