package handlers_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"testing"
	"time"

	"videogen/internal/testkit"
)

// TestOpenAINodeSDK: the official OpenAI Node SDK (`openai` from npm, the version its lock file pins),
// unmodified, creates (multipart, seconds and size as strings), retrieves, polls with the server's
// openai-poll-after-ms, lists with auto-paging, downloads the MP4, thumbnail and spritesheet, deletes,
// and meets our refusals as its typed errors (sdk_check.mjs in the SDK's test folder). Its traffic goes
// through a proxy that checks every exchange against the OpenAPI document.
func TestOpenAINodeSDK(t *testing.T) {
	dir := testkit.OpenAINodeDir(t)
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, nil)
		acct := s.NewAccount(t, "10")
		target, err := url.Parse(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.Transport = testkit.OpenAPITransport(t, nil)
		front := httptest.NewServer(proxy)
		t.Cleanup(front.Close)

		// The deadline only guards against a hang; nothing here measures time.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", "sdk_check.mjs")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "VIDEOGEN_BASE_URL="+front.URL, "VIDEOGEN_API_KEY="+acct.Key)
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("the Node SDK check failed: %v\n%s%s", err, out, stderr)
		}
		t.Logf("the Node SDK saw: %s", out)
		var saw struct {
			First, Second                  string
			Listed                         []string
			MP4                            int
			Stills                         map[string]int
			AfterDelete, Remix, BadVariant map[string]any
		}
		if err := json.Unmarshal(out, &saw); err != nil {
			t.Fatalf("the Node SDK check printed %q: %v", out, err)
		}
		refusals := map[string][2]any{"retrieve after delete": {404.0, "not_found"}, "remix": {404.0, "not_found"},
			"unknown variant": {400.0, "invalid_request"}}
		for name, got := range map[string]map[string]any{"retrieve after delete": saw.AfterDelete, "remix": saw.Remix, "unknown variant": saw.BadVariant} {
			if want := refusals[name]; !reflect.DeepEqual([2]any{got["status"], got["code"]}, want) {
				t.Errorf("%s: the SDK saw %v, want %v", name, got, want)
			}
		}
		// What the SDK saw is what the server holds.
		if size := *testkit.Task(t, s.DB, saw.Second).OutputBytes; int64(saw.MP4) != size {
			t.Errorf("the SDK downloaded %d bytes, the server stored %d", saw.MP4, size)
		}
		if task := testkit.Task(t, s.DB, saw.Second); task.DeletedAt == nil || task.OutputKey != nil {
			t.Errorf("the SDK's delete left the task %+v", task)
		}
		if saw.Stills["thumbnail"] == 0 || saw.Stills["spritesheet"] == 0 {
			t.Errorf("stills %v", saw.Stills)
		}
	})
}
