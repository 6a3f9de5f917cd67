package streampb_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/testutil"
)

// The checked-in code is what the pinned generators make of stream.proto.
func TestGeneratedCodeMatchesProto(t *testing.T) {
	t.Parallel()
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		testutil.Missing(t, "protoc", "protoc is not installed (apt-get install protobuf-compiler): the generated code is not checked against stream.proto")
	}
	if v, err := exec.Command(protoc, "--version").Output(); err != nil || !strings.HasPrefix(string(v), "libprotoc 3.21.") {
		testutil.Missing(t, "protoc", "protoc is not 3.21 (Debian 12's protobuf-compiler), the version the code was generated with: "+strings.TrimSpace(string(v)))
	}
	out := t.TempDir()
	cmd := exec.Command("./generate.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate.sh: %v\n%s", err, b)
	}
	for _, name := range []string{"stream.pb.go", "stream_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		have, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, want) {
			t.Errorf("%s is not what stream.proto generates: run go generate ./api/stream/streampb (protoc 3.21, the generators go.mod pins) and commit the result", name)
		}
	}
}

// The Python client's checked-in message code (clients/python) is what
// protoc 3.21 makes of stream.proto too, so that go test ./... notices a
// .proto changed without it (the Python suite checks the same).
func TestPythonGeneratedCodeMatchesProto(t *testing.T) {
	t.Parallel()
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		testutil.Missing(t, "protoc", "protoc is not installed (apt-get install protobuf-compiler): the Python client's generated code is not checked against stream.proto")
	}
	if v, err := exec.Command(protoc, "--version").Output(); err != nil || !strings.HasPrefix(string(v), "libprotoc 3.21.") {
		testutil.Missing(t, "protoc", "protoc is not 3.21 (Debian 12's protobuf-compiler), the version the Python code was generated with: "+strings.TrimSpace(string(v)))
	}
	out := t.TempDir()
	if b, err := exec.Command("../../../clients/python/generate.sh", out).CombinedOutput(); err != nil {
		t.Fatalf("clients/python/generate.sh: %v\n%s", err, b)
	}
	name := filepath.Join("sluice", "_proto", "stream_pb2.py")
	want, err := os.ReadFile(filepath.Join(out, name))
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join("../../../clients/python", name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Errorf("clients/python/%s is not what stream.proto generates: run clients/python/generate.sh (protoc 3.21) and commit the result", name)
	}
}
