package filter

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

func TestParseShapesTheTree(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, `<nil>`},
		{`  `, `<nil>`},
		{`user_id="ann"`, `user_id = "ann"`},
		{`a=1 AND b=2`, `a = 1 AND b = 2`},
		{`a=1 and b=2`, `a = 1 AND b = 2`},
		// OR binds tighter than AND (AIP-160).
		{`a=1 AND b=2 OR c=3`, `a = 1 AND (b = 2 OR c = 3)`},
		{`(a=1 AND b=2) OR c=3`, `(a = 1 AND b = 2) OR c = 3`},
		{`a=1 b=2`, `a = 1 AND b = 2`},
		{`NOT a="x"`, `NOT a = "x"`},
		{`-a="x"`, `NOT a = "x"`},
		{`NOT (a=1 OR b=2)`, `NOT (a = 1 OR b = 2)`},
		{`timestamp>="2025-01-01T00:00:00+00:00" AND timestamp<2025-02-01T00:00:00Z`, `timestamp >= "2025-01-01T00:00:00+00:00" AND timestamp < 2025-02-01T00:00:00Z`},
		{`labels.my-key != 'it''s'`, ``}, // an unterminated second string: an error
		{`name:"quoted \" inside"`, `name : "quoted \" inside"`},
		{`((a=1))`, `a = 1`},
		{`topics.custom_memory_topic_label: "x" OR topics.managed_memory_topic: USER_PREFERENCES`, `topics.custom_memory_topic_label : "x" OR topics.managed_memory_topic : USER_PREFERENCES`},
	} {
		e, err := Parse(c.in)
		got := "<nil>"
		if e != nil {
			got = e.String()
		}
		if c.want == "" {
			if err == nil {
				t.Errorf("Parse(%q) = %s, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
}

func TestParseErrorsSayWhere(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`user_id`, "a comparison"},
		{`user_id = `, "a value for user_id"},
		{`a=1 AND`, "a field name"},
		{`a=1 AND AND b=2`, "a field name"},
		{`(a=1`, "')'"},
		{`a=1)`, "no '(' before this ')'"},
		{`a="x`, "no closing quote"},
		{`fn(a)`, "functions are not supported"},
		{`.a=1`, "a field name"},
		{strings.Repeat("(", MaxDepth+2) + "a=1" + strings.Repeat(")", MaxDepth+2), "nests parentheses"},
		{strings.Repeat("a=1 OR ", MaxRestrictions) + "a=1", "more than 64 comparisons"},
		{strings.Repeat("x", MaxBytes+1), "the limit is 4096"},
	} {
		_, err := Parse(c.in)
		if !fault.Is(err, fault.Invalid) || fault.FieldOf(err) != "filter" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%.40q): %v; want an Invalid error on field filter saying %q", c.in, err, c.want)
		}
	}
}

var sessionLike = &Schema{Method: "ListThings", Fields: []Field{
	{Name: "user_id", Aliases: []string{"userId"}},
	{Name: "display_name", Aliases: []string{"displayName"}},
	{Name: "labels", Map: true},
	{Name: "create_time", Aliases: []string{"createTime"}, Kind: Timestamp, Ops: []Op{Eq, Ne, Lt, Le, Gt, Ge}},
	{Name: "score", Kind: Number, Ops: []Op{Eq, Lt, Gt}},
	{Name: "pinned", Kind: Bool},
	{Name: "topics.custom_memory_topic_label", Ops: []Op{Has, Eq}},
}}

type thing struct {
	user, name string
	labels     map[string]string
	created    time.Time
	score      float64
	pinned     bool
	topics     []string
}

func (th thing) match(c *Cond) bool {
	switch c.Field.Name {
	case "user_id":
		return c.MatchString(th.user)
	case "display_name":
		return c.MatchString(th.name)
	case "labels":
		return c.MatchMap(th.labels)
	case "create_time":
		return c.MatchTime(th.created)
	case "score":
		return c.MatchNumber(th.score)
	case "pinned":
		return c.MatchBool(th.pinned)
	case "topics.custom_memory_topic_label":
		return slices.ContainsFunc(th.topics, c.MatchString)
	}
	return false
}

func TestBindAndEval(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	things := map[string]thing{
		"a": {user: "ann", name: "weekly", labels: map[string]string{"team": "core"}, created: t0, score: 1, pinned: true, topics: []string{"tea"}},
		"b": {user: "bob", name: "daily", labels: map[string]string{"team": "edge", "x": "1"}, created: t0.Add(time.Hour), score: 2},
		"c": {user: "cy", name: "weekly", created: t0.Add(2 * time.Hour), score: 3, topics: []string{"code", "tea"}},
	}
	for _, c := range []struct {
		filter string
		want   []string
	}{
		{``, []string{"a", "b", "c"}},
		{`user_id="ann" OR user_id="bob"`, []string{"a", "b"}},
		{`userId="ann" OR userId="bob"`, []string{"a", "b"}},
		{`displayName="weekly" AND NOT user_id="ann"`, []string{"c"}},
		{`display_name="weekly" AND (user_id="ann" OR user_id="cy")`, []string{"a", "c"}},
		{`labels.team="core" OR labels.team="edge"`, []string{"a", "b"}},
		{`labels.team!="core"`, []string{"b"}},
		{`labels:x`, []string{"b"}},
		{`-labels:team`, []string{"c"}},
		{`create_time>="2025-01-01T01:00:00+00:00"`, []string{"b", "c"}},
		{`createTime<2025-01-01T01:00:00Z`, []string{"a"}},
		{`create_time>"2025-01-01T00:00:00Z" AND create_time<="2025-01-01T01:00:00.000Z"`, []string{"b"}},
		{`score>1.5`, []string{"b", "c"}},
		{`pinned=true`, []string{"a"}},
		{`pinned!=true`, []string{"b", "c"}},
		{`topics.custom_memory_topic_label:"tea" AND score>2`, []string{"c"}},
	} {
		e, err := sessionLike.Parse(c.filter)
		if err != nil {
			t.Errorf("%s: %v", c.filter, err)
			continue
		}
		var got []string
		for _, id := range []string{"a", "b", "c"} {
			if Eval(e, things[id].match) {
				got = append(got, id)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s selects %v, want %v", c.filter, got, c.want)
		}
	}
}

func TestBindRefusesWhatTheSchemaLacks(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`owner="x"`, `ListThings filters on user_id, display_name, labels.KEY, create_time, score, pinned, topics.custom_memory_topic_label; not on "owner"`},
		{`user_id>"x"`, `user_id takes = !=, not >`},
		{`labels="x"`, `labels is a map`},
		{`create_time>=yesterday`, `the value must be an RFC 3339 time`},
		{`score=ten`, `the value must be a number`},
		{`pinned=yes`, `the value must be true or false`},
		{`user_id="a" OR (pinned=true AND owner="x")`, `not on "owner"`},
	} {
		_, err := sessionLike.Parse(c.in)
		if !fault.Is(err, fault.Invalid) || fault.FieldOf(err) != "filter" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an Invalid error on field filter saying %q", c.in, err, c.want)
		}
	}
}

func TestPinnedAndConjuncts(t *testing.T) {
	for _, c := range []struct {
		filter string
		pinned bool
		want   []string
	}{
		{`user_id="ann"`, true, []string{"ann"}},
		{`user_id="ann" OR userId="bob"`, true, []string{"ann", "bob"}},
		{`user_id="ann" AND display_name="x"`, true, []string{"ann"}},
		{`(user_id="ann" OR user_id="bob") AND user_id="bob"`, true, []string{"bob"}},
		{`user_id="ann" AND user_id="bob"`, true, nil},
		{`user_id="ann" OR display_name="x"`, false, nil},
		{`NOT user_id="ann"`, false, nil},
		{`user_id!="ann"`, false, nil},
		{``, false, nil},
	} {
		e, err := sessionLike.Parse(c.filter)
		if err != nil {
			t.Fatal(err)
		}
		got, pinned := Pinned(e, "user_id", "")
		if pinned != c.pinned || !slices.Equal(got, c.want) {
			t.Errorf("Pinned(%s) = %v, %v; want %v, %v", c.filter, got, pinned, c.want, c.pinned)
		}
	}
	e, _ := sessionLike.Parse(`user_id="ann" AND (display_name="x" OR labels.k="v") AND score>1`)
	if n := len(Conjuncts(e)); n != 3 {
		t.Errorf("Conjuncts: %d terms, want 3", n)
	}
	if n := len(Conjuncts(nil)); n != 0 {
		t.Errorf("Conjuncts(nil): %d terms", n)
	}
}

// FuzzParse: no filter makes the parser panic, and what parses prints as
// a filter that parses to the same tree.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`a=1`, `a="x" OR b!='y'`, `NOT (a:b AND -c>=2025-01-01T00:00:00Z)`, `((`, `a="\"`, `x y z`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if err != nil || e == nil {
			return
		}
		again, err := Parse(e.String())
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", s, e.String(), err)
		}
		if again.String() != e.String() {
			t.Fatalf("%q printed as %q, which parses as %q", s, e.String(), again.String())
		}
	})
}
