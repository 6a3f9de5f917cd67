package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const jsDir = "testdata/clients/js"

// jsClientMissing says why the pinned @aws-sdk/client-sqs cannot run here, or
// returns nil: node 20 or newer on PATH, and node_modules installed by npm ci
// at the version package-lock.json pins.
func jsClientMissing() error {
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("no node on PATH")
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return fmt.Errorf("node --version: %v", err)
	}
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0])
	if major < 20 {
		return fmt.Errorf("node %s is older than 20", strings.TrimSpace(string(out)))
	}
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	b, err := os.ReadFile(filepath.Join(jsDir, "package-lock.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return fmt.Errorf("package-lock.json: %v", err)
	}
	want := lock.Packages["node_modules/@aws-sdk/client-sqs"].Version
	var inst struct{ Version string }
	b, err = os.ReadFile(filepath.Join(jsDir, "node_modules/@aws-sdk/client-sqs/package.json"))
	if err != nil {
		return fmt.Errorf("@aws-sdk/client-sqs is not installed in %s/node_modules", jsDir)
	}
	if err := json.Unmarshal(b, &inst); err != nil || inst.Version != want {
		return fmt.Errorf("installed @aws-sdk/client-sqs %q is not the pinned %q", inst.Version, want)
	}
	return nil
}

// TestClientJSv3 runs the AWS SDK for JavaScript v3 (@aws-sdk/client-sqs,
// AWS JSON 1.0, its MD5 check of bodies on) through a message's whole life on
// standard and FIFO queues: testdata/clients/js/lifecycle.mjs, one node
// process per part.
func TestClientJSv3(t *testing.T) {
	t.Parallel()
	needClient(t, requireNode, "the AWS SDK for JavaScript v3 (@aws-sdk/client-sqs)", jsClientMissing(),
		"cd e2e/"+jsDir+" && npm ci")
	b := startClientBroker(t)
	for _, part := range clientParts {
		t.Run(part.name, func(t *testing.T) {
			t.Parallel()
			part.skipMissing(t, b.feats)
			runClient(t, 2*time.Minute, jsDir, clientEnv(t), "node",
				"lifecycle.mjs", b.p.URL, part.name, uniquePrefix("js"))
		})
	}
}
