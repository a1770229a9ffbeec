package vertex

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/aip/filter"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// memoryToVertex converts a memory. Its topics and metadata, which
// Google's Go types lack, go out as extras: the REST API's JSON members
// topics ([{"managedMemoryTopic"} | {"customMemoryTopicLabel"}]) and
// metadata ({"key": {"stringValue" | "doubleValue" | "boolValue" |
// "timestampValue": value}}), as the Vertex AI SDK reads them.
func memoryToVertex(e engine, m *memorytype.Memory) (*aiplatformpb.Memory, error) {
	out := &aiplatformpb.Memory{
		Name:        e.memoryName(m.ID),
		DisplayName: m.DisplayName,
		Description: m.Description,
		CreateTime:  timestamppb.New(m.CreateTime),
		UpdateTime:  timestamppb.New(m.UpdateTime),
		Fact:        m.Fact,
		Scope:       m.Scope,
	}
	if !m.ExpireTime.IsZero() {
		out.Expiration = &aiplatformpb.Memory_ExpireTime{ExpireTime: timestamppb.New(m.ExpireTime)}
	}
	x := map[string]any{}
	if len(m.Topics) > 0 {
		var topics []any
		for _, t := range m.Topics {
			if _, managed := appconfig.ManagedTopics[t]; managed {
				topics = append(topics, map[string]any{"managedMemoryTopic": t})
			} else {
				topics = append(topics, map[string]any{"customMemoryTopicLabel": t})
			}
		}
		x["topics"] = topics
	}
	if len(m.Metadata) > 0 {
		md := map[string]any{}
		for k, v := range m.Metadata {
			md[k] = metadataValueJSON(v)
		}
		x["metadata"] = md
	}
	if err := setExtras(out, x); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding memory %s", m.ID)
	}
	return out, nil
}

// metadataValueJSON is a metadata value as Vertex AI's
// MemoryMetadataValue in JSON.
func metadataValueJSON(v metadata.Value) map[string]any {
	switch v.Kind() {
	case metadata.KindDouble:
		return map[string]any{"doubleValue": v.Double()}
	case metadata.KindBool:
		return map[string]any{"boolValue": v.Bool()}
	case metadata.KindTimestamp:
		return map[string]any{"timestampValue": v.Time().Format(time.RFC3339Nano)}
	}
	return map[string]any{"stringValue": v.Text()}
}

// memoryFields are a request memory's fields that Google's Go types lack
// (the Vertex AI SDK's JSON members topics and metadata); nil when not
// given.
type memoryFields struct {
	topics   *[]string
	metadata *metadata.Map
}

// memoryFromVertex reads a request memory's topics and metadata. The
// SDK's revision settings (revisionLabels, revisionTtl,
// revisionExpireTime, disableMemoryRevisions) are ignored: kioku records
// every revision and keeps them by its own rules.
func memoryFromVertex(m *aiplatformpb.Memory) (memoryFields, error) {
	var out memoryFields
	x, err := extras(m)
	if err != nil {
		return out, fault.InvalidField("memory", "%v", err)
	}
	if t, ok := x["topics"]; ok && t != nil {
		topics, err := topicsFromJSON("memory.topics", t)
		if err != nil {
			return out, err
		}
		out.topics = &topics
	}
	if md, ok := x["metadata"]; ok && md != nil {
		meta, err := metadataFromJSON("memory.metadata", md)
		if err != nil {
			return out, err
		}
		out.metadata = &meta
	}
	return out, nil
}

// generation are the settings a GenerateMemories or ingestEvents request
// holds beyond Google's Go types.
type generation struct {
	allowedTopics []string
	metadata      metadata.Map
	strategy      metadata.MergeStrategy
}

// generationFromJSON reads allowedTopics (the topics extraction may use),
// metadata and metadataMergeStrategy from a request's JSON members; the
// revision settings are ignored, as memoryFromVertex does.
func generationFromJSON(x map[string]any) (generation, error) {
	var g generation
	var err error
	if t, ok := x["allowedTopics"]; ok && t != nil {
		if g.allowedTopics, err = topicsFromJSON("allowed_topics", t); err != nil {
			return g, err
		}
	}
	if md, ok := x["metadata"]; ok && md != nil {
		if g.metadata, err = metadataFromJSON("metadata", md); err != nil {
			return g, err
		}
	}
	if s, ok := x["metadataMergeStrategy"]; ok && s != nil {
		name, isName := s.(string)
		if !isName {
			return g, fault.InvalidField("metadata_merge_strategy", "metadata_merge_strategy must be a name: OVERWRITE, MERGE or REQUIRE_EXACT_MATCH")
		}
		if g.strategy, err = metadata.ParseMergeStrategy("metadata_merge_strategy", name); err != nil {
			return g, err
		}
	}
	return g, nil
}

// generateFromVertex reads what a GenerateMemories request holds beyond
// Google's Go types (generationFromJSON).
func generateFromVertex(r *aiplatformpb.GenerateMemoriesRequest) (generation, error) {
	x, err := extras(r)
	if err != nil {
		return generation{}, fault.InvalidField("generate_memories_request", "%v", err)
	}
	return generationFromJSON(x)
}

// retrieveFromVertex reads what a RetrieveMemories request holds beyond
// Google's Go types: filter and filterGroups, as one memory filter
// (memoryFilter), and memoryTypes, of which kioku keeps only
// NATURAL_LANGUAGE_COLLECTION.
func retrieveFromVertex(r *aiplatformpb.RetrieveMemoriesRequest) (string, error) {
	x, err := extras(r)
	if err != nil {
		return "", fault.InvalidField("retrieve_memories_request", "%v", err)
	}
	if types, ok := x["memoryTypes"].([]any); ok {
		for _, t := range types {
			if t != "NATURAL_LANGUAGE_COLLECTION" {
				return "", fault.InvalidField("memory_types", "memory_types %v: kioku keeps only NATURAL_LANGUAGE_COLLECTION memories", t)
			}
		}
	}
	f, _ := x["filter"].(string)
	if v, ok := x["filter"]; ok && v != nil && f == "" && present(v) {
		return "", fault.InvalidField("filter", "filter must be a string")
	}
	return memoryFilter(f, x["filterGroups"])
}

// present reports whether a JSON value says something: not null, "", {}
// or [].
func present(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return x != ""
	case map[string]any:
		return len(x) > 0
	case []any:
		return len(x) > 0
	}
	return true
}

// topicsFromJSON reads Vertex AI's memory topics, [{"managedMemoryTopic":
// "USER_PREFERENCES"} | {"customMemoryTopicLabel": "label"}], as kioku's
// topic labels.
func topicsFromJSON(field string, v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fault.InvalidField(field, "%s must be a list of {\"managedMemoryTopic\"} or {\"customMemoryTopicLabel\"}", field)
	}
	out := []string{}
	for i, x := range list {
		m, _ := x.(map[string]any)
		label := ""
		for _, k := range []string{"managedMemoryTopic", "managed_memory_topic", "customMemoryTopicLabel", "custom_memory_topic_label"} {
			if s, ok := m[k].(string); ok && s != "" {
				label = s
				break
			}
		}
		if label == "" {
			return nil, fault.InvalidField(field, "%s[%d] must be {\"managedMemoryTopic\": NAME} or {\"customMemoryTopicLabel\": LABEL}", field, i)
		}
		out = append(out, label)
	}
	return out, nil
}

// metadataFromJSON reads Vertex AI's memory metadata, {"key":
// MemoryMetadataValue}, with its types.
func metadataFromJSON(field string, v any) (metadata.Map, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fault.InvalidField(field, "%s must be an object of {\"stringValue\" | \"doubleValue\" | \"boolValue\" | \"timestampValue\": value}", field)
	}
	out := metadata.Map{}
	for k, x := range m {
		val, err := metadataValueFromJSON(field+"["+strconv.Quote(k)+"]", x)
		if err != nil {
			return nil, err
		}
		out[k] = val
	}
	return out, nil
}

// metadataValueFromJSON reads one MemoryMetadataValue: exactly one of
// stringValue, doubleValue (a number, or its proto3 JSON string form),
// boolValue and timestampValue (RFC 3339), in camelCase or snake_case.
func metadataValueFromJSON(field string, x any) (metadata.Value, error) {
	bad := func(format string, a ...any) (metadata.Value, error) {
		return metadata.Value{}, fault.InvalidField(field, field+": "+format, a...)
	}
	val, ok := x.(map[string]any)
	if !ok {
		return bad("must be {\"stringValue\" | \"doubleValue\" | \"boolValue\" | \"timestampValue\": value}")
	}
	var kind string
	var y any
	for _, f := range []struct{ camel, snake string }{{"stringValue", "string_value"}, {"doubleValue", "double_value"}, {"boolValue", "bool_value"}, {"timestampValue", "timestamp_value"}} {
		for _, name := range []string{f.camel, f.snake} {
			if v, ok := val[name]; ok && v != nil {
				if kind != "" {
					return bad("sets both %s and %s; a value has one type", kind, f.camel)
				}
				kind, y = f.camel, v
			}
		}
	}
	switch kind {
	case "stringValue":
		if s, ok := y.(string); ok {
			return metadata.String(s), nil
		}
	case "doubleValue":
		switch n := y.(type) {
		case float64:
			return metadata.Double(n), nil
		case string:
			if f, err := strconv.ParseFloat(n, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				return metadata.Double(f), nil
			}
			return bad("doubleValue %q is not a finite number", n)
		}
	case "boolValue":
		if b, ok := y.(bool); ok {
			return metadata.Bool(b), nil
		}
	case "timestampValue":
		if s, ok := y.(string); ok {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return bad("timestampValue %q is not an RFC 3339 time", s)
			}
			return metadata.Timestamp(t), nil
		}
	case "":
		return bad("must set one of stringValue, doubleValue, boolValue and timestampValue")
	}
	return bad("%s has the wrong type (%T)", kind, y)
}

// memoryFilter joins a RetrieveMemories or purge request's filter and
// filter_groups into one memory filter (package memorybank): the filter
// AND the groups' disjunction, and checks it.
func memoryFilter(f string, groups any) (string, error) {
	g, err := groupsFilter(groups)
	if err != nil {
		return "", err
	}
	switch {
	case g == "":
	case strings.TrimSpace(f) == "":
		f = g
	default:
		f = "(" + f + ") AND (" + g + ")"
	}
	if _, err := memorytype.ParseFilter(f); err != nil {
		return "", err
	}
	return f, nil
}

// filterKey is a metadata key a filter can name: dotted words of letters,
// digits, '_' and '-'.
var filterKey = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// groupsFilter writes Vertex AI's filter_groups, [{filters: [{key, op,
// value, negate}]}] (an OR of ANDs of comparisons of metadata), as a
// memory filter: (metadata.KEY op value AND ...) OR (...). "" for none.
func groupsFilter(v any) (string, error) {
	if !present(v) {
		return "", nil
	}
	groups, ok := v.([]any)
	if !ok {
		return "", fault.InvalidField("filter_groups", "filter_groups must be a list of {\"filters\": [...]}")
	}
	var ors []string
	for i, raw := range groups {
		field := "filter_groups[" + strconv.Itoa(i) + "].filters"
		gm, _ := raw.(map[string]any)
		filters, _ := gm["filters"].([]any)
		if len(filters) == 0 {
			return "", fault.InvalidField(field, "%s is empty: give each group at least one filter", field)
		}
		var ands []string
		for j, rf := range filters {
			ff := field + "[" + strconv.Itoa(j) + "]"
			fm, _ := rf.(map[string]any)
			key, _ := fm["key"].(string)
			if !filterKey.MatchString(key) {
				return "", fault.InvalidField(ff+".key", "%s.key %q must be a metadata key of letters, digits, '_', '-' and single dots", ff, key)
			}
			op, err := filterOp(ff+".op", fm["op"])
			if err != nil {
				return "", err
			}
			val, err := metadataValueFromJSON(ff+".value", fm["value"])
			if err != nil {
				return "", err
			}
			term := "metadata." + key + " " + op + " " + literal(val)
			if negate, _ := fm["negate"].(bool); negate {
				term = "NOT " + term
			}
			ands = append(ands, term)
		}
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return strings.Join(ors, " OR "), nil
}

// filterOp reads a MemoryFilter's operator, by name or number (unset:
// EQUAL).
func filterOp(field string, v any) (string, error) {
	switch v {
	case nil, "", "OPERATOR_UNSPECIFIED", "EQUAL", 0.0, 1.0:
		return "=", nil
	case "GREATER_THAN", 2.0:
		return ">", nil
	case "LESS_THAN", 3.0:
		return "<", nil
	}
	return "", fault.InvalidField(field, "%s %v: use EQUAL, GREATER_THAN or LESS_THAN", field, v)
}

// literal writes a metadata value as a filter's value.
func literal(v metadata.Value) string {
	switch v.Kind() {
	case metadata.KindDouble, metadata.KindBool:
		return v.String()
	}
	return filter.Quote(v.String())
}

// scopeFilter binds what a ListMemories or purge filter says of the scope:
// scope="{\"user_id\": \"123\"}" (the scope as a JSON object) or
// scope.user_id="123".
var scopeFilter = &filter.Schema{Method: "ListMemories", Fields: []filter.Field{
	{Name: "scope", Ops: []filter.Op{filter.Eq}},
	{Name: "scope", Map: true, Ops: []filter.Op{filter.Eq}},
}}

// scopedFilter splits a ListMemories or purge filter into the exact scope
// it lists (its equalities on the scope, at the top level, joined by AND;
// nil: every scope) and a memory filter of the rest (memoryFilter), with
// groups, a purge's filter_groups.
func scopedFilter(s string, groups any) (memorytype.Scope, string, error) {
	e, err := filter.Parse(s)
	if err != nil {
		return nil, "", err
	}
	var scope memorytype.Scope
	set := func(k, v string) error {
		if scope == nil {
			scope = memorytype.Scope{}
		}
		if old, ok := scope[k]; ok && old != v {
			return fault.InvalidField("filter", "filter gives scope key %q two values", k)
		}
		scope[k] = v
		return nil
	}
	var rest []string
	for _, t := range filter.Conjuncts(e) {
		r, ok := t.(*filter.Restriction)
		if !ok || r.Field != "scope" && !strings.HasPrefix(r.Field, "scope.") {
			if !filter.Walk(t, func(r *filter.Restriction) bool { return r.Field != "scope" && !strings.HasPrefix(r.Field, "scope.") }) {
				return nil, "", fault.InvalidField("filter", "filter %q: the scope is selected by equalities joined by AND at the top of the filter (scope=\"{...}\" or scope.KEY=\"value\"), never inside OR, NOT or parentheses", aip.Truncate(s, 200))
			}
			rest = append(rest, "("+t.String()+")")
			continue
		}
		if err := scopeFilter.Bind(r); err != nil {
			return nil, "", err
		}
		if r.Cond.Key != "" {
			if err := set(r.Cond.Key, r.Cond.Value.Text); err != nil {
				return nil, "", err
			}
			continue
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(r.Cond.Value.Text), &m); err != nil {
			return nil, "", fault.InvalidField("filter", "filter: scope must equal a JSON object of strings, as in scope=\"{\\\"user_id\\\": \\\"123\\\"}\"")
		}
		for k, v := range m {
			if err := set(k, v); err != nil {
				return nil, "", err
			}
		}
	}
	f, err := memoryFilter(strings.Join(rest, " AND "), groups)
	return scope, f, err
}
