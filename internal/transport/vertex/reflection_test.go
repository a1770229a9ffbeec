package vertex_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/kioku-ai/kioku/internal/transport/vertex"
)

// TestReflectionAndHealth: gRPC reflection lists the Vertex AI services
// and resolves their descriptors (grpcurl can call them), and health
// reports each as serving.
func TestReflectionAndHealth(t *testing.T) {
	k := startKioku(t, nil)
	conn, err := grpc.NewClient(strings.TrimPrefix(k.url, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, s := range res.GetListServicesResponse().GetService() {
		listed = append(listed, s.GetName())
	}
	hc := healthpb.NewHealthClient(conn)
	for _, name := range (&vertex.Surface{}).ServiceNames() {
		if !slices.Contains(listed, name) {
			t.Errorf("reflection does not list %s: %v", name, listed)
		}
		if err := r.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: name}}); err != nil {
			t.Fatal(err)
		}
		if f, err := r.Recv(); err != nil || len(f.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
			t.Errorf("the file of %s: %v, %v", name, f, err)
		}
		if h, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: name}); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %s: %v, %v", name, h, err)
		}
	}
}
