package sqlite

import (
	"strconv"

	"github.com/kioku-ai/kioku/internal/seal"
)

// Encryption at rest. In a database encrypted with a key (sqlitedb's
// UseEncryption) the store seals, each bound to its row:
//
//	memories.fact          (app, id), and display_name, description and
//	                       profile (a profile field, with its value) when
//	                       not empty
//	memories.embedding     (app, id): the offline embedder's vectors are
//	                       hashed bags of terms, a dense model's can be
//	                       inverted, so neither is left readable
//	memory_revisions.body  (app, memory, number)
//	bank_configs.body      (app): prompts and examples
//	operations.body        (app, id): requests and results
//	webhook_deliveries.body (app, id): the webhook's URL and the event
//
// Scopes, topics, metadata, sources and memory types stay as they are:
// scopes and sources are ids that key and join rows, filters match topics
// and metadata in SQL, and a memory type is one of two constant names,
// which the index of profile fields is partial on. A schema step that
// reads a sealed column in SQL must open it in Go instead
// (sqlitedb.Step.Func).

// The places of the sealed columns.
func factAt(app, id string) seal.Where { return seal.At("memories.fact", app, id) }
func displayNameAt(app, id string) seal.Where {
	return seal.At("memories.display_name", app, id)
}
func descriptionAt(app, id string) seal.Where {
	return seal.At("memories.description", app, id)
}
func profileAt(app, id string) seal.Where   { return seal.At("memories.profile", app, id) }
func embeddingAt(app, id string) seal.Where { return seal.At("memories.embedding", app, id) }
func configAt(app string) seal.Where        { return seal.At("bank_configs.body", app) }
func operationAt(app, id string) seal.Where { return seal.At("operations.body", app, id) }
func deliveryAt(app, id string) seal.Where {
	return seal.At("webhook_deliveries.body", app, id)
}
func revisionAt(app, memoryID string, number int64) seal.Where {
	return seal.At("memory_revisions.body", app, memoryID, strconv.FormatInt(number, 10))
}

// sealText returns the value to store for an encoded text: sealed bytes
// in an encrypted database, else the text itself (stored as TEXT, as
// before encryption existed, so that SQL's JSON functions still read it).
func sealText(k *seal.Keyring, app string, at seal.Where, text []byte) (any, error) {
	if k == nil {
		return string(text), nil
	}
	return k.Seal(app, at, text)
}

// sealOptional is sealText of a text that is often empty: an empty one is
// stored empty (openBlob reads it back).
func sealOptional(k *seal.Keyring, app string, at seal.Where, text string) (any, error) {
	if text == "" {
		return "", nil
	}
	return sealText(k, app, at, []byte(text))
}

// sealBlob seals a stored blob; an empty one (NULL) stays empty.
func sealBlob(k *seal.Keyring, app string, at seal.Where, b []byte) ([]byte, error) {
	if len(b) == 0 {
		return b, nil
	}
	return k.Seal(app, at, b)
}

// openBlob opens what sealBlob stored.
func openBlob(k *seal.Keyring, app string, at seal.Where, b []byte) ([]byte, error) {
	if len(b) == 0 {
		return b, nil
	}
	return k.Open(app, at, b)
}
