// Package firestoredb holds what kioku's Firestore stores share: the
// mapping of Firestore's errors to the domain's kinds, and a Meter that
// counts the documents they read, write and delete (Firestore's billing
// units).
package firestoredb

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kioku-ai/kioku/fault"
)

// IsNotFound reports whether err is Firestore's NOT_FOUND.
func IsNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// Wrap turns Firestore's errors into the domain's: contention that
// outlasted the retries is Aborted, an unreachable or overloaded service
// Unavailable, a missed deadline DeadlineExceeded. Domain errors pass as
// they are.
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err
	}
	switch status.Code(err) {
	case codes.Aborted:
		return fault.Wrap(fault.Aborted, err, "too much contention; retry")
	case codes.Unavailable, codes.ResourceExhausted:
		return fault.Wrap(fault.Unavailable, err, "Firestore is unavailable")
	case codes.DeadlineExceeded:
		return fault.Wrap(fault.DeadlineExceeded, err, "Firestore did not answer in time")
	case codes.Canceled:
		return fault.Wrap(fault.Canceled, err, "canceled")
	}
	return err
}
