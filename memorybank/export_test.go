package memorybank

// EncodeJob returns the request and result records of a memory bank
// operation of kind (nil result when the job has none), for the golden
// tests of the stored formats.
func EncodeJob(kind string, j *Job) (request, result []byte) {
	switch kind {
	case KindGenerate:
		res := generateResult{
			ModelCalls: j.ModelCalls, EventsProcessed: j.EventsProcessed, FactsExtracted: j.FactsExtracted,
			ExtractionNS: int64(j.ExtractionTime), ConsolidationNS: int64(j.Consolidation),
		}
		for _, gm := range j.Generated {
			res.Generated = append(res.Generated, generatedRecordOf(gm))
		}
		if b := encode(res); string(b) != "{}" {
			result = b
		}
		return encodeGenerate(j.Generate), result
	case KindPurge:
		if j.PurgeCount != 0 {
			result = encode(purgeResult{PurgeCount: j.PurgeCount})
		}
		return encode(purgeRecord{Scope: j.Purge.Scope, Filter: j.Purge.Filter, Force: j.Purge.Force}), result
	}
	return nil, nil
}
