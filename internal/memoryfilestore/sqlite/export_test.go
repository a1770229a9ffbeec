package sqlite

// SchemaV1 is the store's first schema, under which an encrypted database
// kept paths in the clear.
const SchemaV1 = schema
