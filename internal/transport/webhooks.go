package transport

import (
	"context"

	"connectrpc.com/connect"
	"github.com/kioku-ai/kioku/fault"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/resource"
)

var deliveryStates = map[memorytype.DeliveryState]kiokuv1.WebhookDeliveryState{
	memorytype.DeliveryPending:      kiokuv1.WebhookDeliveryState_WEBHOOK_DELIVERY_STATE_PENDING,
	memorytype.DeliveryDelivered:    kiokuv1.WebhookDeliveryState_WEBHOOK_DELIVERY_STATE_DELIVERED,
	memorytype.DeliveryDeadLettered: kiokuv1.WebhookDeliveryState_WEBHOOK_DELIVERY_STATE_DEAD_LETTERED,
	memorytype.DeliverySkipped:      kiokuv1.WebhookDeliveryState_WEBHOOK_DELIVERY_STATE_SKIPPED,
}

func deliveryToProto(d *memorytype.Delivery) *kiokuv1.WebhookDelivery {
	out := &kiokuv1.WebhookDelivery{
		Name: d.Name(), WebhookId: d.MessageID(), Url: d.URL, Type: d.Event, Revision: d.Revision,
		State: deliveryStates[d.State], EventTime: timestampOrNil(d.EventTime), AttemptCount: int32(d.AttemptCount),
	}
	if d.MemoryID != "" {
		out.Memory = resource.MemoryName(d.App, d.MemoryID)
	}
	if d.State == memorytype.DeliveryPending {
		out.NextAttemptTime = timestampOrNil(d.NextAttempt)
	}
	for _, a := range d.Attempts {
		out.Attempts = append(out.Attempts, &kiokuv1.WebhookAttempt{
			Time: timestampOrNil(a.Time), StatusCode: int32(a.Status), Error: a.Error, Duration: durationOrNil(a.Duration),
		})
	}
	return out
}

// ListWebhookDeliveries implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) ListWebhookDeliveries(ctx context.Context, req *connect.Request[kiokuv1.ListWebhookDeliveriesRequest]) (*connect.Response[kiokuv1.ListWebhookDeliveriesResponse], error) {
	app, err := resource.ParseApp("parent", req.Msg.GetParent())
	if err != nil {
		return nil, err
	}
	state := memorytype.DeliveryUnspecified
	if s := req.Msg.GetState(); s != kiokuv1.WebhookDeliveryState_WEBHOOK_DELIVERY_STATE_UNSPECIFIED {
		for ds, ps := range deliveryStates {
			if ps == s {
				state = ds
			}
		}
		if state == memorytype.DeliveryUnspecified {
			return nil, fault.InvalidField("state", "state %d is not a webhook delivery state", s)
		}
	}
	ds, next, err := h.svc.ListDeliveries(ctx, app, state, req.Msg.GetPageSize(), req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kiokuv1.ListWebhookDeliveriesResponse{Deliveries: convertAll(ds, deliveryToProto), NextPageToken: next}), nil
}

// RedeliverWebhook implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) RedeliverWebhook(ctx context.Context, req *connect.Request[kiokuv1.RedeliverWebhookRequest]) (*connect.Response[kiokuv1.WebhookDelivery], error) {
	v, err := resource.WebhookDelivery.Parse("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	d, err := h.svc.Redeliver(ctx, v[0], v[1])
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(deliveryToProto(d)), nil
}
