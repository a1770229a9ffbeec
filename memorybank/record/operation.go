package record

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The formats of an operation's stored form: 3 is the jobs engine's
// record (jobs.MarshalOperation), with the kind's request and result as
// JSON objects of their own. The memory bank wrote the first two, when it
// ran the operations itself: 2, a tagged record whose request lay under a
// key named after its method ("generate", "purge", "compact") and whose
// result's fields lay beside the record's; 1, Go's default JSON of its
// Operation type, with enums by number. The requests and results of
// format 3 have the shapes those of format 2 had, so that reading format
// 2 moves them as they are; format 1 is read into format 2's shapes.

// DecodeOperation decodes the stored form of operation id of app, in any
// format kioku has written.
func DecodeOperation(app, id string, body []byte) (*jobs.Operation, error) {
	var probe struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, fmt.Errorf("decoding operation %s: %w", id, err)
	}
	var (
		fields map[string]json.RawMessage
		err    error
	)
	switch probe.Format {
	case jobs.Format:
		return jobs.UnmarshalOperation(app, id, body)
	case 2:
		err = json.Unmarshal(body, &fields)
	case 0:
		fields, err = v1Fields(body)
	default:
		err = fmt.Errorf("format %d is newer than this kioku understands; upgrade kioku", probe.Format)
	}
	var op *jobs.Operation
	if err == nil {
		op, err = fromV2(app, id, fields)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding operation %s: %w", id, err)
	}
	return op, nil
}

// v2Requests names, by method, the key of format 2 that held the request.
var v2Requests = map[string]string{"GenerateMemories": "generate", "PurgeMemories": "purge", "CompactSession": "compact"}

// v2Envelope are the fields of format 2 that are the jobs engine's now.
type v2Envelope struct {
	Method        string   `json:"method"`
	State         string   `json:"state"`
	ScopeKey      string   `json:"scope_key"`
	ErrorKind     string   `json:"error_kind"`
	ErrorMessage  string   `json:"error_message"`
	CreateNS      int64    `json:"create_ns"`
	StartNS       int64    `json:"start_ns"`
	EndNS         int64    `json:"end_ns"`
	NotBeforeNS   int64    `json:"not_before_ns"`
	Attempt       int      `json:"attempt"`
	LeaseOwner    string   `json:"lease_owner"`
	LeaseExpiryNS int64    `json:"lease_expiry_ns"`
	Progress      string   `json:"progress"`
	CoalescedWith []string `json:"coalesced_with"`
}

// fromV2 reads the fields of a format-2 record: the envelope's are the
// operation's, the request key's value is its request, and the other
// fields make its result.
func fromV2(app, id string, fields map[string]json.RawMessage) (*jobs.Operation, error) {
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	var e v2Envelope
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, err
	}
	reqKey, ok := v2Requests[e.Method]
	if !ok {
		return nil, fmt.Errorf("unknown method %q", e.Method)
	}
	state, err := jobs.ParseState(e.State)
	if err != nil {
		return nil, err
	}
	op := &jobs.Operation{
		App: app, ID: id, Kind: e.Method, State: state, Key: e.ScopeKey, ErrorMessage: e.ErrorMessage,
		CreateTime: unixnano.Time(e.CreateNS), StartTime: unixnano.Time(e.StartNS), EndTime: unixnano.Time(e.EndNS),
		NotBefore: unixnano.Time(e.NotBeforeNS), Attempt: e.Attempt, LeaseOwner: e.LeaseOwner, LeaseExpiry: unixnano.Time(e.LeaseExpiryNS),
		Progress: e.Progress, CoalescedWith: e.CoalescedWith,
	}
	if e.ErrorKind != "" {
		if op.ErrorKind, err = jobs.ParseKind(e.ErrorKind); err != nil {
			return nil, err
		}
	}
	result := map[string]json.RawMessage{}
	envelope := reflect.TypeFor[v2Envelope]()
	for k, v := range fields {
		switch {
		case k == "format":
		case k == reqKey:
			if string(v) != "null" {
				op.Request = []byte(v)
			}
		case slices.ContainsFunc(reflect.VisibleFields(envelope), func(f reflect.StructField) bool { return f.Tag.Get("json") == k }):
		default:
			result[k] = v
		}
	}
	if len(result) > 0 {
		if op.Result, err = json.Marshal(result); err != nil {
			return nil, err
		}
	}
	return op, nil
}

// The first format's enums were Go's constants by number, as they were
// then; these tables freeze them.
var (
	v1States  = map[int]jobs.State{1: jobs.Pending, 2: jobs.Running, 3: jobs.Succeeded, 4: jobs.Failed, 5: jobs.Cancelled}
	v1Actions = map[int]memorytype.Action{0: memorytype.ActionUnspecified, 1: memorytype.Created, 2: memorytype.Updated, 3: memorytype.Deleted, 4: memorytype.Unchanged}
	v1Kinds   = map[int]fault.Kind{
		0: fault.Internal, 1: fault.Invalid, 2: fault.NotFound, 3: fault.AlreadyExists, 4: fault.FailedPrecondition,
		5: fault.ResourceExhausted, 6: fault.PermissionDenied, 7: fault.Unavailable, 8: fault.Canceled,
		9: fault.DeadlineExceeded, 10: fault.Aborted, 11: fault.Unimplemented,
	}
)

// operationV1 is the first format: Go's default JSON of the memory bank's
// Operation as it was (field names as keys, enums by number, times in RFC
// 3339).
type operationV1 struct {
	Method   string
	State    int
	ScopeKey string
	Generate *struct {
		Scope                memorytype.Scope     `json:"scope"`
		Session              *keyV1               `json:"session"`
		From                 time.Time            `json:"from"`
		To                   time.Time            `json:"to"`
		Events               []*sessiontype.Event `json:"events"`
		Facts                []factV1             `json:"facts"`
		FactsSession         *keyV1               `json:"facts_session"`
		FactsEventIDs        []string             `json:"facts_event_ids"`
		DisableConsolidation bool                 `json:"disable_consolidation"`
		AllowedTopics        []string             `json:"allowed_topics"`
	}
	Purge *struct {
		Scope  memorytype.Scope `json:"scope,omitempty"`
		Filter string           `json:"filter,omitempty"`
		Force  bool             `json:"force,omitempty"`
	}
	Generated []struct {
		Memory struct {
			ID, Fact                           string
			Scope                              memorytype.Scope
			Topics                             []string
			Metadata                           map[string]string
			CreateTime, UpdateTime, ExpireTime time.Time
			Sources                            []memorytype.Source
			Revision                           int64
			Deleted                            bool
			EmbeddingModel                     string
		}
		Action int
	}
	PurgeCount                     int64
	ErrorKind                      int
	ErrorMessage                   string
	CreateTime, StartTime, EndTime time.Time
	NotBefore                      time.Time
	Attempt                        int
	LeaseOwner                     string
	LeaseExpiry                    time.Time
	Progress                       string
	ModelCalls                     int
	EventsProcessed                int
	FactsExtracted                 int
	ExtractionTime                 time.Duration
	Consolidation                  time.Duration
	CoalescedWith                  []string
}

type factV1 struct {
	Fact   string   `json:"fact"`
	Topics []string `json:"topics,omitempty"`
}

type keyV1 struct{ App, User, ID string }

func (k *keyV1) name() string {
	if k == nil {
		return ""
	}
	return sessiontype.Key{App: k.App, User: k.User, ID: k.ID}.Name()
}

// object is a JSON object being built: set leaves out the zero values, as
// the tagged records' omitempty does.
type object map[string]any

func (o object) set(key string, v any) object {
	if !reflect.ValueOf(v).IsZero() {
		if rv := reflect.ValueOf(v); (rv.Kind() != reflect.Slice && rv.Kind() != reflect.Map) || rv.Len() > 0 {
			o[key] = v
		}
	}
	return o
}

// v1Fields reads a first-format record into the fields of format 2: the
// migration of one operation.
func v1Fields(body []byte) (map[string]json.RawMessage, error) {
	var v operationV1
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	state, ok := v1States[v.State]
	if !ok {
		return nil, fmt.Errorf("unknown state %d", v.State)
	}
	kind, ok := v1Kinds[v.ErrorKind]
	if !ok {
		return nil, fmt.Errorf("unknown error kind %d", v.ErrorKind)
	}
	o := object{"format": 2, "method": v.Method, "state": state.String(), "create_ns": unixnano.From(v.CreateTime)}
	o.set("scope_key", v.ScopeKey).set("purge_count", v.PurgeCount).set("error_kind", jobs.KindName(kind)).set("error_message", v.ErrorMessage)
	o.set("start_ns", unixnano.From(v.StartTime)).set("end_ns", unixnano.From(v.EndTime)).set("not_before_ns", unixnano.From(v.NotBefore))
	o.set("attempt", v.Attempt).set("lease_owner", v.LeaseOwner).set("lease_expiry_ns", unixnano.From(v.LeaseExpiry)).set("progress", v.Progress)
	o.set("model_calls", v.ModelCalls).set("events_processed", v.EventsProcessed).set("facts_extracted", v.FactsExtracted)
	o.set("extraction_ns", int64(v.ExtractionTime)).set("consolidation_ns", int64(v.Consolidation)).set("coalesced_with", v.CoalescedWith)
	if g := v.Generate; g != nil {
		o["generate"] = object{"scope": g.Scope}.set("session", g.Session.name()).set("from_ns", unixnano.From(g.From)).set("to_ns", unixnano.From(g.To)).
			set("events", g.Events).set("facts", g.Facts).set("facts_session", g.FactsSession.name()).set("facts_event_ids", g.FactsEventIDs).
			set("disable_consolidation", g.DisableConsolidation).set("allowed_topics", g.AllowedTopics)
	}
	if p := v.Purge; p != nil {
		o["purge"] = p
	}
	var generated []object
	for _, g := range v.Generated {
		action, ok := v1Actions[g.Action]
		if !ok || action == memorytype.ActionUnspecified {
			return nil, fmt.Errorf("unknown action %d", g.Action)
		}
		m := g.Memory
		mem := object{"id": m.ID, "fact": m.Fact, "scope": m.Scope, "create_ns": unixnano.From(m.CreateTime), "update_ns": unixnano.From(m.UpdateTime), "revision": m.Revision}
		mem.set("topics", m.Topics).set("metadata", m.Metadata).set("sources", m.Sources).set("expire_ns", unixnano.From(m.ExpireTime)).
			set("deleted", m.Deleted).set("embedding_model", m.EmbeddingModel)
		generated = append(generated, object{"action": action.String(), "memory": mem})
	}
	o.set("generated", generated)
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	return fields, json.Unmarshal(b, &fields)
}
