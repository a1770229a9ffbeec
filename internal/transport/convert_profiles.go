package transport

import (
	"fmt"

	"github.com/kioku-ai/kioku/fault"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"google.golang.org/protobuf/types/known/structpb"
)

// The conversions of structured profiles: memory types, profile fields,
// the configuration's profile schemas and RetrieveProfiles' answer.

var memoryTypes = map[memorytype.MemoryType]kiokuv1.MemoryType{
	memorytype.NaturalLanguage:   kiokuv1.MemoryType_MEMORY_TYPE_NATURAL_LANGUAGE_COLLECTION,
	memorytype.StructuredProfile: kiokuv1.MemoryType_MEMORY_TYPE_STRUCTURED_PROFILE,
}

// memoryTypesFromProto converts a request's memory types; field names
// them in errors.
func memoryTypesFromProto(field string, types []kiokuv1.MemoryType) ([]memorytype.MemoryType, error) {
	var out []memorytype.MemoryType
	for i, pt := range types {
		found := false
		for t, p := range memoryTypes {
			if p == pt {
				out, found = append(out, t), true
			}
		}
		if !found {
			return nil, fault.InvalidField(field, "%s[%d] %v is not a memory type: give MEMORY_TYPE_NATURAL_LANGUAGE_COLLECTION or MEMORY_TYPE_STRUCTURED_PROFILE", field, i, pt)
		}
	}
	return out, nil
}

// profileFieldToProto converts a memory's profile field (nil: none).
func profileFieldToProto(p *profile.Field) *kiokuv1.ProfileField {
	if p == nil {
		return nil
	}
	v, err := structpb.NewValue(p.Value)
	if err != nil {
		// A value of another type than the field types allow: its text.
		v = structpb.NewStringValue(profile.ValueText(p.Value))
	}
	return &kiokuv1.ProfileField{SchemaId: p.SchemaID, Field: p.Field, Value: v}
}

// profileSchemasToProto converts the configuration's profile schemas.
func profileSchemasToProto(schemas []profile.Schema) ([]*kiokuv1.ProfileSchemaConfig, error) {
	var out []*kiokuv1.ProfileSchemaConfig
	for i := range schemas {
		s, err := structpb.NewStruct(schemas[i].JSONSchema())
		if err != nil {
			return nil, fault.Wrap(fault.Internal, err, "encoding profile schema %s", schemas[i].ID)
		}
		out = append(out, &kiokuv1.ProfileSchemaConfig{SchemaId: schemas[i].ID, JsonSchema: s, ScopeKeys: schemas[i].ScopeKeys})
	}
	return out, nil
}

// profileSchemasFromProto reads the configuration's profile schemas
// (memorybank checks them again with the rest of the configuration).
func profileSchemasFromProto(configs []*kiokuv1.ProfileSchemaConfig) ([]profile.Schema, error) {
	var out []profile.Schema
	for i, pc := range configs {
		field := fmt.Sprintf("memory_bank_config.profile_schemas[%d]", i)
		if pc.GetJsonSchema() == nil {
			return nil, fault.InvalidField(field+".json_schema", "%s.json_schema is required: a JSON Schema object of the profile's fields", field)
		}
		p, err := profile.ParseSchema(field+".json_schema", pc.GetSchemaId(), pc.GetJsonSchema().AsMap(), pc.GetScopeKeys())
		if err != nil {
			return nil, err
		}
		out = append(out, *p)
	}
	return out, nil
}

// profilesToProto converts RetrieveProfiles' answer.
func profilesToProto(profiles []*memorybank.Profile) (*kiokuv1.RetrieveProfilesResponse, error) {
	out := &kiokuv1.RetrieveProfilesResponse{Profiles: map[string]*kiokuv1.MemoryProfile{}}
	for _, p := range profiles {
		s, err := structpb.NewStruct(p.Values)
		if err != nil {
			return nil, fault.Wrap(fault.Internal, err, "encoding profile %s", p.SchemaID)
		}
		mp := &kiokuv1.MemoryProfile{SchemaId: p.SchemaID, Profile: s}
		for _, m := range p.Memories {
			mp.Memories = append(mp.Memories, memoryToProto(m))
		}
		out.Profiles[p.SchemaID] = mp
	}
	return out, nil
}
