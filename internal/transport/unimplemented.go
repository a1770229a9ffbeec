package transport

import (
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
)

// The unimplemented* handlers stand in for a service a Server was built
// without (a nil handler in Config). Every method answers UNIMPLEMENTED with
// the generated message naming the method, so a client can tell "not served
// here" from a failure.
type (
	unimplementedSessions struct {
		kiokuv1connect.UnimplementedSessionServiceHandler
	}
	unimplementedMemories struct {
		kiokuv1connect.UnimplementedMemoryBankServiceHandler
	}
	unimplementedOperations struct {
		kiokuv1connect.UnimplementedOperationServiceHandler
	}
	unimplementedMemoryFiles struct {
		kiokuv1connect.UnimplementedMemoryFileServiceHandler
	}
	unimplementedBlocks struct {
		kiokuv1connect.UnimplementedBlockServiceHandler
	}
)
