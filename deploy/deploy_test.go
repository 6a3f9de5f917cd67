// Package deploy holds no code: its tests check the deployment files beside
// them (the systemd unit, the Kubernetes manifests) and the repository's
// Dockerfile and release script against the binary they deploy.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
)

var sluiceBin = testutil.Binary{Pkg: "../cmd/sluice"}

func TestMain(m *testing.M) {
	code := m.Run()
	sluiceBin.Remove()
	os.Exit(code)
}

// serveOptions are the flags and environment variables `sluice serve -h`
// lists: a deployment file that names another is wrong.
type serveOptions struct {
	flags map[string]bool // without the leading dash
	env   map[string]bool
}

func serveHelp(t *testing.T) serveOptions {
	t.Helper()
	out, _ := exec.Command(sluiceBin.Path(t), "serve", "-h").CombinedOutput()
	o := serveOptions{flags: map[string]bool{}, env: map[string]bool{}}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		o.flags[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`SLUICE_[A-Z_]+`).FindAllString(string(out), -1) {
		o.env[m] = true
	}
	if !o.flags["addr"] || !o.env["SLUICE_DATA"] {
		t.Fatalf("sluice serve -h lists no --addr or SLUICE_DATA:\n%s", out)
	}
	return o
}

// checkArgs fails the test for every --flag in args that serve does not take.
func (o serveOptions) checkArgs(t *testing.T, where string, args []string) {
	t.Helper()
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		if !o.flags[name] {
			t.Errorf("%s: sluice serve has no flag %s", where, a)
		}
	}
}

func (o serveOptions) checkEnv(t *testing.T, where, name string) {
	t.Helper()
	if strings.HasPrefix(name, "SLUICE_") && !o.env[name] {
		t.Errorf("%s: sluice serve reads no variable %s", where, name)
	}
}

// unitSetting returns the values of key in the unit file's text, in order.
func unitSetting(unit, key string) []string {
	var vs []string
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+"="); ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// TestSystemdUnit: deploy/systemd/sluice.service passes `systemd-analyze
// verify` without a word (it warns of an unknown key or a bad value but
// exits 0, so any output fails), with its ExecStart pointing at a real
// build; its exposure score stays low; its flags are serve's; and the
// connection cap its comment gives is the one its LimitNOFILE yields.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testutil.Missing(t, "debian", "systemd-analyze is missing: apt-get install -y systemd")
	}
	raw, err := os.ReadFile("systemd/sluice.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(raw)
	opts := serveHelp(t)

	exec1 := unitSetting(unit, "ExecStart")
	if len(exec1) != 1 {
		t.Fatalf("ExecStart: %q, want one", exec1)
	}
	fields := strings.Fields(exec1[0])
	if fields[0] != "/usr/local/bin/sluice" || len(fields) < 2 || fields[1] != "serve" {
		t.Fatalf("ExecStart=%s: want /usr/local/bin/sluice serve ...", exec1[0])
	}
	opts.checkArgs(t, "ExecStart", fields[2:])
	// Every directory the broker writes is writable under ProtectSystem=strict.
	rw := strings.Fields(strings.Join(unitSetting(unit, "ReadWritePaths"), " "))
	for i, f := range fields {
		if (f == "--data" || f == "--backup-dir") && i+1 < len(fields) && !contains(rw, fields[i+1]) {
			t.Errorf("%s %s is not in ReadWritePaths=%v", f, fields[i+1], rw)
		}
	}
	for _, want := range []string{"ProtectSystem=strict", "NoNewPrivileges=yes", "User=sluice"} {
		k, v, _ := strings.Cut(want, "=")
		if got := unitSetting(unit, k); len(got) != 1 || got[0] != v {
			t.Errorf("%s: got %q", want, got)
		}
	}

	// The cap the comment states is the broker's default under the limit.
	nofile := unitSetting(unit, "LimitNOFILE")
	if len(nofile) != 1 {
		t.Fatalf("LimitNOFILE: %q", nofile)
	}
	n, err := strconv.ParseUint(nofile[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	conns := server.MaxConnectionsFor(n)
	if !strings.Contains(unit, fmt.Sprintf("gives %d connections", conns)) {
		t.Errorf("the unit's comment does not say that LimitNOFILE=%d gives %d connections", n, conns)
	}
	if doc, err := os.ReadFile("../docs/deploy.md"); err != nil || !strings.Contains(string(doc), strconv.Itoa(conns)) &&
		!strings.Contains(string(doc), humanInt(conns)) {
		t.Errorf("docs/deploy.md does not give the %d connections of LimitNOFILE=%d (%v)", conns, n, err)
	}

	// systemd-analyze verify needs ExecStart's binary: a copy of the unit
	// names a real build instead.
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.service")
	if err := os.WriteFile(path, []byte(strings.Replace(unit, "ExecStart=/usr/local/bin/sluice", "ExecStart="+sluiceBin.Path(t), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The exposure score (0 best, 10 worst) of the hardening settings.
	out, err = exec.Command(analyze, "security", "--offline=yes", "--no-pager", path).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for sluice.service: ([0-9.]+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Logf("systemd-analyze security --offline: %v (no score: an older systemd?)\n%s", err, out)
		return
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	if score > 2.0 {
		t.Errorf("exposure level %.1f, want at most 2.0:\n%s", score, out)
	}
	t.Logf("systemd-analyze security: exposure %.1f; LimitNOFILE=%d gives --max-connections %d", score, n, conns)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// humanInt writes n with commas (52,429), as the docs do.
func humanInt(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// k8sDoc is the part of a Kubernetes object the test reads.
type k8sDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Replicas    *int `json:"replicas"`
		ServiceName string
		Template    struct {
			Spec podSpec `json:"spec"`
		} `json:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"volumeClaimTemplates"`
	} `json:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int `json:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot bool `json:"runAsNonRoot"`
	} `json:"securityContext"`
	Containers []struct {
		Args []string `json:"args"`
		Env  []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"env"`
		Ports []struct {
			Name          string `json:"name"`
			ContainerPort int    `json:"containerPort"`
		} `json:"ports"`
		StartupProbe, LivenessProbe, ReadinessProbe *struct {
			HTTPGet struct {
				Path string `json:"path"`
				Port any    `json:"port"`
			} `json:"httpGet"`
		}
		VolumeMounts []struct {
			Name      string `json:"name"`
			MountPath string `json:"mountPath"`
		} `json:"volumeMounts"`
	} `json:"containers"`
}

// loadYAML parses a file of YAML documents with Debian's python3-yaml (no
// YAML package in the module) and returns each document as JSON.
func loadYAML(t *testing.T, path string) []json.RawMessage {
	t.Helper()
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import yaml").Run() != nil {
		testutil.Missing(t, "debian", "Debian's python3-yaml is missing: apt-get install -y python3-yaml")
	}
	out, err := exec.Command(py, "-c", `import sys, json, yaml
print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]))`, path).CombinedOutput()
	if err != nil {
		t.Fatalf("%s does not parse as YAML: %v\n%s", path, err, out)
	}
	var docs []json.RawMessage
	if err := json.Unmarshal(out, &docs); err != nil {
		t.Fatal(err)
	}
	return docs
}

// TestKubernetesManifests: the manifests in deploy/kubernetes parse as
// YAML; every object has a kind, an apiVersion and a name; the brokers
// run as non-root with serve's own flags and variables, probe /healthz and
// /readyz on the port they listen on, stop within their grace period, and
// the StatefulSet keeps its data directory on its volume.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	opts := serveHelp(t)
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("manifests: %v, %v", files, err)
	}
	kinds := map[string]bool{}
	for _, f := range files {
		for i, raw := range loadYAML(t, f) {
			var d k8sDoc
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatalf("%s #%d: %v", f, i, err)
			}
			where := fmt.Sprintf("%s: %s %s", f, d.Kind, d.Metadata.Name)
			if d.APIVersion == "" || d.Kind == "" || d.Metadata.Name == "" || d.Metadata.Namespace == "" {
				t.Errorf("%s #%d: no apiVersion, kind, name or namespace", f, i)
			}
			kinds[filepath.Base(f)+":"+d.Kind] = true
			if d.Kind != "StatefulSet" && d.Kind != "Deployment" {
				continue
			}
			ps := d.Spec.Template.Spec
			if !ps.SecurityContext.RunAsNonRoot || len(ps.Containers) != 1 {
				t.Errorf("%s: want one container, run as non-root", where)
				continue
			}
			c := ps.Containers[0]
			if len(c.Args) == 0 || c.Args[0] != "serve" {
				t.Errorf("%s: args %q do not start with serve", where, c.Args)
			}
			opts.checkArgs(t, where, c.Args)
			env := map[string]string{}
			for _, e := range c.Env {
				opts.checkEnv(t, where, e.Name)
				env[e.Name] = e.Value
			}
			// The grace period covers --shutdown-timeout with room for
			// the store's close.
			shutdown := 10 * time.Second
			for i, a := range c.Args {
				if a == "--shutdown-timeout" && i+1 < len(c.Args) {
					shutdown, _ = time.ParseDuration(c.Args[i+1])
				}
			}
			if grace := time.Duration(ps.TerminationGracePeriodSeconds) * time.Second; grace < shutdown+10*time.Second {
				t.Errorf("%s: terminationGracePeriodSeconds %v, want at least --shutdown-timeout %v + 10 s", where, grace, shutdown)
			}
			_, port, _ := strings.Cut(env["SLUICE_ADDR"], ":")
			if len(c.Ports) != 1 || strconv.Itoa(c.Ports[0].ContainerPort) != port {
				t.Errorf("%s: containerPort %v, SLUICE_ADDR %q", where, c.Ports, env["SLUICE_ADDR"])
			}
			for name, p := range map[string]*struct {
				HTTPGet struct {
					Path string `json:"path"`
					Port any    `json:"port"`
				} `json:"httpGet"`
			}{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
				want := "/healthz"
				if name == "readiness" {
					want = "/readyz"
				}
				if p == nil || p.HTTPGet.Path != want || (p.HTTPGet.Port != c.Ports[0].Name && fmt.Sprint(p.HTTPGet.Port) != port) {
					t.Errorf("%s: %s probe %+v, want GET %s on the broker's port", where, name, p, want)
				}
			}
			switch d.Kind {
			case "StatefulSet":
				if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || len(d.Spec.VolumeClaimTemplates) != 1 {
					t.Errorf("%s: want one replica and one volume claim", where)
					continue
				}
				mounted := false
				for _, m := range c.VolumeMounts {
					mounted = mounted || m.Name == d.Spec.VolumeClaimTemplates[0].Metadata.Name && m.MountPath == env["SLUICE_DATA"]
				}
				if env["SLUICE_DATA"] == "" || !mounted {
					t.Errorf("%s: SLUICE_DATA %q is not the volume claim's mount", where, env["SLUICE_DATA"])
				}
			case "Deployment":
				if _, ok := env["SLUICE_STORE"]; !ok {
					t.Errorf("%s: a Deployment of several brokers needs SLUICE_STORE (PostgreSQL)", where)
				}
			}
		}
	}
	for _, k := range []string{"embedded.yaml:StatefulSet", "embedded.yaml:Service", "postgres.yaml:Deployment",
		"postgres.yaml:Service", "servicemonitor.yaml:ServiceMonitor"} {
		if !kinds[k] {
			t.Errorf("no %s", k)
		}
	}
}

// TestKubernetesSettingsServe: the broker starts with the StatefulSet's
// environment (its data directory and keys file moved to temporary ones),
// answers its probes, accepts the Service's name as a Host and refuses
// another, and stops on SIGTERM with status 0.
func TestKubernetesSettingsServe(t *testing.T) {
	t.Parallel()
	var env []string
	for _, raw := range loadYAML(t, "kubernetes/embedded.yaml") {
		var d k8sDoc
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind == "StatefulSet" {
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				env = append(env, e.Name+"="+e.Value)
			}
		}
	}
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(keys, []byte(`[{"accessKeyId": "AKIDTEST", "secretAccessKey": "a-long-secret",
		"account": "123456789012", "allow": ["*"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	env = append(env, "SLUICE_ADDR=127.0.0.1:0", "SLUICE_DATA="+filepath.Join(dir, "data"), "SLUICE_KEYS_FILE="+keys)
	cmd := exec.Command(sluiceBin.Path(t), "serve", "--shutdown-timeout", "20s")
	cmd.Env = append(os.Environ(), env...)
	var out testutil.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	listen := regexp.MustCompile(`sluice listening on (\S+)`)
	var addr string
	testutil.Eventually(t, 60*time.Second, "the broker's listening line", func() bool {
		if m := listen.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	get := func(path, host string) int {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+addr+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	_, port, _ := strings.Cut(addr, ":")
	for _, p := range []string{"/healthz", "/readyz"} {
		if code := get(p, "10.1.2.3:"+port); code != 200 {
			t.Errorf("GET %s from the kubelet (an IP as Host): %d, want 200", p, code)
		}
	}
	if code := get("/v1/queues", "sluice.sluice.svc:"+port); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("GET /v1/queues without a key through the Service's name: %d, want 401 (authentication on)", code)
	}
	if code := get("/v1/queues", "elsewhere.example:"+port); code == http.StatusUnauthorized || code < 400 {
		t.Errorf("GET /v1/queues with an unknown Host: %d, want it refused before authentication", code)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the broker did not stop within 30 s of SIGINT")
	}
}

// TestDockerfile: the image runs the release script's build, from a
// distroless static base as a non-root user, with the data directory a
// volume, the listening port exposed, and serve's own variables.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	opts := serveHelp(t)
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	var from []string
	env := map[string]string{}
	var user, volume, expose string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "FROM":
			from = append(from, f[1])
		case "ENV":
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				opts.checkEnv(t, "Dockerfile ENV", k)
				env[k] = v
			}
		case "USER":
			user = f[1]
		case "VOLUME":
			volume = strings.Trim(strings.Join(f[1:], ""), `[]"`)
		case "EXPOSE":
			expose = f[1]
		case "RUN":
			if strings.Contains(line, "go build") {
				t.Errorf("the Dockerfile runs go build itself: %s; use scripts/release.sh, which CI tests", line)
			}
		}
	}
	if len(from) != 2 || !strings.HasPrefix(from[0], "golang:1.26") ||
		from[1] != "gcr.io/distroless/static-debian12:nonroot" && from[1] != "scratch" {
		t.Errorf("FROM %q: want golang:1.26 then a static base", from)
	}
	if !strings.Contains(text, "scripts/release.sh") {
		t.Error("the build stage does not run scripts/release.sh")
	}
	if user == "" || strings.HasPrefix(user, "0") || strings.HasPrefix(user, "root") {
		t.Errorf("USER %q: want a non-root user", user)
	}
	if volume == "" || volume != env["SLUICE_DATA"] {
		t.Errorf("VOLUME %q, SLUICE_DATA %q: want the same directory", volume, env["SLUICE_DATA"])
	}
	if _, port, _ := strings.Cut(env["SLUICE_ADDR"], ":"); port == "" || port != expose {
		t.Errorf("EXPOSE %q, SLUICE_ADDR %q: want its port", expose, env["SLUICE_ADDR"])
	}
}
