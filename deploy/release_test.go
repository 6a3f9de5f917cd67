package deploy_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSerialReleaseReproducible: scripts/release.sh builds linux/amd64 twice,
// from the repository and from a copy of it in another directory, into two
// output directories: the binaries are byte for byte the same (-trimpath
// leaves no path in, -buildvcs=false no VCS state), so are their SHA256SUMS
// lines, and the binary's --version says the version and commit stamped in.
// In the serial tier: two links of the whole broker take a minute or two.
func TestSerialReleaseReproducible(t *testing.T) {
	if os.Getenv("SLUICE_SERIAL") != "1" {
		t.Skip("two release builds of a minute or more each: runs in the serial tier (SLUICE_SERIAL=1)")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The copy: every file git knows or would add (the tree as it is, with
	// its uncommitted changes), without .git.
	files, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v (the test needs a git checkout)", err)
	}
	copyDir := filepath.Join(t.TempDir(), "elsewhere", "sluice")
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		if err := copyFile(filepath.Join(root, f), filepath.Join(copyDir, f)); err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the tree, not yet in the index
			}
			t.Fatal(err)
		}
	}

	const version = "v9.8.7-test.1"
	const commit = "0123456789abcdef0123456789abcdef01234567"
	build := func(src string) (bin, sums []byte) {
		t.Helper()
		dist := t.TempDir()
		cmd := exec.Command(filepath.Join(src, "scripts", "release.sh"), version)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "PLATFORMS=linux/amd64", "DIST="+dist, "COMMIT="+commit)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("release.sh in %s: %v\n%s", src, err, out)
		}
		name := "sluice-" + version + "-linux-amd64"
		bin, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		sums, err = os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(strings.TrimSpace(string(sums)), "  "+name) {
			t.Fatalf("SHA256SUMS: %q, want one line for %s", sums, name)
		}
		check := exec.Command("sha256sum", "-c", "SHA256SUMS")
		check.Dir = dist
		if out, err := check.CombinedOutput(); err != nil {
			t.Fatalf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
		}
		out, err := exec.Command(filepath.Join(dist, name), "--version").Output()
		if want := "sluice " + version + " (revision 0123456789ab)\n"; err != nil || string(out) != want {
			t.Errorf("--version of the build in %s: %q, %v; want %q", src, out, err, want)
		}
		return bin, sums
	}
	bin1, sums1 := build(root)
	bin2, sums2 := build(copyDir)
	if !bytes.Equal(bin1, bin2) {
		t.Fatalf("the two builds differ (%d and %d bytes): the release is not reproducible", len(bin1), len(bin2))
	}
	if !bytes.Equal(sums1, sums2) {
		t.Fatalf("SHA256SUMS differ:\n%s\n%s", sums1, sums2)
	}
	if bytes.Contains(bin1, []byte(root)) || bytes.Contains(bin1, []byte(copyDir)) {
		t.Error("the binary holds the path of the tree it was built in")
	}
	t.Logf("two builds, %d bytes each, identical: %s", len(bin1), strings.TrimSpace(string(sums1)))
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return nil // a submodule or a nested checkout: not part of the module
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
