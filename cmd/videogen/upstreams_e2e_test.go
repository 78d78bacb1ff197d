package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"videogen/internal/domain/upstream/sim"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// The secrets of the end-to-end upstream tests: distinctive, so that a search for them in any output
// cannot match by accident.
const (
	e2eOAISecret  = "sk-e2e-oai-7f3a91c2d4e5"
	e2eArkSecret1 = "ark-e2e-one-5b8e2a61f0d3"
	e2eArkSecret2 = "ark-e2e-two-c4d80e37b9a6"
	e2eGemSecret  = "AIza-e2e-gem-9d41c07be2f8"
	// e2eOAISecretEnv names the variable the platform reads the OpenAI-style secret from: a secret_env
	// credential is resolved by the instances, never by `upstreams reload`.
	e2eOAISecretEnv = "E2E_OAI_SECRET"
)

// TestUpstreamsMixedPoolSurvivesKills runs the real binary as four processes — the platform and three
// standalone simulators, one per wire protocol — and shows that (1) a pool mixing an OpenAI-style, an
// Ark and a Gemini credential serves every alias, each task under its credential's provider model and
// cost; (2) a SIGKILL of the platform with tasks in flight on all three loses nothing: after a restart
// every task ends once, on the credential it had, with one settlement and one upstream task each; (3) a
// SIGKILL of the Ark and the Gemini simulators only delays the tasks they hold: their polls fail further
// and further apart, and once the simulators are back on the same addresses every task completes.
//
// Every create fits every route of its alias: Veo renders 4, 6 or 8 seconds and OpenAI 4, 8 or 12, so
// the standard alias, served by all three, is asked 4 or 8 seconds at 16:9 720p.
func TestUpstreamsMixedPoolSurvivesKills(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		// 2 s per generation: long enough that the tasks are still running when the platform is killed
		// just after submitting them, short enough for the whole test.
		oai := startUpstreamSim(t, "openai", testkit.FreeAddr(t), filepath.Join(dir, "oai-sim"), "2s", e2eOAISecret)
		ark := startUpstreamSim(t, "ark", testkit.FreeAddr(t), filepath.Join(dir, "ark-sim"), "2s", e2eArkSecret1)
		gem := startUpstreamSim(t, "gemini", testkit.FreeAddr(t), filepath.Join(dir, "gem-sim"), "2s", e2eGemSecret)
		file := filepath.Join(dir, "upstreams.yaml")
		writeUpstreams(t, file,
			e2eCred("gem-main", "gemini", gem.base(), "secret: "+e2eGemSecret, 8,
				e2eRoute("videogen-2.0-720p", "veo-3.1-generate-preview", "0.15")+e2eRoute("videogen-2.0-mini-720p", "veo-3.1-fast-generate-preview", "0.1")),
			e2eCred("oai-main", "openai", oai.base(), "secret_env: "+e2eOAISecretEnv, 8,
				e2eRoute("videogen-2.0-720p", "sora-2", "0.1")),
			e2eCred("ark-main", "ark", ark.base(), "secret: "+e2eArkSecret1, 8,
				e2eRoute("videogen-2.0-720p", "dreamina-seedance-2-0-260128", "0.18")+e2eRoute("videogen-2.0-fast-720p", "dreamina-seedance-2-0-fast-260128", "0.09")))
		upstreamModel := map[string]string{
			"oai-main/videogen-2.0-720p": "sora-2", "ark-main/videogen-2.0-720p": "dreamina-seedance-2-0-260128", "ark-main/videogen-2.0-fast-720p": "dreamina-seedance-2-0-fast-260128",
			"gem-main/videogen-2.0-720p": "veo-3.1-generate-preview", "gem-main/videogen-2.0-mini-720p": "veo-3.1-fast-generate-preview",
		}
		costPerSecond := map[string]int64{ // micro-dollars
			"oai-main/videogen-2.0-720p": 100_000, "ark-main/videogen-2.0-720p": 180_000, "ark-main/videogen-2.0-fast-720p": 90_000,
			"gem-main/videogen-2.0-720p": 150_000, "gem-main/videogen-2.0-mini-720p": 100_000,
		}
		sims := map[string]*upstreamSim{"oai-main": oai, "ark-main": ark, "gem-main": gem}

		d := testkit.OpenDB(t, dbURL)
		acct := testkit.NewAccount(t, d, "200")
		env := platformEnv(dbURL, file)
		p := serve(t, dir, env)

		// 1. Mixed traffic. The Ark-only alias first, so that least-loaded routing then sends standard
		// tasks to the idle OpenAI-style and Gemini credentials: every credential gets work whatever the
		// timing.
		var ids []string
		prompts := map[string]string{} // task → its prompt, unique, to find its upstream task
		for i := range 9 {
			model := "videogen-2.0-720p"
			if i < 3 {
				model = "videogen-2.0-fast-720p"
			}
			prompt := fmt.Sprintf("mixed pool %d", i)
			id := createVideo(t, p.url, acct.Key, model, prompt, []int{4, 8}[i%2])
			ids = append(ids, id)
			prompts[id] = prompt
		}
		// 2. Kill the platform once every task is submitted (the pool has room for all nine) and before
		// they finish. Not earlier: Ark and the Gemini API have no idempotency key, so a kill between the
		// provider accepting a submission and the platform recording its id makes a second upstream task
		// by design (docs/upstreams.md#idempotency).
		before := waitSubmitted(t, d, p, ids...)
		used := map[string]int{}
		unfinished := map[string]int{}
		for _, id := range ids {
			task := testkit.Task(t, d, id)
			used[before[id]]++
			if task.Status != "completed" && task.Status != "failed" {
				unfinished[before[id]]++
			}
		}
		if used["ark-main"] < 3 || used["oai-main"] < 1 || used["gem-main"] < 1 {
			t.Fatalf("tasks per credential %v: want the three Ark-only tasks on ark-main and standard ones on the idle oai-main and gem-main", used)
		}
		if unfinished["ark-main"] == 0 || unfinished["oai-main"] == 0 || unfinished["gem-main"] == 0 {
			t.Fatalf("precondition: no task still in flight on one credential at the kill (%v); SIM_DURATION is too short for this machine", unfinished)
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.exited
		killed := p
		p = serve(t, dir, env) // same DATA_DIR, database and file; env["ADDR"] was set by the first start

		waitEnded(t, p, acct.Key, 60*time.Second, ids...)
		checkUpstreamTasks(t, d, sims, prompts, before, upstreamModel, costPerSecond)
		testkit.CheckLedger(t, d)

		// 3. Kill the Ark and the Gemini simulators with tasks in flight on each (the fast alias is served
		// by Ark alone, the mini one by Gemini alone).
		var outage []string
		for i := range 5 {
			model := "videogen-2.0-fast-720p"
			if i >= 3 {
				model = "videogen-2.0-mini-720p"
			}
			prompt := fmt.Sprintf("through an outage %d", i)
			id := createVideo(t, p.url, acct.Key, model, prompt, 4)
			outage = append(outage, id)
			prompts[id] = prompt
		}
		held := waitSubmitted(t, d, p, outage...)
		for _, id := range outage {
			if st := testkit.Task(t, d, id).Status; st == "completed" || st == "failed" {
				t.Fatalf("precondition: %s already %s before the simulator was killed", id, st)
			}
		}
		ark.kill(t)
		gem.kill(t)
		// The task log shows the lost polls, each further apart (×1.5 from POLL_INTERVAL_MIN): the
		// platform neither gives up on the task nor hammers the provider.
		testkit.Eventually(t, 30*time.Second, "three failed polls, further apart each time, in the log of an affected task of each simulator", func() bool {
			growing := map[string]bool{}
			for _, id := range outage {
				waits := pollFailures(t, d, id)
				if len(waits) >= 3 && waits[0] < waits[1] && waits[1] < waits[2] {
					growing[held[id]] = true
				}
			}
			return growing["ark-main"] && growing["gem-main"]
		}, func() string {
			return "failed polls: " + fmt.Sprint(pollFailuresOf(t, d, outage)) + "\n" + lastChars(p.stderr.String(), 3000)
		})
		for _, id := range outage {
			waits := pollFailures(t, d, id)
			for i := 1; i < len(waits); i++ {
				if waits[i] < waits[i-1] {
					t.Errorf("task %s: the wait before the next poll shrank during the outage: %v", id, waits)
				}
			}
		}
		ark.start(t) // the same address and --dir: its tasks survived on disk
		gem.start(t)
		waitEnded(t, p, acct.Key, 60*time.Second, outage...)
		for _, id := range outage {
			task := testkit.Task(t, d, id)
			if task.Status != "completed" || task.ErrorCode != nil {
				t.Errorf("task %s after the outage: %s %v, want completed", id, task.Status, deref(task.ErrorCode))
			}
			// Never failed on the way either (a run_timeout, say, then somehow completed).
			var failures int64
			d.R.Model(&models.TaskEvent{}).Where("task_id = ? AND (to_status = ? OR detail LIKE ?)", id, "failed", "%run_timeout%").Count(&failures)
			if failures != 0 {
				t.Errorf("task %s: %d failure lines in its log", id, failures)
			}
		}
		maps.Copy(before, held)
		checkUpstreamTasks(t, d, sims, prompts, before, upstreamModel, costPerSecond)
		testkit.CheckLedger(t, d)
		noSecrets(t, "the platform's log", killed.stderr.String()+p.stderr.String())
		noDataRace(t, []*process{killed, p}, oai, ark, gem)
	})
}

// TestUpstreamsReloadCLIAndSIGHUP drives the pool's changes as an operator does, against the real
// binary: `videogen upstreams check`, `videogen upstreams reload` (through the database) and SIGHUP,
// and reads the result with `videogen upstreams status`. (4) A file the CLI refuses is named by line
// and key and reaches no instance; a file an instance refuses leaves its pool as it was; a good file
// takes effect for new tasks while a removed credential finishes the task it holds. (5) SIGHUP
// reloads too. (6) status shows every credential with its kind and load, and no secret is printed
// anywhere.
func TestUpstreamsReloadCLIAndSIGHUP(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		// 2 s per generation on the OpenAI-style simulator; a [sim:slow] one takes ten times as long,
		// which keeps it running on that credential through the reloads that remove it (each reload
		// waits two watch rounds for every instance's answer). 800 ms on the Ark one.
		oai := startUpstreamSim(t, "openai", testkit.FreeAddr(t), filepath.Join(dir, "oai-sim"), "2s", e2eOAISecret)
		ark := startUpstreamSim(t, "ark", testkit.FreeAddr(t), filepath.Join(dir, "ark-sim"), "800ms", e2eArkSecret1, e2eArkSecret2)
		secretFile := filepath.Join(dir, "ark-2.secret")
		if err := os.WriteFile(secretFile, []byte(e2eArkSecret2+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		oaiMain := e2eCred("oai-main", "openai", oai.base(), "secret_env: "+e2eOAISecretEnv, 4,
			// OpenAI renders none of the 480p sizes: this route sells 480p 16:9 as its 1280x720.
			e2eRoute("videogen-2.0-720p", "sora-2", "0.1")+"      videogen-2.0-mini-480p: {upstream_model: sora-2, cost_per_second: \"0.05\", size_map: {864x496: 1280x720}}\n")
		ark1 := e2eCred("ark-1", "ark", ark.base(), "secret: "+e2eArkSecret1, 4,
			e2eRoute("videogen-2.0-720p", "dreamina-seedance-2-0-260128", "0.18")+e2eRoute("videogen-2.0-fast-720p", "dreamina-seedance-2-0-fast-260128", "0.09"))
		ark2 := e2eCred("ark-2", "ark", ark.base(), "secret_file: "+secretFile, 4,
			e2eRoute("videogen-2.0-720p", "dreamina-seedance-2-0-260128", "0.18")+e2eRoute("videogen-2.0-fast-720p", "dreamina-seedance-2-0-fast-260128", "0.09"))
		file := filepath.Join(dir, "upstreams.yaml")
		writeUpstreams(t, file, oaiMain, ark1)

		d := testkit.OpenDB(t, dbURL)
		acct := testkit.NewAccount(t, d, "100")
		env := platformEnv(dbURL, file)
		p := serve(t, dir, env)
		cli := map[string]string{"DATABASE_URL": dbURL, "UPSTREAMS_FILE": file, e2eOAISecretEnv: e2eOAISecret}
		var printed []string // every CLI output, searched for secrets at the end

		// check resolves the secrets as an instance would (hence the variable in its environment).
		out, stderr, code := cliRun(t, dir, cli, "upstreams", "check")
		printed = append(printed, out, stderr)
		if code != 0 || !strings.Contains(out, "is valid: 2 credential(s)") || !strings.Contains(out, "$"+e2eOAISecretEnv) {
			t.Fatalf("upstreams check of a good file: exit %d\n%s%s", code, out, stderr)
		}

		// A task only oai-main serves, slow, so that it is still running when oai-main is removed.
		slow := createVideo(t, p.url, acct.Key, "videogen-2.0-mini-480p", "held through the reloads [sim:slow]", 8)
		if c := waitSubmitted(t, d, p, slow)[slow]; c != "oai-main" {
			t.Fatalf("the mini task went to %s", c)
		}

		// 4a. A file the CLI refuses: named by line and key, and no instance is asked.
		bad := e2eCred("ark-3", "runway", ark.base(), "secret: x", 4, e2eRoute("videogen-2.0-720p", "gen-3", "0.1"))
		badText := writeUpstreams(t, file, oaiMain, ark1, bad)
		badLine := lineOf(t, badText, "kind: runway")
		out, stderr, code = cliRun(t, dir, cli, "upstreams", "reload")
		printed = append(printed, out, stderr)
		if want := fmt.Sprintf("upstreams.yaml:%d: upstreams[2].kind", badLine); code == 0 || !strings.Contains(stderr, want) ||
			!strings.Contains(stderr, "runway") || strings.Contains(out, "asked every instance") {
			t.Fatalf("reload of an invalid file: exit %d, want non-zero and %q on stderr\nstdout: %s\nstderr: %s", code, want, out, stderr)
		}
		out, stderr, code = cliRun(t, dir, cli, "upstreams", "check")
		printed = append(printed, out, stderr)
		if code != 1 || !strings.Contains(stderr, fmt.Sprintf("upstreams.yaml:%d: upstreams[2].kind", badLine)) {
			t.Fatalf("upstreams check of an invalid file: exit %d, want 1\n%s%s", code, out, stderr)
		}
		// The server serves on with its old pool.
		id := createVideo(t, p.url, acct.Key, "videogen-2.0-720p", "after a refused file", 4)
		waitEnded(t, p, acct.Key, 90*time.Second, id)
		if task := testkit.Task(t, d, id); task.Status != "completed" || !slices.Contains([]string{"oai-main", "ark-1"}, deref(task.CredentialID)) {
			t.Fatalf("a task after a refused file: %s on %s", task.Status, deref(task.CredentialID))
		}
		wantEnabled(t, d, map[string]bool{"oai-main": true, "ark-1": true})

		// 4b. Remove oai-main, add ark-2 (a second key on the Ark simulator, read from a file).
		writeUpstreams(t, file, ark1, ark2)
		out, stderr, code = cliRun(t, dir, cli, "upstreams", "reload")
		printed = append(printed, out, stderr)
		if code != 0 || !strings.Contains(out, "reloaded") {
			t.Fatalf("reload: exit %d\nstdout: %s\nstderr: %s\nserver: %s", code, out, stderr, lastChars(p.stderr.String(), 3000))
		}
		if st := testkit.Task(t, d, slow).Status; st == "completed" || st == "failed" {
			t.Fatalf("precondition: the slow task was %s before oai-main was removed; the [sim:slow] task is too fast for this machine", st)
		}
		wantEnabled(t, d, map[string]bool{"oai-main": false, "ark-1": true, "ark-2": true})
		// The operator sees the removed credential still holding its task.
		out, stderr, code = upstreamsStatus(t, dir, cli)
		printed = append(printed, out, stderr)
		if row := statusRow(t, out, "oai-main"); code != 0 || row == nil || row[2] != "openai" || !strings.HasPrefix(row[3], "not taking new tasks") || row[5] != "1/4" {
			t.Fatalf("status while the removed oai-main holds the slow task: exit %d, row %q\n%s%s", code, row, out, stderr)
		}
		// New tasks go to the Ark credentials only; the alias only oai-main served is no longer offered.
		var afterReload []string
		for i := range 4 {
			afterReload = append(afterReload, createVideo(t, p.url, acct.Key, "videogen-2.0-720p", fmt.Sprintf("after the reload %d", i), 4))
		}
		if r := testkit.Do(t, p.url, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "nobody serves this now"}); r.Status != 400 || r.ErrorCode() != "model_unavailable" {
			t.Fatalf("create for an alias only the removed credential served: %d %s", r.Status, r.Body)
		}
		waitEnded(t, p, acct.Key, 90*time.Second, afterReload...)
		onArk := map[string]int{}
		for _, id := range afterReload {
			task := testkit.Task(t, d, id)
			onArk[deref(task.CredentialID)]++
			if task.Status != "completed" || !strings.HasPrefix(deref(task.CredentialID), "ark-") {
				t.Errorf("task %s after the reload: %s on %s, want completed on an Ark credential", id, task.Status, deref(task.CredentialID))
			}
		}
		if onArk["ark-2"] == 0 {
			t.Errorf("tasks per credential after the reload %v: the added ark-2 took none", onArk)
		}

		// 4c. A file the CLI accepts (it reads no secret) but the instance refuses (its secret_env is not
		// set there): the instance keeps its pool and the CLI, which waits for it, exits non-zero.
		writeUpstreams(t, file, ark1, ark2, e2eCred("ark-3", "ark", ark.base(), "secret_env: E2E_NOT_SET_ANYWHERE", 4,
			e2eRoute("videogen-2.0-720p", "dreamina-seedance-2-0-260128", "0.18")))
		out, stderr, code = cliRun(t, dir, cli, "upstreams", "reload", "--wait", "2s")
		printed = append(printed, out, stderr)
		if code == 0 || !strings.Contains(out, "asked every instance") || strings.Contains(out, "reloaded") {
			t.Fatalf("reload of a file the instance refuses: exit %d\nstdout: %s\nstderr: %s", code, out, stderr)
		}
		testkit.Eventually(t, 10*time.Second, "the instance logs why it refused the file", func() bool {
			log := p.stderr.String()
			return strings.Contains(log, "upstreams file refused") && strings.Contains(log, "E2E_NOT_SET_ANYWHERE")
		}, func() string { return lastChars(p.stderr.String(), 3000) })
		wantEnabled(t, d, map[string]bool{"oai-main": false, "ark-1": true, "ark-2": true})

		// The task the removed credential held completes on it, at its price.
		waitEnded(t, p, acct.Key, 60*time.Second, slow)
		if task := testkit.Task(t, d, slow); task.Status != "completed" || deref(task.CredentialID) != "oai-main" ||
			deref(task.UpstreamModel) != "sora-2" || task.UpstreamCostMicros == nil || *task.UpstreamCostMicros != 50_000*int64(task.Seconds) {
			t.Fatalf("the slow task: %s on %s as %s costing %s", task.Status, deref(task.CredentialID), deref(task.UpstreamModel), costText(task.UpstreamCostMicros))
		}

		// 5. SIGHUP: oai-main comes back, ark-1 goes.
		writeUpstreams(t, file, oaiMain, ark2)
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "SIGHUP re-enables oai-main and disables ark-1", func() bool {
			return enabledCredentials(t, d) == "ark-2 oai-main"
		}, func() string {
			return "enabled: " + enabledCredentials(t, d) + "\n" + lastChars(p.stderr.String(), 3000)
		})
		mini := createVideo(t, p.url, acct.Key, "videogen-2.0-mini-480p", "after SIGHUP, on oai-main", 4)
		fast := createVideo(t, p.url, acct.Key, "videogen-2.0-fast-720p", "after SIGHUP, not on ark-1", 4)
		waitEnded(t, p, acct.Key, 90*time.Second, mini, fast)
		for id, want := range map[string]string{mini: "oai-main", fast: "ark-2"} {
			if task := testkit.Task(t, d, id); task.Status != "completed" || deref(task.CredentialID) != want {
				t.Errorf("task %s after SIGHUP: %s on %s, want completed on %s", task.Prompt, task.Status, deref(task.CredentialID), want)
			}
		}

		// 6. status after the traffic: every credential the database knows, with its kind and load.
		out, stderr, code = upstreamsStatus(t, dir, cli)
		printed = append(printed, out, stderr)
		if code != 0 {
			t.Fatalf("status: exit %d\n%s", code, stderr)
		}
		for id, want := range map[string][3]string{
			"oai-main": {"openai", "in service", "0/4"},
			"ark-1":    {"ark", "not taking new tasks", "0/4"},
			"ark-2":    {"ark", "in service", "0/4"},
		} {
			if row := statusRow(t, out, id); row == nil || row[2] != want[0] || !strings.HasPrefix(row[3], want[1]) || row[5] != want[2] {
				t.Errorf("status row of %s: %q, want kind %s, state %s, in flight %s\n%s", id, row, want[0], want[1], want[2], out)
			}
		}
		if statusRow(t, out, "ark-3") != nil {
			t.Errorf("the refused file's ark-3 reached the database:\n%s", out)
		}

		// Each platform task is one upstream task on its credential's simulator.
		var tasks []models.Task
		d.R.Order("id").Find(&tasks)
		perPrompt := map[string]int{}
		for _, st := range append(readSimTasks(t, oai.dir), readSimTasks(t, ark.dir)...) {
			perPrompt[st.Prompt]++
		}
		for _, task := range tasks {
			if perPrompt[task.Prompt] != 1 {
				t.Errorf("task %q has %d upstream tasks, want 1", task.Prompt, perPrompt[task.Prompt])
			}
		}
		if len(perPrompt) != len(tasks) {
			t.Errorf("the simulators hold %d distinct tasks for %d platform tasks", len(perPrompt), len(tasks))
		}
		testkit.CheckLedger(t, d)
		for _, s := range printed {
			noSecrets(t, "a CLI output", s)
		}
		noSecrets(t, "the platform's log", p.stderr.String())
		noDataRace(t, []*process{p}, oai, ark)
	})
}

// upstreamSim is a `videogen upstream-sim` process, restartable on the same address and folder.
type upstreamSim struct {
	protocol, addr, dir, duration string
	keys                          []string
	// output is SIM_OUTPUT ("" for the default, realistic videos).
	output string
	cmd    *exec.Cmd
	exited chan struct{}
	logs   []*testkit.LockedBuffer // of every start, for the data-race check
}

func startUpstreamSim(t *testing.T, protocol, addr, dir, duration string, keys ...string) *upstreamSim {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &upstreamSim{protocol: protocol, addr: addr, dir: dir, duration: duration, keys: keys}
	s.start(t)
	return s
}

// base is the base_url an upstreams file gives for this simulator.
func (s *upstreamSim) base() string {
	if s.protocol == sim.ProtocolArk {
		return "http://" + s.addr + "/api/v3"
	}
	return "http://" + s.addr
}

// upstreamID is the id the provider gives the platform for a task the simulator keeps: its id, or for
// the Gemini API the operation's name, models/{model}/operations/{id}.
func (s *upstreamSim) upstreamID(st sim.Task) string {
	if s.protocol == sim.ProtocolGemini {
		return "models/" + st.Model + "/operations/" + st.ID
	}
	return st.ID
}

// start runs the simulator and returns once it listens.
func (s *upstreamSim) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(bin, "upstream-sim", "--protocol", s.protocol, "--addr", s.addr, "--keys", strings.Join(s.keys, ","), "--dir", s.dir)
	// Its own working folder: whatever it would create under a default DATA_DIR stays away from the
	// platform's.
	cmd.Dir = s.dir
	env := map[string]string{"SIM_DURATION": s.duration, "SIM_CONCURRENCY": "8", "GORACE": "atexit_sleep_ms=0"}
	if s.output != "" {
		env["SIM_OUTPUT"] = s.output
	}
	cmd.Env = environ(env)
	errb := &testkit.LockedBuffer{}
	cmd.Stderr = errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, listening := make(chan struct{}), make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		listening <- line
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	s.logs = append(s.logs, errb)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	select {
	case line := <-listening:
		if strings.TrimSpace(line) != "listening on http://"+s.addr {
			t.Fatalf("the %s simulator printed %q\n%s", s.protocol, line, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the %s simulator did not start\n%s", s.protocol, errb.String())
	}
}

// kill stops the simulator with SIGKILL, as a crash would.
func (s *upstreamSim) kill(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.exited
}

// readSimTasks reads the tasks a simulator keeps in its folder: what the provider holds, whatever the
// platform believes.
func readSimTasks(t *testing.T, dir string) []sim.Task {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	var out []sim.Task
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") { // .task-* are writes under way
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "tasks", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var st sim.Task
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("simulator task %s: %v", e.Name(), err)
		}
		out = append(out, st)
	}
	return out
}

// e2eCred is one credential entry of an upstreams file; secret is its secret line ("secret: …",
// "secret_env: …" or "secret_file: …").
func e2eCred(id, kind, base, secret string, max int, routes string) string {
	return fmt.Sprintf("  - id: %s\n    name: %s credential\n    kind: %s\n    base_url: %s\n    %s\n    max_concurrency: %d\n    models:\n%s",
		id, id, kind, base, secret, max, routes)
}

func e2eRoute(alias, model, cost string) string {
	return fmt.Sprintf("      %s: {upstream_model: %s, cost_per_second: %q}\n", alias, model, cost)
}

// writeUpstreams writes an upstreams file of these entries and returns its text.
func writeUpstreams(t *testing.T, path string, creds ...string) string {
	t.Helper()
	text := "upstreams:\n" + strings.Join(creds, "")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return text
}

// lineOf returns the 1-based line of text that contains s.
func lineOf(t *testing.T, text, s string) int {
	t.Helper()
	for i, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			return i + 1
		}
	}
	t.Fatalf("%q not in the file", s)
	return 0
}

// platformEnv is the platform's settings: the pool from file, quick polls with a short backoff cap, a
// lease short enough that a restarted instance takes the killed one's tasks over soon, and reload
// signals noticed within 200 ms.
func platformEnv(dbURL, file string) map[string]string {
	return map[string]string{
		"DATABASE_URL": dbURL, "UPSTREAMS_FILE": file, "UPSTREAMS_WATCH_INTERVAL": "200ms", e2eOAISecretEnv: e2eOAISecret,
		"POLL_INTERVAL_MIN": "50ms", "POLL_INTERVAL_MAX": "1s", "LEASE_DURATION": "1s",
		"RATE_LIMIT_RPS": "1000", "RATE_LIMIT_BURST": "1000",
	}
}

// cliRun runs a videogen command without the race detector's one-second pause at exit.
func cliRun(t *testing.T, dir string, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	env = maps.Clone(env)
	env["GORACE"] = "atexit_sleep_ms=0"
	return run(t, dir, env, args...)
}

// createVideo creates a task through the API and returns its id.
func createVideo(t *testing.T, base, key, model, prompt string, seconds int) string {
	t.Helper()
	r := testkit.Do(t, base, "POST", "/v1/videos", key, map[string]any{"model": model, "prompt": prompt, "seconds": seconds})
	if r.Status != 200 {
		t.Fatalf("create %s %q: %d %s", model, prompt, r.Status, r.Body)
	}
	return r.JSON(t)["id"].(string)
}

// waitSubmitted waits until each task has an upstream task id and returns the credential of each.
func waitSubmitted(t *testing.T, d *db.DB, p *process, ids ...string) map[string]string {
	t.Helper()
	creds := map[string]string{}
	testkit.Eventually(t, 30*time.Second, "every task submitted upstream", func() bool {
		for _, id := range ids {
			task := testkit.Task(t, d, id)
			if task.UpstreamTaskID == nil || task.CredentialID == nil {
				return false
			}
			creds[id] = *task.CredentialID
		}
		return true
	}, func() string { return lastChars(p.stderr.String(), 3000) })
	return creds
}

// waitEnded waits, through the API, until each task is completed or failed.
func waitEnded(t *testing.T, p *process, key string, timeout time.Duration, ids ...string) {
	t.Helper()
	for _, id := range ids {
		var last any
		testkit.Eventually(t, timeout, "task "+id+" ends", func() bool {
			r := testkit.Do(t, p.url, "GET", "/v1/videos/"+id, key, nil)
			if r.Status != 200 {
				t.Fatalf("GET %s: %d %s", id, r.Status, r.Body)
			}
			last = r.JSON(t)["status"]
			return last == "completed" || last == "failed"
		}, func() string { return fmt.Sprintf("last status %v\n%s", last, lastChars(p.stderr.String(), 3000)) })
	}
}

// checkUpstreamTasks checks the tasks of prompts, all ended: each completed on the credential it had
// before (before), under that credential's provider model and at its cost per second, settled once;
// and each is exactly one upstream task on its credential's simulator, with the id the platform knows.
func checkUpstreamTasks(t *testing.T, d *db.DB, sims map[string]*upstreamSim, prompts map[string]string, before map[string]string,
	upstreamModel map[string]string, costPerSecond map[string]int64) {
	t.Helper()
	held := map[string]map[string][]sim.Task{} // credential → prompt → the upstream tasks
	for cred, s := range sims {
		held[cred] = map[string][]sim.Task{}
		for _, st := range readSimTasks(t, s.dir) {
			held[cred][st.Prompt] = append(held[cred][st.Prompt], st)
		}
	}
	total := 0
	for _, s := range sims {
		total += len(readSimTasks(t, s.dir))
	}
	if total != len(prompts) {
		t.Errorf("the simulators hold %d tasks for %d platform tasks", total, len(prompts))
	}
	for id, prompt := range prompts {
		task := testkit.Task(t, d, id)
		cred := deref(task.CredentialID)
		route := cred + "/" + task.Model
		if task.Status != "completed" || task.ErrorCode != nil {
			t.Errorf("task %q: %s %s, want completed", prompt, task.Status, deref(task.ErrorCode))
			continue
		}
		if cred != before[id] {
			t.Errorf("task %q ended on %s, but was on %s", prompt, cred, before[id])
		}
		if deref(task.UpstreamModel) != upstreamModel[route] {
			t.Errorf("task %q on %s for %s ran as %q, want %q", prompt, cred, task.Model, deref(task.UpstreamModel), upstreamModel[route])
		}
		if want := costPerSecond[route] * int64(task.Seconds); task.UpstreamCostMicros == nil || *task.UpstreamCostMicros != want {
			t.Errorf("task %q (%d s on %s): upstream cost %s, want %d", prompt, task.Seconds, route, costText(task.UpstreamCostMicros), want)
		}
		settles := 0
		for _, e := range testkit.Entries(t, d, id) {
			if e.Kind == models.KindSettle {
				settles++
			}
		}
		if settles != 1 || task.BillingState != "settled" {
			t.Errorf("task %q: %d settlements, billing %s; want one", prompt, settles, task.BillingState)
		}
		ups := held[cred][prompt]
		if len(ups) != 1 || sims[cred].upstreamID(ups[0]) != deref(task.UpstreamTaskID) || ups[0].Model != upstreamModel[route] {
			t.Errorf("task %q (upstream %s on %s): the simulator holds %+v, want exactly that task", prompt, deref(task.UpstreamTaskID), cred, ups)
		}
	}
}

var nextPollIn = regexp.MustCompile(`(?s)^poll \d+ failed \(.*\); next poll in (\S+)$`)

// pollFailures returns the waits the task log announces after each failed poll, in order.
func pollFailures(t *testing.T, d *db.DB, id string) []time.Duration {
	t.Helper()
	var events []models.TaskEvent
	if err := d.R.Where("task_id = ?", id).Order("id").Find(&events).Error; err != nil {
		t.Fatal(err)
	}
	var out []time.Duration
	for _, e := range events {
		m := nextPollIn.FindStringSubmatch(e.Detail)
		if m == nil {
			continue
		}
		wait, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatalf("task %s log line %q: %v", id, e.Detail, err)
		}
		out = append(out, wait)
	}
	return out
}

func pollFailuresOf(t *testing.T, d *db.DB, ids []string) map[string][]time.Duration {
	t.Helper()
	out := map[string][]time.Duration{}
	for _, id := range ids {
		out[id] = pollFailures(t, d, id)
	}
	return out
}

// wantEnabled checks upstream_credentials.enabled of these credentials.
func wantEnabled(t *testing.T, d *db.DB, want map[string]bool) {
	t.Helper()
	for id, on := range want {
		var c models.UpstreamCredential
		if err := d.R.Where("id = ?", id).Take(&c).Error; err != nil {
			t.Fatalf("credential %s: %v", id, err)
		}
		if c.Enabled != on {
			t.Errorf("credential %s enabled %v, want %v", id, c.Enabled, on)
		}
	}
}

// enabledCredentials lists the enabled credentials, sorted, space-separated.
func enabledCredentials(t *testing.T, d *db.DB) string {
	t.Helper()
	var ids []string
	if err := d.R.Model(&models.UpstreamCredential{}).Where("enabled = ?", true).Order("id").Pluck("id", &ids).Error; err != nil {
		t.Fatal(err)
	}
	return strings.Join(ids, " ")
}

// statusRow returns the cells of the credential's line in `upstreams status`'s table (columns are two
// or more spaces apart; a cell holds single spaces), or nil.
func statusRow(t *testing.T, out, id string) []string {
	t.Helper()
	for line := range strings.Lines(out) {
		cells := regexp.MustCompile(` {2,}`).Split(strings.TrimSpace(line), -1)
		if cells[0] == id {
			if len(cells) < 6 {
				t.Fatalf("status line %q has %d cells", line, len(cells))
			}
			return cells
		}
	}
	return nil
}

// costText prints a recorded cost, or "none".
func costText(m *int64) string {
	if m == nil {
		return "none"
	}
	return fmt.Sprint(*m)
}

func lastChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// noSecrets fails if any credential secret of these tests appears in s.
func noSecrets(t *testing.T, where, s string) {
	t.Helper()
	for _, secret := range []string{e2eOAISecret, e2eArkSecret1, e2eArkSecret2, e2eGemSecret} {
		if strings.Contains(s, secret) {
			t.Errorf("%s holds the secret %s…", where, secret[:8])
		}
	}
}

// noDataRace fails if the race detector the binary is built with reported a race in any process.
func noDataRace(t *testing.T, platforms []*process, sims ...*upstreamSim) {
	t.Helper()
	logs := map[string]string{}
	for i, p := range platforms {
		logs[fmt.Sprintf("the platform (start %d)", i+1)] = p.stderr.String()
	}
	for _, s := range sims {
		for i, l := range s.logs {
			logs[fmt.Sprintf("the %s simulator (start %d)", s.protocol, i+1)] = l.String()
		}
	}
	for who, log := range logs {
		if i := strings.Index(log, "WARNING: DATA RACE"); i >= 0 {
			t.Errorf("%s reported a data race:\n%s", who, lastChars(log[i:], 4000))
		}
	}
}
