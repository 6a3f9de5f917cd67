package brokertest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// Tags (TagQueue, UntagQueue) and policy statements (AddPermission,
// RemovePermission): changes of a queue that every backend applies with
// plan.QueueUpdate.Apply inside its UpdateQueue.
var tagTests = []testCase{
	{"TagUntag", testTagUntag},
	{"TagLimits", testTagLimits},
	{"ConcurrentTagsAllKept", testTagConcurrent},
	{"TagsSurviveRestart", testTagRestart},
	{"PermissionsInPolicy", testPermissions},
}

// tagger and policyEditor are the front: tags and policy statements are
// UpdateQueue edits, which every backend has.
func (e *env) tagger() *broker.Broker { return e.b }

func (e *env) policyEditor() *broker.Broker { return e.b }

func (e *env) wantTags(queue string, want map[string]string) {
	e.t.Helper()
	got := e.getQueue(queue).Tags
	if len(got) != len(want) {
		e.t.Fatalf("tags of %s = %v, want %v", queue, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			e.t.Fatalf("tags of %s = %v, want %v", queue, got, want)
		}
	}
}

func testTagUntag(t *testing.T, s suite) {
	e := s.setup(t)
	tg := e.tagger()
	if _, err := e.b.CreateQueue(e.ctx, "q", nil, map[string]string{"team": "a", "env": "dev"}); err != nil {
		t.Fatal(err)
	}
	modified := e.getQueue("q").ModifiedAt
	if err := tg.TagQueue(e.ctx, "q", map[string]string{"env": "prod", "cost": "42"}); err != nil {
		t.Fatal(err)
	}
	e.wantTags("q", map[string]string{"team": "a", "env": "prod", "cost": "42"})
	if err := tg.UntagQueue(e.ctx, "q", []string{"team", "absent"}); err != nil {
		t.Fatal(err)
	}
	e.wantTags("q", map[string]string{"env": "prod", "cost": "42"})
	if !e.getQueue("q").ModifiedAt.Equal(modified) {
		t.Errorf("tagging changed LastModifiedTimestamp")
	}
	_, err := e.b.CreateQueue(e.ctx, "bad-tags", nil, map[string]string{"aws:x": "v"})
	wantErr(t, "CreateQueue with an aws: tag", err, model.ErrInvalidParameterValue)
	wantErr(t, "TagQueue of a missing queue", tg.TagQueue(e.ctx, "nope", map[string]string{"a": "b"}), model.ErrQueueDoesNotExist)
	wantErr(t, "UntagQueue of a missing queue", tg.UntagQueue(e.ctx, "nope", []string{"a"}), model.ErrQueueDoesNotExist)
}

func testTagLimits(t *testing.T, s suite) {
	e := s.setup(t)
	tg := e.tagger()
	e.createQueue("q", nil)
	for name, tags := range map[string]map[string]string{
		"a 129-character key":   {strings.Repeat("k", 129): "v"},
		"a 257-character value": {"k": strings.Repeat("v", 257)},
		"an aws: key":           {"aws:owner": "me"},
	} {
		wantErr(t, "TagQueue with "+name, tg.TagQueue(e.ctx, "q", tags), model.ErrInvalidParameterValue)
	}
	fifty := map[string]string{}
	for i := range 50 {
		fifty[fmt.Sprintf("k%02d", i)] = "v"
	}
	if err := tg.TagQueue(e.ctx, "q", fifty); err != nil {
		t.Fatalf("50 tags: %v", err)
	}
	wantErr(t, "a 51st tag", tg.TagQueue(e.ctx, "q", map[string]string{"one-more": "v"}), model.ErrInvalidParameterValue)
	e.wantTags("q", fifty) // the refused call changed nothing
	if err := tg.TagQueue(e.ctx, "q", map[string]string{"k00": "new"}); err != nil {
		t.Fatalf("replacing a value at 50 tags: %v", err)
	}
}

func testTagConcurrent(t *testing.T, s suite) {
	e := s.setup(t)
	tg := e.tagger()
	e.createQueue("q", nil)
	var wg sync.WaitGroup
	want := map[string]string{}
	for i := range 20 {
		k := fmt.Sprintf("k%d", i)
		want[k] = k
		wg.Go(func() {
			if err := tg.TagQueue(e.ctx, "q", map[string]string{k: k}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	e.wantTags("q", want)
}

func testTagRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", nil)
	if err := e.tagger().TagQueue(e.ctx, "q", map[string]string{"a": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := e.policyEditor().AddPermission(e.ctx, "q", model.Permission{
		Label: "l", AccountIDs: []string{"111122223333"}, Actions: []string{"SendMessage"}, Resource: arn("q"),
	}); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	e.wantTags("q", map[string]string{"a": "1"})
	if p := e.getQueue("q").Config.Policy; !strings.Contains(p, `"Sid":"l"`) {
		t.Fatalf("policy after restart = %s", p)
	}
}

func testPermissions(t *testing.T, s suite) {
	e := s.setup(t)
	pe := e.policyEditor()
	e.createQueue("q", nil)
	perm := model.Permission{Label: "senders", AccountIDs: []string{"111122223333"}, Actions: []string{"SendMessage"}, Resource: arn("q")}
	if err := pe.AddPermission(e.ctx, "q", perm); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a duplicate label", pe.AddPermission(e.ctx, "q", perm), model.ErrInvalidParameterValue)
	perm2 := model.Permission{Label: "readers", AccountIDs: []string{"1", "2"}, Actions: []string{"ReceiveMessage", "DeleteMessage"}, Resource: arn("q")}
	if err := pe.AddPermission(e.ctx, "q", perm2); err != nil {
		t.Fatal(err)
	}
	p := e.getQueue("q").Config.Policy
	if !strings.Contains(p, `"Sid":"senders"`) || !strings.Contains(p, `"Sid":"readers"`) || !strings.Contains(p, `"SQS:ReceiveMessage"`) {
		t.Fatalf("policy = %s", p)
	}
	if err := pe.RemovePermission(e.ctx, "q", "senders"); err != nil {
		t.Fatal(err)
	}
	if p := e.getQueue("q").Config.Policy; strings.Contains(p, `"senders"`) || !strings.Contains(p, `"readers"`) {
		t.Fatalf("policy after remove = %s", p)
	}
	wantErr(t, "RemovePermission of an unknown label", pe.RemovePermission(e.ctx, "q", "senders"), model.ErrInvalidParameterValue)
	if err := pe.RemovePermission(e.ctx, "q", "readers"); err != nil {
		t.Fatal(err)
	}
	if p := e.getQueue("q").Config.Policy; p != "" {
		t.Fatalf("policy after removing every statement = %s", p)
	}
	wantErr(t, "AddPermission on a missing queue", pe.AddPermission(e.ctx, "nope", perm), model.ErrQueueDoesNotExist)
}
