// Package openapi holds the OpenAPI 3 document of kioku's REST bindings
// (openapi.yaml), which package transport serves at GET /openapi.yaml.
//
// The document is generated from proto/ by gnostic's protoc-gen-openapi
// (./scripts/generate, with buf.gen.openapi.yaml) and never edited by hand;
// CI fails when it differs from what the generator writes.
package openapi

import _ "embed"

// Document is openapi.yaml: OpenAPI 3.0 in YAML.
//
//go:embed openapi.yaml
var Document []byte
