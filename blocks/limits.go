package blocks

// Limits of the blocks, part of the API contract.
const (
	// DefaultLimit is the limit in characters of a block created without
	// one.
	DefaultLimit = 2000
	// MaxLimit bounds a block's limit.
	MaxLimit = 20000
	// MaxDescriptionChars bounds a block's description, in characters.
	MaxDescriptionChars = 1000
	// MaxBlocks bounds the blocks of one owner: a user, or an app's
	// shared blocks.
	MaxBlocks = 20
	// MaxRevisions is how many revisions of a block are kept: writing a
	// block's revision n removes its revision n-MaxRevisions.
	MaxRevisions = 20
)
