package vertex

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/resource"
)

// An engine is a reasoning engine as a request named it: in full,
// projects/{project}/locations/{location}/reasoningEngines/{id}, or in
// express mode's short form, reasoningEngines/{id}. Names built from it
// keep the caller's form, so the names a client gets back are the ones it
// can use again.
type engine struct {
	project, location string // empty in the short form
	id                string
	app               string // the kioku app it stands for
}

// build returns the name of a resource of kind k under the engine, in the
// engine's form, with ids in k's places after the engine's.
func (e engine) build(k kind, ids ...string) string {
	if e.project == "" {
		return k.short.Build(append([]string{e.id}, ids...)...)
	}
	return k.full.Build(append([]string{e.project, e.location, e.id}, ids...)...)
}

// name returns the engine's resource name in the caller's form.
func (e engine) name() string { return e.build(engineKind) }

func (e engine) sessionName(id string) string { return e.build(sessionKind, id) }

func (e engine) eventName(session, id string) string { return e.build(eventKind, session, id) }

func (e engine) memoryName(id string) string { return e.build(memoryKind, id) }

// operationName returns the name of an operation of the engine's memory
// bank.
func (e engine) operationName(id string) string { return e.build(engineOpKind, id) }

// deleteOperationName returns the name of a DeleteSession operation:
// Vertex AI names it after the location; the short form has none, so
// there it is the engine's.
func (e engine) deleteOperationName(id string) string {
	if e.project == "" {
		return e.operationName(id)
	}
	return locationOperation.Build(e.project, e.location, id)
}

// Names are checked against a Policy: which projects and locations are
// accepted, and which kioku app each engine id stands for.
type Policy struct {
	// Projects and Locations, when not empty, are the only project and
	// location ids (or numbers) accepted in full names; others are
	// PERMISSION_DENIED. Empty: any.
	Projects, Locations []string
	// Engines maps reasoning engine ids to kioku apps. An engine id not
	// in it is the app of the same id.
	Engines map[string]string
}

// ParsePolicy builds a Policy from its command-line form: comma-separated
// project ids, location ids, and engine=app pairs (each empty for none).
func ParsePolicy(projects, locations, engines string) (Policy, error) {
	var p Policy
	list := func(s string) []string {
		var out []string
		for _, v := range strings.Split(s, ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
		return out
	}
	p.Projects, p.Locations = list(projects), list(locations)
	for _, pair := range list(engines) {
		id, app, ok := strings.Cut(pair, "=")
		id, app = strings.TrimSpace(id), strings.TrimSpace(app)
		if !ok || id == "" || app == "" || strings.Contains(id, "/") {
			return Policy{}, fmt.Errorf("--vertex-engines: %q is not ENGINE_ID=APP", pair)
		}
		if err := resource.ValidateID("app", app, resource.AppIDChars); err != nil {
			return Policy{}, fmt.Errorf("--vertex-engines: %v", err)
		}
		if p.Engines == nil {
			p.Engines = map[string]string{}
		}
		if _, dup := p.Engines[id]; dup {
			return Policy{}, fmt.Errorf("--vertex-engines: engine %s is mapped twice", id)
		}
		p.Engines[id] = app
	}
	return p, nil
}

// app returns the kioku app of an engine id.
func (p *Policy) app(id string) string {
	if a, ok := p.Engines[id]; ok {
		return a
	}
	return id
}

// kind is a kind of Vertex AI resource: a reasoning engine or a resource
// under one, with its name's pattern in full and in express mode's short
// form.
type kind struct{ full, short resource.Pattern }

// The patterns of Vertex AI's resource names that this surface serves
// beside kioku's: a reasoning engine in full or in express mode's short
// form (the resources under one are its Child patterns), and the
// location-level operations of DeleteSession.
var (
	fullEngine        = resource.NewPattern("projects/{project}/locations/{location}/reasoningEngines/{reasoning_engine}")
	shortEngine       = resource.NewPattern("reasoningEngines/{reasoning_engine}")
	locationOperation = resource.NewPattern("projects/{project}/locations/{location}/operations/{operation}")
)

// under returns the kind of the resources under an engine that template
// (such as "sessions/{session}") names; "" is the engine itself.
func under(template string) kind {
	if template == "" {
		return kind{fullEngine, shortEngine}
	}
	return kind{fullEngine.Child(template), shortEngine.Child(template)}
}

// The kinds of Vertex AI names this surface serves.
var (
	engineKind    = under("")
	sessionKind   = under("sessions/{session}")
	memoryKind    = under("memories/{memory}")
	revisionKind  = under("memories/{memory}/revisions/{revision}")
	eventKind     = under("sessions/{session}/events/{event}")
	sessionOpKind = under("sessions/{session}/operations/{operation}")
	memoryOpKind  = under("memories/{memory}/operations/{operation}")
	engineOpKind  = under("operations/{operation}")
)

// parse parses a name of kind k, in either form, and checks it against
// the policy; it returns the engine and the ids that follow it.
func (p *Policy) parse(field, name string, k kind) (engine, []string, error) {
	if name == "" {
		return engine{}, nil, fault.InvalidField(field, "%s is required (%s)", field, k.full)
	}
	var e engine
	var ids []string
	if vars, ok := k.full.Match(name); ok {
		e, ids = engine{project: vars[0], location: vars[1], id: vars[2]}, vars[3:]
	} else if vars, ok := k.short.Match(name); ok {
		e, ids = engine{id: vars[0]}, vars[1:]
	} else {
		return engine{}, nil, fault.InvalidField(field, "%s %q is not of the form %s", field, aip.Truncate(name, 200), k.full)
	}
	if len(p.Projects) > 0 && e.project != "" && !slices.Contains(p.Projects, e.project) {
		return engine{}, nil, fault.New(fault.PermissionDenied, "project %q is not served here (this kioku serves projects %s; see --vertex-projects)", e.project, strings.Join(p.Projects, ", "))
	}
	if len(p.Locations) > 0 && e.location != "" && !slices.Contains(p.Locations, e.location) {
		return engine{}, nil, fault.New(fault.PermissionDenied, "location %q is not served here (this kioku serves locations %s; see --vertex-locations)", e.location, strings.Join(p.Locations, ", "))
	}
	e.app = p.app(e.id)
	if err := resource.ValidateID("reasoning engine id", e.app, resource.AppIDChars); err != nil {
		return engine{}, nil, fault.InvalidField(field, "%s: %v", field, err)
	}
	return e, ids, nil
}

// validVertexID reports whether id is an id Vertex AI lets a caller
// choose for a session or a memory: 1 to 63 characters of [a-z0-9-],
// starting with a letter or digit (the service accepts all digits) and
// ending with a letter or digit.
func validVertexID(id string) bool {
	if id == "" || len(id) > 63 || id[0] == '-' || id[len(id)-1] == '-' {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
