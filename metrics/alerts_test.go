package metrics_test

import (
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testutil"
)

const rulesDir = "../docs/prometheus"

// promtool returns promtool's path, or ends the test (see testutil.Missing).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		testutil.Missing(t, "prometheus", "promtool is not installed: apt-get install prometheus (Debian) to check the alert rules")
	}
	return p
}

// TestAlertRules checks the shipped rules with promtool (syntax, then the
// unit tests of alerts_test.yml: each alert fires when it should and not
// before).
func TestAlertRules(t *testing.T) {
	t.Parallel()
	p := promtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(p, args...)
		cmd.Dir = rulesDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// TestAlertRulesNameRealSeries: every sluice_ series the rules use is one a
// broker exports, so renaming a metric breaks this test, not an alert.
func TestAlertRulesNameRealSeries(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile(rulesDir + "/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t)
	dlq, err := e.c.CreateQueue(t.Context(), "dlq", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreateQueue(t.Context(), "q", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"` + dlq.ARN + `","maxReceiveCount":3}`, "MaxDepth": "1"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, _ = e.c.Send(t.Context(), "q", client.Message{Body: "x"}) // the second is refused
	}
	f := e.scrape()
	names := regexp.MustCompile(`\bsluice_[a-z_]+`).FindAllString(string(rules), -1)
	if len(names) == 0 {
		t.Fatal("no sluice_ series in the rules")
	}
	for _, n := range names {
		if f[n] == nil {
			t.Errorf("alerts.yml uses %s, which /metrics does not export", n)
		}
	}
}
