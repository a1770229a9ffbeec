package memorybank

import (
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
)

// storeParts are the optional parts of the Service's store, each nil
// when the store does not implement it (package memorydriver).
type storeParts struct {
	reembedder memorydriver.Reembedder
	eraser     memorydriver.Eraser
	profiler   memorydriver.Profiler
	changes    memorydriver.ChangeFeed
	webhooks   memorydriver.Webhooks
	meter      memorydriver.UsageMeter
}

// partsOf finds the optional parts store implements.
func partsOf(store memorydriver.Store) storeParts {
	var p storeParts
	p.reembedder, _ = store.(memorydriver.Reembedder)
	p.eraser, _ = store.(memorydriver.Eraser)
	p.profiler, _ = store.(memorydriver.Profiler)
	p.changes, _ = store.(memorydriver.ChangeFeed)
	p.webhooks, _ = store.(memorydriver.Webhooks)
	p.meter, _ = store.(memorydriver.UsageMeter)
	return p
}

// supports refuses a configuration that needs a part the store lacks:
// webhooks need Webhooks, profile schemas need Profiler.
func (p storeParts) supports(c *appconfig.Config) error {
	if len(c.Webhooks) > 0 && p.webhooks == nil {
		return unimplemented("webhooks", "Webhooks")
	}
	if len(c.Profiles) > 0 && p.profiler == nil {
		return unimplemented("structured profiles", "Profiler")
	}
	return nil
}

// unimplemented is the error of a call that needs an optional part of the
// store that it does not implement.
func unimplemented(what, part string) error {
	return fault.New(fault.Unimplemented, "%s needs a memory store that implements memorydriver.%s; this one does not", what, part)
}
