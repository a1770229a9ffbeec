package memorytype

import "testing"

func TestScopeKeys(t *testing.T) {
	s := Scope{"user_id": "ann&bo=1", "agent": "é x"}
	if k := s.Key(); k != "agent=%C3%A9+x&user_id=ann%26bo%3D1" {
		t.Errorf("Key = %q", k)
	}
	back := ParseScopeKey(s.Key())
	if len(back) != 2 || back["user_id"] != "ann&bo=1" || back["agent"] != "é x" {
		t.Errorf("ParseScopeKey(Key) = %v, want %v", back, s)
	}
	if (Scope{"b": "1", "a": "2"}).Key() != (Scope{"a": "2", "b": "1"}).Key() {
		t.Error("Key depends on map order")
	}
}
