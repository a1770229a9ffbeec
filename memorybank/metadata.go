package memorybank

import (
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"math"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/metadata"
)

// metadataBytes estimates the size of metadata in a response.
func metadataBytes(m metadata.Map) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v.Text()) + 16
	}
	return n
}

// validateMetadata checks metadata: its size, its keys, and each value
// (strings of UTF-8 within the limit, finite doubles, timestamps kioku
// stores).
func validateMetadata(field string, m metadata.Map) error {
	if len(m) > MaxMetadataEntries {
		return fault.InvalidField(field, "%s has %d entries; the limit is %d", field, len(m), MaxMetadataEntries)
	}
	for k, v := range m {
		if !plainKey.MatchString(k) {
			return fault.InvalidField(field, "%s key %q must be 1 to %d letters, digits, '_', '.' or '-'", field, k, MaxMetadataKeyBytes)
		}
		switch v.Kind() {
		case metadata.KindString:
			if len(v.Text()) > MaxMetadataValueBytes || !utf8.ValidString(v.Text()) {
				return fault.InvalidField(field, "%s value of %q must be at most %d bytes of UTF-8", field, k, MaxMetadataValueBytes)
			}
		case metadata.KindDouble:
			if math.IsNaN(v.Double()) || math.IsInf(v.Double(), 0) {
				return fault.InvalidField(field, "%s value of %q is %v; a double must be finite", field, k, v.Double())
			}
		case metadata.KindTimestamp:
			if v.Time().IsZero() || !unixnano.Storable(v.Time()) {
				return fault.InvalidField(field, "%s value of %q: the timestamp is out of range (%s)", field, k, unixnano.Range)
			}
		}
	}
	return nil
}

// metadataChange is the metadata a generation applies to its memories.
type metadataChange struct {
	md       metadata.Map
	strategy metadata.MergeStrategy
}

func (g *GenerateRequest) metadataChange() metadataChange {
	return metadataChange{md: g.Metadata, strategy: g.MergeStrategy}
}

// created returns the metadata of a memory the generation creates.
func (c metadataChange) created() metadata.Map {
	if len(c.md) == 0 {
		return nil
	}
	return c.md.Clone()
}

// updated returns the metadata a memory that had old has once the
// generation updated it.
func (c metadataChange) updated(old metadata.Map) metadata.Map {
	switch {
	case c.strategy == metadata.Merge && len(c.md) > 0:
		out := old.Clone()
		if out == nil {
			out = metadata.Map{}
		}
		for k, v := range c.md {
			out[k] = v
		}
		return out
	case c.strategy == metadata.Overwrite || c.strategy == metadata.MergeUnspecified && len(c.md) > 0:
		return c.created()
	}
	return old
}

// consolidation returns the filter of the memories consolidation may
// see: with RequireExactMatch, those whose metadata is the generation's.
func (c metadataChange) consolidation() memorytype.Filter {
	if c.strategy != metadata.RequireExactMatch {
		return memorytype.Filter{}
	}
	md := c.md
	return memorytype.Filter{ExactMetadata: &md}
}
