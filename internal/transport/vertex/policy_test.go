package vertex_test

import (
	"strings"
	"testing"

	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"google.golang.org/grpc/codes"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/transport/vertex"
)

func TestParsePolicy(t *testing.T) {
	p, err := vertex.ParsePolicy(" p1, 123 ", "us-central1", "42=companion, 7 = other")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Projects, ",") != "p1,123" || strings.Join(p.Locations, ",") != "us-central1" || p.Engines["42"] != "companion" || p.Engines["7"] != "other" {
		t.Fatalf("policy %+v", p)
	}
	if p, err := vertex.ParsePolicy("", "", ""); err != nil || p.Projects != nil || p.Engines != nil {
		t.Fatalf("empty policy %+v, %v", p, err)
	}
	for _, bad := range []string{"42", "=app", "42=", "42=a b", "42=a,42=b", "a/b=c"} {
		if _, err := vertex.ParsePolicy("", "", bad); err == nil || !strings.Contains(err.Error(), "--vertex-engines") {
			t.Errorf("engines %q: error %v, want one naming --vertex-engines", bad, err)
		}
	}
}

// TestPolicyMapsEnginesAndRefusesOthers: a mapped engine id reaches its
// app (a session of app "companion" is engine 42's), and with projects and
// locations configured, others are PERMISSION_DENIED.
func TestPolicyMapsEnginesAndRefusesOthers(t *testing.T) {
	policy, err := vertex.ParsePolicy("my-project,123456", "us-central1", "42=companion")
	if err != nil {
		t.Fatal(err)
	}
	k := startKiokuWith(t, func(cfg *node.Config) { cfg.Vertex = policy })
	ctx := t.Context()

	if _, err := client.New(k.url).CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/companion/users/ann", SessionId: "day1"}); err != nil {
		t.Fatal(err)
	}
	c := googleClient(t, aiplatform.NewSessionClient, k.grpcOptions())
	for _, name := range []string{
		"projects/my-project/locations/us-central1/reasoningEngines/42/sessions/day1",
		"projects/123456/locations/us-central1/reasoningEngines/42/sessions/day1",
		"reasoningEngines/42/sessions/day1", // express mode names no project
	} {
		s, err := c.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: name})
		if err != nil || s.GetUserId() != "ann" || s.GetName() != name {
			t.Errorf("GetSession(%s) = %v, %v", name, s, err)
		}
	}
	// An engine not listed is the app of its own id.
	if _, err := c.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: "projects/my-project/locations/us-central1/reasoningEngines/companion/sessions/day1"}); err != nil {
		t.Errorf("engine companion: %v", err)
	}
	if _, err := c.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: "projects/my-project/locations/us-central1/reasoningEngines/43/sessions/day1"}); codeOf(err) != codes.NotFound {
		t.Errorf("engine 43: %v, want NOT_FOUND", err)
	}
	for _, name := range []string{
		"projects/other/locations/us-central1/reasoningEngines/42/sessions/day1",
		"projects/my-project/locations/europe-west4/reasoningEngines/42/sessions/day1",
	} {
		_, err := c.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: name})
		if codeOf(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "--vertex-") {
			t.Errorf("GetSession(%s): %v, want PERMISSION_DENIED naming the flag", name, err)
		}
	}
}
