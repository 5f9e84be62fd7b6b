package mcpserver

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: a
// connection, a copy or a watcher that outlives its test outlives its
// user in production too.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
