package memorybank

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model"
)

// Quotas are the allowances every app has each day (UTC), counted durably
// in the store (memorydriver.UsageMeter), so that they hold across restarts and across
// the servers of one store. A field of zero means no quota.
//
// A GenerateMemories request counts one generation when it is accepted,
// whatever its source, automatic (triggered) ones included; once an app
// has made Generations today, or its generations have spent Tokens of the
// generation model today, its requests are refused RESOURCE_EXHAUSTED
// with the time until the day ends (fault.RetryDelayOf). Tokens are
// counted as each model call of a generation returns, so the generations
// already accepted when the token quota is reached still run: an app
// passes it by at most what those use.
type Quotas struct {
	Generations int64
	Tokens      int64
}

// AppUsage is an app's usage of one day as this server last saw it, for
// metrics.
type AppUsage struct {
	App string
	Day string
	memorytype.Usage
}

// usageSeen remembers each app's usage of the day as this server last
// read or added it.
type usageSeen struct {
	mu   sync.Mutex
	apps map[string]AppUsage
}

func (u *usageSeen) saw(app, day string, got memorytype.Usage) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.apps == nil {
		u.apps = map[string]AppUsage{}
	}
	// A later day replaces an earlier; the same day only grows.
	if old, ok := u.apps[app]; ok && (old.Day > day || old.Day == day && old.Generations >= got.Generations && old.Tokens >= got.Tokens) {
		return
	}
	u.apps[app] = AppUsage{App: app, Day: day, Usage: got}
}

// dayOf returns the UTC day of t as the store keys it, and the time the
// day ends.
func dayOf(t time.Time) (string, time.Time) {
	t = t.UTC()
	start := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return start.Format(time.DateOnly), start.AddDate(0, 0, 1)
}

// Quotas returns the allowances every app has each day.
func (s *Service) Quotas() Quotas { return s.cfg.Quotas }

// Usage returns an app's usage of today (UTC) and when the day ends.
func (s *Service) Usage(ctx context.Context, app string) (memorytype.Usage, time.Time, error) {
	if err := validateApp(app); err != nil {
		return memorytype.Usage{}, time.Time{}, err
	}
	if s.parts.meter == nil {
		return memorytype.Usage{}, time.Time{}, unimplemented("reading an app's usage", "UsageMeter")
	}
	day, end := dayOf(s.now())
	u, err := s.parts.meter.GetUsage(ctx, app, day)
	if err != nil {
		return memorytype.Usage{}, time.Time{}, err
	}
	s.usage.saw(app, day, u)
	return u, end, nil
}

// UsageSeen returns the usage of today of every app this server has
// counted or read, as it last saw it (other servers' counts included up
// to then), sorted by app.
func (s *Service) UsageSeen() []AppUsage {
	today, _ := dayOf(s.now())
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	var out []AppUsage
	for _, u := range s.usage.apps {
		if u.Day == today {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b AppUsage) int {
		if a.App < b.App {
			return -1
		}
		if a.App > b.App {
			return 1
		}
		return 0
	})
	return out
}

// spendGeneration counts one generation of app today, or refuses it when
// the app's generations or tokens of today are spent.
func (s *Service) spendGeneration(ctx context.Context, app string) error {
	q := s.cfg.Quotas
	if q.Generations <= 0 && q.Tokens <= 0 {
		return nil
	}
	if s.parts.meter == nil {
		return unimplemented("a memory generation under quotas", "UsageMeter")
	}
	day, end := dayOf(s.now())
	u, added, err := s.parts.meter.AddUsage(ctx, app, day, memorytype.Usage{Generations: 1}, memorytype.Usage{Generations: q.Generations, Tokens: q.Tokens})
	if err != nil {
		return err
	}
	s.usage.saw(app, day, u)
	if added {
		return nil
	}
	wait := end.Sub(s.now())
	if q.Generations > 0 && u.Generations >= q.Generations {
		return fault.WithRetryDelay(fault.New(fault.ResourceExhausted, "app %s has made its %d memory generations of today (the quota of every app, --quota-generations); the day ends (UTC) in %v", app, q.Generations, wait.Round(time.Second)), wait)
	}
	return fault.WithRetryDelay(fault.New(fault.ResourceExhausted, "app %s's generations have used %d model tokens today, its quota being %d (--quota-tokens); the day ends (UTC) in %v", app, u.Tokens, q.Tokens, wait.Round(time.Second)), wait)
}

// chargedGenerator counts the tokens of each call of gen to app's usage
// of the day.
type chargedGenerator struct {
	model.Generator
	s   *Service
	app string
}

// Unwrap returns the generator charged (see model.IsOfflineExtractor).
func (g chargedGenerator) Unwrap() model.Generator { return g.Generator }

func (g chargedGenerator) Generate(ctx context.Context, r *model.GenerateRequest) (*model.GenerateResponse, error) {
	resp, err := g.Generator.Generate(ctx, r)
	if resp != nil && resp.PromptTokens+resp.OutputTokens > 0 {
		day, _ := dayOf(g.s.now())
		// The tokens are spent whatever the call's outcome; a failure to
		// count them is logged, not the generation's.
		u, _, cerr := g.s.parts.meter.AddUsage(ctx, g.app, day, memorytype.Usage{Tokens: int64(resp.PromptTokens + resp.OutputTokens)}, memorytype.Usage{})
		if cerr != nil {
			g.s.log.Warn("could not count a generation's model tokens against its app's quota", "app", g.app, "tokens", resp.PromptTokens+resp.OutputTokens, "error", cerr)
		} else {
			g.s.usage.saw(g.app, day, u)
		}
	}
	return resp, err
}

// charged returns gen counting its tokens to app, when the apps have
// quotas.
func (s *Service) charged(gen model.Generator, app string) model.Generator {
	if gen == nil || s.parts.meter == nil || s.cfg.Quotas.Tokens <= 0 && s.cfg.Quotas.Generations <= 0 {
		return gen
	}
	return chargedGenerator{Generator: gen, s: s, app: app}
}
