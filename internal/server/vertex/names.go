package vertex

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
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

// name returns the engine's resource name in the caller's form.
func (e engine) name() string {
	if e.project == "" {
		return "reasoningEngines/" + e.id
	}
	return "projects/" + e.project + "/locations/" + e.location + "/reasoningEngines/" + e.id
}

// location returns the parent of location-level resources (the operations
// of DeleteSession): projects/{p}/locations/{l}, or "" in the short form.
func (e engine) locationName() string {
	if e.project == "" {
		return ""
	}
	return "projects/" + e.project + "/locations/" + e.location
}

func (e engine) sessionName(id string) string { return e.name() + "/sessions/" + id }

func (e engine) eventName(session, id string) string {
	return e.sessionName(session) + "/events/" + id
}

func (e engine) memoryName(id string) string { return e.name() + "/memories/" + id }

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
		if err := aip.ValidateID("app", app, aip.AppIDChars); err != nil {
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

// parse parses the name of a reasoning engine, or of a resource under one
// when rest gives what follows the engine (literal segments, and "*" for
// an id); it returns the engine and the ids in rest's "*" places. Both the
// full form and the short form (reasoningEngines/{id}) are accepted.
func (p *Policy) parse(field, name string, rest ...string) (engine, []string, error) {
	form := "projects/{project}/locations/{location}/reasoningEngines/{reasoning_engine}"
	for _, r := range rest {
		if r == "*" {
			form += "/{id}"
		} else {
			form += "/" + r
		}
	}
	if name == "" {
		return engine{}, nil, fault.InvalidField(field, "%s is required (%s)", field, form)
	}
	bad := fault.InvalidField(field, "%s %q is not of the form %s", field, aip.Truncate(name, 200), form)
	segs := strings.Split(name, "/")
	var e engine
	switch {
	case len(segs) >= 6 && segs[0] == "projects" && segs[2] == "locations" && segs[4] == "reasoningEngines":
		e = engine{project: segs[1], location: segs[3], id: segs[5]}
		if e.project == "" || e.location == "" {
			return engine{}, nil, bad
		}
		segs = segs[6:]
	case len(segs) >= 2 && segs[0] == "reasoningEngines":
		e = engine{id: segs[1]}
		segs = segs[2:]
	default:
		return engine{}, nil, bad
	}
	if e.id == "" || len(segs) != len(rest) {
		return engine{}, nil, bad
	}
	var ids []string
	for i, r := range rest {
		switch {
		case r == "*" && segs[i] != "":
			ids = append(ids, segs[i])
		case r != segs[i]:
			return engine{}, nil, bad
		}
	}
	if len(p.Projects) > 0 && e.project != "" && !slices.Contains(p.Projects, e.project) {
		return engine{}, nil, fault.New(fault.PermissionDenied, "project %q is not served here (this kioku serves projects %s; see --vertex-projects)", e.project, strings.Join(p.Projects, ", "))
	}
	if len(p.Locations) > 0 && e.location != "" && !slices.Contains(p.Locations, e.location) {
		return engine{}, nil, fault.New(fault.PermissionDenied, "location %q is not served here (this kioku serves locations %s; see --vertex-locations)", e.location, strings.Join(p.Locations, ", "))
	}
	e.app = p.app(e.id)
	if err := aip.ValidateID("reasoning engine id", e.app, aip.AppIDChars); err != nil {
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
