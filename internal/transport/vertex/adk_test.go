package vertex_test

import (
	"testing"

	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/session/sessiontestsuite"
	adkvertex "google.golang.org/adk/v2/session/vertexai"
)

// TestADKSessionSuiteOverVertexGRPC runs ADK-Go's own session conformance
// suite through ADK's Vertex AI session service (session/vertexai), pointed
// at kioku over gRPC, with a numeric reasoning engine id as the app name,
// as ADK requires.
func TestADKSessionSuiteOverVertexGRPC(t *testing.T) {
	opts := sessiontestsuite.SuiteOptions{
		SupportsUserProvidedSessionID: true,
		ProvidesServerAssignedEventID: true,
		AppName:                       "1491331942182813696",
	}
	sessiontestsuite.RunServiceTests(t, opts, func(t *testing.T) session.Service {
		k := startKioku(t, nil)
		svc, err := adkvertex.NewSessionService(t.Context(), adkvertex.VertexAIServiceConfig{ProjectID: "my-project", Location: "us-central1"}, k.grpcOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		return svc
	})
}
