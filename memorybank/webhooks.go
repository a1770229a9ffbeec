package memorybank

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/resource"
)

// Webhook limits.
const (
	MaxWebhooks      = 8
	MaxWebhookURL    = 2048
	webhookSecretPre = "whsec_"
	// webhookSecretBytes is the size of a generated secret; a given one
	// may have 24 to 64 bytes.
	webhookSecretBytes = 32
)

// WebhookSecretKey returns the HMAC key of a "whsec_" secret: the bytes
// its base64 holds.
func WebhookSecretKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, webhookSecretPre)
	if !ok {
		return nil, fault.InvalidField("webhooks.secret", "a webhook secret must start with %q", webhookSecretPre)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fault.InvalidField("webhooks.secret", "a webhook secret is %q and standard base64: %v", webhookSecretPre, err)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fault.InvalidField("webhooks.secret", "a webhook secret holds 24 to 64 bytes, not %d", len(key))
	}
	return key, nil
}

// newWebhookSecret returns a random secret.
func newWebhookSecret() string {
	b := make([]byte, webhookSecretBytes)
	rand.Read(b)
	return webhookSecretPre + base64.StdEncoding.EncodeToString(b)
}

// prepareWebhooks gives each webhook of next the create time of cur's
// webhook of the same URL (now for a new URL) and, when it has no secret,
// that webhook's secret or a new one (SecretGenerated), so that a
// configuration read back (secrets empty) and written again keeps them.
func prepareWebhooks(cur, next []appconfig.Webhook, now time.Time) []appconfig.Webhook {
	out := make([]appconfig.Webhook, len(next))
	for i, w := range next {
		w.Events = slices.Clone(w.Events)
		w.SecretGenerated = false
		w.CreateTime = now
		j := slices.IndexFunc(cur, func(c appconfig.Webhook) bool { return c.URL == w.URL })
		if j >= 0 {
			w.CreateTime = cur[j].CreateTime
		}
		if w.Secret == "" {
			if j >= 0 {
				w.Secret = cur[j].Secret
			} else {
				w.Secret, w.SecretGenerated = newWebhookSecret(), true
			}
		}
		out[i] = w
	}
	return out
}

// validateWebhooks checks an app's webhooks: https URLs (http to a
// loopback address when allowed), known event types, valid secrets.
func validateWebhooks(ws []appconfig.Webhook, allowLoopbackHTTP bool) error {
	if len(ws) > MaxWebhooks {
		return fault.InvalidField("webhooks", "webhooks has %d endpoints; the limit is %d", len(ws), MaxWebhooks)
	}
	seen := map[string]bool{}
	for i, w := range ws {
		field := fmt.Sprintf("webhooks[%d]", i)
		if err := validateWebhookURL(field+".url", w.URL, allowLoopbackHTTP); err != nil {
			return err
		}
		if seen[w.URL] {
			return fault.InvalidField(field+".url", "%s: url %q is given twice", field, w.URL)
		}
		seen[w.URL] = true
		if len(w.Events) == 0 {
			return fault.InvalidField(field+".events", "%s.events is empty: name at least one of %v", field, memorytype.EventTypes)
		}
		for _, e := range w.Events {
			if !slices.Contains(memorytype.EventTypes, e) {
				return fault.InvalidField(field+".events", "%s.events: %q is not an event type (%v)", field, e, memorytype.EventTypes)
			}
		}
		if _, err := WebhookSecretKey(w.Secret); err != nil {
			return fault.InvalidField(field+".secret", "%s.secret: %v", field, err)
		}
	}
	return nil
}

func validateWebhookURL(field, raw string, allowLoopbackHTTP bool) error {
	if raw == "" || len(raw) > MaxWebhookURL {
		return fault.InvalidField(field, "%s must be 1 to %d bytes", field, MaxWebhookURL)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fault.InvalidField(field, "%s %q is not an absolute URL with a host (and no user or fragment)", field, raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		ip := net.ParseIP(u.Hostname())
		if ip == nil || !ip.IsLoopback() {
			return fault.InvalidField(field, "%s %q: http is allowed only to a loopback address (127.0.0.1, ::1); use https", field, raw)
		}
		if !allowLoopbackHTTP {
			return fault.InvalidField(field, "%s %q: http to loopback needs the server's --webhooks-allow-loopback-http; use https", field, raw)
		}
		return nil
	}
	return fault.InvalidField(field, "%s %q: the scheme must be https", field, raw)
}

// MaxKeptAttempts is how many attempts a delivery keeps (the last ones);
// Delivery.AttemptCount counts them all.
const MaxKeptAttempts = 20

// deliveryPage is how many deliveries one read of deleteDeliveries takes.
const deliveryPage = 500

// deleteDeliveries deletes the deliveries of an app that gone says, a
// page at a time, and returns how many.
func (s *Service) deleteDeliveries(ctx context.Context, app string, gone func(*memorytype.Delivery) bool) (int, error) {
	n := 0
	if s.parts.webhooks == nil {
		return 0, nil
	}
	q := memorydriver.DeliveryQuery{App: app, Limit: deliveryPage}
	for {
		page, err := s.parts.webhooks.ListDeliveries(ctx, q)
		if err != nil {
			return n, err
		}
		var ids []string
		for _, d := range page {
			if gone(d) {
				ids = append(ids, d.ID)
			}
		}
		if len(ids) > 0 {
			if err := s.parts.webhooks.DeleteDeliveries(ctx, app, ids); err != nil {
				return n, err
			}
			n += len(ids)
		}
		if len(page) < deliveryPage {
			return n, nil
		}
		q.BeforeID = page[len(page)-1].ID
	}
}

// sweepDeliveries deletes the deliveries that ended more than
// memorydriver.DeliveryRetention before now, of every app with a configuration.
func (s *Service) sweepDeliveries(ctx context.Context, now time.Time) (int, error) {
	cfgs, err := s.store.ListConfigs(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, c := range cfgs {
		n, err := s.deleteDeliveries(ctx, c.App, func(d *memorytype.Delivery) bool {
			last := d.CreateTime
			if k := len(d.Attempts); k > 0 {
				last = d.Attempts[k-1].Time
			}
			return d.State != memorytype.DeliveryPending && now.Sub(last) > memorydriver.DeliveryRetention
		})
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// ListDeliveries returns a page of an app's webhook deliveries, newest
// event first.
func (s *Service) ListDeliveries(ctx context.Context, app string, state memorytype.DeliveryState, pageSize int32, token string) ([]*memorytype.Delivery, string, error) {
	if err := validateApp(app); err != nil {
		return nil, "", err
	}
	size, err := aip.PageSize("page_size", pageSize)
	if err != nil {
		return nil, "", err
	}
	digest := aip.QueryDigest("webhookDeliveries", app, state.String())
	tok, err := aip.DecodePageToken(token, digest)
	if err != nil {
		return nil, "", err
	}
	if s.parts.webhooks == nil {
		return nil, "", unimplemented("listing webhook deliveries", "Webhooks")
	}
	ds, err := s.parts.webhooks.ListDeliveries(ctx, memorydriver.DeliveryQuery{App: app, State: state, BeforeID: tok.ID, Limit: size + 1})
	if err != nil {
		return nil, "", err
	}
	ds, next := aip.Page(ds, size, digest, func(last *memorytype.Delivery) aip.PageToken { return aip.PageToken{ID: last.ID} })
	return ds, next, nil
}

// Redeliver makes a delivery pending again, due at once, its attempts
// kept, and wakes the app's dispatcher on this server.
func (s *Service) Redeliver(ctx context.Context, app, id string) (*memorytype.Delivery, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := resource.ValidateID("delivery id", id, resource.MemoryIDChars); err != nil {
		return nil, err
	}
	if s.parts.webhooks == nil {
		return nil, unimplemented("redelivering a webhook delivery", "Webhooks")
	}
	d, err := s.parts.webhooks.GetDelivery(ctx, app, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	d.State, d.NextAttempt, d.RetryFrom = memorytype.DeliveryPending, now, now
	if err := s.parts.webhooks.PutDelivery(ctx, d); err != nil {
		return nil, err
	}
	s.feed.Notify(app)
	return d, nil
}

// SubscribeChanges returns a channel that receives a value after each
// committed Write through this Service that changed an app's memories (or
// a Redeliver), and the function that ends the subscription.
func (s *Service) SubscribeChanges(app string) (<-chan struct{}, func()) {
	return s.feed.Subscribe(app)
}

// SubscribeConfigs returns a channel that receives a value after each
// UpdateConfig through this Service, and the function that ends the
// subscription.
func (s *Service) SubscribeConfigs() (<-chan struct{}, func()) {
	return s.configs.Subscribe(struct{}{})
}
