package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sys/unix"

	"videogen/internal/infra/db"
	"videogen/models"
)

// The bytes engine measures what videogen does with realistic video bytes, each figure against the same
// bytes moved without videogen, on the same disk, in the same run:
//
//   - the worker's copy rate: bytes of videos stored per second while the worker copies finished videos
//     from the upstream (the standalone simulator with its default output, 3–4 MB MP4s) into storage,
//     against a raw copy of the same files from the same simulator into the same storage folder, the
//     way blob.Local.Put stores them (a temporary file, fsync, rename), as many at once;
//   - downloads: GET /v1/videos/{id}/content of a stored video against a bare Fiber handler streaming
//     the same file, with the same wrk connections.
//
// Only the copy stage is timed, for both, and it is read from the stored files themselves: a file is
// born when Put (or the raw copy) creates its temporary file, once the upstream's answer has arrived,
// and its ctime is set by the rename that ends the copy, after the fsync (statx: btime to ctime). The
// rate is the bytes over the time during which any copy ran. The rest of a task's handling (the poll,
// the stills, the settlement) is reported beside it, as the whole copy phase's rate.

// bytesTasks is how many realistic videos the worker copies: a copy stage of a second or so.
const bytesTasks = 120

// bytesGate is how long the simulator takes to finish a task: time for one instance to submit them all
// and stop before any is finished.
const bytesGate = 8 * time.Second

// bytesModel is the model of the realistic videos: the bench's worker model, rendered by the simulator
// at the API's default length (4 s of 864x496, 3–4 MB).
const bytesModel = "videogen-2.0-mini-480p"

// simCred is one kind-sim credential of an UPSTREAMS_FILE.
type simCred struct {
	id, url string
	models  []string
	max     int
}

// upstreamsEnv writes an UPSTREAMS_FILE with the credentials and returns the settings a worker run uses.
func (b *bench) upstreamsEnv(name string, creds ...simCred) []string {
	var w strings.Builder
	w.WriteString("upstreams:\n")
	for _, c := range creds {
		fmt.Fprintf(&w, "  - id: %s\n    name: Simulator %s (make bench)\n    kind: sim\n    base_url: %s\n    secret: bench-sim-key\n    max_concurrency: %d\n    models:\n",
			c.id, c.id, c.url, c.max)
		for _, m := range c.models {
			fmt.Fprintf(&w, "      %s: {upstream_model: %s, cost_per_second: \"0.01\"}\n", m, m)
		}
	}
	file := filepath.Join(b.work, name+"-upstreams.yaml")
	if err := os.WriteFile(file, []byte(w.String()), 0o600); err != nil {
		log.Fatal(err)
	}
	return []string{"UPSTREAMS_FILE=" + file, "MAX_QUEUED_PER_ACCOUNT=100000000", "QUEUE_TIMEOUT=24h", "RUN_TIMEOUT=24h",
		"POLL_INTERVAL_MIN=50ms", "POLL_INTERVAL_MAX=1s"}
}

// dieWithBench has a child process killed when the bench exits, a log.Fatal included.
var dieWithBench = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

// startSim runs the standalone simulator with its default output; duration is SIM_DURATION.
func (b *bench) startSim(name, duration string) (url string, stop func()) {
	addr := freeAddr()
	sim := exec.Command(b.videogen, "upstream-sim", "--addr", addr, "--keys", "bench-sim-key")
	sim.Env = []string{"PATH=" + os.Getenv("PATH"), "SIM_DURATION=" + duration, "SIM_CONCURRENCY=100000",
		"SIM_DATA_DIR=" + filepath.Join(b.work, name), "LOG_LEVEL=warn"}
	sim.Stderr = os.Stderr
	sim.SysProcAttr = dieWithBench
	if err := sim.Start(); err != nil {
		log.Fatal(err)
	}
	url = "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/v1/videos/none")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			log.Fatalf("simulator %s not ready: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return url, func() { _ = sim.Process.Kill(); _ = sim.Wait() }
}

// fundN is fund for n accounts.
func (b *bench) fundN(dbURL string, n int) []string {
	c := *b
	c.accounts = n
	return c.fund(dbURL)
}

// span is one file's copy stage: from the creation of its temporary file to the rename that ends it.
type span struct {
	start, end time.Time
	bytes      int64
}

// prerender has the simulator render the video and stills of every submitted task (two at a time, as
// the machine has two cores), and returns how long that took.
func (b *bench) prerender(d *db.DB, simURL string) time.Duration {
	began := time.Now()
	var ids []string
	d.R.Model(&models.Task{}).Where("upstream_task_id IS NOT NULL").Pluck("upstream_task_id", &ids)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	defer client.CloseIdleConnections()
	inParallel(len(ids), 2, func(i int) {
		for _, q := range []string{"", "?variant=thumbnail", "?variant=spritesheet"} {
			req, _ := http.NewRequest("GET", simURL+"/v1/videos/"+ids[i]+"/content"+q, nil)
			req.Header.Set("Authorization", "Bearer bench-sim-key")
			resp, err := client.Do(req)
			if err != nil {
				log.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				log.Fatalf("render %s%s: HTTP %d", ids[i], q, resp.StatusCode)
			}
		}
	})
	return time.Since(began)
}

// fileSpan reads a stored file's copy stage from its birth and change times.
func fileSpan(path string) (span, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_BTIME|unix.STATX_CTIME|unix.STATX_SIZE, &st); err != nil {
		return span{}, fmt.Errorf("statx %s: %w", path, err)
	}
	if st.Mask&unix.STATX_BTIME == 0 {
		return span{}, errors.New("the file system keeps no birth time: the copy stage cannot be timed")
	}
	return span{start: time.Unix(st.Btime.Sec, int64(st.Btime.Nsec)), end: time.Unix(st.Ctime.Sec, int64(st.Ctime.Nsec)), bytes: int64(st.Size)}, nil
}

// busy is the time during which at least one of the copies ran (the union of the spans), and the mean
// number running at once over it.
func busy(spans []span) (d time.Duration, meanConc float64) {
	s := slices.Clone(spans)
	sort.Slice(s, func(i, j int) bool { return s[i].start.Before(s[j].start) })
	var sum time.Duration
	var cur span
	for i, x := range s {
		sum += x.end.Sub(x.start)
		switch {
		case i == 0:
			cur = x
		case x.start.After(cur.end):
			d += cur.end.Sub(cur.start)
			cur = x
		case x.end.After(cur.end):
			cur.end = x.end
		}
	}
	if len(s) > 0 {
		d += cur.end.Sub(cur.start)
	}
	if d > 0 {
		meanConc = float64(sum) / float64(d)
	}
	return d, meanConc
}

func totalBytes(spans []span) (n int64) {
	for _, s := range spans {
		n += s.bytes
	}
	return n
}

// copyRate is the bytes stored per second of copying: the bytes of the spans over the time any ran.
func copyRate(spans []span) float64 {
	d, _ := busy(spans)
	if d <= 0 {
		return 0
	}
	return float64(totalBytes(spans)) / d.Seconds()
}

// rawCopy copies the simulator's videos of ids into dir the way blob.Local.Put stores a file (a folder
// per file, a temporary file in it, io.Copy, fsync, close, rename), conc at a time, and returns each
// file's copy stage, read the same way as the worker's.
func rawCopy(simURL string, ids []string, dir string, conc int) []span {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	defer client.CloseIdleConnections()
	paths := make([]string, len(ids))
	inParallel(len(ids), conc, func(i int) { paths[i] = rawCopyOne(client, simURL, ids[i], dir) })
	var spans []span
	for _, p := range paths {
		s, err := fileSpan(p)
		if err != nil {
			log.Fatal(err)
		}
		spans = append(spans, s)
	}
	return spans
}

func rawCopyOne(client *http.Client, simURL, id, dir string) string {
	req, _ := http.NewRequest("GET", simURL+"/v1/videos/"+id+"/content", nil)
	req.Header.Set("Authorization", "Bearer bench-sim-key")
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		log.Fatalf("raw copy of %s: HTTP %d", id, resp.StatusCode)
	}
	folder := filepath.Join(dir, id)
	if err := os.MkdirAll(folder, 0o700); err != nil {
		log.Fatal(err)
	}
	f, err := os.CreateTemp(folder, ".put-*")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		log.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	final := filepath.Join(folder, id+".mp4")
	if err := os.Rename(f.Name(), final); err != nil {
		log.Fatal(err)
	}
	return final
}

// measureBytes runs the bytes engine on a fresh PostgreSQL database of server.
//
// The simulator renders a video when it is first asked for it, and its stills after, on the machine the
// worker runs on: renders running while the worker copies would take the cores the copies need, which a
// real provider, rendering on its own machines, does not. So the simulator finishes each task bytesGate
// after its submission; one instance submits them all and stops; once they are finished the bench has
// the simulator render every video and still; then a second instance polls them and copies.
func (b *bench) measureBytes(server string) {
	simURL, stopSim := b.startSim("sim-bytes", bytesGate.String())
	defer stopSim()
	dbURL, drop := createDatabase(server)
	defer drop()
	dataDir := filepath.Join(b.work, "data-bytes")
	up := b.upstreamsEnv("bytes", simCred{id: "bench-bytes", url: simURL, models: []string{bytesModel}, max: 1000})

	log.Printf("bytes: queueing %d tasks of realistic videos", bytesTasks)
	url, _, _, stop := b.startServerPID(dbURL, dataDir, append(up, "WORKERS=false")...)
	keys := b.fundN(dbURL, 1)
	queueTasks(url, keys, bytesModel, bytesTasks, 4)
	stop()

	d, err := db.Open(context.Background(), dbURL)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	count := func(where string) int {
		var c int64
		d.R.Model(&models.Task{}).Where(where).Count(&c)
		return int(c)
	}
	log.Printf("bytes: one instance submits them")
	_, _, _, stop = b.startServerPID(dbURL, dataDir, append(up, "WORKER_ID=bench-bytes-submit")...)
	for deadline := time.Now().Add(2 * time.Minute); count("upstream_task_id IS NOT NULL") < bytesTasks; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			log.Fatalf("bytes: %d of %d tasks submitted after 2 minutes", count("upstream_task_id IS NOT NULL"), bytesTasks)
		}
	}
	stop()
	// A task the first instance polled after the simulator finished it was copied beside the renders:
	// such copies (a machine so slow that submitting the tasks took longer than bytesGate) are left out.
	early := count("status = 'completed'")
	if early > 0 {
		log.Printf("bytes: WARNING: %d tasks were copied before the simulator rendered the others; they are left out", early)
	}
	var last time.Time
	d.R.Model(&models.Task{}).Select("MAX(submitted_at)").Scan(&last)
	time.Sleep(time.Until(last.Add(bytesGate + 100*time.Millisecond)))
	rendered := b.prerender(d, simURL)
	log.Printf("bytes: the simulator rendered the videos and stills in %v; a second instance copies them", rendered.Round(time.Millisecond))
	copying := time.Now()
	url, pprofAddr, pid, stop := b.startServerPID(dbURL, dataDir, append(up, "WORKER_ID=bench-bytes")...)
	defer stop()
	for deadline := time.Now().Add(5 * time.Minute); count("status = 'completed' AND billing_state = 'settled'") < bytesTasks; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			log.Fatalf("bytes: %d of %d tasks done after 5 minutes", count("status = 'completed'"), bytesTasks)
		}
	}
	settled := time.Now()
	var tasks []models.Task
	if err := d.R.Where("status = 'completed'").Find(&tasks).Error; err != nil {
		log.Fatal(err)
	}
	var worker []span
	var upIDs []string
	for _, t := range tasks {
		s, err := fileSpan(filepath.Join(dataDir, "blobs", filepath.FromSlash(*t.OutputKey)))
		if err != nil {
			log.Fatal(err)
		}
		if s.start.Before(copying) {
			continue
		}
		worker = append(worker, s)
		upIDs = append(upIDs, *t.UpstreamTaskID)
	}
	if len(worker) == 0 {
		log.Fatal("bytes: every task was copied before the simulator's renders")
	}
	// The copy phase, from the first copy's start to the last task settled, for the rate of the whole.
	first := worker[0].start
	for _, s := range worker {
		if s.start.Before(first) {
			first = s.start
		}
	}
	whole := settled.Sub(first)
	wBusy, wConc := busy(worker)
	// The raw copy moves the same files with as many copies at once as the worker ran on average while it
	// copied: the same parallelism for both.
	conc := max(1, int(wConc+0.5))
	raw := rawCopy(simURL, upIDs, filepath.Join(dataDir, "blobs", "raw"), conc)
	rBusy, rConc := busy(raw)
	n := totalBytes(worker)
	wRate, rRate := copyRate(worker)/1e6, copyRate(raw)/1e6
	log.Printf("bytes: worker stored %.0f MB in %v of copying (%.1f at once): %.0f MB/s; raw copy %.0f MB/s (%v, %.1f at once); whole run %.1f s, %.0f MB/s",
		float64(n)/1e6, wBusy.Round(time.Millisecond), wConc, wRate, rRate, rBusy.Round(time.Millisecond), rConc, whole.Seconds(), float64(n)/1e6/whole.Seconds())
	b.ratios = append(b.ratios, ratio{Measure: "worker copy rate, realistic videos", Ours: wRate, Limit: rRate, Unit: "MB/s", Target: 0.50,
		Note: fmt.Sprintf("bytes stored per second of copying (from the upstream's answer to the stored file's rename, statx btime→ctime) against a raw copy of the same %d files from the same simulator into the same folder (io.Copy, fsync, rename, as blob.Local.Put), %d at once as the worker averaged", len(worker), conc)})
	b.sections = append(b.sections, fmt.Sprintf("**Bytes.** One worker instance copied %d realistic videos (%s, the simulator's default output, %.1f MB on average) from the standalone simulator into local storage: "+
		"%.0f MB/s while copying (%.2f s of copying, %.1f copies at once on average), against %.0f MB/s for a raw copy of the same files from the same simulator into the same folder with the same fsync and rename (%.2f s, %d at once). "+
		"From its first copy to the last task settled the instance took %.1f s (%.0f tasks/s, %.0f MB/s of video), each task also polled, its two stills copied and its charge settled. "+
		"The simulator had rendered every video and still beforehand (%.1f s), so that no rendering, which a real provider does on its own machines, ran beside the copies.\n",
		len(worker), bytesModel, float64(n)/float64(len(worker))/1e6, wRate, wBusy.Seconds(), wConc, rRate, rBusy.Seconds(), conc,
		whole.Seconds(), float64(len(worker))/whole.Seconds(), float64(n)/1e6/whole.Seconds(), rendered.Seconds()))

	// Downloads of one stored video, ours against the bare handler streaming the same file.
	t := tasks[0]
	path := filepath.Join(dataDir, "blobs", filepath.FromSlash(*t.OutputKey))
	bareURL, barePID, stopBare := b.startBareFile(path)
	defer stopBare()
	ours, bare, prof, cpu := b.downloads(url+"/v1/videos/"+t.ID+"/content", keys[0], bareURL, pprofAddr, pid, barePID)
	oursCPU, bareCPU := cpu.per()
	log.Printf("downloads: server CPU per download %v ours, %v bare", oursCPU, bareCPU)
	b.profiles = append(b.profiles, prof)
	size := float64(*t.OutputBytes) / 1e6
	b.ratios = append(b.ratios, ratio{Measure: "downloads (/content), realistic video", Ours: ours.RPS, Limit: bare.RPS, Unit: "/s", Target: 0.50,
		Note: fmt.Sprintf("GET /v1/videos/{id}/content of a stored %.1f MB video against a bare Fiber handler streaming the same file (os.Open, SetBodyStream), `wrk -c%d`", size, b.conns)})
	b.sections = append(b.sections, fmt.Sprintf("**Downloads.** GET /v1/videos/{id}/content of one stored %.1f MB video: %.0f/s (%.0f MB/s, p50 %s, p99 %s); "+
		"the bare Fiber handler streaming the same file: %.0f/s (%.0f MB/s, p50 %s, p99 %s); `wrk -t1 -c%d`, median of %d runs of %s each, alternating. "+
		"The load generator, reading every byte on the same two cores, bounds both; the servers' own CPU time per download tells them apart: %.2f ms ours (the key, the task's row, the call log, the file), %.2f ms the bare handler's.\n",
		size, ours.RPS, ours.RPS*size, ms(ours.P50), ms(ours.P99), bare.RPS, bare.RPS*size, ms(bare.P50), ms(bare.P99), b.conns, b.runs, b.duration,
		float64(oursCPU.Microseconds())/1000, float64(bareCPU.Microseconds())/1000))
}

// downloadLua makes wrk print the summary the bench reads; the requests are wrk's own GET of its URL,
// over the paths of a file given as its argument when there is one.
const downloadLua = `
local paths = {}
local i = 0
init = function(args)
  if args[1] then
    for line in io.lines(args[1]) do table.insert(paths, line) end
    i = math.random(#paths)
  end
end
request = function()
  if #paths == 0 then return wrk.format() end
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d %d %d\n", summary.requests, e.status, e.connect + e.read + e.write + e.timeout,
    summary.duration, latency:percentile(50), latency:percentile(99)))
end
`

// wrkGet runs wrk's GETs of url (or of the paths in the file pathsFile, on url's host) with conns
// connections for d, sending key as the bearer credential when set.
func (b *bench) wrkGet(url, key, pathsFile string, conns int, d time.Duration) result {
	script := filepath.Join(b.work, "download.lua")
	_ = os.WriteFile(script, []byte(downloadLua), 0o600)
	args := []string{"-t1", "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(int(d.Seconds())) + "s", "--timeout", "30s", "-s", script}
	if key != "" {
		args = append(args, "-H", "Authorization: Bearer "+key)
	}
	args = append(args, url)
	if pathsFile != "" {
		args = append(args, "--", pathsFile)
	}
	out, err := exec.Command("wrk", args...).Output()
	if err != nil {
		log.Fatalf("wrk: %v\n%s", err, out)
	}
	f := strings.Fields(between(string(out), "RESULT ", "\n"))
	if len(f) != 6 {
		log.Fatalf("wrk output: %s", out)
	}
	n := atoi(f[0])
	dur := time.Duration(atoi(f[3])) * time.Microsecond
	return result{Requests: n, Errors: atoi(f[1]) + atoi(f[2]), RPS: float64(n) / dur.Seconds(),
		P50: time.Duration(atoi(f[4])) * time.Microsecond, P99: time.Duration(atoi(f[5])) * time.Microsecond}
}

// downloads measures GET of ours (with key) and of bare, the same file, in alternating runs so that
// the machine's drift touches both alike: a warm-up each, then b.runs runs each, profiling our server at
// pprofAddr during the middle one. It returns the median run of each.
func (b *bench) downloads(ours, key, bare, pprofAddr string, oursPID, barePID int) (result, result, profile, cpuPer) {
	b.wrkGet(ours, key, "", b.conns, time.Second)
	b.wrkGet(bare, "", "", b.conns, time.Second)
	var rs, bs []result
	var prof profile
	var cpu cpuPer
	for i := 0; i < b.runs; i++ {
		var ch chan string
		if i == b.runs/2 {
			ch = make(chan string, 1)
			go func() { ch <- b.profile(pprofAddr, max(b.duration-2*time.Second, time.Second)) }()
		}
		c0 := procCPU(oursPID)
		r := b.wrkGet(ours, key, "", b.conns, b.duration)
		cpu.ours += procCPU(oursPID) - c0
		cpu.oursN += r.Requests
		r.Target, r.Case = "videogen on PostgreSQL", "GET /v1/videos/{id}/content"
		if ch != nil {
			prof = profile{Target: r.Target, Case: r.Case + " (a stored video)", Top: <-ch}
		}
		c0 = procCPU(barePID)
		br := b.wrkGet(bare, "", "", b.conns, b.duration)
		cpu.bare += procCPU(barePID) - c0
		cpu.bareN += br.Requests
		br.Target, br.Case = "bare Fiber handler", r.Case
		for _, x := range []result{r, br} {
			log.Printf("%s %s: %.0f req/s p50 %v p99 %v errors %d", x.Target, x.Case, x.RPS, x.P50, x.P99, x.Errors)
			if x.Errors > 0 {
				log.Fatalf("%s: %d errors", x.Target, x.Errors)
			}
		}
		rs, bs = append(rs, r), append(bs, br)
	}
	median := func(rs []result) result {
		sort.Slice(rs, func(i, j int) bool { return rs[i].RPS < rs[j].RPS })
		return rs[len(rs)/2]
	}
	return median(rs), median(bs), prof, cpu
}

// cpuPer is the CPU time two servers spent over their runs, and the requests they answered in them.
type cpuPer struct {
	ours, bare   time.Duration
	oursN, bareN int
}

func (c cpuPer) per() (ours, bare time.Duration) {
	return c.ours / time.Duration(max(c.oursN, 1)), c.bare / time.Duration(max(c.bareN, 1))
}

// procCPU is the CPU time (user and system) process pid has used, from /proc/<pid>/stat.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may hold spaces: utime and stime
	// are the 14th and 15th fields, in clock ticks (100 a second on Linux).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ticks := atoi(f[11]) + atoi(f[12])
	return time.Duration(ticks) * 10 * time.Millisecond
}

// startBareFile starts the bare file handler on path and returns its URL.
func (b *bench) startBareFile(path string) (url string, pid int, stop func()) {
	self, _ := os.Executable()
	addr := freeAddr()
	cmd := exec.Command(self, "bare-file", addr, path)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = dieWithBench
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	url = "http://" + addr + "/v1/videos/x/content"
	waitReady(url)
	return url, cmd.Process.Pid, func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
}

// bareFile serves the baseline of downloads: a Fiber handler that streams one file as a minimal
// handler would (open, stat, stream with its size), and does nothing else.
func bareFile(addr, path string) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/v1/videos/:id/content", func(c *fiber.Ctx) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return err
		}
		c.Set(fiber.HeaderContentType, "video/mp4")
		c.Response().SetBodyStream(f, int(st.Size()))
		return nil
	})
	log.Fatal(app.Listen(addr))
}
