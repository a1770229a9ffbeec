package firestoredb

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
)

// Meter counts the documents a Firestore client reads, writes and deletes,
// the way Firestore bills them (Standard edition): a document returned by a
// lookup or a query is a read, a lookup of a document that does not exist
// too (counted as a read here, as a conservative reading of the billing
// rules), a query that returns nothing costs one read, an aggregation one
// read; each write of a commit or batch write is a write (a delete a
// delete). It sees the gRPC traffic of the client, so it counts every store
// that shares the client. What it cannot see: index entries that vector
// search (FindNearest) reads beyond the documents it returns, which
// Firestore also bills, and reads of the Firestore console or exports.
type Meter struct {
	reads, writes, deletes atomic.Uint64
}

// Usage is a Meter's counts.
type Usage struct {
	Reads, Writes, Deletes uint64
}

// Sub returns u minus v.
func (u Usage) Sub(v Usage) Usage {
	return Usage{Reads: u.Reads - v.Reads, Writes: u.Writes - v.Writes, Deletes: u.Deletes - v.Deletes}
}

// Usage returns the counts so far.
func (m *Meter) Usage() Usage {
	return Usage{Reads: m.reads.Load(), Writes: m.writes.Load(), Deletes: m.deletes.Load()}
}

// ClientOptions returns the options that make a Firestore client report to
// m (see Dial).
func (m *Meter) ClientOptions() ([]option.ClientOption, error) {
	return Dial{Meter: m}.ClientOptions()
}

// countWrites counts the writes of a commit or batch write.
func (m *Meter) countWrites(writes []*firestorepb.Write) {
	for _, w := range writes {
		if w.GetDelete() != "" {
			m.deletes.Add(1)
		} else {
			m.writes.Add(1)
		}
	}
}

func (m *Meter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		return err
	}
	switch r := req.(type) {
	case *firestorepb.CommitRequest:
		m.countWrites(r.GetWrites())
	case *firestorepb.BatchWriteRequest:
		m.countWrites(r.GetWrites())
	case *firestorepb.GetDocumentRequest:
		m.reads.Add(1)
	case *firestorepb.ListDocumentsRequest:
		m.reads.Add(uint64(max(1, len(reply.(*firestorepb.ListDocumentsResponse).GetDocuments()))))
	}
	return nil
}

func (m *Meter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &meteredStream{ClientStream: s, m: m}, nil
}

// meteredStream counts the documents of a streamed read.
type meteredStream struct {
	grpc.ClientStream
	m       *Meter
	query   bool // a RunQuery stream
	docs    int
	counted bool
}

func (s *meteredStream) RecvMsg(msg any) error {
	err := s.ClientStream.RecvMsg(msg)
	if err != nil {
		if errors.Is(err, io.EOF) && s.query && s.docs == 0 && !s.counted {
			s.counted = true
			s.m.reads.Add(1) // a query that returned nothing
		}
		return err
	}
	switch r := msg.(type) {
	case *firestorepb.BatchGetDocumentsResponse:
		if r.GetFound() != nil || r.GetMissing() != "" {
			s.m.reads.Add(1)
		}
	case *firestorepb.RunQueryResponse:
		s.query = true
		if r.GetDocument() != nil {
			s.docs++
			s.m.reads.Add(1)
		}
	case *firestorepb.RunAggregationQueryResponse:
		if r.GetResult() != nil {
			s.m.reads.Add(1)
		}
	}
	return nil
}
