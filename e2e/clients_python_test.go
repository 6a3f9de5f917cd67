package e2e

import (
	"testing"
	"time"
)

// TestClientBoto3 runs Debian's boto3 (python3-boto3 1.26, the query protocol)
// through a message's whole life on standard and FIFO queues:
// testdata/clients/python/lifecycle.py, one process per part.
func TestClientBoto3(t *testing.T) {
	t.Parallel()
	needDebianPython(t, "boto3 (Debian python3-boto3 under /usr/bin/python3)", "boto3")
	b := startClientBroker(t)
	for _, part := range clientParts {
		t.Run(part.name, func(t *testing.T) {
			t.Parallel()
			part.skipMissing(t, b.feats)
			runClient(t, 2*time.Minute, "testdata/clients/python", clientEnv(t), debianPython,
				"lifecycle.py", b.p.URL, part.name, uniquePrefix("boto3"))
		})
	}
}
