package main

import (
	"context"
	"fmt"
	"strings"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/cli"
)

// The webhooks group: an app's deliveries and their attempts, and sending
// one again.

func webhooksList(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	state := fs.String("state", "", "only deliveries in this state: pending, delivered, dead_lettered or skipped")
	limit := limitFlag(fs, 50)
	return func(ctx context.Context, e *opEnv) error {
		req := &kiokuv1.ListWebhookDeliveriesRequest{Parent: e.arg, PageSize: 100}
		if *state != "" {
			v, ok := kiokuv1.WebhookDeliveryState_value["WEBHOOK_DELIVERY_STATE_"+strings.ToUpper(*state)]
			if !ok || v == 0 {
				return fmt.Errorf("--state %q: want pending, delivered, dead_lettered or skipped", *state)
			}
			req.State = kiokuv1.WebhookDeliveryState(v)
		}
		all := func(yield func(*kiokuv1.WebhookDelivery, error) bool) {
			for {
				page, err := e.c.ListWebhookDeliveries(ctx, req)
				if err != nil {
					yield(nil, err)
					return
				}
				for _, d := range page.GetDeliveries() {
					if !yield(d, nil) {
						return
					}
				}
				if req.PageToken = page.GetNextPageToken(); req.PageToken == "" {
					return
				}
			}
		}
		return printListing(e, *limit, all, []string{"DELIVERY", "TYPE", "MEMORY", "STATE", "ATTEMPTS", "LAST", "URL"}, func(d *kiokuv1.WebhookDelivery) []string {
			last := ""
			if as := d.GetAttempts(); len(as) > 0 {
				a := as[len(as)-1]
				last = ts(a.GetTime()) + " " + shorten(a.GetError(), 40)
				if a.GetError() == "" {
					last = fmt.Sprintf("%s %d", ts(a.GetTime()), a.GetStatusCode())
				}
			}
			return []string{lastSegment(d.GetName()), d.GetType(), lastSegment(d.GetMemory()), deliveryState(d), fmt.Sprint(d.GetAttemptCount()), last, d.GetUrl()}
		})
	}
}

func deliveryState(d *kiokuv1.WebhookDelivery) string {
	return strings.TrimPrefix(d.GetState().String(), "WEBHOOK_DELIVERY_STATE_")
}

func webhooksRedeliver(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		d, err := e.c.RedeliverWebhook(ctx, &kiokuv1.RedeliverWebhookRequest{Name: e.arg})
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(d)
		}
		return e.done("%s is %s again, due now (%d attempts so far)", d.GetName(), strings.ToLower(deliveryState(d)), d.GetAttemptCount())
	}
}
