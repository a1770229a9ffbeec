package memorybank

import (
	"context"
	"slices"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/resource"
)

// Erasure is what EraseUser deleted.
type Erasure struct {
	// Memories counts the memories removed (deleted ones included), each
	// with its revisions.
	Memories int
	// Watermarks and Operations count the generation watermarks of the
	// user's sessions and the operations about the user removed.
	Watermarks, Operations int
	// Deliveries counts the webhook deliveries of the user's memory
	// changes removed (their records name the memory and its scope).
	Deliveries int
}

// eraseBatch is how many records one deletion of an erasure removes.
const eraseBatch = 100

// EraseUser removes everything the memory bank holds about a user of an
// app, for a data-subject request: the operations about the user (of any
// kind: Concerns, whose key, or whose generation request, names the user;
// their requests and results hold what came from the user; removing them
// first stops a generation under way from writing more), every memory whose scope's user_id is the user, deleted ones too,
// with its revisions (no revision records the removal), the watermarks of
// the user's sessions, then again any operation queued meanwhile.
// Memories of other scopes are not the user's and stay, with the sources
// that name the user's sessions. Calling it again finishes an erasure that
// stopped.
func (s *Service) EraseUser(ctx context.Context, app, user string) (*Erasure, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := resource.ValidateID("user id", user, resource.UserIDChars); err != nil {
		return nil, err
	}
	if s.parts.eraser == nil {
		return nil, unimplemented("erasing a user", "Eraser")
	}
	out := &Erasure{}
	if err := s.eraseOperations(ctx, app, user, out); err != nil {
		return out, err
	}
	for {
		page, err := s.parts.eraser.ScanMemories(ctx, memorydriver.ScanQuery{App: app, User: user, Limit: eraseBatch})
		if err != nil || len(page) == 0 {
			if err != nil {
				return out, err
			}
			break
		}
		ids := make([]string, len(page))
		for i, m := range page {
			ids[i] = m.ID
		}
		if err := s.parts.eraser.DeleteMemories(ctx, app, ids); err != nil {
			return out, err
		}
		out.Memories += len(ids)
	}
	prefix := resource.UserName(app, user) + "/sessions/"
	for {
		page, err := s.parts.eraser.ScanWatermarks(ctx, app, prefix, "", eraseBatch)
		if err != nil || len(page) == 0 {
			if err != nil {
				return out, err
			}
			break
		}
		names := make([]string, len(page))
		for i, w := range page {
			names[i] = w.Session
			s.forgetTrigger(w.Session)
		}
		if err := s.parts.eraser.DeleteWatermarks(ctx, app, names); err != nil {
			return out, err
		}
		out.Watermarks += len(names)
	}
	if err := s.eraseOperations(ctx, app, user, out); err != nil {
		return out, err
	}
	// The user's changes left the feed with their memories: no delivery
	// of them is made after this, and those made are removed.
	n, err := s.deleteDeliveries(ctx, app, func(d *memorytype.Delivery) bool { return d.Scope["user_id"] == user })
	out.Deliveries += n
	if err != nil {
		return out, err
	}
	return out, nil
}

// UserErased appends a user.erased event for the webhooks to the app's
// change feed (their outbox), in a Write of its own, when a webhook of the
// app's configuration wants that event: the caller calls it once
// everything it erases of the user is gone (DeleteUser erases the
// sessions, the memories, the memory files and the blocks). The event
// names the user, so an app whose webhooks do not ask for it keeps no
// trace of the user at all; one that asks keeps the event in the feed and
// its deliveries for their retention (memorydriver.ChangeRetention,
// memorydriver.DeliveryRetention). A crash before it leaves the erasure to be finished
// by calling DeleteUser again, which appends it then.
func (s *Service) UserErased(ctx context.Context, app, user string) error {
	if err := validateApp(app); err != nil {
		return err
	}
	if err := resource.ValidateID("user id", user, resource.UserIDChars); err != nil {
		return err
	}
	cfg, err := s.store.GetConfig(ctx, app)
	if fault.Is(err, fault.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(cfg.Webhooks, func(w appconfig.Webhook) bool { return w.Wants(memorytype.EventUserErased) }) {
		return nil
	}
	return s.store.Write(ctx, &memorydriver.Write{App: app, Now: s.now(), Events: []*memorytype.ChangeRecord{{Event: memorytype.EventUserErased, Scope: memorytype.Scope{"user_id": user}}}})
}

// eraseOperations removes the operations of an app that concern a user.
func (s *Service) eraseOperations(ctx context.Context, app, user string, out *Erasure) error {
	if s.ops == nil {
		return nil
	}
	q := jobs.Query{App: app, Limit: eraseBatch}
	var ids []string
	for {
		page, err := s.ops.ListOperations(ctx, q)
		if err != nil {
			return err
		}
		for _, op := range page {
			if Concerns(op, user) {
				ids = append(ids, op.ID)
			}
		}
		if len(page) < eraseBatch {
			break
		}
		last := page[len(page)-1]
		q.AfterCreate, q.AfterID = last.CreateTime, last.ID
	}
	for start := 0; start < len(ids); start += eraseBatch {
		batch := ids[start:min(start+eraseBatch, len(ids))]
		if err := s.ops.DeleteOperations(ctx, app, batch); err != nil {
			return err
		}
		out.Operations += len(batch)
	}
	return nil
}
