package vertex

import (
	"context"
	"net/http"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/kioku-ai/kioku/fault"
)

// google.cloud.aiplatform.v1.SessionService is v1beta1's with v1's
// messages, which are v1beta1's field for field (TestV1MessagesAreV1beta1s
// checks every one): a v1 call is re-encoded as the v1beta1 request,
// served by the same handler, and its response re-encoded as v1's. Fields
// one version has and the other lacks (v1's Part.media_resolution, v1beta1's
// FunctionCall.id) pass as unknown fields and are not kept.

func (s *Surface) createSessionV1(ctx context.Context, r *aiplatformpb.CreateSessionRequest) (*longrunningpb.Operation, error) {
	return s.createSession(ctx, r, v1)
}

func (s *Surface) deleteSessionV1(ctx context.Context, r *aiplatformpb.DeleteSessionRequest) (*longrunningpb.Operation, error) {
	return s.deleteSession(ctx, r, v1)
}

// bridge registers a v1 procedure served by fn, a handler of v1beta1's
// messages.
func bridge[ReqV1, ResV1, ReqB, ResB any](mux *http.ServeMux, procedure string, fn func(context.Context, *ReqB) (*ResB, error), opts []connect.HandlerOption) {
	unary(mux, procedure, func(ctx context.Context, r *ReqV1) (*ResV1, error) {
		in := new(ReqB)
		if err := reencode(any(r).(proto.Message), any(in).(proto.Message)); err != nil {
			return nil, err
		}
		res, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		out := new(ResV1)
		if err := reencode(any(res).(proto.Message), any(out).(proto.Message)); err != nil {
			return nil, err
		}
		return out, nil
	}, opts)
}

// reencode copies src into dst through the wire format.
func reencode(src, dst proto.Message) error {
	b, err := proto.Marshal(src)
	if err != nil {
		return fault.Wrap(fault.Internal, err, "re-encoding %s", src.ProtoReflect().Descriptor().FullName())
	}
	if err := proto.Unmarshal(b, dst); err != nil {
		return fault.Wrap(fault.Internal, err, "re-encoding as %s", dst.ProtoReflect().Descriptor().FullName())
	}
	return nil
}
