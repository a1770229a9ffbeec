// Package retrieval ranks memories for a similarity search: the rules the
// memory bank and every store share, so that a search ranks the same
// whichever store runs it.
//
// A search has two sides (see Rank). The lexical one matches the query's
// terms (model.OfflineTerms) with each memory's fact, weighting them by
// their inverse document frequency among the scope's memories (TermStats),
// whatever the embedder; the dense one compares the query's embedding,
// weighted for the scope (WeightedQuery), with the memories' vectors of
// the same embedder. Rank scores the candidates a store gathered on both
// sides; Fuse orders its results as an app's Fusion says: by the lexical
// side alone with the offline embedder, whose vectors hash the same terms,
// or fused with the dense side with a model embedder (hybrid retrieval).
// A query that asks when (AsksWhen) prefers, on the lexical side, the
// memories that say when, and a search prefers the memories of a period
// (QueryPeriod, TimeRange).
//
// vector.go holds the dense side's scoring rule and the compact forms it
// works on: Vector (a memory's embedding, sparse or dense) and DocFreq (a
// scope's document frequencies per embedding model, or of its terms'
// buckets), kept by the SQLite store's cache of scopes
// (internal/memorystore/vectorcache); the Firestore store keeps its
// statistics in a document per scope and ranks the candidates it reads
// with the same Rank.
package retrieval
